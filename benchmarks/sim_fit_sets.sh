#!/usr/bin/env bash
# The simulator's H100 fit set F (182 cells) or check set R (246 cells) scored at one point, as the
# fit plans under 96a51f9:benchmarks/results/sim_calibration/ define them; each plan's fitgrid.sh /
# checkset.sh calls this with its own axes.
#   bash benchmarks/sim_fit_sets.sh F|R OUT_DIR [sim_calibrate.py axis flags, e.g. --refills clock]
# Stores: the decompressed .db files of 96a51f9:benchmarks/results/sim_validation_h100 in $STORES (/tmp/st).
set -uo pipefail
set_name=$1; o=$2; shift 2
cd "$(dirname "$0")/.."
[ -f .venv/bin/activate ] && . .venv/bin/activate
st=${STORES:-/tmp/st}; mkdir -p "$o"
score() {   # name, then sim_calibrate.py arguments
  local name=$1; shift
  python benchmarks/sim_calibrate.py "$@" --target h100 --out "$o/$name" --validate "${AXES[@]}" > "$o/$name.log" 2>&1
}
AXES=("$@")
if [ "$set_name" = F ]; then
  score h100fit --uri "sqlite:///$st/simval_igemm_fast.db" "sqlite:///$st/simval_igemm_reads.db" \
    --shapes big l03 l07 l10 l13 l17 l21 mbv2 vgg3
  score fresh --uri "sqlite:///$st/simval_igemm_fresh.db"
  score unseen4 --uri "sqlite:///$st/simval_unseen4_fast.db"
elif [ "$set_name" = R ]; then
  for s in igemm_fresh2 fast_tma unseen unseen_fast unseen2 unseen2_fast unseen3; do
    score "$s" --uri "sqlite:///$st/simval_$s.db"
  done
else
  echo "sim_fit_sets.sh: the set must be F or R, not '$set_name'" >&2; exit 2
fi
python benchmarks/sim_calibrate.py --pool "$o"/*/cells.csv > "$o/pool.log" 2>&1
echo "done $set_name $o $*"
