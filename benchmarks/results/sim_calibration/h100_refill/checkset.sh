#!/bin/bash
# usage: checkset.sh REFILL WINDOW JITTER [OUT_ROOT] -- the check set R of PLAN.md (246 cells, not
# fitted) scored at one point; outputs under OUT_ROOT/R_REFILL_WINDOW_JITTER (/tmp/refill unless given).
. /work/main/.venv/bin/activate; cd /work/main
r=$1; w=$2; j=$3; o=${4:-/tmp/refill}/R_${r}_${w}_${j}; mkdir -p $o
ax=(--refills $r --windows $w --scatter-jitters $j)
for s in igemm_fresh2 fast_tma unseen unseen_fast unseen2 unseen2_fast unseen3; do
  python benchmarks/sim_calibrate.py --uri sqlite:////tmp/st/simval_$s.db --target h100 --out $o/$s --validate "${ax[@]}" > $o/$s.log 2>&1
done
python benchmarks/sim_calibrate.py --pool $o/*/cells.csv > $o/pool.log 2>&1
echo done R $r $w $j
