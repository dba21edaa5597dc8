#!/bin/bash
# usage: fitgrid.sh REFILL WINDOW JITTER [OUT_ROOT] -- the fit set F of PLAN.md scored at one point of
# the grid (refill, coalesce_window, scatter_jitter); outputs under OUT_ROOT/F_REFILL_WINDOW_JITTER
# (/tmp/refill unless given).  Needs the stores decompressed to /tmp/st (xz -dkc ...db.xz).
. /work/main/.venv/bin/activate; cd /work/main
r=$1; w=$2; j=$3; o=${4:-/tmp/refill}/F_${r}_${w}_${j}; mkdir -p $o
ax=(--refills $r --windows $w --scatter-jitters $j)
python benchmarks/sim_calibrate.py --uri sqlite:////tmp/st/simval_igemm_fast.db sqlite:////tmp/st/simval_igemm_reads.db --target h100 --out $o/h100fit --validate --shapes big l03 l07 l10 l13 l17 l21 mbv2 vgg3 "${ax[@]}" > $o/h100fit.log 2>&1
python benchmarks/sim_calibrate.py --uri sqlite:////tmp/st/simval_igemm_fresh.db --target h100 --out $o/fresh --validate "${ax[@]}" > $o/fresh.log 2>&1
python benchmarks/sim_calibrate.py --uri sqlite:////tmp/st/simval_unseen4_fast.db --target h100 --out $o/unseen4 --validate "${ax[@]}" > $o/unseen4.log 2>&1
python benchmarks/sim_calibrate.py --pool $o/h100fit/cells.csv $o/fresh/cells.csv $o/unseen4/cells.csv > $o/pool.log 2>&1
echo done $r $w $j
