// Probe (benchmarks/probes/cutlass_1x1.py): one CUTLASS 3 Hopper GEMM per object file,
// D[M,N] = A[M,K] (row-major) x B[N,K]^T (B stored N x K, K contiguous), fp16 in, fp32
// accumulate, fp16 out: a stride-1 1x1 conv on channels_last tensors.  Not part of the
// package: CUTLASS's headers are not a dependency.  Built on a CPU machine with nvcc 13.0
// against CUTLASS 7107b05 (include/ and tools/util/include/ of github.com/NVIDIA/cutlass),
// each config from its -D flags (NAME, TILE_M/N/K, CLUSTER_M/N, SCHEDULE 0 cooperative or
// 1 ping-pong, STREAMK 0 or 1), about 40 CPU-s each, then linked into one library:
//   nvcc -std=c++17 -O3 -DNDEBUG -arch=sm_90a -Xcompiler -fPIC --expt-relaxed-constexpr \
//     -I $CUTLASS/include -I $CUTLASS/tools/util/include -DNAME=c128x128_2x1 -DTILE_M=128 \
//     -DTILE_N=128 -DTILE_K=64 -DCLUSTER_M=2 -DCLUSTER_N=1 -DSCHEDULE=0 -DSTREAMK=0 \
//     -c -x cu benchmarks/probes/cutlass_1x1.cu -o c128x128_2x1.o    # ... one per config
//   nvcc -shared -arch=sm_90a -cudart static -o libcutlass_probe.so *.o
// (-DNDEBUG matters: with CUTLASS's asserts in, ptxas serializes the wgmma pipeline, C7510.)
#include "cutlass/cutlass.h"
#include "cute/tensor.hpp"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"
#include "cutlass/util/packed_stride.hpp"
using namespace cute;

using ElementA = cutlass::half_t;
using ElementB = cutlass::half_t;
using ElementD = cutlass::half_t;
using LayoutA = cutlass::layout::RowMajor;
using LayoutB = cutlass::layout::ColumnMajor;
using LayoutD = cutlass::layout::RowMajor;
constexpr int Align = 8;
using TileShape = Shape<Int<TILE_M>, Int<TILE_N>, Int<TILE_K>>;
using ClusterShape = Shape<Int<CLUSTER_M>, Int<CLUSTER_N>, _1>;
#if SCHEDULE == 0
using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecializedCooperative;
#else
using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecialized;
#endif
#if STREAMK
using Scheduler = cutlass::gemm::StreamKScheduler;
#else
using Scheduler = cutlass::gemm::PersistentScheduler;
#endif

using Epi = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float,
    void, LayoutD, Align, ElementD, LayoutD, Align, EpilogueSchedule>::CollectiveOp;
using Main = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
    ElementA, LayoutA, Align, ElementB, LayoutB, Align, float, TileShape, ClusterShape,
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epi::SharedStorage))>,
    KernelSchedule>::CollectiveOp;
using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Main, Epi, Scheduler>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)

// Returns 0 on a launch; 1 cannot implement; 2 workspace too small (needed bytes in *need); 3, 4 failures.
extern "C" int CAT(run_, NAME)(const void* A, const void* B, void* D, int M, int N, int K, void* workspace,
                               size_t workspace_bytes, size_t* need, void* stream) {
  auto sA = cutlass::make_cute_packed_stride(typename Kernel::StrideA{}, make_shape(M, K, 1));
  auto sB = cutlass::make_cute_packed_stride(typename Kernel::StrideB{}, make_shape(N, K, 1));
  auto sD = cutlass::make_cute_packed_stride(typename Kernel::StrideD{}, make_shape(M, N, 1));
  typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm, {M, N, K, 1},
                                {(ElementA const*)A, sA, (ElementB const*)B, sB},
                                {{1.f, 0.f}, nullptr, sD, (ElementD*)D, sD}};
  Gemm gemm;
  if (gemm.can_implement(args) != cutlass::Status::kSuccess) return 1;
  *need = Gemm::get_workspace_size(args);
  if (*need > workspace_bytes) return 2;
  if (gemm.initialize(args, workspace, (cudaStream_t)stream) != cutlass::Status::kSuccess) return 3;
  if (gemm.run((cudaStream_t)stream) != cutlass::Status::kSuccess) return 4;
  return 0;
}
