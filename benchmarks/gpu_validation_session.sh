#!/usr/bin/env bash
# GPU session for the simulator validation and the crash-isolation demonstration.
#  1. ncu (cold L2, 5 repeats) over all kernel families x 3 swizzles x 6 ResNet-50 layers;
#     swizzle.num_xcds=8 so that `xcd` really reorders tiles on a one-die GPU too.
#     Compare with: python benchmarks/sim_validation.py --uri sqlite:///<db> --target h200
#  2. a sweep in which jobs are forced to crash (illegal memory access, SIGSEGV, hang).
# Usage on an NVIDIA node (deps installed): bash benchmarks/gpu_validation_session.sh [OUT_DIR]
. "$(dirname "$0")/gpu_session_common.sh" "$@"
SHAPES=(shape=resnet 'shape.select=[l02,l03,l07,l12,l13,l17]')
run validation 420 profiler=ncu kernel=igemm,direct,patch swizzle=identity,grouped,xcd swizzle.num_xcds=8 \
    "${SHAPES[@]}" experiment=sim-validation
run faults 150 profiler=none kernel=igemm swizzle=identity,xcd shape=resnet 'shape.select=[l03,l12,l19]' \
    fault.kind=illegal_address fault.shape=l12 fault.swizzle=xcd experiment=faults
run faults_segv_hang 150 profiler=none kernel=igemm swizzle=identity shape=resnet 'shape.select=[l03,l12,l19]' \
    fault.kind=segv fault.shape=l12 experiment=faults-segv resume=false
cp "$W/mlflow.db" "$OUT/validation_session.db"
