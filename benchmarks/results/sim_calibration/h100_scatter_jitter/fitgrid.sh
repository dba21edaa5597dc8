#!/bin/bash
# usage: fitgrid.sh VALUE [OUT_ROOT]  (OUT_ROOT: /tmp/sj unless given)
. /work/main/.venv/bin/activate; cd /work/main
v=$1; o=${2:-/tmp/sj}/F_$v; mkdir -p $o
python benchmarks/sim_calibrate.py --uri sqlite:////tmp/st/simval_igemm_fast.db sqlite:////tmp/st/simval_igemm_reads.db --target h100 --out $o/h100fit --validate --shapes big l03 l07 l10 l13 l17 l21 mbv2 vgg3 --scatter-jitters $v > $o/h100fit.log 2>&1
python benchmarks/sim_calibrate.py --uri sqlite:////tmp/st/simval_igemm_fresh.db --target h100 --out $o/fresh --validate --scatter-jitters $v > $o/fresh.log 2>&1
python benchmarks/sim_calibrate.py --uri sqlite:////tmp/st/simval_unseen4_fast.db --target h100 --out $o/unseen4 --validate --scatter-jitters $v > $o/unseen4.log 2>&1
python benchmarks/sim_calibrate.py --pool $o/h100fit/cells.csv $o/fresh/cells.csv $o/unseen4/cells.csv > $o/pool.log 2>&1
echo done $v
