"""The README's main command on a machine with no GPU, end to end: ``python -m harness -m
swizzle=xcd,grouped shape=resnet`` with its defaults (``kernel=igemm_best tune=table``, the
MI300X target, the simulated L2), on two of its layers (``shape.select``) so the test costs
seconds; then its report as headless Chromium renders it (issue 40: a CPU report claims
nothing it did not measure)."""
import re
import shutil

import pytest
from mlflow.tracking import MlflowClient

from tests.report.test_browser import CHROMIUM, chromium
from tests.test_cli import _harness, _page_text

LAYERS = ("l02", "l09")   # 1x1 layers (one tap): the cheapest to interpret, one of them strided


@pytest.fixture(scope="module")
def main_command(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("main")
    proc = _harness(["-m", "swizzle=xcd,grouped", "shape=resnet", f"shape.select=[{','.join(LAYERS)}]"], cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, tmp


def test_every_job_of_the_main_command_finishes_verified_on_its_table_config(main_command):
    proc, tmp = main_command
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("[job ")]
    assert len(lines) == 2 * len(LAYERS), lines
    assert all(" FINISHED verified " in ln and " not timed " in ln for ln in lines), lines
    assert all("(sim, not validated on mi300x)" in ln and "| vs identity: L2 " in ln for ln in lines), lines
    assert {re.search(r"/(resnet-l\d+)/", ln).group(1) for ln in lines} == {f"resnet-{la}" for la in LAYERS}
    # each job launched its entry of the committed MI300X table (no tuning at run time):
    # igemm_fast's config (WS=0), as igemm_ws runs on sm_90 only
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp}/mlflow.db")
    runs = [r for r in client.search_runs([client.get_experiment_by_name("swizzlebench").experiment_id])
            if "spec_hash" in r.data.tags]
    assert len(runs) == len(lines)
    for run in runs:
        fields = {**run.data.params, **run.data.tags}
        assert fields.get("tune", "").startswith("table igemm_best_mi300x.json: its own entry"), fields
        assert fields["tile.WS"] == "0" and fields["kernel"] == "igemm_best", fields
        assert "not timed here" in fields["tune"]


@pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason=f"{CHROMIUM} not installed (apt-get install -y chromium)")
def test_main_command_report_claims_nothing_it_did_not_measure(main_command, tmp_path):
    proc, tmp = main_command
    (page,) = (tmp / "reports").glob("*/*/index.html")
    result = chromium(page, tmp_path / "profile", "--dump-dom")
    assert result.returncode == 0, result.stderr[-2000:]
    text = _page_text(result.stdout)
    for claim in ("timed its baseline", "95 % CI", "± 0.00", "interleaved rounds"):
        assert claim not in text, claim
    assert not re.search(r"\[([+-]\d+\.\d+), \1\]", text), "a zero-width interval"
    cells = text[text.index("All cells"):text.index("Failed or unfinished")].splitlines()
    simulated = [row for row in cells if "(sim," in row]
    assert len(simulated) == 2 * len(LAYERS)                              # xcd and grouped on each layer
    assert all("(sim, not validated on mi300x hardware)" in row for row in simulated), simulated
    best = text[text.index("Best swizzle per group"):text.index("Kernel vs vendor")]
    assert "Swizzles ranked by predicted ΔL2 vs baseline (prediction: not timed)" in best
    assert "L2 hit-rate delta vs baseline (percentage points): simulated on mi300x, not validated on hardware" \
        in result.stdout
