#!/usr/bin/env bash
# The simulated L2 against ncu (issue "A simulated L2 you can believe"): the same jobs profiled
# by ncu (cold L2, paired ABBA with identity) and predicted by the simulator configured as the
# target (profiler.simulate=true).  benchmarks/sim_calibrate.py then re-simulates every cell on
# the CPU, fits the model's free parameter on one half of the shapes and reports on the other.
#   . benchmarks/gpu_setup.sh && STAGE=igemm|igemm_fast|reads|fresh|fresh2|fast_tma|unseen|unseen_fast|unseen2|unseen2_fast|unseen3|unseen4|unseen4_fast|unseen5|unseen6|unseen7|unseen7_fast|unseen7_repeat|unseen8|unseen8_fast|unseen9|unseen9_fast|unseen10|tma_heldout|probes|lookups|noise|holdout8|holdout8_fast bash benchmarks/gpu_sim_validation_session.sh OUT_DIR
# STAGE=fresh: cells on six ResNet-50 layers no calibration has seen (a re-validation set);
# STAGE=fresh2: the four layers left (l01, l18, l20, l22), measured after the set hash was added.
# STAGE=unseen: igemm on the layers of conf/shape/unseen.yaml (other networks, other batch sizes),
# measured after the simulator's error bands were fixed: their coverage, checked prospectively.
# STAGE=unseen_fast: the same with igemm_fast tuned per shape (LAYOUT=0 skips the layout probe).
# STAGE=unseen2: igemm on conf/shape/unseen2.yaml, measured after the layer-class bands were fixed;
# STAGE=unseen2_fast: the same with igemm_fast tuned per shape.
# STAGE=unseen3: igemm on conf/shape/unseen3.yaml, after the misaligned-row class's bands were fixed.
# STAGE=unseen4 / unseen4_fast: igemm / igemm_fast tuned on conf/shape/unseen4.yaml, after the
#   simulator counted requests of 128 B and register spills (their prospective check).
# STAGE=unseen5: igemm on conf/shape/unseen5.yaml, six order-blind grids, 8 pairs, no simulation on
#   the node: the order-blind delta bands' prospective check (run it with LAYOUT=0).
# STAGE=unseen6: igemm on conf/shape/unseen6.yaml (3x3 and 1x1 layers of other networks), 8 pairs,
#   no simulation on the node: the prospective check of the fitted scatter_jitter (LAYOUT=0).
# STAGE=unseen7 / unseen7_fast: igemm / igemm_fast tuned on conf/shape/unseen7.yaml (1x1 layers
#   of several waves, where igemm_fast loads by TMA), 8 pairs, no simulation on the node: the
#   prospective check of the refill refit (96a51f9:benchmarks/results/sim_calibration/h100_refill/PLAN.md; LAYOUT=0).
# STAGE=unseen7_repeat: igemm on unseen7's three one-wave layers again (aspp, incv3m6, fpnlat), 8
#   pairs: does the table's size of their order effects hold in another process (LAYOUT=0)?
# STAGE=unseen8 / unseen8_fast: igemm / igemm_fast tuned on conf/shape/unseen8.yaml, 8 pairs: the
#   prospective check of the partition-run fit (96a51f9:benchmarks/results/sim_calibration/h100_partition_run/PLAN.md).
# STAGE=unseen9 / unseen9_fast: igemm / igemm_fast tuned on conf/shape/unseen9.yaml (three grids
#   under 68 programs), 8 pairs: the prospective check of 96a51f9:benchmarks/results/sim_calibration/h100_partition_17.
# STAGE=unseen10: igemm on conf/shape/unseen10.yaml (four grids of several waves), 8 pairs: the
#   prospective check of 96a51f9:benchmarks/results/sim_calibration/h100_partition_merge.
# STAGE=tma_heldout: igemm_fast with fixed 128x128x64 tiles in four variants (TMA on, off, on +
#   persistent, off + split-K 2) on three 1x1 layers, and 64x128x64 tiles with and without
#   pixel-rectangle boxes (BOX_W=8) on a 3x3 layer (benchmarks/conf/shape/tma_heldout.yaml), 8
#   pairs, no simulation on the node: held-out cells for the TMA model (issue 41), measured before it.
#   PART=4: the same 128x128x64 tiles, TMA on and off, on three layers of other networks
#   (benchmarks/conf/shape/tma_heldout2.yaml) x 4 orders: the held-out check of the one-wave
#   clock-phase rule planned in results/sim_calibration/h100_tma_heldout/PLAN.md ("Part 4").
# STAGE=fast_tma: igemm_fast (tuned) on four 1x1 stride-1 layers, whose input it loads by TMA:
# cells to fit the TMA operands' merge window on (the held-out l02 / l12 are such cells).
# STAGE=lookups: the L2 lookup probe (run_l2_lookups.py) on the cells the model gets wrong:
#   one-column l05, igemm_fast's TMA config on l12, and layers whose output rows straddle sectors.
# STAGE=probes: the probes of benchmarks/probes: where programs run and which L2 partition each
# SM reads through (sm_placement.py), and the L2 lookups of igemm_fast's TMA loads (TMA=1 vs 0).
# Cells: identity + 5 orders (the colmajor and scatter controls, grouped, and the hilbert and
# morton families) x 11 shapes (6 ResNet-50 layers, 2 of the calibrate preset, 3 hold-out
# layers) with igemm's fixed config (66 cells), and x 8 shapes with igemm_fast tuned (48).
OUT_ARG=$1; shift
. "$(dirname "$0")/gpu_session_common.sh" "$OUT_ARG"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; ncu --version | tail -1
} | tee -a "$OUT/summary.txt"
DB="sqlite:////tmp/swb-simval.db"
SW=swizzle=identity,colmajor,scatter,grouped,hilbert,morton
# ncu launches per cell (ABBA pairs with identity).  Every stage before STAGE=holdout8 ran with 3;
# identity's all-traffic counts spread by 2-5 points from launch to launch on small grids
# (STAGE=noise), so a cell now takes 8 (REPEATS=3 repeats the old stages as they ran).
COMMON=(profiler=ncu profiler.repeats=${REPEATS:-8} profiler.simulate=true compare.max_time_s=0.2
        compare.min_rounds=10 experiment=simval "$@")
# The re-measurement stages: 8 pairs, no simulation on the node (the CPU re-simulates).
R8=(profiler=ncu profiler.repeats=8 profiler.simulate=false compare.max_time_s=0.2 compare.min_rounds=10 experiment=simval)
STAGE=${STAGE:-igemm}
# Every cell stage first records this node's own L2 layout (about 70 s): which partition each SM
# reads through is per chip (96a51f9:benchmarks/README.md, probe 5), so the cells can be re-simulated with
# their own chip's map (target keys sm_partition, sm_dispatch from OUT/layout/*.json).
if [ "$STAGE" != probes ] && [ "$STAGE" != lookups ] && [ "${LAYOUT:-1}" = 1 ]; then
  (cd "$REPO/benchmarks/probes" && python3 sm_placement.py "$OUT/layout" && python3 l2_partition_map.py "$OUT/layout") \
    > "$OUT/layout.log" 2>&1
  tail -4 "$OUT/layout.log" | cut -c1-200 | tee -a "$OUT/summary.txt"
fi
if [ "$STAGE" = igemm ]; then
  run simval_igemm_resnet 330 kernel=igemm "$SW" shape=resnet 'shape.select=[l02,l03,l07,l12,l13,l17]' "${COMMON[@]}"
  cp /tmp/swb-simval.db "$OUT/simval.db"
  run simval_igemm_cal 150 kernel=igemm "$SW" shape=calibrate 'shape.select=[l19,big]' "${COMMON[@]}"
  cp /tmp/swb-simval.db "$OUT/simval.db"
  run simval_igemm_holdout 120 kernel=igemm "$SW" shape=holdout 'shape.select=[vgg3,mbv2,odd]' "${COMMON[@]}"
elif [ "$STAGE" = probes ]; then
  cd "$REPO"
  python3 benchmarks/probes/sm_placement.py "$OUT" 2>&1 | tee "$OUT/sm_placement.log"
  L02=BLOCK_M=64,BLOCK_N=64,BLOCK_K=64,SPLIT_K=1,PACK_K=0,NCHW_IN=0,PERSISTENT=0
  L12=BLOCK_M=64,BLOCK_N=128,BLOCK_K=64,SPLIT_K=1,PACK_K=0,NCHW_IN=0,PERSISTENT=0
  END=TMA_STORE=0,FOLD=0,SPLIT_SUM=0
  python3 benchmarks/probes/run_l2_lookups.py "$OUT/tma" "l02@igemm_fast@$L02,TMA=1,$END/w4/s2:identity,scatter" \
    "l02@igemm_fast@$L02,TMA=0,$END/w4/s2:identity,scatter" "l12@igemm_fast@$L12,TMA=1,$END/w4/s3:identity,colmajor" \
    "l12@igemm_fast@$L12,TMA=0,$END/w4/s3:identity,colmajor" 2>&1 | tee "$OUT/tma_lookups.log"
  tar czf "$OUT/probes.tar.gz" -C "$OUT" tma sm_placement.json && rm -rf "$OUT/tma"
  exit 0
elif [ "$STAGE" = lookups ]; then
  cd "$REPO"
  L12=BLOCK_M=64,BLOCK_N=128,BLOCK_K=64,SPLIT_K=1,PACK_K=0,NCHW_IN=0,PERSISTENT=0,TMA=1,TMA_STORE=0,FOLD=0,SPLIT_SUM=0
  python3 benchmarks/probes/run_l2_lookups.py "$OUT/lookups" l05:identity,scatter \
    "l12@igemm_fast@$L12/w4/s3:identity,colmajor,scatter" unseen3/effb0b2:identity,scatter \
    unseen3/shfl58:identity unseen3/mbv3x:identity 2>&1 | tee "$OUT/lookups.log"
  tar czf "$OUT/lookups.tar.gz" -C "$OUT" lookups && rm -rf "$OUT/lookups"
  exit 0
elif [ "$STAGE" = noise ]; then   # where the all-traffic hit rate's spread comes from: every launch's counters
  run simval_noise 300 kernel=igemm swizzle=identity,scatter,colmajor shape=resnet 'shape.select=[l23,l19]' \
    "${R8[@]}" "$@"
  (cd "$W" && find . -name ncu.csv -o -name command.txt | tar czf "$OUT/ncu_raw.tar.gz" -T -)
  cp /tmp/swb-simval.db "$OUT/simval.db"
  exit 0
elif [ "$STAGE" = holdout8 ]; then   # the held-out half's cells again, 8 ABBA pairs each instead of 3 (STAGE=noise)
  run holdout8_igemm 420 kernel=igemm "$SW" shape=resnet 'shape.select=[l02,l05,l09,l12,l15,l19,l23]' "${R8[@]}"
  run holdout8_odd 200 kernel=igemm swizzle=identity,colmajor shape=holdout 'shape.select=[odd]' "${R8[@]}"
elif [ "$STAGE" = holdout8_fast ]; then   # its igemm_fast cells, at the configs tune mode chose then (a call of its own:
  # the igemm and igemm_fast runs together took over 600 s)
  run holdout8_fast_l02 200 kernel=igemm_fast swizzle=identity,colmajor,scatter,grouped,hilbert shape=resnet \
    'shape.select=[l02]' kernel.tiles.BLOCK_M=64 kernel.tiles.BLOCK_N=64 kernel.tiles.BLOCK_K=64 kernel.tiles.TMA=1 \
    kernel.num_warps=4 kernel.num_stages=2 "${R8[@]}"
  run holdout8_fast_l12 200 kernel=igemm_fast swizzle=identity,colmajor,scatter,grouped,hilbert shape=resnet \
    'shape.select=[l12]' kernel.tiles.BLOCK_M=64 kernel.tiles.BLOCK_N=128 kernel.tiles.BLOCK_K=64 kernel.tiles.TMA=1 \
    kernel.num_warps=4 kernel.num_stages=3 "${R8[@]}"
elif [ "$STAGE" = fresh ]; then
  run simval_igemm_fresh 400 kernel=igemm "$SW" shape=resnet 'shape.select=[l04,l06,l08,l11,l14,l16]' "${COMMON[@]}"
elif [ "$STAGE" = fresh2 ]; then   # the last four ResNet-50 layers no cell had (after the set hash)
  run simval_igemm_fresh2 450 kernel=igemm "$SW" shape=resnet 'shape.select=[l01,l18,l20,l22]' "${COMMON[@]}"
elif [ "$STAGE" = fast_tma ]; then   # igemm_fast tuned on 1x1 stride-1 layers: it loads the input by TMA too
  run simval_fast_tma 480 kernel=igemm_fast tune=fastest tune.cache_dir=/tmp/swb-tunecache "$SW" shape=resnet 'shape.select=[l04,l10,l16,l20]' "${COMMON[@]}"
elif [ "$STAGE" = unseen ]; then   # layers of other networks: the bands' prospective check
  run simval_igemm_unseen 430 kernel=igemm "$SW" shape=unseen "${COMMON[@]}"
elif [ "$STAGE" = unseen_fast ]; then   # the same layers with igemm_fast tuned per shape
  run simval_fast_unseen 500 kernel=igemm_fast tune=fastest tune.cache_dir=/tmp/swb-tunecache "$SW" shape=unseen "${COMMON[@]}"
elif [ "$STAGE" = unseen2 ]; then   # more layers, after the layer-class bands were fixed
  run simval_igemm_unseen2 460 kernel=igemm "$SW" shape=unseen2 "${COMMON[@]}"
elif [ "$STAGE" = unseen2_fast ]; then   # the same layers with igemm_fast tuned per shape
  run simval_fast_unseen2 500 kernel=igemm_fast tune=fastest tune.cache_dir=/tmp/swb-tunecache "$SW" shape=unseen2 "${COMMON[@]}"
elif [ "$STAGE" = unseen3 ]; then   # after the misaligned-row class's bands were fixed
  run simval_igemm_unseen3 460 kernel=igemm "$SW" shape=unseen3 "${COMMON[@]}"
elif [ "$STAGE" = unseen4 ]; then   # after requests of 128 B and spills were modelled
  run simval_igemm_unseen4 460 kernel=igemm "$SW" shape=unseen4 "${COMMON[@]}"
elif [ "$STAGE" = unseen4_fast ]; then
  run simval_fast_unseen4 520 kernel=igemm_fast tune=fastest tune.cache_dir=/tmp/swb-tunecache "$SW" shape=unseen4 "${COMMON[@]}"
elif [ "$STAGE" = unseen5 ]; then   # order-blind grids only, after their delta bands were fixed (8 pairs)
  run simval_igemm_unseen5 420 kernel=igemm "$SW" shape=unseen5 "${R8[@]}"
elif [ "$STAGE" = unseen6 ]; then   # after scatter_jitter was fitted (8 pairs): its prospective check
  run simval_igemm_unseen6 480 kernel=igemm "$SW" shape=unseen6 "${R8[@]}"
elif [ "$STAGE" = unseen7 ]; then   # after the refill refit was planned (8 pairs): its prospective check
  run simval_igemm_unseen7 480 kernel=igemm "$SW" shape=unseen7 "${R8[@]}"
elif [ "$STAGE" = unseen7_fast ]; then
  run simval_fast_unseen7 560 kernel=igemm_fast tune=fastest tune.cache_dir=/tmp/swb-tunecache "$SW" shape=unseen7 "${R8[@]}"
elif [ "$STAGE" = unseen7_repeat ]; then   # the one-wave cells the model misses most, measured again
  run simval_igemm_unseen7_repeat 420 kernel=igemm "$SW" shape=unseen7 'shape.select=[aspp,incv3m6,fpnlat]' "${R8[@]}"
elif [ "$STAGE" = unseen8 ]; then   # after the partition-run fit was planned (8 pairs): its prospective check
  run simval_igemm_unseen8 480 kernel=igemm "$SW" shape=unseen8 "${R8[@]}"
elif [ "$STAGE" = unseen8_fast ]; then
  run simval_fast_unseen8 560 kernel=igemm_fast tune=fastest tune.cache_dir=/tmp/swb-tunecache "$SW" shape=unseen8 "${R8[@]}"
elif [ "$STAGE" = unseen9 ]; then   # after the partition-17 fit was planned (8 pairs): its prospective check
  run simval_igemm_unseen9 480 kernel=igemm "$SW" shape=unseen9 "${R8[@]}"
elif [ "$STAGE" = unseen9_fast ]; then
  run simval_fast_unseen9 560 kernel=igemm_fast tune=fastest tune.cache_dir=/tmp/swb-tunecache "$SW" shape=unseen9 "${R8[@]}"
elif [ "$STAGE" = unseen10 ]; then   # after the partition-merge fit was planned (8 pairs): its prospective check
  run simval_igemm_unseen10 540 kernel=igemm "$SW" shape=unseen10 "${R8[@]}"
elif [ "$STAGE" = tma_heldout ]; then   # sealed until the TMA model's plan is committed
  SP=("hydra.searchpath=[file://$REPO/benchmarks/conf]" shape=tma_heldout)
  SW5=swizzle=identity,colmajor,scatter,grouped,hilbert
  T=(kernel=igemm_fast kernel.tiles.BLOCK_N=128 kernel.tiles.BLOCK_K=64 kernel.tiles.PACK_K=0 kernel.tiles.NCHW_IN=0
     kernel.tiles.TMA_STORE=0 kernel.tiles.FOLD=0 kernel.tiles.SPLIT_SUM=0 launch.num_warps=4 launch.num_stages=3)
  PW=("${T[@]}" kernel.tiles.BLOCK_M=128 "$SW5" "${SP[@]}" 'shape.select=[cnxpw1,cnxpw2,mbv3pw]' "${R8[@]}")
  P=${PART:-1}   # 1, 2, 3, 4: parts of one device call each (PART=3: the boxes; PART=4: new layers)
  if [ "$P" = 4 ]; then   # sealed until h100_tma_heldout/PLAN.md's "Part 4" is committed (it is, before this runs)
    SP2=("hydra.searchpath=[file://$REPO/benchmarks/conf]" shape=tma_heldout2)
    SW4=swizzle=identity,colmajor,scatter,grouped
    PW4=("${T[@]}" kernel.tiles.BLOCK_M=128 "$SW4" "${SP2[@]}" "${R8[@]}")
    run tma2_on 280 "${PW4[@]}" kernel.tiles.TMA=1 kernel.tiles.PERSISTENT=0 kernel.tiles.SPLIT_K=1
    run tma2_off 280 "${PW4[@]}" kernel.tiles.TMA=0 kernel.tiles.PERSISTENT=0 kernel.tiles.SPLIT_K=1
  elif [ "$P" = 1 ]; then
    run tma_on 280 "${PW[@]}" kernel.tiles.TMA=1 kernel.tiles.PERSISTENT=0 kernel.tiles.SPLIT_K=1
    run tma_off 280 "${PW[@]}" kernel.tiles.TMA=0 kernel.tiles.PERSISTENT=0 kernel.tiles.SPLIT_K=1
  elif [ "$P" = 2 ]; then
    run tma_persistent 280 "${PW[@]}" kernel.tiles.TMA=1 kernel.tiles.PERSISTENT=1 kernel.tiles.SPLIT_K=1
    run tma_off_split2 280 "${PW[@]}" kernel.tiles.TMA=0 kernel.tiles.PERSISTENT=0 kernel.tiles.SPLIT_K=2
  else
    B=("${T[@]}" kernel.tiles.BLOCK_M=64 kernel.tiles.TMA=1 kernel.tiles.PERSISTENT=0 kernel.tiles.SPLIT_K=1 "$SW5"
       "${SP[@]}" 'shape.select=[yolo5c3]' "${R8[@]}")
    run box 150 "${B[@]}" +kernel.tiles.BOX_W=8
    run box_off 150 "${B[@]}"
  fi
  cp /tmp/swb-simval.db "$OUT/simval.db"
elif [ "$STAGE" = reads ]; then   # more ResNet-50 layers, logged with the paired read-only deltas
  run simval_igemm_reads 480 kernel=igemm "$SW" shape=resnet 'shape.select=[l05,l09,l10,l15,l21,l23]' "${COMMON[@]}"
else
  run simval_fast_resnet 300 kernel=igemm_fast tune=fastest tune.cache_dir=/tmp/swb-tunecache "$SW" shape=resnet 'shape.select=[l02,l07,l12,l17]' "${COMMON[@]}"
  cp /tmp/swb-simval.db "$OUT/simval.db"
  run simval_fast_rest 250 kernel=igemm_fast tune=fastest tune.cache_dir=/tmp/swb-tunecache "$SW" shape=holdout 'shape.select=[vgg3,mbv2,big]' "${COMMON[@]}"
fi
cp /tmp/swb-simval.db "$OUT/simval.db"
xz -k -9 "$OUT/simval.db"; rm "$OUT/simval.db"
tar czf "$OUT/logs.tar.gz" -C "$OUT" $(cd "$OUT" && ls *.log summary.txt)
