#!/usr/bin/env bash
# One cell measured two ways in one device call, to tell a method effect from a placement or node
# effect (benchmarks/README.md, "Refill by clock, fitted again"): the lookup probe's launcher
# (one process, every order on the same buffers, one launch per order) under ncu with the
# harness's own five metrics, then the harness's job (its ncu worker, 8 ABBA pairs with identity).
#   . benchmarks/gpu_setup.sh && bash benchmarks/probes/probe_vs_harness.sh OUT PRESET/LAYER ORDER
set -uo pipefail
LAYER=$2; ORDER=$3
OUT=$(mkdir -p "$1" && cd "$1" && pwd); cd "$(dirname "$0")/../.."
M=$(python3 -c "from harness.profilers.ncu import NCU_METRICS; print(','.join(NCU_METRICS))")
ncu --csv --page raw --metrics "$M" --cache-control all --clock-control base --print-units base -k regex:igemm \
  python3 benchmarks/probes/l2_lookups.py "$LAYER" identity "$ORDER" identity "$ORDER" identity "$ORDER" identity "$ORDER" \
  > "$OUT/probe_five_metrics.csv" 2>&1
python3 - "$OUT/probe_five_metrics.csv" <<'PY'
import csv, io, sys
lines = open(sys.argv[1]).read().splitlines()
start = next(i for i, l in enumerate(lines) if l.startswith('"ID"'))
rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
head, data = rows[0], [r for r in rows[2:] if len(r) == len(rows[0])]
for m in [h for h in head if h.startswith(("lts__", "dram__"))]:
    print(f"{m:60s}", " ".join(f"{r[head.index(m)]:>12s}" for r in data))
PY
python3 -m harness -m kernel=igemm "swizzle=identity,$(echo "$ORDER" | cut -d[ -f1)" shape="${LAYER%%/*}" "shape.select=[${LAYER##*/}]" \
  profiler=ncu profiler.repeats=8 profiler.simulate=false compare.max_time_s=0.2 compare.min_rounds=10 experiment=simval \
  tracking.uri="sqlite:///$OUT/harness.db" hydra.sweep.dir="$OUT/sweep" > "$OUT/harness.log" 2>&1
grep -E '^\[job' "$OUT/harness.log" | cut -c1-260
