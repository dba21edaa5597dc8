#!/bin/bash
# usage: checkset.sh PARTITION_RUN WINDOW [OUT_ROOT] -- the check set R of PLAN.md at one point; outputs under
# OUT_ROOT/R_PR_WINDOW (/tmp/p17 unless given)
exec bash "$(dirname "$0")/../../../sim_fit_sets.sh" R "${3:-/tmp/p17}/R_$1_$2" --partition-runs "$1" --windows "$2"
