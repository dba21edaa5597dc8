#!/usr/bin/env bash
# Search with a measured objective on a GPU node (issue "search"): ncu's L2 hit rate on two
# layers whose working sets exceed the H100/H200 L2, then the top 3 confirmed by paired timing.
#   . benchmarks/gpu_setup.sh && bash benchmarks/gpu_search_session.sh OUT_DIR [harness args...]
# Writes OUT_DIR/search.db (MLflow store), the logs and the search report.
OUT_ARG=$1; shift
. "$(dirname "$0")/gpu_session_common.sh" "$OUT_ARG"
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  ncu --version | tail -1; } | tee -a "$OUT/summary.txt"
# SHAPES: which hold-out layers (one study each); tune=fastest: the study searches the tuned
# config of each layer (tuned once, with identity fixed, then taken from the cache).
SHAPES=${SHAPES:-big,vgg3} LIMIT=${LIMIT:-560}
run search_measured "$LIMIT" hydra/sweeper=swizzle_search kernel=igemm_fast tune=fastest shape=holdout \
  "shape.select=[$SHAPES]" profiler=ncu profiler.repeats=5 hydra.sweeper.n_trials=8 hydra.sweeper.timeout_s=250 \
  compare.max_time_s=2 "$@"
cp "$W/mlflow.db" "$OUT/search.db"
cp -r "$W/reports" "$OUT/" 2>/dev/null || true
