#!/usr/bin/env bash
# One cell measured two ways in one device call, to tell a method effect from a placement or node
# effect (96a51f9:benchmarks/README.md, "Refill by clock, fitted again"): the lookup probe's launcher
# (one process, every order on the same buffers, one launch per order) under ncu with the
# harness's own five metrics (run_l2_lookups.py --harness-metrics), then the harness's job (its
# ncu worker, 8 ABBA pairs with identity).
#   . benchmarks/gpu_setup.sh && bash benchmarks/probes/probe_vs_harness.sh OUT PRESET/LAYER ORDER
set -uo pipefail
LAYER=$2; ORDER=$3
OUT=$(mkdir -p "$1" && cd "$1" && pwd); cd "$(dirname "$0")/../.."
python3 benchmarks/probes/run_l2_lookups.py --harness-metrics "$OUT" \
  "$LAYER:identity,$ORDER,identity,$ORDER,identity,$ORDER,identity,$ORDER" > "$OUT/probe_five_metrics.log" 2>&1
cat "$OUT/probe_five_metrics.log"
python3 -m harness -m kernel=igemm "swizzle=identity,$(echo "$ORDER" | cut -d[ -f1)" shape="${LAYER%%/*}" "shape.select=[${LAYER##*/}]" \
  profiler=ncu profiler.repeats=8 profiler.simulate=false compare.max_time_s=0.2 compare.min_rounds=10 experiment=simval \
  tracking.uri="sqlite:///$OUT/harness.db" hydra.sweep.dir="$OUT/sweep" > "$OUT/harness.log" 2>&1
grep -E '^\[job' "$OUT/harness.log" | cut -c1-260
