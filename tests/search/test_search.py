"""Search mode through the real CLI (``python -m harness -m hydra/sweeper=swizzle_search``) in
a subprocess, against temporary SQLite stores: trials are nested MLflow runs, a resumed
search repeats no finished trial, the report is written; and the search space in process."""
import os

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

optuna = pytest.importorskip("optuna", reason="needs optuna (extra 'search'; a GPU node's default wheelhouse has none)")

from harness.search.space import SearchSpace, formula_families
from harness.search.sweeper import check_overrides
from tests.report.pages import section, table_rows
from tests.cli_fork import run_cli

SMALL_TILES = ["kernel.tiles.BLOCK_M=16", "kernel.tiles.BLOCK_N=16", "kernel.tiles.BLOCK_K=16"]


def _search(tmp, *args):
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONUNBUFFERED": "1", "SWIZZLEBENCH_CACHE": str(tmp / "cache")}
    common = ["-m", "hydra/sweeper=swizzle_search", "kernel=igemm", "shape=tiny", "shape.select=[t2]", *SMALL_TILES,
              f"tracking.uri=sqlite:///{tmp}/store.db", "experiment=search-test",
              f"hydra.sweeper.storage=sqlite:///{tmp}/search.db", "hydra.sweeper.families=[grouped_m,hilbert]",
              "hydra.sweeper.baselines=[identity]"]
    return run_cli([*common, *args], tmp, env, timeout=600)


def _children(client, experiment_id, parent_id):
    return client.search_runs([experiment_id], max_results=1000,
                              filter_string=f"tags.mlflow.parentRunId = '{parent_id}'")


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("search")
    first = _search(tmp, "hydra.sweeper.n_trials=3", "hydra.sweeper.confirm.top_k=1",
                    f"hydra.sweep.dir={tmp}/sweep1")
    assert first.returncode == 0, first.stderr[-3000:]
    second = _search(tmp, "hydra.sweeper.n_trials=4", "hydra.sweeper.confirm.top_k=0",
                     f"hydra.sweep.dir={tmp}/sweep2")
    assert second.returncode == 0, second.stderr[-3000:]
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp}/store.db")
    exp = client.get_experiment_by_name("search-test")
    sweeps = sorted((r for r in client.search_runs([exp.experiment_id], max_results=100)
                     if r.data.tags.get("swizzlebench.kind") == "sweep"), key=lambda r: r.info.start_time)
    (study,) = optuna.get_all_study_summaries(f"sqlite:///{tmp}/search.db")
    study = optuna.load_study(study_name=study.study_name, storage=f"sqlite:///{tmp}/search.db")
    return tmp, client, exp, sweeps, study, first, second


def test_every_job_is_a_run_nested_under_its_search_run(searched):
    _, client, exp, sweeps, _, _, _ = searched
    assert len(sweeps) == 2 and all(s.info.status == "FINISHED" for s in sweeps)
    first = _children(client, exp.experiment_id, sweeps[0].info.run_id)
    labels = sorted(r.data.params["swizzle"] for r in first)
    # 1 built-in + 3 trials + 1 confirmation (a re-measurement of the best trial's swizzle)
    assert len(first) == 5 and "identity" in labels
    trial_runs = [r for r in first if r.data.params["swizzle"] != "identity"]
    for run in trial_runs:
        assert run.data.params["swizzle.family"] in ("grouped_m", "hilbert")
        assert "swizzle.num_xcds" in run.data.params and "l2_hit_rate" in run.data.metrics


def test_resumed_search_repeats_no_finished_trial(searched):
    _, client, exp, sweeps, study, _, second = searched
    first_labels = {r.data.params["swizzle"] for r in _children(client, exp.experiment_id, sweeps[0].info.run_id)}
    second_runs = _children(client, exp.experiment_id, sweeps[1].info.run_id)
    # Only the 1 new trial ran: no built-in again, no earlier trial again.
    assert len(second_runs) == 1, [r.data.params["swizzle"] for r in second_runs]
    assert not {r.data.params["swizzle"] for r in second_runs} & first_labels
    evaluated = [t for t in study.trials if t.user_attrs.get("evaluated")]
    assert len(evaluated) == 4 and len({t.user_attrs["label"] for t in evaluated}) == 4
    assert "built-in identity" not in second.stdout and "built-in identity" in searched[5].stdout


def test_search_report_and_confirmation_record(searched):
    tmp, _, _, sweeps, study, _, _ = searched
    html = (tmp / "reports" / "search-test" / sweeps[1].info.run_id / "search.html").read_text()
    assert "<h2>Search</h2>" in html and "data:image/png;base64," in html
    trials = pd.read_csv(tmp / "reports" / "search-test" / sweeps[1].info.run_id / "search_trials.csv")
    assert set(trials["kind"]) == {"builtin", "trial", "confirm"}
    assert (trials["run_id"].fillna("") != "").all()
    confirm = trials[trials["kind"] == "confirm"].iloc[0]
    assert pd.isna(confirm["speedup"])                  # CPU: the paired timing is absent
    assert any(k.startswith("confirm:") for k in study.user_attrs)


def test_sweep_report_has_the_search_section(searched):
    """The sweep's comparison report (index.html, built at multirun end) shows the search."""
    tmp, client, exp, sweeps, _, _, _ = searched
    runs = _children(client, exp.experiment_id, sweeps[0].info.run_id)
    l2 = {r.data.params["swizzle"]: r.data.metrics["l2_hit_rate"] for r in runs}
    best = max(v for k, v in l2.items() if k != "identity")
    page = (tmp / "reports" / "search-test" / sweeps[0].info.run_id / "index.html").read_text()
    (row,) = table_rows(section(page, '<section id="search"', "</section>"))
    group, identity, builtin, builtin_value, found, found_value = row[:6]
    assert group == "igemm/tiny-t2/mi300x" and builtin == "identity"
    assert identity == builtin_value == f"{l2['identity']:.3f}"
    assert found_value == f"{best:.3f}" and l2[found] == best
    assert row[7] == "3"                                  # trials; the confirmation is not one


def test_search_refuses_a_swizzle_override():
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parse = OverridesParser.create().parse_overrides
    check_overrides(parse(["shape=resnet", "shape.select=[l03]", "hydra.sweeper.n_trials=3"]))
    for bad in ("swizzle=xcd", "swizzle.group_size=4", "+swizzle.x=1"):
        with pytest.raises(ValueError, match=r"the search chooses the swizzle of each job: remove \['"):
            check_overrides(parse(["shape=tiny", bad]))


# ---------------------------------------------------------------- the space, in process

def test_space_suggests_valid_candidates_and_rebuilds_them(tmp_path):
    formulas = formula_families({"rot": {"expr": "(pid + k) % num_pids", "params": {"k": [1, 2, 3]}}})
    space = SearchSpace(("tiled", "morton"), formulas, 8, formula_dir=tmp_path)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    for _ in range(20):
        trial = study.ask()
        candidate = space.suggest(trial)
        assert space.candidate_from_params(trial.params) == candidate
        study.tell(trial, 0.0)
        if candidate.family == "formula:rot":
            assert candidate.overrides[0] == "swizzle=custom"
            assert "new_pid = (pid + k) % num_pids" in next(tmp_path.glob("*.txt")).read_text()
        else:
            assert candidate.overrides[0] == f"swizzle={candidate.family}"
            assert candidate.label.startswith(candidate.family + "[")


def test_space_errors_name_the_bad_value():
    with pytest.raises(ValueError, match=r"search families \['zigzag'\] are unknown; valid: grouped_m"):
        SearchSpace(("zigzag",))
    with pytest.raises(ValueError, match=r"tile_m=0 is invalid; valid: an integer from 1"):
        SearchSpace(("tiled",), choices={"tiled.tile_m": (0, 2)})
    with pytest.raises(ValueError, match=r"entries \['hilbert.order'\] name no parameter"):
        SearchSpace(("tiled",), choices={"hilbert.order": (1,)})
    with pytest.raises(ValueError, match="name `q` is not defined"):
        formula_families({"bad": {"expr": "pid * q", "params": {"k": [1]}}})
