#!/usr/bin/env bash
# The main command's default kernel (igemm_best) on an H100 after igemm_ws learned strided layers,
# in one device call: igemm_ws tuned on every strided preset layer its phase view runs (merged
# into its table, rows kept as run igemm_ws_strided_tune), igemm_best's table rebuilt from them,
# that table timed on ResNet-50 against cuDNN in one process (CUPTI), then the main command.
# Everything comes back as OUT/best_session.tgz (a lent node returns a limited number of files).
#   . benchmarks/gpu_setup.sh && bash benchmarks/gpu_best_session.sh OUT_DIR
. "$(dirname "${BASH_SOURCE[0]}")/gpu_session_common.sh"
R=$OUT/best; mkdir -p "$R"
cd "$REPO"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cudnn', torch.backends.cudnn.version())"
  git rev-parse HEAD 2>/dev/null || cat harness/BUILD_COMMIT
} | tee -a "$OUT/summary.txt"
timeout 150 python3 benchmarks/conv_speed.py --kernel igemm_ws --out "$R/strided" --presets resnet,unseen,unseen2 \
    --shapes l07,l09,l13,l15,l19,l21,r18s2,yolos2 --finalists 4 --rounds 4 --jobs 16 --deadline-s 120 \
    --merge-into kernels/tuned/igemm_ws_h100.json > "$R/strided.log" 2>&1
cp "$R/strided/merged.json" kernels/tuned/igemm_ws_h100.json
python3 benchmarks/best_of_tables.py --add-run igemm_ws_strided_tune "$R/strided/results.json" 2>&1 | tee -a "$OUT/summary.txt"
cp kernels/tuned/igemm_ws_h100.json kernels/tuned/igemm_best_h100.json kernels/tuned/igemm_best_mi300x.json \
    benchmarks/results/kernel_speed/h100_rows.json.xz "$R/"
. benchmarks/gpu_setup.sh    # the harness runs from the installed copy: install the new tables
timeout 120 python3 benchmarks/conv_speed.py --kernel igemm_best --table kernels/tuned/igemm_best_h100.json \
    --presets resnet --out "$R/best_resnet" > "$R/best_resnet.log" 2>&1
tail -8 "$R/strided.log" "$R/best_resnet.log" | tee -a "$OUT/summary.txt"
tar czf "$OUT/before_main.tgz" -C "$OUT" best
cd "$W"
run main_command 290 swizzle=xcd,grouped shape=resnet
cp "$OUT"/*.log "$OUT/summary.txt" "$R/"; cp "$W/mlflow.db" "$R/"; cp -a "$W/reports" "$R/" 2>/dev/null
tar czf "$OUT/best_session.tgz" -C "$OUT" best
