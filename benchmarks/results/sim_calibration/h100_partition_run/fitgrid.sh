#!/bin/bash
# usage: fitgrid.sh PARTITION_RUN WINDOW [OUT_ROOT] -- the fit set F of PLAN.md scored at one point
# (refill clock and scatter_jitter 0.015 as committed); outputs under OUT_ROOT/F_PR_WINDOW
# (/tmp/prun unless given).  Needs the stores decompressed to /tmp/st (xz -dkc ...db.xz).
. /work/main/.venv/bin/activate; cd /work/main
p=$1; w=$2; o=${3:-/tmp/prun}/F_${p}_${w}; mkdir -p $o
ax=(--partition-runs $p --windows $w)
python benchmarks/sim_calibrate.py --uri sqlite:////tmp/st/simval_igemm_fast.db sqlite:////tmp/st/simval_igemm_reads.db --target h100 --out $o/h100fit --validate --shapes big l03 l07 l10 l13 l17 l21 mbv2 vgg3 "${ax[@]}" > $o/h100fit.log 2>&1
python benchmarks/sim_calibrate.py --uri sqlite:////tmp/st/simval_igemm_fresh.db --target h100 --out $o/fresh --validate "${ax[@]}" > $o/fresh.log 2>&1
python benchmarks/sim_calibrate.py --uri sqlite:////tmp/st/simval_unseen4_fast.db --target h100 --out $o/unseen4 --validate "${ax[@]}" > $o/unseen4.log 2>&1
python benchmarks/sim_calibrate.py --pool $o/h100fit/cells.csv $o/fresh/cells.csv $o/unseen4/cells.csv > $o/pool.log 2>&1
echo done $p $w
