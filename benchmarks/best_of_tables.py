"""The tables of ``kernel=igemm_best`` (kernels/igemm_best.py), from committed files only: no GPU,
nothing timed here.

    python benchmarks/best_of_tables.py [--check]
    python benchmarks/best_of_tables.py --add-run NAME OUT/results.json   # keep a conv_speed run's rows
    python benchmarks/best_of_tables.py --runs    # each stored run's command and versions

* ``kernels/tuned/igemm_best_h100.json``: every entry of ``igemm_fast_h100.json``; where
  ``igemm_ws_h100.json`` has the layer too and igemm_ws was measured faster against cuDNN, its
  config (``WS=1``), else igemm_fast's (``WS=0``; a tie goes to igemm_fast, which runs
  everywhere).  The measurements are the rows of ``benchmarks/results/kernel_speed/
  h100_rows.json.xz`` (``benchmarks/conv_speed.py``: CUPTI kernel durations, ``ratio`` = the
  faster cuDNN mode's time / ours): each family's from the newest of its runs
  (:data:`WS_RUNS`, :data:`FAST_RUNS`) that timed the config its table holds (an older run
  timed an older table's config on some layers).  Each entry keeps both ratios under ``measured``, and an
  igemm_ws entry igemm_fast's config as its ``fallback`` (run where igemm_ws is refused:
  :meth:`kernels.tuned.TunedTable.lookup`).
* ``kernels/tuned/igemm_{fast,ws,best}_h200.json``: each member's entries tuned and timed on an
  NVIDIA H200 (the rows of ``h200_rows.json.xz``: :data:`H200_RUNS`), the layers no H200 run
  tuned keep the H100's entry (``"tuned_on": "H100"``); igemm_best per layer the member with the
  higher cuDNN / ours ratio, each ratio from the H200 where it was timed there, else the H100's.
* ``kernels/tuned/igemm_best_mi300x.json``: ``igemm_fast_mi300x.json``'s entries as ``WS=0``
  configs (igemm_ws runs on sm_90 only).

``--check``: write nothing; exit 1 when a committed table differs from what this builds.
``--add-run NAME RESULTS``: store ``conv_speed.py``'s ``results.json`` in the rows file as run
NAME (replacing a run of that name), then build.  ``--runs``: print each stored run of both rows
files, one line each (name, the command that made it, device and versions), and build nothing.
"""
from __future__ import annotations

import argparse
import json
import lzma
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernels.igemm_best import MEMBERS  # noqa: E402
from kernels.problem import ConvShape  # noqa: E402
from kernels.tuned import TunedTable, load_table, shape_key, table_path  # noqa: E402

ROWS = ROOT / "benchmarks" / "results" / "kernel_speed" / "h100_rows.json.xz"
#: The runs of h100_rows.json.xz that timed igemm_ws_h100.json's configs, newest first.  Not
#: here: runs of a kernel since changed back (``igemm_ws_splitsum_tune``: split-K summed in the
#: kernel; ``igemm_ws_twoout_tune``: two output tiles in turn; ``igemm_ws_narrow_tune``: a narrow
#: wgmma for a tap's last channel block; benchmarks/kernel_notes.md).
WS_RUNS = ("igemm_ws_deep128_rest_tune", "igemm_ws_deep128_tune", "igemm_ws_bk32_tune", "igemm_ws_splitadd_tune",
           "igemm_ws_phase_tune", "igemm_ws_deep_tune", "igemm_ws_wide_tune", "igemm_ws_splitk_tune",
           "igemm_ws_pointwise_tune", "igemm_ws_strided_tune", "igemm_ws_full_tune")
#: The runs that timed igemm_fast_h100.json's configs, newest first.
FAST_RUNS = ("other_presets_full_tune", "resnet_and_unseen_table_run")
FAMILIES = {0: "igemm_fast", 1: "igemm_ws"}
H200_ROWS = ROOT / "benchmarks" / "results" / "kernel_speed" / "h200_rows.json.xz"
#: The H200's runs of h200_rows.json.xz per family, newest first (benchmarks/gpu_h200_session.sh's
#: tuning lanes: conv_speed.py on the H200 against cuDNN, four lanes of one host side by side).
H200_RUNS = {"igemm_fast": ("h200_fast_unseen6to10_tune", "h200_fast_unseen1to5_tune", "h200_fast_kinds_tune",
                            "h200_fast_resnet_tune"),
             "igemm_ws": ("h200_ws_rows256b_tune", "h200_ws_rows256_tune", "h200_ws_padc_tune", "h200_ws_n2b_tune",
                          "h200_ws_n2_tune", "h200_ws_m64_tune", "h200_ws_small_f_tune", "h200_ws_kinds_tune",
                          "h200_ws_resnet_tune", "h200_ws_unseen1to5_tune", "h200_ws_unseen6to10_tune")}


def row_dims(dims: str) -> dict[str, int]:
    """A row's ``dims`` (``"32 64 56x56 64 3x3 s1 p1"``: N C HxW F RxS stride padding) as a
    ConvShape's fields."""
    n, c, hw, f, rs, s, p = dims.split()
    (h, w), (r, s_) = hw.split("x"), rs.split("x")
    return {"N": int(n), "C": int(c), "H": int(h), "W": int(w), "F": int(f), "R": int(r), "S": int(s_),
            "stride": int(s[1:]), "padding": int(p[1:])}


def row_key(dims: str, dtype: str) -> str:
    """A row's ``dims`` as a table key (:func:`kernels.tuned.shape_key`)."""
    return shape_key(ConvShape("row", dtype=dtype, **row_dims(dims)))


def _same_config(family: str, a: dict, b: dict) -> bool:
    kernel = MEMBERS[{v: k for k, v in FAMILIES.items()}[family]]
    return (kernel.check_tiles(a["tiles"]) == kernel.check_tiles(b["tiles"])
            and (a["num_warps"], a["num_stages"]) == (b["num_warps"], b["num_stages"]))


def measured_ratio(family: str, table: TunedTable, runs: dict, run_names: tuple[str, ...]) -> dict[str, float]:
    """Table key -> the ratio (cuDNN / ours) measured for the table's own config of that layer,
    from the first of ``run_names`` whose row of the layer ran that config; raises where none did."""
    absent = [name for name in run_names if name not in runs]
    if absent:
        raise SystemExit(f"{family}: runs {absent} are not in the rows file (stored: {sorted(runs)}); "
                         "keep a run first: --add-run NAME RESULTS_JSON")
    out, unmeasured = {}, []
    for key, entry in table.entries.items():
        if entry.get("tuned_on"):    # another GPU's entry: its ratio is that GPU's (build_h200, _borrowed)
            continue
        for name in run_names:
            rows = [r for r in runs[name]["rows"] if row_key(r["dims"], entry["shape"]["dtype"]) == key]
            if rows and _same_config(family, rows[0]["config"], entry["config"]):
                out[key] = rows[0]["ratio"]
                break
        else:
            unmeasured.append(entry["shape"]["name"])
    if unmeasured:
        raise SystemExit(f"{family}: no run of {', '.join(run_names)} timed the table's config of {unmeasured}")
    return out


def load_runs(path: Path = ROWS) -> dict:
    return json.loads(lzma.decompress(path.read_bytes()))


def add_run(name: str, results: Path) -> None:
    """Store a ``conv_speed.py`` ``results.json`` (meta, command, rows, compile_errors) as run
    ``name`` of the rows file of the GPU it ran on (H200: ``h200_rows.json.xz``), replacing a
    run of that name."""
    run = json.loads(results.read_text())
    missing = {"meta", "command", "rows"} - set(run)
    if missing:
        raise SystemExit(f"{results}: not a conv_speed.py results.json (no {', '.join(sorted(missing))})")
    path = H200_ROWS if "H200" in run["meta"]["device"] else ROWS
    runs = load_runs(path)
    runs[name] = {k: run.get(k, []) for k in ("meta", "command", "rows", "compile_errors")}
    path.write_bytes(lzma.compress(json.dumps(runs).encode()))


def run_lines(runs: dict) -> list[str]:
    """One line per stored run: its name, the ``conv_speed.py`` command that made it, the
    device and the versions it ran with."""
    return [f"{name}: {run['command']} ({run['meta']['nvidia_smi'].splitlines()[0]}; torch {run['meta']['torch']}, "
            f"Triton {run['meta']['triton']}, cuDNN {run['meta']['cudnn']})" for name, run in runs.items()]


def _with_ws(ws: int, config: dict) -> dict:
    """A member's config as igemm_best's: tile WS first, then the member's tiles."""
    return {**config, "tiles": {"WS": ws, **config["tiles"]}}


def _borrowed(family: str, h200: TunedTable) -> TunedTable:
    """``family``'s H100 table as committed (its own entries), plus the H200's own entry, marked
    ``tuned_on: H200``, for each layer no H100 run tuned (layers added since an H100 was lent)."""
    h100 = load_table(family, "h100")
    own = {k: e for k, e in h100.entries.items() if e.get("tuned_on") != "H200"}
    extra = {k: {**e, "tuned_on": "H200"} for k, e in h200.entries.items() if k not in own and "tuned_on" not in e}
    return TunedTable(h100.device, {**own, **extra}, h100.how)


def build_h100(runs: dict, fast: TunedTable, ws: TunedTable, h200_ratio: dict[str, dict[str, float]]) -> TunedTable:
    """igemm_best's H100 table from the H100 member tables ``fast`` and ``ws`` (their
    :func:`_borrowed` entries with the H200's ratios, ``h200_ratio``: family -> key -> cuDNN / ours)."""
    ratios = {0: {**h200_ratio["igemm_fast"], **measured_ratio("igemm_fast", fast, runs, FAST_RUNS)},
              1: {**h200_ratio["igemm_ws"], **measured_ratio("igemm_ws", ws, runs, WS_RUNS)}}
    outside = sorted(set(ws.entries) - set(fast.entries))
    if outside:
        raise SystemExit(f"igemm_ws_h100.json has layers igemm_fast_h100.json has not: {outside}")
    entries = {}
    for key, entry in fast.entries.items():
        ws_ratio = ratios[1].get(key)
        pick = 1 if ws_ratio is not None and ws_ratio > ratios[0][key] else 0
        chosen = (ws if pick else fast).entries[key]
        entries[key] = {"shape": entry["shape"], "config": _with_ws(pick, chosen["config"]),
                        "measured": {"igemm_fast": ratios[0][key], "igemm_ws": ws_ratio}}
        if "tuned_on" in chosen:
            entries[key]["tuned_on"] = chosen["tuned_on"]
        if pick:
            entries[key]["fallback"] = _with_ws(0, entry["config"])
    wins = sum(e["config"]["tiles"]["WS"] for e in entries.values())
    how = (f"per layer the faster of igemm_fast and igemm_ws, each timed on an {fast.device}: igemm_ws on {wins} of "
           f"{len(entries)} layers, the two timed on different nodes (best_of_tables.py; docs/benchmarks.md)")
    return TunedTable(fast.device, entries, how)


def _row_shape(row: dict) -> dict:
    """A ``conv_speed.py`` row's layer as a table entry's ``shape`` (its name, fp16, its dims)."""
    return {"name": row["shape"], "dtype": "float16", **row_dims(row["dims"])}


def _h200_member(family: str, runs: dict, h100_runs: dict) -> tuple[TunedTable, dict[str, float]]:
    """``family``'s H200 table: the config each H200 run (of ``runs``) tuned for a layer (the
    newest run first), the H100's entry, marked ``tuned_on: H100``, for layers no H200 run tuned;
    and the cuDNN / ours ratio per key as the H200 measured it (the H100's, from ``h100_runs``,
    where it did not)."""
    h100 = load_table(family, "h100")
    h100_ratio = measured_ratio(family, h100, h100_runs, FAST_RUNS if family == "igemm_fast" else WS_RUNS)
    entries, ratios = {}, {}
    for name in reversed(H200_RUNS[family]):   # newest last, so it wins
        for row in runs[name]["rows"]:
            key = row_key(row["dims"], "float16")
            entries[key] = {"shape": h100.entries[key]["shape"] if key in h100.entries else _row_shape(row),
                            "config": row["config"]}
            ratios[key] = row["ratio"]
    for key, entry in h100.entries.items():
        if key not in entries and entry.get("tuned_on") != "H200":
            entries[key] = {**entry, "tuned_on": "H100"}
            ratios[key] = h100_ratio[key]
    tuned = sum("tuned_on" not in e for e in entries.values())
    how = (f"tuned on an NVIDIA H200 on {tuned} of {len(entries)} layers (the rest the H100's): "
           "benchmarks/gpu_h200_session.sh, docs/benchmarks.md")
    return TunedTable("NVIDIA H200", entries, how), ratios


def build_h200(runs: dict, h100_runs: dict) -> tuple[dict[str, TunedTable], dict[str, dict[str, float]]]:
    """The H200's member tables and igemm_best's from them (module doc), and each member's
    cuDNN / ours ratio per key."""
    members = {f: _h200_member(f, runs, h100_runs) for f in ("igemm_fast", "igemm_ws")}
    (fast, fast_ratio), (ws, ws_ratio) = members["igemm_fast"], members["igemm_ws"]
    entries = {}
    for key, entry in fast.entries.items():
        w = ws_ratio.get(key)
        pick = 1 if w is not None and w > fast_ratio[key] else 0
        chosen = (ws if pick else fast).entries[key]
        entries[key] = {"shape": entry["shape"], "config": _with_ws(pick, chosen["config"]),
                        "measured": {"igemm_fast": fast_ratio[key], "igemm_ws": w},
                        "timed_on": {"igemm_fast": fast.entries[key].get("tuned_on", "H200"),
                                     "igemm_ws": ws.entries[key].get("tuned_on", "H200") if key in ws.entries else None}}
        if "tuned_on" in chosen:
            entries[key]["tuned_on"] = chosen["tuned_on"]
        if pick:
            entries[key]["fallback"] = _with_ws(0, entry["config"])
    wins = sum(e["config"]["tiles"]["WS"] for e in entries.values())
    how = (f"the faster member per layer by cuDNN / ours, timed on an H200 where it was, else on an H100; igemm_ws on "
           f"{wins} of {len(entries)}: benchmarks/best_of_tables.py")
    return ({"igemm_fast": fast, "igemm_ws": ws, "igemm_best": TunedTable("NVIDIA H200", entries, how)},
            {"igemm_fast": fast_ratio, "igemm_ws": ws_ratio})


def build_mi300x() -> TunedTable:
    fast = load_table("igemm_fast", "mi300x")
    entries = {key: {**entry, "config": _with_ws(0, entry["config"])} for key, entry in fast.entries.items()}
    head = fast.how.split(":", 1)[0]      # what a job's tune tag quotes
    return TunedTable(fast.device, entries, f"{head}: igemm_fast_mi300x.json's entries as WS=0 configs (igemm_ws "
                                            "runs on sm_90 only)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 where a committed table differs; write nothing")
    ap.add_argument("--add-run", nargs=2, metavar=("NAME", "RESULTS_JSON"),
                    help="first store this conv_speed.py results.json as run NAME of the rows file")
    ap.add_argument("--runs", action="store_true", help="print each stored run's command and versions; build nothing")
    args = ap.parse_args()
    if args.runs:
        print("\n".join(line for path in (ROWS, H200_ROWS) for line in run_lines(load_runs(path))))
        return 0
    if args.add_run:
        add_run(args.add_run[0], Path(args.add_run[1]))
    stale = []
    h100_runs = load_runs()
    h200, h200_ratio = build_h200(load_runs(H200_ROWS), h100_runs)
    fast, ws = (_borrowed(f, h200[f]) for f in ("igemm_fast", "igemm_ws"))
    tables = [("igemm_fast", "h100", fast), ("igemm_ws", "h100", ws), ("igemm_best", "h100", build_h100(h100_runs, fast, ws, h200_ratio)),
              *((family, "h200", table) for family, table in h200.items()), ("igemm_best", "mi300x", build_mi300x())]
    for kernel, target, table in tables:
        path = table_path(kernel, target)
        if args.check:
            committed = TunedTable.load(path) if path.exists() else None
            if committed is None or (committed.entries, committed.how) != (table.entries, table.how):
                stale.append(path.name)
            continue
        table.save(path)
        ws = sum(bool(e["config"]["tiles"].get("WS")) for e in table.entries.values())
        print(f"{path.relative_to(ROOT)}: {len(table.entries)} layers" + (f", igemm_ws on {ws}" if kernel == "igemm_best" else ""))
    if stale:
        print(f"out of date: {', '.join(stale)} (run python benchmarks/best_of_tables.py)")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
