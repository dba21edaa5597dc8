"""Does tune mode pick the same config twice?  Per layer, over two (or more) tune sweeps of one
MLflow store (issue 19: ``STAGE=tune bash benchmarks/gpu_verdicts_session.sh``, tune mode twice
with the cache cleared):

    python benchmarks/tune_repro.py OUT/tune.db [more.db ...] [--experiment tune] [--full-labels]

Each sweep is a parent run; its jobs (tag ``swizzlebench.kind=job``) carry the chosen config
(param ``tune.config``) and the tie rule's finalists, read from the job's
``tune_finalists.json`` artifact where it is on this machine, else from param
``tune.runner_ups`` (``LABEL +0.30 % [-0.20, +0.80] tied; ...``, gaps relative to the
chosen config; ``tied``: tied with the fastest finalist, harness/tune/ties.py).
For every pair of sweeps, each layer is

* **same**: both picked the same config;
* **tied**: the picks differ, but one run had the other's pick among its finalists and marked
  it tied (the acceptance rule's "configs whose times are within the stated tie rule");
  *contested* when the other run measured the pair too and found them not tied (counted as
  tied; ``--strict`` counts it as not);
* **not**: neither run measured the other's pick as tied (not a finalist, or measured and not
  tied);
* **missing**: a run has no finished, tuned job for the layer.

Prints one table per pair, its counts, and each sweep's tuning wall (the sum of its jobs'
``tune.cost_s``, and the sweep run's own wall time); ``--measurements`` adds each run's
``tune.final_measurement`` (rounds, passes, placements, unsettled finalists, drained batches).
Exit status 0 whatever the counts.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import urlparse

SAME, TIED, NOT, MISSING = "same", "tied", "not", "missing"
VERDICTS = (SAME, TIED, NOT, MISSING)

#: One runner-up of ``tune.runner_ups``: label, gap to the chosen config in % and either its
#: 95 % CI in % or ``(single shot)``, then `` tied`` when it is in the tied set.
_RUNNER_UP = re.compile(r"^(?P<label>.+?) (?P<gap>[+-](?:\d+(?:\.\d+)?|inf)) % "
                        r"(?P<ci>\[[^\]]*\]|\(single shot\))(?P<tied> tied)?$")


@dataclass(frozen=True)
class Finalist:
    """A finalist as one run measured it: ``gap`` to that run's chosen config, as logged."""

    label: str
    gap: str            # "+0.30 % [-0.20, +0.80]", "+1.49 % (single shot)", or "chosen"
    tied: bool


@dataclass(frozen=True)
class Pick:
    """One run's choice for one layer and the finalists it measured (the choice included)."""

    label: str
    finalists: dict[str, Finalist] = field(default_factory=dict)
    rule: str = "?"
    trials: str = "?"
    cost_s: float = 0.0
    measurement: str = "?"

    def measured(self, label: str) -> Finalist | None:
        """How this run measured config ``label``: None where it was no finalist."""
        if label == self.label:
            return Finalist(label, "chosen", True)
        return self.finalists.get(label)


def parse_runner_ups(text: str) -> list[Finalist]:
    """The finalists of a ``tune.runner_ups`` param (``none``, ``not recorded``: none).  A
    part that does not parse is a ValueError: a changed format must not read as "no finalist"."""
    text = (text or "").strip()
    if text in ("", "none", "not recorded"):
        return []
    out = []
    for part in text.split("; "):
        m = _RUNNER_UP.match(part.strip())
        if not m:
            raise ValueError(f"cannot read runner-up {part!r}")
        out.append(Finalist(m["label"], f"{m['gap']} % {m['ci']}", bool(m["tied"])))
    return out


def finalists_from_artifact(doc: dict, chosen: str) -> list[Finalist]:
    """The finalists of a ``tune_finalists.json`` artifact (harness TieDecision.as_dict)."""
    out = []
    for f in doc.get("finalists", []):
        if f["label"] == chosen:
            continue
        ratio, lo, hi = f.get("ratio"), f.get("ci_lo"), f.get("ci_hi")
        pct = (lambda r: f"{(r - 1) * 100:+.2f}")
        gap = f"{pct(ratio)} % " + (f"[{pct(lo)}, {pct(hi)}]" if lo is not None and hi is not None else "(single shot)")
        out.append(Finalist(f["label"], gap, bool(f.get("tied"))))
    return out


def make_pick(label: str, finalists: list[Finalist], **extra) -> Pick:
    return Pick(label, {f.label: f for f in finalists if f.label != label}, **extra)


def classify(a: Pick | None, b: Pick | None, names: tuple[str, str] = ("run 1", "run 2"),
             strict: bool = False) -> tuple[str, str]:
    """(verdict, why) for one layer picked by two runs (module doc); None: no pick.  A tied
    verdict that the other run's own measurement contradicts says ``CONTESTED`` in ``why``, and
    is NOT with ``strict``."""
    if a is None or b is None:
        return MISSING, f"no tuned job in {names[0] if a is None else names[1]}"
    if a.label == b.label:
        return SAME, ""
    a_saw, b_saw = a.measured(b.label), b.measured(a.label)
    said = []
    for who, other, saw in ((names[0], names[1], a_saw), (names[1], names[0], b_saw)):
        said.append(f"{who}: {other}'s pick " + ("no finalist" if saw is None else
                                                   f"{saw.gap}{' tied' if saw.tied else ' not tied'}"))
    why = "; ".join(said)
    marks = [saw.tied for saw in (a_saw, b_saw) if saw is not None]
    if not any(marks):
        return NOT, why
    if not all(marks):
        return (NOT if strict else TIED), f"CONTESTED: {why}"
    return TIED, why


def short_label(label: str) -> str:
    """A config label without its default-valued flags (``X0``, ``SPLIT_K1``)."""
    return " ".join(t for t in label.split() if not re.fullmatch(r"[A-Z_]+0|SPLIT_K1", t))


# -----------------------------------------------------------
# Reading a store.

@dataclass
class Sweep:
    name: str
    run_id: str
    start_ms: int
    wall_s: float | None
    store: str
    picks: dict[tuple[str, str, str], Pick] = field(default_factory=dict)

    @property
    def tune_s(self) -> float:
        return sum(p.cost_s for p in self.picks.values())


def _local_artifact(artifact_uri: str, name: str) -> dict | None:
    path = urlparse(artifact_uri).path if artifact_uri.startswith("file:") else artifact_uri
    full = os.path.join(path or "", name)
    if not os.path.isfile(full):
        return None
    with open(full) as fh:
        return json.load(fh)


def load_sweeps(stores: list[str], experiment: str | None = None) -> list[Sweep]:
    """Every sweep of ``stores`` with at least one tuned job, in start order."""
    from mlflow.tracking import MlflowClient

    sweeps: list[Sweep] = []
    for store in stores:
        if not os.path.isfile(store):
            raise SystemExit(f"no store {store}")
        client = MlflowClient(tracking_uri=f"sqlite:///{os.path.abspath(store)}")
        exps = client.search_experiments()
        if experiment:
            exps = [e for e in exps if e.name == experiment]
        ids = [e.experiment_id for e in exps]
        if not ids:
            continue
        runs = client.search_runs(ids, max_results=50000, order_by=["attributes.start_time ASC"])
        parents = {r.info.run_id: r for r in runs}
        by_parent: dict[str, Sweep] = {}
        for r in runs:
            tags, p = r.data.tags, r.data.params
            if tags.get("swizzlebench.kind") != "job" or r.info.status != "FINISHED" or "tune.config" not in p:
                continue
            parent_id = tags.get("mlflow.parentRunId", "-")
            if parent_id not in by_parent:
                parent = parents.get(parent_id)
                wall = None
                if parent is not None and parent.info.end_time and parent.info.start_time:
                    wall = (parent.info.end_time - parent.info.start_time) / 1e3
                by_parent[parent_id] = Sweep(parent.info.run_name if parent else parent_id, parent_id,
                                             parent.info.start_time if parent else r.info.start_time, wall, store)
            chosen = p["tune.config"]
            doc = _local_artifact(r.info.artifact_uri, "tune_finalists.json")
            finals = finalists_from_artifact(doc, chosen) if doc else parse_runner_ups(p.get("tune.runner_ups", ""))
            key = (p.get("kernel", "?"), p.get("swizzle", "?"), p.get("shape.name", r.info.run_name))
            pick = make_pick(chosen, finals, rule=tags.get("tune.rule", "?"),
                             trials="cache" if p.get("tune.from_cache") == "True" else p.get("tune.trials", "?"),
                             cost_s=float(p.get("tune.cost_s", 0) or 0),
                             measurement=p.get("tune.final_measurement", f"{p.get('tune.final_rounds', '?')} rounds"))
            sweep = by_parent[parent_id]
            if key not in sweep.picks or sweep.picks[key].trials == "cache":   # the tuning itself, not a cache hit
                sweep.picks[key] = pick
        sweeps += by_parent.values()
    return sorted(sweeps, key=lambda s: s.start_ms)


def compare(a: Sweep, b: Sweep, names: tuple[str, str] = ("run 1", "run 2"),
            strict: bool = False) -> list[tuple[tuple, str, str]]:
    """[(layer key, verdict, why)] over the layers of either sweep, sorted."""
    keys = sorted(set(a.picks) | set(b.picks))
    return [(k, *classify(a.picks.get(k), b.picks.get(k), names, strict)) for k in keys]


def count_line(rows: list[tuple[tuple, str, str]]) -> str:
    """``18 same, 3 tied (1 contested), 2 not of 23 layers; same or tied: 21 of 23``."""
    counts = Counter(v for _, v, _ in rows)
    contested = sum(v == TIED and why.startswith("CONTESTED") for _, v, why in rows)
    return (f"{counts[SAME]} same, {counts[TIED]} tied" + (f" ({contested} contested)" if contested else "")
            + f", {counts[NOT]} not" + (f", {counts[MISSING]} missing" if counts[MISSING] else "")
            + f" of {len(rows)} layers; same or tied: {counts[SAME] + counts[TIED]} of {len(rows)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stores", nargs="+", help="MLflow sqlite files")
    ap.add_argument("--experiment", default=None, help="only this experiment (default: all)")
    ap.add_argument("--full-labels", action="store_true", help="print configs with every flag")
    ap.add_argument("--strict", action="store_true",
                    help="count a tie that the other run measured as not tied (contested) as not")
    ap.add_argument("--measurements", action="store_true", help="add each run's tune.final_measurement")
    args = ap.parse_args(argv)
    label = (lambda s: s) if args.full_labels else short_label
    sweeps = load_sweeps(args.stores, args.experiment)
    if len(sweeps) < 2:
        print(f"need two tune sweeps; found {len(sweeps)}", file=sys.stderr)
        return 2
    for i, s in enumerate(sweeps, 1):
        wall = f"{s.wall_s:.1f} s" if s.wall_s is not None else "?"
        print(f"run {i}: sweep {s.run_id[:8]} ({s.name}, {os.path.basename(s.store)}): {len(s.picks)} layers, "
              f"tuning {s.tune_s:.1f} s (sum of tune.cost_s), sweep wall {wall}")
    for (i, a), (j, b) in itertools.combinations(enumerate(sweeps, 1), 2):
        names = (f"run {i}", f"run {j}")
        rows = compare(a, b, names, args.strict)
        kernels = {k[:2] for k, _, _ in rows}
        extra = f" run {i} measurement | run {j} measurement |" if args.measurements else ""
        print(f"\n### run {i} vs run {j}{' (strict)' if args.strict else ''}\n")
        print(f"| layer | run {i} pick | run {j} pick | verdict | how each run measured the other's pick |{extra}")
        print("|---|---|---|---|---|" + ("---|---|" if args.measurements else ""))
        for key, verdict, why in rows:
            name = key[2] if len(kernels) == 1 else "/".join(key)
            pa, pb = a.picks.get(key), b.picks.get(key)
            line = (f"| {name} | {label(pa.label) if pa else '-'} | "
                    f"{'(same)' if verdict == SAME else (label(pb.label) if pb else '-')} | {verdict} | {why} |")
            if args.measurements:
                line += f" {pa.measurement if pa else '-'} | {pb.measurement if pb else '-'} |"
            print(line)
        print(f"\nrun {i} vs run {j}{' (strict)' if args.strict else ''}: {count_line(rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
