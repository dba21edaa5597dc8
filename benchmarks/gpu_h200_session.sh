#!/usr/bin/env bash
# The H200 in one call of four lanes, one GPU each (device kind nvidia-h200-x4), run side by side:
#   cal: the simulator's calibration cells on the H200 (igemm_best as launched: its igemm_ws
#        configs on six ResNet-50 layers x six orders), then held-out unseen3 layers;
#   held_a, held_b: the pre-registered held-out cells (igemm_best on layers of other networks, x six orders);
#   indep: the independent check cells (layers outside every preset: benchmarks/conf/shape/h200_indep.yaml);
#   held2a, held2b, held2c: the second held-out set (PLAN2.md, benchmarks/conf/shape/h200_held2.yaml);
#   held3a, held3b, held3c: the third held-out set (PLAN3.md, benchmarks/conf/shape/h200_held3.yaml);
#   kinds: both families tuned on the kinds preset (1xN, Nx1, strides above 2, C or F not multiples of 8);
#   gpu_tests: the suite's GPU tests (tests/faults/test_signals.py's first); ws_1x1: igemm_ws re-tuned
#        with a longer selection on ResNet-50's slowest 1x1 layers; main: the main command and its report;
#   speed_all: the committed igemm_best H200 table timed against cuDNN on every preset (no tuning);
#   ws_resnet, fast_resnet, ws_u1, ws_u2, fast_u1, fast_u2: igemm_ws / igemm_fast tuned on the H200
#        itself (conv_speed.py, against cuDNN) on ResNet-50 / unseen..unseen5 / unseen6..unseen10 (issue 52).
# Lanes 0-2 are ncu cells (8 ABBA pairs, lookup counters, no simulation on the node: the CPU
# re-simulates them, benchmarks/sim_calibrate.py); the plan that seals lanes 1 and 2 until the fit
# is fixed is benchmarks/results/sim_calibration/h200_ws/PLAN.md.  Everything comes back as
# OUT/h200_session.tgz.
#   . benchmarks/gpu_setup.sh && LANES="cal held_a held_b indep" bash benchmarks/gpu_h200_session.sh OUT
#   LANES: one GPU each, in order (GPU 0 first); a tuning lane stops at TUNE_S seconds (540).
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
    . "$REPO/benchmarks/gpu_session_common.sh" "$OUT/$name"   # from here on OUT is the lane's folder
    node_header "$OUT/summary.txt" >/dev/null
    "$@"
    [ -f "$W/mlflow.db" ] && cp "$W/mlflow.db" "$OUT/$name.db" && xz -9 "$OUT/$name.db" ) \
    > "$OUT/$name.lane.log" 2>&1 &
}
calibration() {
  run cal_resnet 280 "$SW" shape=resnet 'shape.select=[l04,l08,l09,l13,l15,l22]' "${R8[@]}"
  cp "$W/mlflow.db" "$OUT/cal_part.db"
  run held_unseen3 250 "$SW" shape=unseen3 'shape.select=[goog112,r34,wrn]' "${R8[@]}"   # held-out set H
  rm -f "$OUT/cal_part.db"
}
heldout_a() {
  run held_unseen 520 "$SW" shape=unseen 'shape.select=[vgg12,vgg42,r18s2,unet3,mbv2x]' "${R8[@]}"
}
heldout_b() {
  run held_unseen2 520 "$SW" shape=unseen2 'shape.select=[cnxt1,incep3,yolos2]' "${R8[@]}"
}
heldout2() {   # PLAN2.md's set H2, four of its layers a lane
  run "held2_$1" 515 "$SW" "$SP" shape=h200_held2 "shape.select=[$2]" "${R8[@]}"
}
heldout3() {   # PLAN3.md's set H3, four of its layers a lane
  run "held3_$1" 515 "$SW" "$SP" shape=h200_held3 "shape.select=[$2]" "${R8[@]}"
}
heldout4() {   # PLAN4.md's set H4: igemm_ws's 256-row tiles (the H200 table's config on its large layers)
  run held4 515 "$SW" "$SP" shape=h200_held4 kernel=igemm_ws tune=none kernel.tiles.BLOCK_M=256 kernel.num_stages=3 \
    profiler=ncu profiler.repeats=8 profiler.simulate=false compare.max_time_s=0.2 compare.min_rounds=10 experiment=simval
}
speed() {   # the igemm_best tables as committed, timed against cuDNN (no tuning): issue 52's acceptance
  cd "$REPO"
  timeout "${TUNE_S:-540}" python3 benchmarks/conv_speed.py --kernel igemm_best --table "kernels/tuned/igemm_best_$1.json" \
    --out "$OUT/time" --presets "$2" --deadline-s "$(( ${TUNE_S:-540} - 40 ))" > "$OUT/tune.log" 2>&1
  tail -n 40 "$OUT/tune.log"
}
tune_kinds() {   # both families tuned on the kinds preset, each in half the lane's time
  TUNE_S=$(( ${TUNE_S:-540} / 2 )) tune igemm_ws kinds; mv "$OUT/tune" "$OUT/tune_ws"; mv "$OUT/tune.log" "$OUT/tune_ws.log"
  TUNE_S=$(( ${TUNE_S:-540} / 2 )) tune igemm_fast kinds
}
gpu_tests() {   # the suite's GPU tests (pytest carried in the wheelhouse), the signal tests first
  cd "$REPO"
  timeout "${TUNE_S:-540}" python3 -m pytest -o addopts="" -p no:cacheprovider -q -m gpu ${GPU_TESTS:-tests/faults/test_signals.py \
    tests/test_gpu.py tests/test_gpu_families.py} > "$OUT/pytest.log" 2>&1
  tail -n 40 "$OUT/pytest.log"
}
retune() {   # family, presets, layers: a longer selection (8 finalists, 8 rounds) on those layers only
  cd "$REPO"
  timeout "${TUNE_S:-540}" python3 benchmarks/conv_speed.py --kernel "$1" --out "$OUT/tune" --presets "$2" --shapes "$3" \
    --finalists 8 --rounds 8 --jobs 12 --deadline-s "$(( ${TUNE_S:-540} - 40 ))" > "$OUT/tune.log" 2>&1
  tail -n 30 "$OUT/tune.log"
}
main_command() {   # the README's main command on the GPU, with its report
  run main_command "$(( ${TUNE_S:-540} - 20 ))" swizzle=xcd,grouped shape=resnet
  cp -a "$W/reports" "$OUT/" 2>/dev/null
}
independent() {
  run indep 520 "$SW" "$SP" shape=h200_indep "${R8[@]}"
}
tune() {   # kernel family, presets: the family tuned on the H200 on every layer of the presets
  cd "$REPO"
  timeout "${TUNE_S:-540}" python3 benchmarks/conv_speed.py --kernel "$1" --out "$OUT/tune" --presets "$2" \
    --finalists 4 --rounds 4 --jobs 12 --deadline-s "$(( ${TUNE_S:-540} - 40 ))" > "$OUT/tune.log" 2>&1
  tail -n 40 "$OUT/tune.log"
}
U1=unseen,unseen2,unseen3,unseen4,unseen5
U2=unseen6,unseen7,unseen8,unseen9,unseen10
gpu=0
for l in ${LANES:-cal held_a held_b indep}; do
  case $l in
    cal) lane "$gpu" cal calibration ;; held_a) lane "$gpu" held_a heldout_a ;; held_b) lane "$gpu" held_b heldout_b ;;
    indep) lane "$gpu" indep independent ;;
    held2a) lane "$gpu" held2a heldout2 a sdu320,sdu640,fpnp3,retina4 ;;
    held2b) lane "$gpu" held2b heldout2 b sdu1280,wrn50l2,dn201t3,rgy1x1 ;;
    held2c) lane "$gpu" held2c heldout2 c r50ds64,yolo8c2f,sdvae,r50w28 ;;
    held3a) lane "$gpu" held3a heldout3 a edsr,hrnet4b3,fbnetx2,segnet4 ;;
    held3b) lane "$gpu" held3b heldout3 b effv2f2,vov3,sg2s64,nafpw ;;
    held3c) lane "$gpu" held3c heldout3 c cycres,esrdisc,srres,pillars2 ;;
    held4) lane "$gpu" held4 heldout4 ;;
    kinds) lane "$gpu" kinds tune_kinds ;;
    gpu_tests) lane "$gpu" gpu_tests gpu_tests ;;
    ws_1x1) lane "$gpu" ws_1x1 retune igemm_ws resnet l08,l16,l18,l20,l22 ;;
    main) lane "$gpu" main main_command ;;
    speed_all) lane "$gpu" speed_all speed h200 "resnet,kinds,$U1,$U2" ;;
    ws_resnet) lane "$gpu" ws_resnet tune igemm_ws resnet ;; fast_resnet) lane "$gpu" fast_resnet tune igemm_fast resnet ;;
    ws_u1) lane "$gpu" ws_u1 tune igemm_ws "$U1" ;; ws_u2) lane "$gpu" ws_u2 tune igemm_ws "$U2" ;;
    fast_u1) lane "$gpu" fast_u1 tune igemm_fast "$U1" ;; fast_u2) lane "$gpu" fast_u2 tune igemm_fast "$U2" ;;
    *) echo "unknown lane $l (cal held_a held_b indep held2a held2b held2c held3a held3b held3c held4 kinds speed_all gpu_tests ws_1x1 main ws_resnet fast_resnet ws_u1 ws_u2 fast_u1 fast_u2)" >&2; exit 2 ;;
  esac
  gpu=$((gpu + 1))
done
wait
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,temperature.gpu --format=csv > "$OUT/nvidia_smi.csv"
tar czf "$OUT/h200_session.tgz" -C "$OUT" --exclude h200_session.tgz $(cd "$OUT" && ls)
cat "$OUT"/*/summary.txt
for f in "$OUT"/*/tune.log; do tail -n 32 "$f"; done 2>/dev/null
