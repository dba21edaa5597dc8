#!/bin/bash
# usage: fitgrid.sh PARTITION_RUN WINDOW [OUT_ROOT] -- the fit set F of PLAN.md at one point (refill clock
# and scatter_jitter 0.015 as committed); outputs under OUT_ROOT/F_PR_WINDOW (/tmp/prun unless given)
exec bash "$(dirname "$0")/../../../sim_fit_sets.sh" F "${3:-/tmp/prun}/F_$1_$2" --partition-runs "$1" --windows "$2"
