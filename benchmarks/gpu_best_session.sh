#!/usr/bin/env bash
# igemm_ws re-tuned on some preset layers and the main command's default kernel (igemm_best)
# rebuilt from it, in one device call on an H100:
#  1. the GPU tests of igemm_ws (tests/test_gpu_families.py -k igemm_ws);
#  2. igemm_ws tuned on SHAPES of PRESETS (conv_speed.py), merged into its table, the rows kept
#     as run RUN of benchmarks/results/kernel_speed/h100_rows.json.xz (best_of_tables.py's
#     WS_RUNS must name RUN first);
#  3. igemm_best's tables rebuilt (best_of_tables.py) and its H100 table timed on ResNet-50
#     against cuDNN in one process (CUPTI).
# The main command on the rebuilt table: gpu_main_session.sh, after committing the tables.
# Everything comes back as OUT/best_session.tgz (a lent node returns a limited number of files).
#   . benchmarks/gpu_setup.sh && bash benchmarks/gpu_best_session.sh OUT RUN PRESETS SHAPES
. "$(dirname "${BASH_SOURCE[0]}")/gpu_session_common.sh"
RUN=$2 PRESETS=$3 SHAPES=$4
R=$OUT/best; mkdir -p "$R"
cd "$REPO"
node_header "$R/summary.txt"
timeout 150 python3 -m pytest -o addopts="" -q tests/test_gpu_families.py -k igemm_ws > "$R/ws_tests.log" 2>&1
tail -n 1 "$R/ws_tests.log" | tee -a "$R/summary.txt"
timeout 300 python3 benchmarks/conv_speed.py --kernel igemm_ws --out "$R/tune" --presets "$PRESETS" --shapes "$SHAPES" \
    --finalists 4 --rounds 4 --jobs 16 --deadline-s 280 --merge-into kernels/tuned/igemm_ws_h100.json > "$R/tune.log" 2>&1
cp "$R/tune/merged.json" kernels/tuned/igemm_ws_h100.json
python3 benchmarks/best_of_tables.py --add-run "$RUN" "$R/tune/results.json" 2>&1 | tee -a "$R/summary.txt"
cp kernels/tuned/igemm_ws_h100.json kernels/tuned/igemm_best_h100.json kernels/tuned/igemm_best_mi300x.json \
    benchmarks/results/kernel_speed/h100_rows.json.xz "$R/"
. benchmarks/gpu_setup.sh    # the harness runs from the installed copy: install the new tables
timeout 150 python3 benchmarks/conv_speed.py --kernel igemm_best --table kernels/tuned/igemm_best_h100.json \
    --presets resnet --out "$R/best_resnet" > "$R/best_resnet.log" 2>&1
for f in "$R/tune.log" "$R/best_resnet.log"; do tail -n 6 "$f"; done | tee -a "$R/summary.txt"
tar czf "$OUT/best_session.tgz" -C "$OUT" best
