#!/usr/bin/env bash
# GPU session for the profiler issue: an ncu sweep over ResNet-50 layers, and profiler
# overhead (no profiler vs one ncu launch per Hydra job vs one per shape).
# Usage on an NVIDIA node (deps installed): bash benchmarks/gpu_ncu_session.sh [OUT_DIR]
. "$(dirname "$0")/gpu_session_common.sh" "$@"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/summary.txt"
ncu --version | tail -1 | tee -a "$OUT/summary.txt"

# 1. The acceptance sweep: igemm x 3 swizzles x 6 layers, cold L2, 5 repeats per job.
run ncu_resnet 400 profiler=ncu kernel=igemm swizzle=identity,grouped,xcd shape=resnet \
    'shape.select=[l02,l03,l07,l12,l13,l17]' experiment=ncu-resnet
# 2. Overhead on one subset (6 jobs): no profiler, batched (1 ncu launch per Hydra job), per shape.
SUB=(kernel=igemm swizzle=identity,grouped,xcd shape=resnet 'shape.select=[l03,l12]' resume=false)
run overhead_none    200 profiler=none "${SUB[@]}" experiment=overhead-none
run overhead_batched 200 profiler=ncu  "${SUB[@]}" experiment=overhead-batched
run overhead_per_job 200 profiler=ncu  "${SUB[@]}" profiler.batch=false experiment=overhead-perjob
python3 "$REPO/benchmarks/sweep_table.py" --uri "$DB" --experiment ncu-resnet --metric l2_hit_rate | tee "$OUT/ncu_resnet_table.txt"
cp "$W/mlflow.db" "$OUT/ncu_session.db"
