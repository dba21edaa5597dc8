"""igemm_fast's persistent and split-K schedules through the real CLI with profiler=sim,
on the CPU: every job finishes with a simulated hit rate.

On the CPU the correctness gate runs ``kernel.interpret_tiles`` (one tile per program,
no split) on a down-scaled shape under the interpreter; the simulator replays the full
shape with the configured ``kernel.tiles``, so the PERSISTENT / SPLIT_K override reaches
the simulation (and the logged ``tile.*`` params), not the interpreted check."""
import pytest
from mlflow.tracking import MlflowClient

from harness.job.verdict import Kind
from tests.test_cli import _harness


@pytest.mark.parametrize("override,launches", [("kernel.tiles.PERSISTENT=1", ()),
                                               ("kernel.tiles.SPLIT_K=2", ("conv", "split_k_sum"))])
def test_sim_profiles_persistent_and_split_k_jobs(tmp_path, override, launches):
    uri = f"sqlite:///{tmp_path}/store.db"
    proc = _harness(["-m", "kernel=igemm_fast", override, "profiler=sim", "target=h100", "shape=tiny",
                     f"tracking.uri={uri}", "experiment=sim-cli", f"hydra.sweep.dir={tmp_path}/multirun"],
                    cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("[job")]
    assert lines and all("(sim, validated on H100 ncu" in line and "; ± covers 90 % of " in line and ", reads " in line
                         for line in lines), lines
    import yaml
    from pathlib import Path

    from harness.profilers.sim.bands import LAYER_CLASSES, prediction_error
    target = yaml.safe_load((Path(__file__).resolve().parents[2] / "conf/target/h100.yaml").read_text())
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("sim-cli")
    jobs = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("swizzlebench.kind") == "job"]
    assert len(jobs) == 3
    key, value = override.removeprefix("kernel.tiles.").split("=")
    for r in jobs:
        assert r.info.status == "FINISHED", r.data.tags.get("status_reason")
        assert r.data.params[f"tile.{key}"] == value
        assert r.data.params["tune"] == "none"   # a launch config on the command line wins over tune=table
        metrics = r.data.metrics
        assert 0.0 <= metrics["l2_hit_rate"] <= 100.0 and metrics["l2_hit_rate"] == metrics["sim.l2_hit_rate"]
        assert "sim.l2_read_hit_rate" in metrics and metrics["sim.l2_write_lookups"] > 0
        # h100 is calibrated: the reads' rate and both errors are logged, merged reads counted
        assert metrics["l2_read_hit_rate"] == metrics["sim.l2_read_hit_rate"]
        # the ± are the 90 % bands of the job's layer class, and a simulated delta's interval is
        # its band around it
        layer = r.data.tags["sim_layer_class"]
        assert layer in LAYER_CLASSES
        err = prediction_error(target, "igemm_fast", layer)
        assert metrics["l2_hit_rate_err"] == err.hit_rate and metrics["l2_read_hit_rate_err"] == err.read_hit_rate
        assert metrics["l2_err_coverage"] == 90.0
        if "l2_delta_pts" in metrics:
            half = (metrics["l2_delta_ci_hi"] - metrics["l2_delta_ci_lo"]) / 2
            assert half == pytest.approx(err.delta)
        assert "sim.l2_merged_reads" in metrics
        assert r.data.tags["sim_validation"].startswith("validated on H100 ncu")
        for name in launches:
            assert f"sim.{name}.l2_hit_rate" in metrics
    # The sweep's report says what the simulated ± is
    pages = list((tmp_path / "reports" / "sim-cli").glob("*/index.html"))
    assert len(pages) == 1
    assert "(sim, 90 % band)" in pages[0].read_text()


def test_a_measured_layout_set_on_the_command_line_reaches_the_simulation(tmp_path):
    # A chip's layout as a user adds it (Hydra's + for keys of an empty mapping): every slot in
    # partition 1.  The job's logged hit rate is the simulator's with that layout, not without.
    from pathlib import Path

    import yaml

    from harness.profilers.sim.job import Remap, simulate_job
    from kernels.problem import ConvShape
    from swizzles import get_swizzle

    uri = f"sqlite:///{tmp_path}/store.db"
    proc = _harness(["target=h100", "profiler=sim", "shape=tiny", "shape.select=[t1]", "target.sm_partition=[0,1]",
                     "+target.sm_dispatch={1:[1]}", f"tracking.uri={uri}", "experiment=sim-layout"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("sim-layout")
    (job,) = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("swizzlebench.kind") == "job"]
    p, m = job.data.params, job.data.metrics
    shape = ConvShape(p["shape.name"], **{k: int(p[f"shape.{k}"]) for k in
                                          ("N", "C", "H", "W", "F", "R", "S", "stride", "padding")})
    tiles = {k.removeprefix("tile."): int(v) for k, v in p.items() if k.startswith("tile.")}
    h100 = yaml.safe_load((Path(__file__).resolve().parents[2] / "conf" / "target" / "h100.yaml").read_text())
    occupancy = int(m["sim.programs_per_cu"])
    spills = int(m.get("compile.spill_bytes_per_program", 0))   # the compiled kernel's, as the job's request carries

    def hit(target):
        return simulate_job(p["kernel"], shape, tiles, Remap(get_swizzle("identity"), 1, 8), target, occupancy,
                            spill_bytes=spills).hit_rate

    with_layout = hit({**h100, "sm_partition": [0, 1], "sm_dispatch": {1: [1]}})
    assert m["l2_hit_rate"] == pytest.approx(with_layout)
    assert with_layout != pytest.approx(hit(h100))


def test_an_order_blind_grid_says_so_and_takes_the_band_of_such_grids(tmp_path):
    # One column of a 1x1 conv (16 filters, 32 B pixels): every order reads the same blocks, so
    # the model gives scatter the identity's traffic.  The job line and the report say so, and
    # the delta's ± is the band measured on such grids, not the layer class's.
    from pathlib import Path

    import yaml

    from harness.profilers.sim.bands import ORDER_BLIND_NOTE, prediction_error

    uri = f"sqlite:///{tmp_path}/store.db"
    proc = _harness(["-m", "swizzle=scatter", "profiler=sim", "target=h100", "shape=tiny",
                     "shape.shapes=[{name:b1,N:4,C:16,H:16,W:16,F:16,R:1,S:1,stride:1,padding:0}]",
                     f"tracking.uri={uri}", "experiment=sim-blind", f"hydra.sweep.dir={tmp_path}/multirun"],
                    cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (line,) = [line for line in proc.stdout.splitlines() if line.startswith("[job")]
    assert "L2 +0.00 ± " in line and line.endswith("(order-blind grid)"), line   # the note: in the tag and the report
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("sim-blind")
    (job,) = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("swizzlebench.kind") == "job"]
    assert job.data.tags["sim_order_blind"] == ORDER_BLIND_NOTE
    target = yaml.safe_load((Path(__file__).resolve().parents[2] / "conf/target/h100.yaml").read_text())
    blind = prediction_error(target, "igemm", job.data.tags["sim_layer_class"], blind=True)
    plain = prediction_error(target, "igemm", job.data.tags["sim_layer_class"])
    assert blind.delta != plain.delta      # h100.yaml has bands of order-blind grids
    m = job.data.metrics
    assert (m["l2_delta_ci_hi"] - m["l2_delta_ci_lo"]) / 2 == pytest.approx(blind.delta)
    assert f"± {blind.delta:.1f} pts" in line
    (page,) = (tmp_path / "reports" / "sim-blind").glob("*/index.html")
    assert ORDER_BLIND_NOTE in page.read_text()


#: A layer whose column-major order changes the simulated L2 on both targets (16-wide tiles:
#: a 32 x 4 grid), cheap to verify under the interpreter.
ORDERED = ["kernel=igemm", "swizzle=colmajor", "shape=tiny", "kernel.tiles.BLOCK_M=16", "kernel.tiles.BLOCK_N=16",
           "kernel.tiles.BLOCK_K=16", "shape.shapes=[{name:s1,N:2,C:16,H:16,W:16,F:64,R:3,S:3,stride:1,padding:1}]"]
CI_METRICS = ("l2_delta_ci_lo", "l2_delta_ci_hi", "l2_read_delta_ci_lo", "l2_read_delta_ci_hi")


def _ordered_job(tmp_path, target: str):
    """The colmajor job of ORDERED on ``target`` through the CLI: (its job line, its MLflow run,
    every run of the sweep)."""
    uri = f"sqlite:///{tmp_path}/store.db"
    proc = _harness(["-m", *ORDERED, f"target={target}", f"tracking.uri={uri}", "experiment=bands",
                     f"hydra.sweep.dir={tmp_path}/multirun"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (line,) = [line for line in proc.stdout.splitlines() if line.startswith("[job")]
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("bands").experiment_id])
    (job,) = [r for r in runs if r.data.tags.get("swizzlebench.kind") == "job"]
    assert job.info.status == "FINISHED", job.data.tags.get("status_reason")
    return line, job, runs


def test_a_prediction_without_a_band_claims_no_effect(tmp_path):
    # mi300x has no validated band: the predicted change is said as such, with no interval
    # (absent, not zero-width) and no higher / lower, in MLflow, the job line and the report
    from harness.measure.stats import unvalidated_l2_verdict
    from harness.storage.run_fields import verdict_text

    PREDICTED_NOT_VALIDATED = Kind.PREDICTED.word

    line, job, runs = _ordered_job(tmp_path, "mi300x")
    m, tags = job.data.metrics, job.data.tags
    assert tags["sim_validation"] == "not validated on mi300x hardware"
    delta = m["l2_delta_pts"]
    assert abs(delta) >= 0.5 and "l2_read_delta_pts" in m   # a change a band would have been asked to judge
    assert not set(CI_METRICS) & set(m), m
    assert tags["l2_verdict"] == verdict_text(unvalidated_l2_verdict(delta)) == f"{PREDICTED_NOT_VALIDATED} ({delta:+.2f} pts)"
    assert f"| vs identity: L2 {delta:+.2f} pts {PREDICTED_NOT_VALIDATED}" in line and "±" not in line, line
    for run in runs:   # nothing the store holds says "exact"
        fields = {**run.data.tags, **run.data.params}
        assert not [k for k, v in fields.items() if "exact" in f"{k} {v}".lower()], fields
    (page,) = (tmp_path / "reports" / "bands").glob("*/index.html")
    text = page.read_text()
    assert verdict_text(unvalidated_l2_verdict(delta)) in text and "exact" not in text.lower()
    assert "L2: 0 higher, 0 lower, 1 predicted, not validated" in text


def test_a_prediction_with_a_band_keeps_its_interval(tmp_path):
    # h100 is validated: the same change carries its band as the interval its verdict is taken on
    import yaml
    from pathlib import Path

    from harness.profilers.sim.bands import prediction_error

    line, job, _ = _ordered_job(tmp_path, "h100")
    m, tags = job.data.metrics, job.data.tags
    target = yaml.safe_load((Path(__file__).resolve().parents[2] / "conf/target/h100.yaml").read_text())
    band = prediction_error(target, "igemm", tags["sim_layer_class"]).delta
    assert band and m["l2_delta_ci_lo"] == pytest.approx(m["l2_delta_pts"] - band)
    assert m["l2_delta_ci_hi"] == pytest.approx(m["l2_delta_pts"] + band)
    assert tags["l2_verdict"].split(" (")[0] in (Kind.HIGHER.word, Kind.LOWER.word, Kind.NO_DIFFERENCE.word)
    assert f"L2 {m['l2_delta_pts']:+.2f} ± {band:.1f} pts " in line, line


def _sweep_jobs(tmp_path, overrides: list[str]):
    """The main command's multirun with ``overrides`` into a store of its own: the finished
    process and its job runs."""
    uri = f"sqlite:///{tmp_path}/store.db"
    proc = _harness(["-m", *overrides, f"tracking.uri={uri}", "experiment=sweep",
                     f"hydra.sweep.dir={tmp_path}/multirun"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("sweep")
    return proc, [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("swizzlebench.kind") == "job"]


def test_a_cpu_prediction_is_for_the_config_the_target_launches(tmp_path):
    """The default kernel on the CPU, for the H100 and the H200 (each with its own table):
    a layer whose table entry is igemm_ws's, which this Triton cannot build, launches and
    compiles the entry's igemm_fast fallback, but its simulated L2 is that of the igemm_ws config
    the target launches (the run's params name it), with the band of igemm_ws's family, and
    equals a simulation of that config made directly."""
    import yaml
    from pathlib import Path

    from harness.profilers.sim.bands import prediction_error
    from harness.profilers.sim.job import Remap, simulate_job
    from harness.tune.per_job import TABLE_FALLBACK
    from kernels import KERNELS
    from kernels.problem import ConvShape
    from kernels.tuned import load_table, shape_key
    from kernels.tuning import Config
    from swizzles import resolve_swizzle

    proc, jobs = _sweep_jobs(tmp_path, ["target=h100,h200", "swizzle=scatter", "shape=unseen9",
                                        "shape.select=[dn121k]"])
    assert sorted(r.data.tags["target"] for r in jobs) == ["h100", "h200"]
    kernel = KERNELS["igemm_best"]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("[job")]
    for r in jobs:
        p, t, m = r.data.params, r.data.tags, r.data.metrics
        assert r.info.status == "FINISHED", t.get("status_reason")
        name = t["target"]
        table = load_table("igemm_best", name) or load_table("igemm_best", TABLE_FALLBACK[name])
        dims = {k: v for k, v in p.items() if k.startswith("shape.")}
        shape = ConvShape("dn121k", **{k: int(dims[f"shape.{k}"]) for k in ("N", "C", "H", "W", "F", "R", "S",
                                                                              "stride", "padding")})
        own = Config.from_dict(table.entries[shape_key(shape)]["config"])   # what the target launches
        if p["tune.chosen"] != own.label:   # this machine launched another: the run names both
            assert p["sim.config"] == own.label and p["sim.family"] == kernel.family_for(own.tiles_dict).name
            assert f"predicted for {p['sim.family']} {own.label}, the config {name} launches" in t["sim_config"]
            assert p["tile.WS"] == "0" and p["compile.kernel"] == "igemm_fast_kernel"   # the fallback, built here
            assert (f"({name} has no table of its own: h100's)" in t["sim_config"]) == (load_table("igemm_best", name) is None)
        else:   # under the Triton igemm_ws was written for, the target's config is launched here too
            assert "sim.config" not in p
        assert p["verified_config"].startswith("WS0 M16 N16 K16 ")   # the interpreter's tiles, gated
        target = yaml.safe_load((Path(__file__).resolve().parents[2] / f"conf/target/{name}.yaml").read_text())
        direct = {sw: simulate_job(kernel, shape, own.tiles_dict, Remap(resolve_swizzle(sw, None), 1, 8), target)
                  for sw in ("scatter", "identity")}
        assert m["l2_hit_rate"] == pytest.approx(direct["scatter"].hit_rate, abs=1e-9)
        assert m["baseline_l2_hit_rate"] == pytest.approx(direct["identity"].hit_rate, abs=1e-9)
        family = kernel.family_for(own.tiles_dict).name
        err = prediction_error(target, family, t["sim_layer_class"])
        said = f"(sim of the target's {family} config, " if "sim.config" in p else "(sim, "
        assert any(said + err.validated.removesuffix(" hardware") in line for line in lines), lines
        assert ("l2_hit_rate_err" in m) == err.banded and t["sim_validation"] == err.validated
        if err.banded:   # the predicted family's band, not the launched family's
            assert m["l2_hit_rate_err"] == err.hit_rate
            assert err.hit_rate != prediction_error(target, "igemm_fast", t["sim_layer_class"]).hit_rate


def test_a_config_of_a_code_path_no_validation_held_claims_no_band(tmp_path):
    """On the H200 the default kernel's table runs GoogLeNet's 7 x 7 pointwise layer with tiles
    of two filter blocks (igemm_ws's BLOCK_N2), which none of the H200's validation sets held:
    its simulated L2 is reported as not validated, with no ± and no error metric, and its
    predicted difference claims no direction; a one-block igemm_ws config keeps its family's band."""
    from harness.profilers.sim.bands import prediction_error
    from kernels import KERNELS
    from kernels.tuned import load_table

    table = load_table("igemm_best", "h200")
    two_block = {e["shape"]["name"]: e["config"]["tiles"] for e in table.entries.values()
                 if e["config"]["tiles"].get("BLOCK_N2")}
    assert "unseen8/goog5b" in two_block
    proc, (job,) = _sweep_jobs(tmp_path, ["target=h200", "swizzle=scatter", "shape=unseen8", "shape.select=[goog5b]"])
    assert job.info.status == "FINISHED", job.data.tags.get("status_reason")
    assert job.data.tags["sim_validation"] == "not validated on h200 hardware for igemm_ws (two filter blocks)"
    assert "l2_hit_rate" in job.data.metrics and "l2_hit_rate_err" not in job.data.metrics
    (line,) = [line for line in proc.stdout.splitlines() if line.startswith("[job")]
    assert "(sim of the target's igemm_ws config, not validated on h200 hardware for igemm_ws (two filter " \
           "blocks))" in line and "pts predicted, not validated" in line, line
    assert " higher" not in line and " lower" not in line, line
    one_block = {**two_block["unseen8/goog5b"], "BLOCK_N2": 0}
    target = {"name": "h200", "sim_calibration": {"hit_rate_mae": {"igemm_ws": 2.0}, "delta_mae": {"igemm_ws": 1.0}}}
    assert KERNELS["igemm_best"].validation_scope(one_block) == "igemm_ws"
    assert prediction_error(target, KERNELS["igemm_best"].validation_scope(one_block)).banded
    # 256-row tiles, which the H200 table launches on ResNet-50's l06 among others, failed their
    # own held-out set (PLAN4.md): their jobs take the same unbanded path as the two-block tiles
    rows256 = {e["shape"]["name"]: e["config"]["tiles"] for e in table.entries.values()
               if e["config"]["tiles"].get("BLOCK_M") == 256}
    assert "unseen2/dn121t" in rows256      # ResNet-50's l06 has the same dimensions
    err = prediction_error(target, KERNELS["igemm_best"].validation_scope(rows256["unseen2/dn121t"]))
    assert not err.banded and err.validated == "not validated on h200 hardware for igemm_ws (256-row tiles)"
