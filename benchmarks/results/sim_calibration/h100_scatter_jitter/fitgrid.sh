#!/bin/bash
# usage: fitgrid.sh VALUE [OUT_ROOT] -- the fit set F at scatter_jitter VALUE (OUT_ROOT: /tmp/sj unless given)
exec bash "$(dirname "$0")/../../../sim_fit_sets.sh" F "${2:-/tmp/sj}/F_$1" --scatter-jitters "$1"
