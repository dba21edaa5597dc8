#!/usr/bin/env bash
# Verdicts that hold on the next run (issue 19) on a GPU node, one stage per device call:
#   . benchmarks/gpu_setup.sh && STAGE=check|repro|tune bash benchmarks/gpu_verdicts_session.sh OUT_DIR [FIRST LAST]
# check: one job per timer and placement setting (smoke), then benchmarks/kernel_time_check.py
#        (harness timers vs an independent CUPTI loop, ResNet-50 layers).
# repro: processes FIRST..LAST of the reproducibility benchmark: each one sweep (one process) of
#        kernel=igemm x {identity_copy (A/A), colmajor, scatter} x the calibrate preset's 6 layers,
#        once the old way (CUDA events, one set of buffers) and once with the defaults (kernel
#        durations, 8 placements): two processes per iteration.
#        benchmarks/repro_table.py reads the store afterwards.  METHODS="new" runs one method only.
# tune:  tune mode twice with the cache cleared, ResNet-50: are the picks the same or tied?
#        benchmarks/tune_repro.py OUT_DIR/tune.db reads the store afterwards.
OUT_ARG=$1; shift
FIRST=${1:-0}; LAST=${2:-4}
. "$(dirname "$0")/gpu_session_common.sh" "$OUT_ARG"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
} | tee -a "$OUT/summary.txt"
STAGE=${STAGE:-check}
if [ "$STAGE" = check ]; then
  run smoke 150 kernel=igemm swizzle=colmajor shape=calibrate 'shape.select=[l03,big]' profiler=none \
    compare.placements=1,8 compare.timer=events,cupti compare.max_time_s=1
  ( cd "$REPO" && timeout 300 python3 benchmarks/kernel_time_check.py --out "$OUT" > "$OUT/kernel_time.log" 2>&1 )
  echo "kernel_time_check rc=$?" | tee -a "$OUT/summary.txt"; tail -4 "$OUT/kernel_time.log"
  cp "$W/mlflow.db" "$OUT/check.db"
elif [ "$STAGE" = repro ]; then
  for i in $(seq "$FIRST" "$LAST"); do
    for method in ${METHODS:-old new}; do   # old: CUDA events, one set of buffers; new: the defaults (cupti, 8 placements)
      extra=(); [ "$method" = old ] && extra=(compare.placements=1 compare.timer=events)
      [ "$method" = new ] && extra=(${NEW_EXTRA:-})   # e.g. NEW_EXTRA=compare.check_every=5
      run "repro_${method}_$i" 150 kernel=igemm swizzle=identity_copy,colmajor,scatter shape=calibrate profiler=none \
        compare.max_time_s=1 experiment=repro resume=false "${extra[@]}"
    done
    cp "$W/mlflow.db" "$OUT/repro_${FIRST}_${LAST}.db"
  done
else
  for i in ${TUNE_RUNS:-1 2}; do   # TUNE_RUNS=1, then TUNE_RUNS=2 in a second call: two fresh nodes
    run "tune_$i" 330 kernel=igemm_fast tune=fastest tune.cache_dir="$W/tunecache_$i" swizzle=identity shape=resnet \
      profiler=none compare.max_time_s=0.3 experiment=tune resume=false
    cp "$W/mlflow.db" "$OUT/tune.db"
  done
fi
