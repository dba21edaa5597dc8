#!/usr/bin/env bash
# The compile stage on a GPU node (issue "MI300X-ready without an MI300X"): is the ahead-of-time
# sm_90 build the kernel the GPU runs (benchmarks/compile_check_gpu.py), do the GPU tests pass
# with the stage in every job, and what does it cost a GPU sweep (the design card's command).
#   . benchmarks/gpu_setup.sh && bash benchmarks/gpu_compile_session.sh OUT_DIR
OUT_ARG=$1; shift
. "$(dirname "$0")/gpu_session_common.sh" "$OUT_ARG"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
} | tee -a "$OUT/summary.txt"
( cd "$REPO" && python3 benchmarks/compile_check_gpu.py "$OUT" > "$OUT/compile_check.log" 2>&1 ); tail -1 "$OUT/compile_check.log"
( cd "$REPO" && timeout 300 python3 -m pytest -o addopts="" -q tests/test_gpu.py > "$OUT/gpu_tests.log" 2>&1 ); tail -1 "$OUT/gpu_tests.log"
run design_card 240 swizzle=xcd,grouped shape=resnet profiler=none compare.max_time_s=0.5
run design_card_mi300x 120 swizzle=xcd,grouped shape=resnet target=mi300x compile.only=true
