#!/usr/bin/env bash
# GPU session for the profiler issue: an ncu sweep over ResNet-50 layers, and profiler
# overhead (no profiler vs one ncu launch per Hydra job vs one per shape).
# Usage on an NVIDIA node (deps installed): bash benchmarks/gpu_ncu_session.sh [OUT_DIR]
set -uo pipefail
OUT=${1:-${OUT:-/tmp/swizzlebench-out}}
REPO=$(cd "$(dirname "$0")/.." && pwd)
W=$(mktemp -d); cd "$W"
export PYTHONUNBUFFERED=1
DB="sqlite:///$W/mlflow.db"
run() {  # name, then harness args; prints wall time and the job lines
  local name=$1; shift
  local t0=$(date +%s.%N)
  python3 -m harness -m "$@" tracking.uri="$DB" hydra.sweep.dir="$W/$name" > "$OUT/$name.log" 2>&1
  local rc=$? t1=$(date +%s.%N)
  local launches=$(find "$W/$name" -name command.txt | wc -l)
  printf '%-22s rc=%d wall=%6.1f s ncu_launches=%d\n' "$name" $rc "$(python3 -c "print($t1 - $t0)")" "$launches" | tee -a "$OUT/summary.txt"
  grep -E '^\[job' "$OUT/$name.log" | sed 's/^/    /' | cut -c1-230
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/summary.txt"
ncu --version | tail -1 | tee -a "$OUT/summary.txt"

# 1. The acceptance sweep: igemm x 3 swizzles x 6 layers, cold L2, 5 repeats per job.
run ncu_resnet profiler=ncu kernel=igemm swizzle=identity,grouped,xcd shape=resnet \
    'shape.select=[l02,l03,l07,l12,l13,l17]' experiment=ncu-resnet
# 2. Overhead on one subset (6 jobs): no profiler, batched (1 ncu launch per Hydra job), per shape.
SUB=(kernel=igemm swizzle=identity,grouped,xcd shape=resnet 'shape.select=[l03,l12]' resume=false)
run overhead_none    profiler=none "${SUB[@]}" experiment=overhead-none
run overhead_batched profiler=ncu  "${SUB[@]}" experiment=overhead-batched
run overhead_per_job profiler=ncu  "${SUB[@]}" profiler.batch=false experiment=overhead-perjob
python3 "$REPO/benchmarks/sweep_table.py" --uri "$DB" --experiment ncu-resnet --metric l2_hit_rate | tee "$OUT/ncu_resnet_table.txt"
cp "$W/mlflow.db" "$OUT/ncu_session.db"
