"""The report's "Kernel vs vendor" table on a synthetic store with known times (CPU only).

* igemm / identity: time / vendor 0.5, 2 and 4 on three shapes (ratio_to_vendor as an
  older run logs it, median / vendor median) -> geometric mean 4 ** (1/3), worst shape l03;
* igemm / xcd: the paired ``ratio_to_vendor`` 0.8, 0.8, 1.25 (not its median / vendor
  median, which is 1) -> geometric mean 0.8 ** (1/3);
* direct: CPU-only runs, not timed.
"""
from __future__ import annotations

import math

import pandas as pd
import pytest

from harness.report import build_report
from tests.report.pages import section, table_rows
from tests.report.test_report import T0_MS, _job, _timed, new_store

EXPERIMENT = "vendor"


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    root = tmp_path_factory.mktemp("vendor")
    uri, client, exp = new_store(root, EXPERIMENT)
    sweep = client.create_run(exp, run_name="sweep", start_time=T0_MS, tags={"swizzlebench.kind": "sweep"}).info.run_id
    t = T0_MS
    for i, (shape, median) in enumerate((("l01", 0.5), ("l02", 2.0), ("l03", 4.0))):
        _job(client, exp, sweep, t + 10 * i, kernel="igemm", swizzle="identity", shape=shape, preset="resnet", warps=8,
             metrics=_timed(median, median * 0.99, median * 1.01, vendor=1.0))
    for i, (shape, ratio) in enumerate((("l01", 0.8), ("l02", 0.8), ("l03", 1.25))):
        _job(client, exp, sweep, t + 10 * i + 1, kernel="igemm", swizzle="xcd", shape=shape, preset="resnet", warps=8,
             metrics={**_timed(1.0, 0.99, 1.01, vendor=1.0), "ratio_to_vendor": ratio})
    for i, shape in enumerate(("t1", "t2")):
        _job(client, exp, sweep, t + 100 + i, kernel="direct", swizzle="identity", shape=shape, preset="tiny",
             warps=4, metrics={"max_rel_err": 1e-3}, timed=False)
    client.set_terminated(sweep, "FINISHED", end_time=t + 1_000)
    return build_report(uri, EXPERIMENT, sweep, root / "out")


def test_geometric_mean_of_time_over_vendor(page):
    vendor = pd.read_csv(page.parent / "vendor.csv").set_index(["kernel", "swizzle"])
    identity = vendor.loc[("igemm · w8", "identity")]
    assert identity["geomean_ratio"] == pytest.approx(4.0 ** (1 / 3), rel=1e-12)
    assert identity["geomean_vendor_speedup"] == pytest.approx(4.0 ** (-1 / 3), rel=1e-12)
    assert (identity["shapes"], identity["timed_shapes"]) == (3, 3)
    assert (identity["worst_shape"], identity["worst_ratio"]) == ("resnet-l03", pytest.approx(4.0))
    xcd = vendor.loc[("igemm · w8", "xcd")]
    assert xcd["geomean_ratio"] == pytest.approx(0.8 ** (1 / 3), rel=1e-12)     # the paired ratio, not 1.0
    assert xcd["worst_shape"] == "resnet-l03"
    cpu = vendor.loc[("direct · w4", "identity")]
    assert cpu["timed_shapes"] == 0 and math.isnan(cpu["geomean_ratio"])


def test_table_on_the_page(page):
    rows = table_rows(section(page.read_text(), "<h2>Kernel vs vendor</h2>", "<h2>Figures</h2>"))
    shown = {(r[0], r[1]): r[2:] for r in rows}
    assert shown[("igemm · w8", "identity")] == ["3", "1.587", "0.630", "resnet-l03 (4.000)"]
    assert shown[("igemm · w8", "xcd")] == ["3", "0.928", "1.077", "resnet-l03 (1.250)"]
    assert shown[("direct · w4", "identity")] == ["2", "not timed", "not timed", "–"]
