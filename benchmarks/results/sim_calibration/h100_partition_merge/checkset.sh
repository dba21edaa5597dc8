#!/bin/bash
# usage: checkset.sh WINDOW [OUT_ROOT] -- the check set R of PLAN.md at one window (partition_run 8, merge_unit
# partition); outputs under OUT_ROOT/R_8p_WINDOW (/tmp/pm unless given)
exec bash "$(dirname "$0")/../../../sim_fit_sets.sh" R "${2:-/tmp/pm}/R_8p_$1" --partition-runs 8 --merge-units partition --windows "$1"
