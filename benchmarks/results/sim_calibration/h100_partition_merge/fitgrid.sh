#!/bin/bash
# usage: fitgrid.sh WINDOW [OUT_ROOT] -- the fit set F of PLAN.md at one window: partition_run 8 and merge_unit
# partition (refill clock, scatter_jitter 0.015 as committed); outputs under OUT_ROOT/F_8p_WINDOW (/tmp/pm unless given)
exec bash "$(dirname "$0")/../../../sim_fit_sets.sh" F "${2:-/tmp/pm}/F_8p_$1" --partition-runs 8 --merge-units partition --windows "$1"
