#!/usr/bin/env bash
# The H200 in one call of four lanes, one GPU each (device kind nvidia-h200-x4), run side by side:
#   lane 0: the simulator's calibration cells on the H200 (igemm_best as launched: its igemm_ws
#           configs on ten ResNet-50 layers x six orders);
#   lane 1: the pre-registered held-out cells (igemm_best on layers of other networks, x six orders);
#   lane 2: the independent check cells (layers outside every preset: benchmarks/conf/shape/h200_indep.yaml);
#   lane 3: igemm_ws tuned on the H200 itself (conv_speed.py) on the PRESETS' layers (issue 52).
# Lanes 0-2 are ncu cells (8 ABBA pairs, lookup counters, no simulation on the node: the CPU
# re-simulates them, benchmarks/sim_calibrate.py); the plan that seals lanes 1 and 2 until the fit
# is fixed is benchmarks/results/sim_calibration/h200_ws/PLAN.md.  Everything comes back as
# OUT/h200_session.tgz.
#   . benchmarks/gpu_setup.sh && LANES="0 1 2 3" PRESETS=resnet bash benchmarks/gpu_h200_session.sh OUT
set -uo pipefail
OUT=${1:?OUT dir}; mkdir -p "$OUT"
REPO=$(cd "$(dirname "$0")/.." && pwd)
SW=swizzle=identity,colmajor,scatter,grouped,hilbert,morton
R8=(kernel=igemm_best profiler=ncu profiler.repeats=8 profiler.simulate=false compare.max_time_s=0.2
    compare.min_rounds=10 experiment=simval)
SP="hydra.searchpath=[file://$REPO/benchmarks/conf]"
lane() {   # GPU index, lane name, then the lane's commands (a function name)
  local gpu=$1 name=$2; shift 2
  ( export CUDA_VISIBLE_DEVICES=$gpu TMPDIR; TMPDIR=$(mktemp -d)   # ncu's lock file lives in TMPDIR
    . "$REPO/benchmarks/gpu_session_common.sh" "$OUT/$name"
    node_header "$OUT/$name/summary.txt" >/dev/null
    "$@"
    [ -f "$W/mlflow.db" ] && cp "$W/mlflow.db" "$OUT/$name/$name.db" && xz -9 "$OUT/$name/$name.db" ) \
    > "$OUT/$name.lane.log" 2>&1 &
}
calibration() {
  run cal_resnet 560 "$SW" shape=resnet 'shape.select=[l04,l08,l09,l11,l13,l14,l15,l21,l22,l23]' "${R8[@]}"
}
heldout() {
  run held_unseen 220 "$SW" shape=unseen 'shape.select=[vgg12,vgg42,r18s2,unet3,mbv2x]' "${R8[@]}"
  run held_unseen2 170 "$SW" shape=unseen2 'shape.select=[cnxt1,incep3,yolos2]' "${R8[@]}"
  run held_unseen3 170 "$SW" shape=unseen3 'shape.select=[goog112,r34,wrn]' "${R8[@]}"
}
independent() {
  run indep 560 "$SW" "$SP" shape=h200_indep "${R8[@]}"
}
tune_ws() {
  cd "$REPO"
  timeout 540 python3 benchmarks/conv_speed.py --kernel igemm_ws --out "$OUT/tune_ws/tune" --presets "${PRESETS:-resnet}" \
    --finalists 4 --rounds 4 --jobs 12 --deadline-s 500 > "$OUT/tune_ws/tune.log" 2>&1
  tail -n 40 "$OUT/tune_ws/tune.log"
}
for l in ${LANES:-0 1 2 3}; do
  case $l in
    0) lane 0 cal calibration ;; 1) lane 1 held heldout ;; 2) lane 2 indep independent ;; 3) lane 3 tune_ws tune_ws ;;
  esac
done
wait
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,temperature.gpu --format=csv > "$OUT/nvidia_smi.csv"
tar czf "$OUT/h200_session.tgz" -C "$OUT" --exclude h200_session.tgz $(cd "$OUT" && ls)
cat "$OUT"/*/summary.txt
for d in cal held indep tune_ws; do tail -n 30 "$OUT/$d/tune.log" 2>/dev/null; done
