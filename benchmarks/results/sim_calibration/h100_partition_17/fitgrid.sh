#!/bin/bash
# usage: fitgrid.sh PARTITION_RUN WINDOW [OUT_ROOT] -- the fit set F of PLAN.md at one point (refill clock,
# scatter_jitter 0.015 and cluster_run 17 as committed); outputs under OUT_ROOT/F_PR_WINDOW (/tmp/p17 unless given)
exec bash "$(dirname "$0")/../../../sim_fit_sets.sh" F "${3:-/tmp/p17}/F_$1_$2" --partition-runs "$1" --windows "$2"
