"""The report's HTML: Jinja2 templates (``templates/``) filled with plain text and numbers.

Autoescape is on, and every value a template shows goes through :func:`html.escape`
(quotes included), so a swizzle name, formula or failure reason is always text, never
markup.  The Python side only formats values (``1.250 [1.210, 1.291]``); the markup is in
the templates.
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import jinja2
import numpy as np
import pandas as pd
from markupsafe import Markup

from harness.job.verdict import Kind
from harness.tune.best_vs_best import BEST_VS_BEST
from harness.report.compare import GROUP_KEYS, Comparison
from harness.report.data import artifact_href
from harness.report.figures import FigureBlock
from harness.report.prediction import PREDICTION, band_text
from harness.report.summary import best_per_group, kernel_vs_vendor, verdicts_per_swizzle
from harness.report.verdicts import (BASELINE, BY_IDENTITY_RUN, FASTER, L2_BAND_FLOOR_POINTS, L2_BAND_SIGMAS,
                                     L2_HIGHER, L2_LOWER, NO_DIFFERENCE, NOISE, NOT_PROFILED, NOT_TIMED, PAIRED,
                                     SAME_ORDER, SLOWER, verdict_counts)
from harness.report.views import ReportRuns

DASH = "–"
EXTRA_GROUP_HEADS = {"num_stages": "Stages", "tiles": "Tiles", "num_xcds": "XCDs", "dtype": "Dtype",
                     "target": "Target", "seed": "Seed"}
VERDICT_CLASSES = {FASTER: "v-faster", SLOWER: "v-slower", NOISE: "v-noise", NO_DIFFERENCE: "v-noise",
                   SAME_ORDER: "v-noise", L2_HIGHER: "v-faster", L2_LOWER: "v-slower", BASELINE: "v-baseline"}


def _escape(value: Any) -> Markup:
    """Every ``{{ value }}``: already-rendered markup (a macro) as is, anything else escaped."""
    if isinstance(value, Markup):
        return value
    return Markup(html.escape("" if value is None else str(value), quote=True))


_ENV = jinja2.Environment(loader=jinja2.PackageLoader("harness.report", "templates"), autoescape=True,
                          finalize=_escape, trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined,
                          keep_trailing_newline=True)
#: The verdict words, as the templates spell them: ``{{ words.NOT_TIMED }}``.
_ENV.globals["words"] = {k.name: k.word for k in Kind}


def render(template: str, **context: Any) -> str:
    """Template ``templates/<template>`` filled with ``context``."""
    return _ENV.get_template(template).render(**context)


# --------------------------------------------------------------------------------------
# Numbers as text
# --------------------------------------------------------------------------------------
def num(value: float | None, fmt: str) -> str:
    """``value`` formatted with ``fmt``; a dash when it is unknown."""
    return DASH if value is None or not np.isfinite(value) else format(value, fmt)


def bounds(lo: float, hi: float, fmt: str) -> str:
    """``[1.210, 1.291]``; empty when both bounds are unknown."""
    return f"[{num(lo, fmt)}, {num(hi, fmt)}]" if np.isfinite(lo) or np.isfinite(hi) else ""


def interval(value: float, lo: float, hi: float, fmt: str) -> str:
    """``1.250 [1.210, 1.291]``; the bracket is left out when both bounds are unknown."""
    if not np.isfinite(value):
        return DASH
    return f"{format(value, fmt)} {bounds(lo, hi, fmt)}".rstrip()


def _compared_text(r: dict) -> str:
    """How a cell was compared: ``paired, 40 rounds`` / ``identity run, [p20, p80] bands`` /
    ``simulated pair`` (an untimed paired job whose L2 figures are predictions)."""
    if r["comparison"] == PAIRED and r["simulated"] and not np.isfinite(r["paired_rounds"]):
        return f"simulated pair ({NOT_TIMED})"
    if r["comparison"] == PAIRED:
        rounds = f", {r['paired_rounds']:.0f} rounds" if np.isfinite(r["paired_rounds"]) else ""
        pairs = f", {r['l2_pairs']:.0f} L2 pairs" if np.isfinite(r["l2_pairs"]) else ""
        return f"paired{rounds}{pairs}"
    return f"{BY_IDENTITY_RUN}, [p20, p80] bands" if r["comparison"] == BY_IDENTITY_RUN else ""


def _l2_text(r: dict) -> str:
    """A cell's L2 hit rate: measured ``70.00 ± 0.30`` (std over repeats; no ± without a
    spread), simulated ``85.68 ± 1.2 (sim, 90 % band)`` or ``85.68 (sim, not validated on ...)``."""
    if not np.isfinite(r["l2_hit_rate"]):
        return DASH
    if r["simulated"]:
        err = r["l2_hit_rate_err"]
        return f"{r['l2_hit_rate']:.2f}{f' ± {err:.1f}' if np.isfinite(err) else ''} (sim, {band_text(r)})"
    std = r["l2_hit_rate_std"]
    return f"{r['l2_hit_rate']:.2f}" + (f" ± {std:.2f}" if np.isfinite(std) and std > 0 else "")


def _delta_l2_parts(r: dict) -> tuple[str, str, str]:
    """A cell's ΔL2 (percentage points) as (value, interval, basis): ``+1.23``, ``[+0.50,
    +1.90]`` (paired: 95 % CI) / ``± 0.50`` (noise band; a simulated prediction's band ``± 0.9``)
    and, for a prediction, ``prediction, 90 % band`` / ``prediction, not validated on ...``
    with an order-blind grid's note; dashes and empty text where there is none."""
    if r["verdict"] == BASELINE or not np.isfinite(r["l2_delta_pts"]):
        return DASH, "", ""
    value = f"{r['l2_delta_pts']:+.2f}"
    if r["simulated"]:
        band = r.get("l2_delta_band_pts", np.nan)
        spread, basis = (f"± {band:.1f}" if np.isfinite(band) else ""), f"{PREDICTION}, {band_text(r)}"
    elif r["comparison"] == PAIRED:
        spread, basis = bounds(r["l2_delta_lo"], r["l2_delta_hi"], "+.2f"), ""
    else:
        spread, basis = f"± {num(r['l2_band_pts'], '.2f')}", ""
    if r.get("sim_order_blind"):   # the simulator cannot tell this grid's orders apart: its note
        basis = f"{basis}; {r['sim_order_blind']}" if basis else r["sim_order_blind"]
    return value, spread, basis


# --------------------------------------------------------------------------------------
# The page's parts
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CellRow:
    """One cell of the "All cells" table: its row classes, its decision cells (class, text)
    and its details (label, class, text), shown in the expandable row under it."""

    classes: str
    cells: list[tuple[str, str]]
    summary: str
    details: list[tuple[str, str, str]]
    links: list[tuple[str, str, str]] = ()   # (label, address, text): files of the cell to open


@dataclass(frozen=True)
class CellTable:
    """The "All cells" table: the decision columns' headings and one :class:`CellRow` per cell."""

    heads: list[str]
    rows: list[CellRow]


def _cell_name(r: dict, extra_group: list[str]) -> str:
    """The cell a row is about, in a few words: ``igemm · resnet-l03 · w8`` (then any other
    launch knob of its group: ``· stages 4``)."""
    extra = [f"{EXTRA_GROUP_HEADS.get(c, c).lower()} {r[c]}" for c in extra_group]
    return " · ".join([str(r["kernel"]), str(r["shape"]), f"w{r['num_warps']}", *extra])


def _verdict_cell(verdict: str, text: str, basis: str = "") -> tuple[str, str]:
    """A verdict's (class, text): its colour class and words, a prediction's basis after them."""
    return "verdict " + VERDICT_CLASSES.get(verdict, ""), f"{text} ({basis})" if basis else text


def cell_table(comparison: Comparison, tracking_uri: str = "") -> CellTable:
    """One row per cell, groups separated, the best cell of each group marked.  The decision
    columns (cell, swizzle, verdict, speedup and its interval when anything was timed, ΔL2 and
    its interval, L2 verdict) are the row; the rest (config, times, hit rates, vendor ratio,
    roofline, compile figures) are its details, with a link to its profiler report file
    (:func:`report_link`; ``tracking_uri``: the store, for a tracking server's artifacts)."""
    t = comparison.table
    extra_group = [c for c in comparison.group_cols if c not in GROUP_KEYS]
    show_gsize = "group_size" in comparison.variant_cols
    show_sim = bool(t["sim_l2_hit_rate"].notna().any()) if len(t) else False
    show_compile = bool((t["compile_arch"] != "").any()) if len(t) and "compile_arch" in t else False
    show_bound = bool((t["bound"] != "").any()) if len(t) and "bound" in t else False
    timed = bool(t["speedup"].notna().any()) if len(t) else False
    measured_l2 = bool((t["l2_hit_rate"].notna() & ~t["simulated"]).any()) if len(t) else False
    simulated_l2 = bool((t["l2_hit_rate"].notna() & t["simulated"]).any()) if len(t) else False
    l2_heads = {(True, False): ("L2 hit % ± std", "[95 % CI] or ± band"),
                (False, True): ("L2 hit % (simulated: ± band or not validated)", "± band (prediction)"),
                (True, True): ("L2 hit %: measured ± std, simulated ± band or not validated",
                               "measured [95 % CI] or ± band; simulated ± band")}
    l2_hit_head, l2_spread_head = l2_heads.get((measured_l2, simulated_l2), ("L2 hit %", "interval"))
    heads = ["Cell", "Swizzle", "Verdict",
             *(["Speedup", "[95 % CI or band interval]"] if timed else []),
             "ΔL2 (points)", l2_spread_head, "L2 verdict"]
    detail_heads = ["Kernel", "Shape", "Warps", *[EXTRA_GROUP_HEADS.get(c, c) for c in extra_group],
                    *(["Group size"] if show_gsize else []), "Config measured on" if timed else "Config",
                    "Baseline", "Compared", "Time ms: median [p20, p80]", "Baseline time ms", l2_hit_head,
                    *(["Simulated L2 %"] if show_sim else []), "Time / vendor", "TFLOP/s",
                    *(["What bounds it (roofline)"] if show_bound else []), *(COMPILE_HEADS if show_compile else [])]
    rows, previous_group = [], None
    for row in t.itertuples(index=False):
        r = row._asdict()
        group = tuple(r[c] for c in comparison.group_cols)
        classes = (["best"] if r["best"] else []) + (["group-start"] if group != previous_group else [])
        previous_group = group
        if r["verdict"] == BASELINE:
            speed, speed_interval = num(1.0, ".3f"), "(baseline)"   # by definition
        else:
            speed = num(r["speedup"], ".3f")
            speed_interval = bounds(r["speedup_lo"], r["speedup_hi"], ".3f") if np.isfinite(r["speedup"]) else ""
        l2_value, l2_spread, l2_basis = _delta_l2_parts(r)
        swizzle = f"{r['swizzle']} (group size {r['group_size']})" if show_gsize else r["swizzle"]
        cells = [("name", _cell_name(r, extra_group)), ("sw", swizzle), _verdict_cell(r["verdict"], r["verdict_detail"]),
                 *([("num", speed), ("num", speed_interval)] if timed else []),
                 ("num", l2_value), ("num", l2_spread),
                 _verdict_cell(r["l2_verdict"], r["l2_verdict_detail"], l2_basis)]
        config = _config_cell(r)
        values = [("", r["kernel"]), ("", r["shape"]), ("num", r["num_warps"]), *[("", r[c]) for c in extra_group],
                  *([("num", r["group_size"])] if show_gsize else []), config,
                  ("", r["baseline"] or DASH), ("", _compared_text(r) or DASH),
                  ("num", interval(r["time_ms_median"], r["time_ms_p20"], r["time_ms_p80"], ".4f")),
                  ("num", num(r["baseline_time_ms"], ".4f")), ("num", _l2_text(r)),
                  *([("num", num(r["sim_l2_hit_rate"], ".2f"))] if show_sim else []),
                  ("num", num(r["ratio_to_vendor"], ".3f")), ("num", num(r["tflops"], ".1f")),
                  *([("", r["bound"] or DASH)] if show_bound else []),
                  *(_compile_cells(r) if show_compile else [])]
        details = [(head, cls, text) for head, (cls, text) in zip(detail_heads, values)]
        rows.append(CellRow(" ".join(classes), cells, config[1], details, report_link(r, tracking_uri)))
    return CellTable(heads, rows)


def report_link(r: dict, tracking_uri: str = "") -> list[tuple[str, str, str]]:
    """The link to a cell's profiler report file (ncu's ``.ncu-rep``), where its run kept one:
    (label, address, text naming the file, the cell's results in it and the viewer)."""
    if not r.get("profiler_report"):
        return []
    results = f", results {r['profiler_report_results']}" if r.get("profiler_report_results") else ""
    name = r["profiler_report"].rpartition("/")[2]
    return [("Nsight Compute report", artifact_href(r["profiler_report"], tracking_uri),
             f"{name} (run {r['run_id']}{results}; open with ncu-ui {name})")]


#: The flag of a cell measured on a tuned config chosen among near-equal candidates.
NEAR_TIE = "near-tie config"


def _config_cell(r: dict) -> tuple[str, str]:
    """The config a cell was measured on, flagged when tune mode's choice was a near-tie; best
    vs best: both arms' configs (``best vs best: M64 ... ; identity: M128 ...``)."""
    text = r["config"]
    if r["question"] == BEST_VS_BEST and r["verdict"] != BASELINE:
        text = f"{BEST_VS_BEST}: {text}; {r['baseline'] or 'baseline'}: {r['baseline_config'] or '?'}"
    if r["reused_from"]:   # a run a resumed sweep reused: "from run <id>, <date>"
        text = f"{text} [{r['reused_from']}]"
    if r["tune_near_tie"]:
        return "cfg near-tie", f"{text} [{NEAR_TIE}]"
    return "cfg", text


#: The compile stage's column group: what the job's kernel took on its target.
COMPILE_HEADS = ["Compiled for", "Registers", "LDS / shared B", "Programs per CU / SM (limit)", "Spilled registers (B)"]


def _compile_cells(r: dict) -> list[tuple[str, str]]:
    """The compile group's cells of one row (dashes where the job was not compiled)."""
    if not r["compile_arch"]:
        return [("", DASH)] * len(COMPILE_HEADS)
    occupancy = num(r["compile_programs_per_cu"], ".0f") + (f" ({r['compile_limiter']})" if r["compile_limiter"] else "")
    spills = (DASH if not np.isfinite(r["compile_spills"]) else
              f"{num(r['compile_spills'], '.0f')} ({num(r['compile_spill_bytes'], '.0f')})")
    return [("", r["compile_arch"]), ("num", num(r["compile_registers"], ".0f")),
            ("num", num(r["compile_shared_bytes"], ".0f")), ("num", occupancy),
            ("num" + (" v-slower" if r["compile_spills"] and np.isfinite(r["compile_spills"]) else ""), spills)]


def verdict_summary(comparison: Comparison) -> dict[str, Any]:
    """Verdict counts over every compared cell and per swizzle variant."""
    t = comparison.candidates
    return {"cells": len(t), "time": verdict_counts(t["verdict"]),
            "l2": verdict_counts(t["l2_verdict"], (L2_HIGHER, L2_LOWER), NOT_PROFILED),
            "swizzles": verdicts_per_swizzle(comparison).to_dict("records")}


def vendor_rows(comparison: Comparison) -> list[dict[str, Any]]:
    """The "Kernel vs vendor" table as text: numbers, or "not timed" where no shape was."""
    rows = []
    for r in kernel_vs_vendor(comparison).itertuples(index=False):
        timed = r.timed_shapes > 0
        shapes = str(r.shapes) if r.timed_shapes in (0, r.shapes) else f"{r.shapes} ({r.timed_shapes} timed)"
        rows.append({"kernel": r.kernel, "swizzle": r.swizzle, "shapes": shapes,
                     "ratio": num(r.geomean_ratio, ".3f") if timed else NOT_TIMED,
                     "speedup": num(r.geomean_vendor_speedup, ".3f") if timed else NOT_TIMED,
                     "worst": f"{r.worst_shape} ({r.worst_ratio:.3f})" if timed else DASH})
    return rows


def render_page(data: ReportRuns, comparison: Comparison, failed: pd.DataFrame, figures: list[FigureBlock],
                facts: list[tuple[str, str]], searches: list[Any] = ()) -> str:
    """The whole report page (``templates/report.html.j2``); ``searches``: the search
    sections (:class:`harness.report.search.SearchSection`), if any."""
    t = comparison.table
    used = set(t["comparison"])
    return render(
        "report.html.j2", title=f"swizzlebench report: {data.experiment} / {data.title}", facts=facts,
        generated=datetime.now(tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        verdicts=verdict_summary(comparison), notes=comparison.notes,
        best=best_per_group(comparison).to_dict("records"), vendor=vendor_rows(comparison),
        searches=list(searches), figures=figures, cells=cell_table(comparison, data.tracking_uri),
        failed=failed.to_dict("records"),
        methods={"paired": bool(((t["comparison"] == PAIRED) & ~(t["simulated"] & t["speedup"].isna())).any()),
                 "identity": BY_IDENTITY_RUN in used, "simulated": bool(t["simulated"].any()),
                 "timed": bool(t["speedup"].notna().any()),
                 "sigmas": f"{L2_BAND_SIGMAS:g}", "floor": f"{L2_BAND_FLOOR_POINTS:g}"})
