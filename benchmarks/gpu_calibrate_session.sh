#!/usr/bin/env bash
# Calibration of the verdicts on a GPU node (the A/A and known-bad controls of
# conf/study/calibrate.yaml), one chunk of seeds per call:
#   . benchmarks/gpu_setup.sh && bash benchmarks/gpu_calibrate_session.sh OUT_DIR NAME SEEDS [harness args...]
# e.g. NAME=cal_a SEEDS=0,1,2.  Writes OUT_DIR/NAME.log and OUT_DIR/NAME.db (the MLflow store);
# benchmarks/calibration_table.py reads any number of those stores.
OUT_ARG=$1 NAME=$2 SEEDS=$3; shift 3
. "$(dirname "$0")/gpu_session_common.sh" "$OUT_ARG"
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  ncu --version | tail -1; } | tee -a "$OUT/summary.txt"
# isolation.mode=none: one process for the whole chunk (no worker start-up per job); the
# ncu worker is a process of its own either way.
run "$NAME" 580 +study=calibrate "seed=$SEEDS" profiler=ncu profiler.repeats=10 isolation.mode=none "$@"
cp "$W/mlflow.db" "$OUT/$NAME.db"
