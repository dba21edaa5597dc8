#!/usr/bin/env bash
# igemm_ws's strided layers (the phase view) on an H100, in one call: the GPU tests of the
# family (stride-2 variants included), the family tuned on every strided preset layer it can
# run (its table merged), and its committed table re-timed on five stride-1 layers, to show the
# 5-D box costs nothing there against the committed rows (benchmarks/results/kernel_speed/).
#   . benchmarks/gpu_setup.sh && bash benchmarks/gpu_stride_session.sh OUT_DIR
. "$(dirname "${BASH_SOURCE[0]}")/gpu_session_common.sh"
cd "$REPO"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cudnn', torch.backends.cudnn.version())"
} | tee -a "$OUT/summary.txt"
timeout 120 python3 -m pytest -o addopts="" -q tests/test_gpu_families.py -k igemm_ws > "$OUT/ws_tests.log" 2>&1
tail -1 "$OUT/ws_tests.log" | tee -a "$OUT/summary.txt"
cp kernels/tuned/igemm_ws_h100.json "$OUT/igemm_ws_h100.before.json"
timeout 320 python3 benchmarks/conv_speed.py --kernel igemm_ws --out "$OUT/strided" --presets resnet,unseen,unseen2 \
    --shapes l07,l09,l13,l15,l19,l21,r18s2,yolos2 --finalists 4 --rounds 4 --jobs 16 --deadline-s 270 \
    --merge-into kernels/tuned/igemm_ws_h100.json > "$OUT/strided.log" 2>&1
cp kernels/tuned/igemm_ws_h100.json "$OUT/"
timeout 100 python3 benchmarks/conv_speed.py --kernel igemm_ws --out "$OUT/stride1" --presets resnet \
    --shapes l03,l08,l11,l17,l23 --table "$OUT/igemm_ws_h100.before.json" > "$OUT/stride1.log" 2>&1
tail -12 "$OUT/strided.log" "$OUT/stride1.log" | tee -a "$OUT/summary.txt"
