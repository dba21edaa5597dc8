#!/bin/bash
# usage: fitgrid.sh VALUE -- the ninth session's fit of the same set F, its outputs under /tmp/sjw
exec bash "$(dirname "$0")/../h100_scatter_jitter/fitgrid.sh" "$1" /tmp/sjw
