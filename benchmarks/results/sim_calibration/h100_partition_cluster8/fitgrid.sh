#!/bin/bash
# usage: fitgrid.sh CLUSTER_RUN WINDOW [OUT_ROOT] -- the fit set F of PLAN.md at one point: partition_run 8 and
# merge_unit cluster (refill clock, scatter_jitter 0.015 as committed); outputs under OUT_ROOT/F_8c_CR_WINDOW
exec bash "$(dirname "$0")/../../../sim_fit_sets.sh" F "${3:-/tmp/pc}/F_8c_$1_$2" --partition-runs 8 --cluster-runs "$1" --windows "$2"
