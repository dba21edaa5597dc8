#!/usr/bin/env bash
# The main command's default kernel on an H100, in one device call: igemm_best's committed H100
# table timed on every layer of ResNet-50 and the unseen presets against cuDNN (heuristic and
# benchmark mode) in one process, by CUPTI kernel durations (the kernel benchmark table), then
# the main command itself (python -m harness -m swizzle=xcd,grouped shape=resnet) with its
# report.  Everything comes back as OUT/main_session.tgz.
#   . benchmarks/gpu_setup.sh && bash benchmarks/gpu_main_session.sh OUT
. "$(dirname "${BASH_SOURCE[0]}")/gpu_session_common.sh"
R=$OUT/main; mkdir -p "$R"
cd "$REPO"
node_header "$R/summary.txt"
timeout 200 python3 benchmarks/conv_speed.py --kernel igemm_best --table kernels/tuned/igemm_best_h100.json \
    --presets resnet,unseen,unseen2,unseen3,unseen4,unseen5,unseen6,unseen7,unseen8,unseen9,unseen10 \
    --out "$R/table" > "$R/table.log" 2>&1
grep -E '^- ' "$R/table.log" | tee -a "$R/summary.txt"
tar czf "$OUT/main_session.tgz" -C "$OUT" main
cd "$W"
run main_command 380 swizzle=xcd,grouped shape=resnet
cp "$OUT/main_command.log" "$R/"; cat "$OUT/summary.txt" >> "$R/summary.txt"; cp "$W/mlflow.db" "$R/"; cp -a "$W/reports" "$R/" 2>/dev/null
tar czf "$OUT/main_session.tgz" -C "$OUT" main
