"""benchmarks/sim_calibrate.py's pure parts: the split by shape, the fit of the L2 capacity
fraction and the held-out figures, on a hand-made table with a fake simulator (no replay)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from tests.benchmarks.scripts import RESULTS, load
from tests.cli_fork import run_script

cal = load("sim_calibrate.py")


def _spec_of(kernel: str, shape: str, swizzle: str) -> "cal.SimSpec":
    return cal.SimSpec(kernel=kernel, shape=(("name", shape),), tiles=(), swizzle=swizzle, num_xcds=1,
                       group_size=8)


def _cell(kernel, shape, swizzle, hit, read, delta=math.nan, lo=math.nan, hi=math.nan):
    spec = _spec_of(kernel, shape, swizzle)
    return {"kernel": kernel, "shape": shape, "swizzle": swizzle, "config": "c", "baseline": "identity",
            "measured_hit": hit, "measured_read": read, "measured_delta": delta, "delta_ci_lo": lo,
            "delta_ci_hi": hi, "spec": spec, "baseline_spec": spec.with_swizzle("identity")}


#: Predicted (hit, read) per (kernel, shape, swizzle) at f = 1; a smaller f lowers every
#: hit rate by 10 * (1 - f) points, except that "grouped" loses nothing (so deltas grow).
PRED = {("igemm", "a", "identity"): (50.0, 60.0), ("igemm", "a", "grouped"): (53.0, 61.0),
        ("igemm", "b", "identity"): (70.0, 80.0), ("igemm", "b", "grouped"): (69.0, 80.0),
        ("direct", "c", "identity"): (90.0, 90.0), ("direct", "c", "grouped"): (91.0, 92.0),
        ("direct", "d", "identity"): (80.0, 85.0), ("direct", "d", "grouped"): (80.5, 85.0)}


def fake_simulate(spec, f):
    hit, read = PRED[(spec.kernel, dict(spec.shape)["name"], spec.swizzle)]
    drop = 0.0 if spec.swizzle == "grouped" else 10.0 * (1 - f)
    return hit - drop, read - drop


@pytest.fixture
def cells() -> pd.DataFrame:
    rows = [
        # shape a (fit): measured identity 45 = prediction at f=0.5 exactly
        _cell("igemm", "a", "identity", 45.0, 55.0),
        _cell("igemm", "a", "grouped", 53.0, 62.0, 8.0, 6.0, 10.0),
        # shape b (holdout)
        _cell("igemm", "b", "identity", 66.0, 75.0),
        _cell("igemm", "b", "grouped", 71.0, 79.0, 2.0, 1.0, 3.0),      # predicted 69-65=+4: right
        # shape c (fit)
        _cell("direct", "c", "identity", 85.0, 86.0),
        _cell("direct", "c", "grouped", 91.0, 92.0, 6.0, 5.0, 7.0),
        # shape d (holdout)
        _cell("direct", "d", "identity", 76.0, 80.0),
        _cell("direct", "d", "grouped", 75.0, 79.0, -1.5, -2.5, -0.5),  # predicted 80.5-75=+5.5: wrong
    ]
    return pd.DataFrame(rows)


def test_split_alternates_sorted_shapes():
    assert cal.split_by_shape(["d", "b", "a", "c", "a"]) == {"a": "fit", "b": "holdout", "c": "fit",
                                                              "d": "holdout"}


def test_fit_picks_least_hit_rate_mae(cells):
    cells["half"] = cells["shape"].map(cal.split_by_shape(cells["shape"]))
    fraction, grid = cal.fit_fraction(cells[cells.half == "fit"], fake_simulate)
    # At f = 0.5 the fit half's predictions are a: 45, 53; c: 85, 91 -- all exact.
    assert fraction == 0.5
    assert grid.set_index("fraction").loc[0.5, "hit_rate_mae"] == pytest.approx(0.0)
    # f = 1: |50-45| + |53-53| + |90-85| + |91-91| = 10 over 4 cells.
    assert grid.set_index("fraction").loc[1.0, "hit_rate_mae"] == pytest.approx(2.5)
    # f = 1: deltas predicted 3 and 1 vs measured 8 and 6: MAE 5.
    assert grid.set_index("fraction").loc[1.0, "delta_mae"] == pytest.approx(5.0)


def test_fit_tie_goes_to_delta_then_larger_fraction(cells):
    def flat(spec, f):   # hit rates independent of f: only the delta could break the tie, and it is flat too
        return PRED[(spec.kernel, dict(spec.shape)["name"], spec.swizzle)]

    fraction, _ = cal.fit_fraction(cells, flat, (0.5, 0.75, 1.0))
    assert fraction == 1.0

    # One pair, identity measured 50, grouped 60 (+10): both f miss each cell by 2 points (a
    # tie on the hit rate); f = 0.5 predicts the delta exactly, f = 1 predicts +6.
    pair = pd.DataFrame([_cell("igemm", "a", "identity", 50.0, 50.0),
                         _cell("igemm", "a", "grouped", 60.0, 60.0, 10.0, 9.0, 11.0)])
    table = {("identity", 0.5): 52.0, ("grouped", 0.5): 62.0, ("identity", 1.0): 52.0, ("grouped", 1.0): 58.0}

    def by_delta(spec, f):
        return table[(spec.swizzle, f)], math.nan

    fraction, grid = cal.fit_fraction(pair, by_delta, (0.5, 1.0))
    assert list(grid["hit_rate_mae"]) == [2.0, 2.0]
    assert fraction == 0.5


def test_summarise_held_out_figures(cells):
    cells["half"] = cells["shape"].map(cal.split_by_shape(cells["shape"]))
    pred = cal.predict(cells, fake_simulate, 0.5)
    summary = cal.summarise(pred)
    held = summary["holdout"]["all"]
    # Holdout at f=0.5: igemm/b identity 65 (66), grouped 69 (71); direct/d identity 75 (76), grouped 80.5 (75)
    assert held["n"] == 4
    assert held["hit_rate_mae"] == pytest.approx((1 + 2 + 1 + 5.5) / 4)
    # reads: b identity 75 (75), grouped 80 (79); d identity 80 (80), grouped 85 (79)
    assert held["read_hit_rate_mae"] == pytest.approx((0 + 1 + 0 + 6) / 4)
    # deltas: b +4 vs +2; d +5.5 vs -1.5
    assert held["delta_n"] == 2
    assert held["delta_mae"] == pytest.approx((2 + 7) / 2)
    assert (held["sign_right"], held["sign_total"]) == (1, 2)
    assert len(held["sign_wrong"]) == 1 and held["sign_wrong"][0].startswith("direct/d/grouped")
    assert summary["holdout"]["igemm"]["hit_rate_mae"] == pytest.approx(1.5)
    assert summary["fit"]["all"]["hit_rate_mae"] == pytest.approx(0.0)

    record = cal.calibration_record(summary, "h100", "NVIDIA H100 ncu", 0.5, pred)
    assert record["l2_capacity_fraction"] == 0.5
    assert (record["cells_fit"], record["cells_holdout"]) == (4, 4)
    assert record["hit_rate_mae"] == {"all": pytest.approx(2.375), "direct": pytest.approx(3.25),
                                      "igemm": pytest.approx(1.5)}
    assert record["sign_right"] == [1, 2]


def test_sign_needs_clear_delta(cells):
    cells["half"] = "holdout"
    # Below the 1-point threshold, or a CI that spans 0: not judged.
    cells.loc[cells["shape"] == "b", ["measured_delta", "delta_ci_lo", "delta_ci_hi"]] = [0.5, 0.2, 0.8]
    cells.loc[cells["shape"] == "d", ["measured_delta", "delta_ci_lo", "delta_ci_hi"]] = [-1.5, -3.0, 0.1]
    e = cal.errors(cal.predict(cells, fake_simulate, 1.0))
    # a: +3 vs +8 right; c: +1 vs +6 right; b and d not judged.
    assert (e["sign_right"], e["sign_total"]) == (2, 2)


def test_a_predicted_delta_of_about_zero_is_no_sign():
    # A clear measured +2 against a prediction of +0.001 (no effect, numerically positive) or
    # -0.3: both wrong; +0.2: right.
    d = pd.DataFrame({"kernel": "igemm", "shape": ["a", "b", "c"], "swizzle": "scatter",
                      "m": [2.0, 2.0, 2.0], "lo": [1.0, 1.0, 1.0], "hi": [3.0, 3.0, 3.0],
                      "p": [0.001, -0.3, 0.2]})
    right, total, wrong = cal._signs(d, "m", "lo", "hi", "p", sign_min=1.0)
    assert (right, total) == (1, 3)
    assert [w.split(":")[0] for w in wrong] == ["igemm/a/scatter", "igemm/b/scatter"]
    assert cal._signs(d, "m", "lo", "hi", "p", sign_min=1.0, pred_min=0.0)[:2] == (2, 3)


def test_unpaired_deltas_from_the_baseline_cell():
    rows = [dict(_cell("igemm", "a", "identity", 60.0, 60.0), measured_hit_std=0.3, samples=1.0,
                 baseline_measured=math.nan, delta_source=None),
            dict(_cell("igemm", "a", "xcd", 62.0, 61.0), measured_hit_std=0.4, samples=1.0,
                 baseline_measured=math.nan, delta_source=None)]
    out = cal.fill_unpaired_deltas(pd.DataFrame(rows)).set_index("swizzle")
    assert out.loc["xcd", "measured_delta"] == pytest.approx(2.0)
    assert out.loc["xcd", "delta_ci_hi"] - 2.0 == pytest.approx(1.96 * 0.5)
    assert out.loc["xcd", "delta_source"] == "unpaired"
    assert out.loc["xcd", "baseline_measured"] == 60.0
    assert math.isnan(out.loc["identity", "measured_delta"])


def test_scaled_target_whole_sets():
    target = {"l2_bytes": 52428800, "l2_ways": 16, "l2_line_bytes": 32, "sim_calibration": {"x": 1}}
    out = cal.scaled_target(target, 0.625)
    assert out["l2_bytes"] % (16 * 32) == 0 and out["l2_bytes"] == 32768000
    assert "sim_calibration" not in out


def test_points_set_their_keys_over_the_targets_own_record():
    target = {"l2_bytes": 52428800, "l2_ways": 16, "l2_line_bytes": 32,
              "sim_calibration": {"l2_capacity_fraction": 0.5, "coalesce_window": 0.18, "cluster_run": 17}}
    # A bare fraction keeps the target's window and cluster_run; its own fraction is not applied twice.
    out = cal.scaled_target(target, 1.0)
    assert out["sim_calibration"] == {"coalesce_window": 0.18, "cluster_run": 17}
    assert out["l2_bytes"] == 52428800
    # A point's parts override them, in POINT_KEYS order; trailing parts may be left off.
    out = cal.scaled_target(target, (1.0, 0.25, None, "partition"))
    assert out["sim_calibration"] == {"coalesce_window": 0.25, "cluster_run": 17, "merge_unit": "partition"}
    assert cal.point_record((1.0, None, 2)) == {"cluster_run": 2}
    assert cal.unpack(0.75) == (0.75,) + (None,) * len(cal.POINT_KEYS)
    # partition_run: a point that sets it writes it into the record the simulator reads
    point = (1.0,) + (None,) * cal.POINT_KEYS.index("partition_run") + (8,)
    assert cal.point_record(point) == {"partition_run": 8}
    assert cal.scaled_target(target, point)["sim_calibration"]["partition_run"] == 8
    # the TMA merge model's keys, the last ones: tma_unit turns it on (SimTarget.bulk_merge)
    assert cal.POINT_KEYS[-2:] == ("tma_unit", "tma_cap")
    point = (1.0,) + (None,) * (len(cal.POINT_KEYS) - 2) + ("any", 4)
    assert cal.point_record(point) == {"tma_unit": "any", "tma_cap": 4}
    assert cal.scaled_target(target, point)["sim_calibration"] == {"coalesce_window": 0.18, "cluster_run": 17,
                                                                   "tma_unit": "any", "tma_cap": 4}


def test_select_cells_keeps_the_kernels_and_configs_asked_for():
    cells = pd.DataFrame({"kernel": ["igemm", "igemm_fast", "igemm_fast"],
                          "config": ["BLOCK_M=64/w4/s3", "TMA=1,TMA_STORE=0/w4/s3", "TMA=0,TMA_STORE=0/w4/s3"]})
    assert cal.select_cells(cells, None, None).equals(cells)
    assert cal.select_cells(cells, ["igemm_fast"], None)["config"].str[:5].tolist() == ["TMA=1", "TMA=0"]
    assert cal.select_cells(cells, ["igemm_fast"], "TMA=1")["config"].tolist() == ["TMA=1,TMA_STORE=0/w4/s3"]
    assert cal.select_cells(cells, None, "TMA=1").shape[0] == 1


def test_pool_reports_the_held_out_cells_of_several_tables(cells, tmp_path, capsys):
    # Two cells.csv files: the fit/held-out split above, and the same cells again as a
    # re-validation run (--validate: every cell held out).  Pooled: the 4 held-out cells of the
    # first and all 8 of the second; fit rows are left out.
    cells["half"] = cells["shape"].map(cal.split_by_shape(cells["shape"]))
    pred = cal.predict(cells, fake_simulate, 0.5)
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    pred.drop(columns=["spec", "baseline_spec"]).to_csv(first, index=False)
    pred.drop(columns=["spec", "baseline_spec"]).assign(half="holdout").to_csv(second, index=False)
    cal.main(["--pool", str(first), str(second)])
    out = capsys.readouterr().out
    assert "pooled: 12 held-out cells" in out
    # hit MAE: first's held-out 2.375 (4 cells), second's all 8 cells: fit half 0, held-out 2.375
    row = next(line for line in out.splitlines() if line.startswith("| holdout | all |"))
    assert row.split("|")[3:5] == [" 12 ", f" {(4 * 2.375 + 4 * 0 + 4 * 2.375) / 12:.2f} "]
    cal.main(["--pool", str(first), str(second), "--out", str(tmp_path / "pooled")])
    record = json.loads((tmp_path / "pooled" / "pooled.json").read_text())
    assert record["cells_holdout"] == 12
    assert record["hit_rate_mae"]["all"] == pytest.approx(round((4 * 2.375 + 4 * 2.375) / 12, 3))
    assert set(record) == {"cells_holdout", "hit_rate_mae", "delta_mae", "read_hit_rate_mae", "read_delta_mae",
                           "sign_right", "read_sign_right", "band_coverage", "hit_rate_band", "delta_band",
                           "read_hit_rate_band", "read_delta_band"}
    # 12 cells: ceil(13 * 0.9) = 12, the largest |error| (direct/d/grouped at f = 0.5: 80.5 vs 75)
    assert record["band_coverage"] == 0.9 and record["hit_rate_band"]["all"] == pytest.approx(5.5)
    # Each file against the bands of the other (8 cells: too few for a 90 % band, nothing judged);
    # then the second file as a check of the pooled bands (the largest error: every cell inside).
    cal.main(["--pool", str(first), str(second), "--check", str(second)])
    out = capsys.readouterr().out
    assert f"  {first}: hit 0/0, read 0/0" in out
    assert f"8 cells of {second} within the pooled bands: hit 8/8 (100 %)" in out
    with pytest.raises(SystemExit):
        cal.main(["--uri", "sqlite:///x.db"])      # --out missing, and no --pool


def test_with_layout_reads_a_recorded_chip_map():
    # The map and dispatch probe 5 recorded on an H100 node become the target's layout keys.
    from harness.profilers.sim.target import SimTarget

    layout = RESULTS / "sim_validation_h100" / "probes_2026-11-25" / "partition_map"
    target = cal.with_layout(cal.load_target("h100"), layout)
    assert len(target["sm_partition"]) == 132 and sum(target["sm_partition"]) == 66
    assert sorted(target["sm_dispatch"]) == [52, 98, 132, 264, 1056]
    sim = SimTarget.from_target(target, occupancy=1)
    assert sim.partition_of_slot(132)[:20].tolist() == [0] * 16 + [1] * 4     # launch order: 16, 48, 50, 18


def test_band_is_the_split_conformal_quantile_of_the_absolute_errors():
    # n = 9 at 90 %: the ceil(10 * 0.9) = 9th smallest |error|, whatever the signs; NaNs dropped.
    assert cal.band([1, -2, 3, -4, 5, -6, 7, -8, 9, math.nan]) == 9.0
    # n = 19: the 18th smallest of 1..19
    assert cal.band(range(1, 20)) == 18.0
    assert cal.band(range(1, 20), coverage=0.5) == 10.0
    # too few cells to promise 90 %: no band
    assert cal.band([0.5] * 8) == math.inf and cal.band([]) == math.inf


def test_covered_counts_cells_within_their_kernels_band():
    cells = pd.DataFrame([_cell("igemm", "a", "grouped", 50.0, 60.0, delta=1.0, lo=0.5, hi=1.5),
                          _cell("igemm", "b", "grouped", 70.0, 80.0, delta=-3.0, lo=-4.0, hi=-2.0),
                          _cell("direct", "c", "grouped", 90.0, 91.0, delta=0.0, lo=-1.0, hi=1.0)])
    cells = cells.assign(pred_hit=[52.0, 75.0, 90.5], pred_read=[60.0, 80.0, 99.0],
                         pred_delta=[1.5, 0.0, 0.0], measured_read_delta=math.nan, pred_read_delta=math.nan)
    bands = {"igemm": {"hit_rate": 2.0, "delta": 2.0, "read_hit_rate": 1.0},
             "direct": {"hit_rate": 1.0, "delta": math.inf}}
    got = cal.covered(cells, lambda k, layer="", blind=False: bands[k])
    # hits: 2 <= 2 in, 5 > 2 out, 0.5 <= 1 in; reads: direct has no band; deltas: 0.5 in, 3 out, direct unjudged
    assert got == {"hit_rate": (2, 3), "read_hit_rate": (2, 2), "delta": (1, 2), "read_delta": (0, 0)}
    assert cal.coverage_text(got).startswith("hit 2/3 (67 %), read 2/2 (100 %), delta 1/2 (50 %)")


def test_record_bands_pick_the_family_then_all_as_a_job_does():
    record = {"hit_rate_mae": {"all": 2.0}, "band_coverage": 0.9,
              "hit_rate_band": {"all": 5.0, "igemm": 4.0}, "delta_band": {"all": 3.0}}
    bands = cal.record_bands(record)
    assert bands("igemm")["hit_rate"] == 4.0 and bands("direct")["hit_rate"] == 5.0
    assert bands("igemm")["delta"] == 3.0 and bands("igemm")["read_hit_rate"] is None
    assert cal.record_bands({"hit_rate_mae": {"all": 2.0}})("igemm") == {}   # an older record: MAEs, no bands


def test_a_kernel_family_gets_its_own_band_in_a_class_where_it_differs():
    # 9 misaligned igemm cells off by 1..9 points and 9 misaligned igemm_fast ones off by 10..90:
    # the class's band over all 18 is 90 (the 18th of 18), each family's its own 9th of 9.
    rows = []
    for i in range(1, 10):
        rows.append({**_cell("igemm", f"a{i}", "identity", 50.0, 50.0), "pred_hit": 50.0 + i, "pred_read": 50.0,
                     "layer_class": "misaligned"})
        rows.append({**_cell("igemm_fast", f"b{i}", "identity", 50.0, 50.0), "pred_hit": 50.0 + 10 * i,
                     "pred_read": 50.0, "layer_class": "misaligned"})
    cells = pd.DataFrame(rows).assign(pred_delta=math.nan, measured_read_delta=math.nan, pred_read_delta=math.nan)
    got = cal.class_bands(cells)
    assert got["misaligned"]["cells"] == 18 and got["misaligned"]["hit_rate"] == 90.0
    assert got["igemm/misaligned"]["hit_rate"] == 9.0 and got["igemm_fast/misaligned"]["hit_rate"] == 90.0
    record = {"hit_rate_mae": {"all": 1.0}, "band_coverage": 0.9, "hit_rate_band": {"all": 90.0}, "class_bands": got}
    bands = cal.record_bands(record)
    assert bands("igemm", "misaligned")["hit_rate"] == 9.0
    assert cal.covered(cells, bands)["hit_rate"] == (18, 18)


def test_order_blind_grids_get_delta_bands_of_their_own():
    # 9 regular cells with deltas off by 1..9 points; 9 order-blind ones (scatter on a one-column
    # grid: predicted 0, measured +0.1 .. +0.9) in the same class.  The order-blind group's delta
    # band is its own 9th of 9; its cells take it, the others the class's (over all 18).
    rows = []
    for i in range(1, 10):
        rows.append({**_cell("igemm", f"r{i}", "scatter", 50.0, 50.0, delta=float(i), lo=i - 0.5, hi=i + 0.5),
                     "pred_delta": 0.0, "layer_class": "regular", "order_blind": False})
        rows.append({**_cell("igemm", f"o{i}", "scatter", 50.0, 50.0, delta=i / 10, lo=0.0, hi=1.0),
                     "pred_delta": 0.0, "layer_class": "regular", "order_blind": True})
    cells = pd.DataFrame(rows).assign(pred_hit=50.0, pred_read=50.0, measured_read_delta=math.nan,
                                      pred_read_delta=math.nan)
    got = cal.class_bands(cells)
    assert got["order-blind"] == {"cells": 9, "delta": 0.9}
    assert got["regular"]["delta"] == 9.0
    record = {"hit_rate_mae": {"all": 1.0}, "band_coverage": 0.9, "hit_rate_band": {"all": 1.0},
              "delta_band": {"all": 9.0}, "class_bands": got}
    bands = cal.record_bands(record)
    assert bands("igemm", "regular", True)["delta"] == 0.9 and bands("igemm", "regular")["delta"] == 9.0
    assert cal.covered(cells, bands)["delta"] == (18, 18)
    # a cells.csv written before the column: no cell is order-blind
    assert "order-blind" not in cal.class_bands(cells.drop(columns="order_blind"))


def test_delta_bands_are_those_of_other_orders_not_of_a_and_a_cells():
    # 9 cells of real orders off by 1..9 points, and 27 A/A cells (the baseline's own permutation:
    # predicted 0, measured noise of 0.1): counted in, they make the 90 % band the 34th smallest of
    # 36 (7); it must be that of the other orders (the 9th of 9).
    rows = []
    for i in range(1, 10):
        rows.append({**_cell("igemm", f"r{i}", "scatter", 50.0, 50.0, delta=float(i), lo=i - 0.5, hi=i + 0.5),
                     "pred_delta": 0.0, "layer_class": "regular", "same_permutation": False})
    for i in range(1, 28):
        rows.append({**_cell("igemm", f"a{i}", "colmajor", 50.0, 50.0, delta=0.1, lo=-0.4, hi=0.6),
                     "pred_delta": 0.0, "layer_class": "regular", "same_permutation": True})
    cells = pd.DataFrame(rows).assign(pred_hit=50.0, pred_read=50.0, measured_read_delta=math.nan,
                                      pred_read_delta=math.nan)
    assert cal.band(cells["measured_delta"]) == 7.0          # what the A/A cells made of it before
    e = cal.errors(cells)
    assert e["delta_band"] == 9.0 and e["delta_n"] == 36     # the band of the 9; the MAE keeps all 36
    assert cal.class_bands(cells)["regular"]["delta"] == 9.0
    # read back from a CSV the flag is text; a cells.csv without the column bands every cell
    assert cal.errors(cells.assign(same_permutation=cells["same_permutation"].astype(str)))["delta_band"] == 9.0
    assert cal.errors(cells.drop(columns="same_permutation"))["delta_band"] == 7.0
    # coverage and verdicts judge the 9 alone: a job on the baseline's permutation claims nothing
    bands = cal.record_bands({"hit_rate_mae": {"all": 1.0}, "band_coverage": 0.9, "hit_rate_band": {"all": 1.0},
                              "delta_band": {"all": 4.5}})
    assert cal.covered(cells, bands)["delta"] == (4, 9)
    assert cal.verdicts(cells, bands)["measured"] == 9


def test_class_bands_are_kept_apart_and_cells_take_their_classes_band():
    # 9 regular cells off by 1..9 points and 9 misaligned ones off by 10..90: one band each (the
    # 9th smallest of 9 at 90 %), where one band for all (the 18th of 18) would be 90 for every cell.
    rows = []
    for i in range(1, 10):
        rows.append({**_cell("igemm", f"r{i}", "identity", 50.0, 50.0), "pred_hit": 50.0 + i, "pred_read": 50.0,
                     "layer_class": "regular"})
        rows.append({**_cell("igemm", f"g{i}", "identity", 50.0, 50.0), "pred_hit": 50.0 - 10 * i, "pred_read": 50.0,
                     "layer_class": "misaligned"})
    cells = pd.DataFrame(rows).assign(pred_delta=math.nan, measured_read_delta=math.nan, pred_read_delta=math.nan)
    got = cal.class_bands(cells)
    assert got["regular"]["cells"] == 9 and got["regular"]["hit_rate"] == 9.0
    assert got["misaligned"]["hit_rate"] == 90.0
    assert "delta" not in got["regular"]          # no cell with a delta: no delta band
    assert cal.band((cells["pred_hit"] - cells["measured_hit"])) == 90.0
    record = {"hit_rate_mae": {"all": 1.0}, "band_coverage": 0.9, "hit_rate_band": {"all": 90.0}, "class_bands": got}
    bands = cal.record_bands(record)
    assert bands("igemm", "regular")["hit_rate"] == 9.0 and bands("igemm", "one-wave")["hit_rate"] == 90.0
    # every cell inside its own class's band
    assert cal.covered(cells, bands)["hit_rate"] == (18, 18)
    # a cell of another class, 10 points off: outside the regular band, inside the all-cells one
    other = cells.iloc[[0]].assign(pred_hit=60.0, layer_class="regular")
    assert cal.covered(other, bands)["hit_rate"] == (0, 1)
    assert cal.covered(other.assign(layer_class="one-wave"), bands)["hit_rate"] == (1, 1)


def test_a_cell_in_its_baselines_own_permutation_is_marked_and_counted():
    # The remap hashes a run logs tell an order that is its baseline's permutation (colmajor on a
    # grid of one column): the summary counts such cells and names them among the wrong signs.
    assert cal._same_permutation({"params.remap.hash": "ab", "params.baseline.remap.hash": "ab"}) is True
    assert cal._same_permutation({"params.remap.hash": "ab", "params.baseline.remap.hash": "cd"}) is False
    assert cal._same_permutation({"params.remap.hash": "ab"}) is None          # logged no baseline hash
    cells = pd.DataFrame([
        {"kernel": "igemm", "shape": "a", "swizzle": "colmajor", "baseline": "identity", "same_permutation": True,
         "measured_delta": 1.2, "delta_ci_lo": 0.1, "delta_ci_hi": 2.3, "pred_delta": 0.0,
         "measured_read_delta": 0.0, "read_delta_ci_lo": -0.1, "read_delta_ci_hi": 0.1},
        {"kernel": "igemm", "shape": "a", "swizzle": "grouped", "baseline": "identity", "same_permutation": True,
         "measured_delta": 0.3, "delta_ci_lo": -0.2, "delta_ci_hi": 0.8, "pred_delta": 0.0,
         "measured_read_delta": 1.5, "read_delta_ci_lo": 1.1, "read_delta_ci_hi": 1.9},
        {"kernel": "igemm", "shape": "a", "swizzle": "scatter", "baseline": "identity", "same_permutation": False,
         "measured_delta": 3.0, "delta_ci_lo": 2.0, "delta_ci_hi": 4.0, "pred_delta": 0.0,
         "measured_read_delta": 3.0, "read_delta_ci_lo": 2.0, "read_delta_ci_hi": 4.0}])
    assert cal.aa_lines(cells)[0].startswith("A/A cells (the order is the baseline's own permutation): 2; measured "
                                             "as a clear effect (|delta| >= 1, CI excluding 0): 1 in all traffic, "
                                             "1 in reads")
    right, total, wrong = cal._signs(cells, "measured_delta", "delta_ci_lo", "delta_ci_hi", "pred_delta", 1.0)
    assert (right, total) == (0, 2)
    assert "the baseline's own permutation" in wrong[0] and "permutation" not in wrong[1]
    assert cal.aa_lines(cells.drop(columns="same_permutation")) == []


def test_pooled_deltas_take_every_paired_baseline_launch_of_the_layer(tmp_path):
    # Layer a: two candidates whose paired identity launches averaged 50 and 54 (so 52 pooled);
    # layer b: one candidate, its pooled baseline its own.  Hand-counted: grouped 53 - 52 = +1
    # (paired: +3), xcd 51 - 52 = -1 (paired: -3); the CIs keep their paired half-widths.
    def paired(shape, swizzle, hit, read, delta, half, read_delta, read_half):
        return dict(_cell("igemm", shape, swizzle, hit, read, delta, delta - half, delta + half),
                    measured_read_delta=read_delta, read_delta_ci_lo=read_delta - read_half,
                    read_delta_ci_hi=read_delta + read_half, delta_source="paired", baseline_measured=hit - delta)

    rows = [dict(_cell("igemm", "a", "identity", 52.5, 40.0), delta_source=None),
            paired("a", "grouped", 53.0, 41.0, 3.0, 0.5, 2.0, 0.2),     # paired baselines 50 / 39
            paired("a", "xcd", 51.0, 40.0, -3.0, 0.7, -1.0, 0.4),       # paired baselines 54 / 41
            paired("b", "grouped", 70.0, 60.0, 1.5, 0.3, 0.5, 0.1),
            dict(_cell("igemm", "c", "grouped", 80.0, 70.0, 2.0, 1.0, 3.0), delta_source="unpaired")]
    out = cal.pool_deltas(pd.DataFrame(rows)).set_index(["shape", "swizzle"])
    assert out.loc[("a", "grouped"), "measured_delta"] == pytest.approx(1.0)
    assert out.loc[("a", "xcd"), "measured_delta"] == pytest.approx(-1.0)
    assert out.loc[("a", "xcd"), ["delta_ci_lo", "delta_ci_hi"]].tolist() == pytest.approx([-1.7, -0.3])
    assert out.loc[("a", "grouped"), "measured_read_delta"] == pytest.approx(1.0)     # 41 - (39 + 41) / 2
    assert out.loc[("a", "grouped"), ["read_delta_ci_lo", "read_delta_ci_hi"]].tolist() == pytest.approx([0.8, 1.2])
    assert out.loc[("a", "grouped"), "baseline_measured"] == pytest.approx(52.0)
    assert out.loc[("a", "grouped"), ["paired_delta", "paired_read_delta"]].tolist() == [3.0, 2.0]
    assert out.loc[("a", "grouped"), "delta_source"] == "pooled"
    assert out.loc[("b", "grouped"), "measured_delta"] == pytest.approx(1.5)          # alone in its layer
    assert out.loc[("c", "grouped"), "measured_delta"] == 2.0                          # not paired: as it was
    assert out.loc[("c", "grouped"), "delta_source"] == "unpaired"
    assert math.isnan(out.loc[("a", "identity"), "measured_delta"])
    # A table written with paired deltas (its paired_delta column empty) is pooled when read back.
    written = cal.pool_deltas(pd.DataFrame(rows).assign(paired_delta=math.nan)).set_index(["shape", "swizzle"])
    assert written.loc[("a", "grouped"), "measured_delta"] == pytest.approx(1.0)
    # Pooling twice changes nothing; a pooled table asked for paired deltas says how to get them.
    again = cal.pool_deltas(out.reset_index()).set_index(["shape", "swizzle"])
    assert again.loc[("a", "grouped"), "measured_delta"] == pytest.approx(1.0)
    pooled_csv = tmp_path / "cells.csv"
    out.reset_index().assign(half="holdout").drop(columns=["spec", "baseline_spec"]).to_csv(pooled_csv, index=False)
    with pytest.raises(SystemExit, match="--delta paired"):
        cal.main(["--pool", str(pooled_csv), "--delta", "paired"])


def test_pooled_deltas_through_the_cli_on_a_real_h100_store(tmp_path):
    """The third held-out measurement's store (H100 ncu, 8 ABBA pairs per cell), one layer, scored
    as a user scores it: each candidate's delta is its hit rate minus the mean of the identity
    launches paired with every candidate of the layer, counted here from the store itself."""
    import lzma
    import sqlite3

    root = Path(__file__).resolve().parents[2]
    db = tmp_path / "simval.db"
    db.write_bytes(lzma.decompress((RESULTS / "sim_validation_h100/simval_holdout8b/simval.db.xz").read_bytes()))
    con = sqlite3.connect(db)
    rows = con.execute(
        "select p.value, m.key, m.value from metrics m join params p on p.run_uuid = m.run_uuid "
        "join params s on s.run_uuid = m.run_uuid join params k on k.run_uuid = m.run_uuid "
        "where p.key = 'swizzle' and s.key = 'shape.name' and s.value = 'l05' and k.key = 'kernel' "
        "and k.value = 'igemm' and m.key in ('l2_hit_rate', 'baseline_l2_hit_rate', 'l2_delta_pts')").fetchall()
    got = {}
    for swizzle, key, value in rows:
        got.setdefault(swizzle, {})[key] = value
    candidates = {s: m for s, m in got.items() if "baseline_l2_hit_rate" in m}
    assert len(candidates) == 5                                 # colmajor, grouped, hilbert, morton, scatter
    pooled_base = sum(m["baseline_l2_hit_rate"] for m in candidates.values()) / 5

    out = tmp_path / "out"
    run = run_script(root / "benchmarks/sim_calibrate.py", ["--uri", f"sqlite:///{db}", "--target", "h100", "--out",
                                                             str(out), "--validate", "--shapes", "l05"], timeout=300)
    assert run.returncode == 0, run.stderr
    cells = pd.read_csv(out / "cells.csv").set_index("swizzle")
    assert len(cells) == 6 and set(cells["shape"]) == {"l05"}
    for swizzle, m in candidates.items():
        assert cells.loc[swizzle, "measured_delta"] == pytest.approx(m["l2_hit_rate"] - pooled_base, abs=1e-3)
        assert cells.loc[swizzle, "paired_delta"] == pytest.approx(m["l2_delta_pts"], abs=1e-3)
        assert cells.loc[swizzle, "delta_source"] == "pooled"
    # What the read hit rates are made of: ncu's tex read lookups and the model's, per cell.
    for swizzle, row in cells.iterrows():
        hits, misses = (con.execute(
            "select m.value from metrics m join params p on p.run_uuid = m.run_uuid join params s on "
            "s.run_uuid = m.run_uuid join params k on k.run_uuid = m.run_uuid where p.key = 'swizzle' and "
            "p.value = ? and s.key = 'shape.name' and s.value = 'l05' and k.key = 'kernel' and k.value = 'igemm' "
            "and m.key = ?", (swizzle, key)).fetchone()[0] for key in ("l2_hits", "l2_misses"))
        assert row["measured_read_hits"] == pytest.approx(hits) and row["measured_read_misses"] == pytest.approx(misses)
        # the model's lookups and misses give its read hit rate; it merged some requests (lookups < requests)
        assert 100 * (1 - row["pred_read_misses"] / row["pred_read_lookups"]) == pytest.approx(row["pred_read"], abs=1e-3)
        assert row["pred_read_requests"] > row["pred_read_lookups"] > row["pred_read_misses"] > 0
    assert "## What the read hit rates are made of" in (out / "summary.md").read_text()
    # A store from before the ncu profiler counted lookups: its all-traffic rate is ncu's percentage.
    assert set(cells["hit_rate_counters"]) == {"lts__t_sector_hit_rate.pct"}
    assert "taken from: `lts__t_sector_hit_rate.pct` (6 cells)" in (out / "summary.md").read_text()
    # A layer the store does not hold is named, with the ones it does.
    bad = run_script(root / "benchmarks/sim_calibrate.py", ["--uri", f"sqlite:///{db}", "--target", "h100", "--out",
                                                             str(out), "--validate", "--shapes", "l99"], timeout=300)
    assert bad.returncode != 0 and "--shapes l99: no such shape" in bad.stderr and "l05" in bad.stderr


def test_count_errors_by_hand():
    # Two cells: the model looks up 10 % more than ncu and misses 20 % fewer, then the same
    # lookups and 20 % more misses; DRAM served 100 sectors (3200 B) each.
    c = pd.DataFrame({"measured_read_hits": [900.0, 400.0], "measured_read_misses": [100.0, 100.0],
                      "measured_dram_bytes": [3200.0, 3200.0], "pred_read_lookups": [1100.0, 500.0],
                      "pred_read_misses": [80.0, 120.0]})
    e = cal.count_errors(c)
    assert e["n"] == 2
    assert e["lookups_err_median"] == pytest.approx(5.0) and e["lookups_err_mae"] == pytest.approx(5.0)
    assert e["misses_err_median"] == pytest.approx(0.0) and e["misses_err_mae"] == pytest.approx(20.0)
    assert e["miss_per_dram_measured"] == pytest.approx(1.0) and e["miss_per_dram_pred"] == pytest.approx(1.0)
    table = cal.counts_table({"all": c})
    assert "| all | 2 | +5.0 / 5.0 | +0.0 / 20.0 | 1.00 / 1.00 |" in table
    # A table without counts (a cells.csv written before the columns) shows nothing, not zeros.
    assert cal.count_errors(c.drop(columns=["pred_read_misses"])) == {}
    assert cal.counts_table({"all": c.iloc[:0]}) == ""


TARGET_YAML = """name: t
# a comment the writer keeps
sim_calibration:
  validated_on: X ncu, 1 cells
  coalesce_window: 0.18
  hit_rate_mae: {all: 9.0}
  delta_mae: {all: 9.0}
  read_hit_rate_mae: {all: 9.0}
  band_coverage: 0.9
  hit_rate_band: {all: 9.0}
  delta_band: {all: 9.0}
  read_hit_rate_band: {all: 9.0}
  read_delta_band: {all: 9.0}
  class_bands:
    regular: {cells: 1, hit_rate: 9.0}
    # a class comment
    order-blind: {cells: 1, delta: 9.0}
peak_tflops: 757
"""


def test_write_pooled_keys_replaces_the_error_lines_in_place():
    record = {"hit_rate_mae": {"all": 3.118, "igemm": 2.5}, "delta_mae": {"all": 1.0},
              "band_coverage": 0.9, "hit_rate_band": {"all": 7.0},
              "class_bands": {"regular": {"cells": 5, "hit_rate": 4.514}, "igemm/one-wave": {"cells": 3, "delta": 5.0}},
              "sign_right": [1, 2]}
    out = cal.write_pooled_keys(TARGET_YAML, record, "X ncu, 5 cells")
    lines = out.splitlines()
    assert "  hit_rate_mae: {all: 3.12, igemm: 2.5}" in lines and "  hit_rate_band: {all: 7.0}" in lines
    assert "  validated_on: X ncu, 5 cells" in lines and "  coalesce_window: 0.18" in lines
    assert "    regular: {cells: 5, hit_rate: 4.51}" in lines
    assert '    "igemm/one-wave": {cells: 3, delta: 5.0}' in lines         # a new class, quoted
    assert "    order-blind: {cells: 1, delta: 9.0}" in lines               # not in the record: kept
    assert "# a comment the writer keeps" in lines and "    # a class comment" in lines
    assert lines[-1] == "peak_tflops: 757" and out.endswith("\n")
    import yaml
    parsed = yaml.safe_load(out)["sim_calibration"]
    assert parsed["class_bands"]["igemm/one-wave"] == {"cells": 3, "delta": 5.0}
    assert parsed["delta_mae"] == {"all": 1.0}
    with pytest.raises(ValueError, match="no read_delta_mae line"):
        cal.write_pooled_keys(TARGET_YAML, {"read_delta_mae": {"all": 1.0}})
    assert cal.write_pooled_keys(TARGET_YAML, {"read_hit_rate_band": {"all": math.inf}}).count(
        "  read_hit_rate_band: {all: .inf}") == 1           # too few cells for a band: YAML's infinity
    with pytest.raises(ValueError, match="no sim_calibration record"):
        cal.write_pooled_keys("name: t\n", record)


def test_pool_writes_a_target_file_through_the_cli(cells, tmp_path, capsys):
    cells["half"] = "holdout"
    pred = cal.predict(cells, fake_simulate, 0.5)
    table = tmp_path / "a.csv"
    pred.drop(columns=["spec", "baseline_spec"]).to_csv(table, index=False)
    target = tmp_path / "t.yaml"
    target.write_text(TARGET_YAML)
    # The file lacks a key the pool writes (read_delta_mae): a clear error, the file untouched.
    with pytest.raises(SystemExit, match="no read_delta_mae line"):
        cal.main(["--pool", str(table), "--write-target", str(target)])
    assert target.read_text() == TARGET_YAML
    target.write_text(TARGET_YAML.replace("  band_coverage:", "  read_delta_mae: {all: 9.0}\n  band_coverage:"))
    cal.main(["--pool", str(table), "--write-target", str(target), "--validated-on", "X ncu, 8 cells"])
    import yaml
    rec = yaml.safe_load(target.read_text())["sim_calibration"]
    assert rec["validated_on"] == "X ncu, 8 cells"
    assert rec["hit_rate_mae"]["all"] == pytest.approx(round(cal.errors(pred)["hit_rate_mae"], 2))
    assert "# a comment the writer keeps" in target.read_text()
    with pytest.raises(SystemExit):
        cal.main(["--uri", "sqlite:///x.db", "--out", str(tmp_path), "--write-target", str(target)])


def test_the_h100_record_is_the_committed_pool():
    """conf/target/h100.yaml's error figures and bands are what results/sim_calibration/h100_pooled/
    pooled.json says: writing the pool into the file changes nothing (a re-pool that was not written
    into the target, or a hand edit of a band, fails here)."""
    import yaml

    root = Path(__file__).resolve().parents[2]
    text = (root / "conf/target/h100.yaml").read_text()
    record = json.loads((RESULTS / "sim_calibration/h100_pooled/pooled.json").read_text())
    validated_on = yaml.safe_load(text)["sim_calibration"]["validated_on"]
    assert cal.write_pooled_keys(text, record, validated_on) == text
    assert f"{record['cells_holdout']} cells" in validated_on
