#!/bin/bash
# usage: fitgrid.sh REFILL WINDOW JITTER [OUT_ROOT] -- the fit set F of PLAN.md at one point of the grid
# (refill, coalesce_window, scatter_jitter); outputs under OUT_ROOT/F_REFILL_WINDOW_JITTER (/tmp/refill)
exec bash "$(dirname "$0")/../../../sim_fit_sets.sh" F "${4:-/tmp/refill}/F_$1_$2_$3" \
  --refills "$1" --windows "$2" --scatter-jitters "$3"
