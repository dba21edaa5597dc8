#!/bin/bash
# usage: checkset.sh REFILL WINDOW JITTER [OUT_ROOT] -- the check set R of PLAN.md (246 cells, not fitted)
# at one point; outputs under OUT_ROOT/R_REFILL_WINDOW_JITTER (/tmp/refill unless given)
exec bash "$(dirname "$0")/../../../sim_fit_sets.sh" R "${4:-/tmp/refill}/R_$1_$2_$3" \
  --refills "$1" --windows "$2" --scatter-jitters "$3"
