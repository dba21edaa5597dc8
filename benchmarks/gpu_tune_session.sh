#!/usr/bin/env bash
# Tune mode on a GPU node (issue "fast kernels"): igemm_fast tuned per shape on ResNet-50 and
# the hold-out layers, then the same sweep again to show the tuning cache answering.
#   . benchmarks/gpu_setup.sh && bash benchmarks/gpu_tune_session.sh OUT_DIR [harness args...]
# Writes OUT_DIR/tune.db (MLflow store) and the logs; benchmarks/tune_table.py makes the table.
OUT_ARG=$1; shift
. "$(dirname "$0")/gpu_session_common.sh" "$OUT_ARG"
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cudnn', torch.backends.cudnn.version())"
} | tee -a "$OUT/summary.txt"
# The tuning cache and the store live in fixed places so that a second call on a still-warm
# node (STAGE=cached) finds them.
STAGE=${STAGE:-all}
COMMON=(kernel=igemm_fast tune=fastest profiler=none tune.cache_dir=/tmp/swb-tunecache compare.max_time_s=1 "$@")
DB="sqlite:////tmp/swb-tune.db"
# The store is copied out after every stage: a call cut short still brings back what it measured.
if [ "$STAGE" != cached ]; then
  run tune_resnet "${RESNET_LIMIT_S:-330}" shape=resnet "${COMMON[@]}"; cp /tmp/swb-tune.db "$OUT/tune.db"
  run tune_holdout 150 shape=holdout "${COMMON[@]}"; cp /tmp/swb-tune.db "$OUT/tune.db"
fi
if [ "$STAGE" != first ]; then
  run tune_resnet_cached 200 shape=resnet resume=false "${COMMON[@]}"; cp /tmp/swb-tune.db "$OUT/tune.db"
fi
# Every tuned job's trials (benchmarks/tune_flags.py reads them): OUT/trials/<run id>.json.
mkdir -p "$OUT/trials"
find "$W" -path '*/artifacts/tune_trials.json' | while read -r f; do
  cp "$f" "$OUT/trials/$(basename "$(dirname "$(dirname "$f")")").json"; done
tar czf "$OUT/trials.tar.gz" -C "$OUT" trials   # one file: a lent node returns a limited number
