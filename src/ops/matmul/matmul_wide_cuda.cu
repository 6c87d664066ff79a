// matmul_wide_cuda: y[m, n] = x[m, k] · W[n, k]ᵀ (+ bias[n] | + residual[m, n]) for decode's
// m <= 64 rows on Hopper's warpgroup MMA; bf16 in and out, fp32 accumulation, one rounding.
// matmul_wide.h says why it exists beside the skinny kernel and how a problem is tiled.
//
// Bound: n·k·2 bytes of weights for 2·m·n·k FLOPs (<= 64 FLOP/byte): memory bound; the goal is the
// 4.28 TB/s copy ceiling. x is read once per 128 weight rows (from L2: m·k·2 bytes per tile).
//
// Block: one consumer warpgroup (warps 0-3) and one producer warp (warp 4). The producer's first
// lane asks the copy engine for each stage's two boxes — 128 weight rows × 64 k (16 KB) and the
// m token rows × 64 k of x (K past k arrives as zeros; the wgmma rows past m multiply whatever the
// stage held before, into sums nobody reads) — into a ring of
// kMatmulWideStages stages, both in the 128-byte swizzle wgmma reads, completing bytes on the
// stage's "full" mbarrier. The consumers wait for a stage, issue four wgmma.m64n128k16 (A = the x
// rows, B = the weight rows, both K-major from shared memory: D[token][weight row]), commit, and
// once the previous stage's group has completed hand that stage back on its "empty" mbarrier (one
// arrival per warp). Nothing in the multiply waits on global memory but the ring.
//   Programmatic dependent launch: weights are constants, so the producer requests the weight
// boxes of the ring's first stages before griddepcontrol.wait, while the kernel before this one
// still runs; x is that kernel's output, so its boxes follow the wait (the stage's mbarrier
// expects both). The consumers wait too before they read the bias or residual or write y.
//   Splits: the K splits of a tile are one thread-block cluster. After its K loop each block
// leaves its fp32 sums [64][128] in its own shared memory (the consumed ring), one cluster barrier
// publishes them, each block finishes an equal share of the tile's m × 128 outputs by summing the
// splits' sums over distributed shared memory in split order (deterministic), and a second cluster
// barrier keeps every block's sums alive until all are read. Unsplit, the block finishes the tile
// from its own sums.
//
// Numerics: products of bf16 values are exact in fp32; sums in fp32 (tensor-core order within a
// wgmma, K order within a split, split order across splits); bias or residual added in fp32; one
// rounding to bf16.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/check.h"
#include "core/cuda_check.h"
#include "ops/common/cuda_async.cuh"
#include "ops/common/cuda_barrier.cuh"
#include "ops/common/cuda_launch.cuh"
#include "ops/common/cuda_phase_trace.cuh"
#include "ops/common/cuda_tensor_map.cuh"
#include "ops/common/cuda_wgmma.cuh"
#include "ops/matmul/matmul_wide.h"

// wgmma exists on sm_90a only (CMakePresets.json builds 90a).
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "matmul_wide_cuda.cu needs the sm_90a target (wgmma): set CMAKE_CUDA_ARCHITECTURES=90a"
#endif

namespace roofline {

namespace {

constexpr int kTileN = static_cast<int>(kMatmulWideTileN);
constexpr int kTileM = static_cast<int>(kMatmulWideMaxM);
constexpr int kChunkK = static_cast<int>(kMatmulWideChunkK);
constexpr int kConsumers = 128;  // one warpgroup
constexpr int kThreads = kConsumers + 32;
constexpr int kWBytes = kTileN * kChunkK * 2;  // 16 KB
constexpr int kXBytes = kTileM * kChunkK * 2;  // 8 KB
constexpr int kStageBytes = kWBytes + kXBytes;
// The sums left for the merge: [64][128] f32, rows padded by 4 floats (no bank conflicts between
// the 8 rows a warp's float2 stores touch).
constexpr int kSumStride = kTileN + 4;
constexpr int kSumBytes = kTileM * kSumStride * 4;
// The ring, 1024-byte aligned for the swizzle (the dynamic shared memory is asked 1 KB larger),
// then the mbarriers.
constexpr int kStages = kMatmulWideStages;
constexpr int kRingBytes = kStages * kStageBytes;
constexpr int kSmemBytes = 1024 + kRingBytes + 2 * kStages * 8;
static_assert(kSumBytes <= kRingBytes, "the merge's sums reuse the ring");
static_assert(kChunkK * 2 == 128, "a stage row is one 128-byte swizzle row");
static_assert(kWBytes % 1024 == 0 && kXBytes % 1024 == 0, "boxes start 1024-byte aligned");
// The named barrier of the consumer warpgroup (0 is __syncthreads).
constexpr int kConsumerBarrier = 1;

struct WideArgs {
  const __nv_bfloat16* bias;      // [n] or null
  const __nv_bfloat16* residual;  // [m, n] row stride y_row_stride, or null; may equal y
  __nv_bfloat16* y;               // [m, n] row stride y_row_stride
  int m;
  int n;
  int64_t y_row_stride;
  int num_chunks;
  int chunks_per_split;
  int splits;
#if defined(ROOFLINE_PHASE_TRACE)
  uint64_t* trace;  // the launch's phase records, or nullptr
#endif
};

// The phase marks of a trace build (matmul_skinny_trace_bench trace wide; phase_trace.h), in order,
// taken by the block's thread 0 (a consumer).
enum WideMark : int {
  kMarkWait = 1,    // past the PDL wait
  kMarkFirstStage,  // the first stage landed
  kMarkStreamed,    // every stage multiplied, the last multiply drained
  kMarkSumsShared,  // the sums in shared memory, the (cluster) barrier passed
  kMarkOutputs,     // this block's outputs written
  kMarkDone,        // released by the cluster's last barrier (split launches)
};

__global__ void __launch_bounds__(kThreads, 1)
    matmul_wide_kernel(const __grid_constant__ CUtensorMap w_map,
                       const __grid_constant__ CUtensorMap x_map, const WideArgs a) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* ring = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~static_cast<uintptr_t>(1023));
  uint64_t* full = reinterpret_cast<uint64_t*>(ring + kRingBytes);
  uint64_t* empty = full + kStages;
  cuda::PhaseTrace trace(cuda::phase_trace_records(a));

  const int tile = static_cast<int>(blockIdx.x) / a.splits;
  const int split = static_cast<int>(blockIdx.x) % a.splits;
  const int chunk0 = split * a.chunks_per_split;
  const int chunks = min(a.chunks_per_split, a.num_chunks - chunk0);
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      cuda::mbarrier_init(&full[s], 1);
      cuda::mbarrier_init(&empty[s], kConsumers / 32);
    }
    cuda::fence_mbarrier_init_cluster();  // visible to the copy engine (the async proxy)
  }
  __syncthreads();

  if (warp == kConsumers / 32) {
    // The producer: its first lane issues every copy; the warp's other lanes leave.
    if (lane != 0) return;
    const auto issue_weights = [&](int i) {
      const int s = i % kStages;
      cuda::tma_load_3d(ring + s * kStageBytes, &w_map, (chunk0 + i) * kChunkK, tile * kTileN, 0,
                        &full[s]);
    };
    const auto issue_x = [&](int i) {
      const int s = i % kStages;
      cuda::tma_load_3d(ring + s * kStageBytes + kWBytes, &x_map, (chunk0 + i) * kChunkK, 0, 0,
                        &full[s]);
    };
    // x's box is its m rows exactly. A 64-row box past the tensor's rows is filled with zeros by
    // the copy engine, which is slow: the stage loop at m = 1 streamed gate_up at 75 % of the copy
    // ceiling with a 64-row box of x, 96 % at m = 64 (bench/results/2026-12-01-wide-stream-k.md).
    const unsigned stage_bytes = static_cast<unsigned>(kWBytes + a.m * kChunkK * 2);
    const int prefetch = min(chunks, kStages);
    for (int i = 0; i < prefetch; ++i) {
      cuda::mbarrier_arrive_expect_tx(&full[i], stage_bytes);
      issue_weights(i);
    }
    cuda::pdl_wait();  // x is the previous kernel's output
    cuda::pdl_launch_dependents();
    for (int i = 0; i < prefetch; ++i) issue_x(i);
    for (int i = prefetch; i < chunks; ++i) {
      const int s = i % kStages;
      cuda::mbarrier_wait(&empty[s], static_cast<unsigned>((i / kStages - 1) & 1));
      cuda::mbarrier_arrive_expect_tx(&full[s], stage_bytes);
      issue_weights(i);
      issue_x(i);
    }
    return;
  }

  // The consumers. The bias, the residual and y may belong to the kernel before this one.
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  trace.mark(kMarkWait);
  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
  const unsigned ring_addr = static_cast<unsigned>(__cvta_generic_to_shared(ring));
  for (int i = 0; i < chunks; ++i) {
    const int s = i % kStages;
    cuda::mbarrier_wait(&full[s], static_cast<unsigned>((i / kStages) & 1));
    if (i == 0) trace.mark(kMarkFirstStage);
    const unsigned w_addr = ring_addr + s * kStageBytes;
    const unsigned x_addr = w_addr + kWBytes;
    cuda::fence_registers(acc);
    cuda::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kChunkK / 16; ++kk) {
      // A k16 step within the 128-byte swizzle row moves both starts by 32 bytes.
      cuda::wgmma_m64n128k16_ss(acc, cuda::wgmma_desc(x_addr + kk * 32, 16, 1024),
                                cuda::wgmma_desc(w_addr + kk * 32, 16, 1024), 1);
    }
    cuda::wgmma_commit();
    cuda::wgmma_wait<1>();  // the previous stage's multiplies are done: hand it back
    if (i > 0 && lane == 0) cuda::mbarrier_arrive(&empty[(i - 1) % kStages]);
  }
  cuda::wgmma_wait<0>();
  cuda::fence_registers(acc);
  trace.mark(kMarkStreamed);

  // The sums into the consumed ring: the m16n8 accumulator layout per warp, D[token][weight row].
  // Every stage's copies have landed (the consumers waited on each) and every multiply is done.
  float* sums = reinterpret_cast<float*>(ring);
  {
    const int r0 = warp * 16 + lane / 4;
    const int c0 = 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < kTileN / 8; ++j) {
      *reinterpret_cast<float2*>(sums + r0 * kSumStride + 8 * j + c0) =
          make_float2(acc[4 * j], acc[4 * j + 1]);
      *reinterpret_cast<float2*>(sums + (r0 + 8) * kSumStride + 8 * j + c0) =
          make_float2(acc[4 * j + 2], acc[4 * j + 3]);
    }
  }
  if (a.splits > 1) {
    cuda::cluster_sync();  // every split's sums written and visible to the cluster
  } else {
    cuda::named_barrier_sync(kConsumerBarrier, kConsumers);
  }
  trace.mark(kMarkSumsShared);

  // This block's share of the tile's outputs: items of 4 columns of one row, split evenly.
  const int items = a.m * (kTileN / 4);
  const int begin = items * split / a.splits;
  const int end = items * (split + 1) / a.splits;
  const int col_base = tile * kTileN;
  for (int item = begin + static_cast<int>(threadIdx.x); item < end; item += kConsumers) {
    const int row = item / (kTileN / 4);
    const int c = (item % (kTileN / 4)) * 4;
    float4 v;
    if (a.splits > 1) {
      v = cuda::cluster_load_f32x4(sums + row * kSumStride + c, 0);
      for (int sp = 1; sp < a.splits; ++sp) {
        const float4 o = cuda::cluster_load_f32x4(sums + row * kSumStride + c, sp);
        v.x += o.x;
        v.y += o.y;
        v.z += o.z;
        v.w += o.w;
      }
    } else {
      v = *reinterpret_cast<const float4*>(sums + row * kSumStride + c);
    }
    const float vals[4] = {v.x, v.y, v.z, v.w};
    const int64_t row_offset = static_cast<int64_t>(row) * a.y_row_stride;
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      const int col = col_base + c + t;
      if (col >= a.n) break;
      float out = vals[t];
      if (a.bias != nullptr) out += __bfloat162float(a.bias[col]);
      if (a.residual != nullptr) out += __bfloat162float(a.residual[row_offset + col]);
      a.y[row_offset + col] = __float2bfloat16_rn(out);
    }
  }
  trace.mark(kMarkOutputs);
  if (a.splits > 1) cuda::cluster_sync();  // no block's sums vanish while another reads them
  trace.mark(kMarkDone);
  trace.finish();
}

void configure_kernel() {
  static const bool configured = [] {
    ROOFLINE_CUDA_CHECK(cudaFuncSetAttribute(
        matmul_wide_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    return true;
  }();
  (void)configured;
}

// A bf16 [rows, k] row-major matrix (row stride k) as a rank-3 tensor map of 64 × box_rows boxes.
void encode_rows(CUtensorMap* map, const void* base, int64_t rows, int64_t k, uint32_t box_rows,
                 CUtensorMapL2promotion promotion) {
  const uint64_t dims[3] = {static_cast<uint64_t>(k), static_cast<uint64_t>(rows), 1};
  const uint64_t row_bytes = static_cast<uint64_t>(k) * 2;
  const uint32_t box[3] = {static_cast<uint32_t>(kChunkK), box_rows, 1};
  ROOFLINE_CHECK_MSG(
      cuda::encode_bf16_tensor_map_3d(map, base, dims, row_bytes,
                                      row_bytes * static_cast<uint64_t>(rows), box, promotion),
      "the driver would not encode a tensor map for the wide matmul");
}

}  // namespace

#if defined(ROOFLINE_PHASE_TRACE)
PhaseTraceRecorder& matmul_wide_phase_trace() {
  static PhaseTraceRecorder recorder;
  return recorder;
}
#endif

MatmulWideLaunch matmul_wide_cuda_launch(int64_t m, int64_t n, int64_t k, int requested_splits) {
  int device = 0;
  ROOFLINE_CUDA_CHECK(cudaGetDevice(&device));
  int num_sms = 0;
  ROOFLINE_CUDA_CHECK(cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device));
  configure_kernel();  // the occupancy query sees the shared memory
  int64_t clusters[kMatmulWideMaxSplits + 1] = {};
  for (int s = 2; s <= kMatmulWideMaxSplits; ++s)
    clusters[s] =
        cuda::max_active_clusters<matmul_wide_kernel, kThreads, kSmemBytes, kMatmulWideMaxSplits>(
            s, "ROOFLINE_WIDE_CLUSTER");
  return matmul_wide_launch(m, n, k, num_sms, requested_splits, clusters);
}

void matmul_wide_cuda(const MatmulParams& p, MatmulEpilogue epilogue,
                      const MatmulWideLaunch& launch, CudaStream stream) {
  const char* unsupported = matmul_wide_unsupported_reason(p, epilogue);
  ROOFLINE_CHECK_MSG(unsupported == nullptr, unsupported);
  ROOFLINE_CHECK(p.y != nullptr);
  ROOFLINE_CHECK_MSG(matmul_wide_launch_valid(launch, p.n, p.k),
                     "the wide launch was planned for another problem");
  configure_kernel();

  CUtensorMap w_map;
  CUtensorMap x_map;
  // The weights stream once: each request widened to 256 bytes in L2. x is re-read by every tile.
  encode_rows(&w_map, p.w, p.n, p.k, static_cast<uint32_t>(kTileN),
              CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
  encode_rows(&x_map, p.x, p.m, p.k, static_cast<uint32_t>(p.m),
              CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
  WideArgs a;
  a.bias = epilogue == MatmulEpilogue::kBias ? static_cast<const __nv_bfloat16*>(p.bias) : nullptr;
  a.residual = epilogue == MatmulEpilogue::kResidual ? static_cast<const __nv_bfloat16*>(p.residual)
                                                     : nullptr;
  a.y = static_cast<__nv_bfloat16*>(p.y);
  a.m = static_cast<int>(p.m);
  a.n = static_cast<int>(p.n);
  a.y_row_stride = p.y_row_stride;
  a.num_chunks = static_cast<int>(launch.num_chunks);
  a.chunks_per_split = static_cast<int>(launch.chunks_per_split);
  a.splits = launch.splits;
#if defined(ROOFLINE_PHASE_TRACE)
  a.trace = matmul_wide_phase_trace().next(static_cast<int>(launch.grid));
#endif
  cuda::launch_pdl_clustered(matmul_wide_kernel, dim3(static_cast<unsigned>(launch.grid)),
                             dim3(kThreads), static_cast<size_t>(kSmemBytes),
                             static_cast<cudaStream_t>(stream),
                             static_cast<unsigned>(launch.splits), w_map, x_map, a);
  ROOFLINE_CUDA_LAUNCH_CHECK(static_cast<cudaStream_t>(stream));
}

}  // namespace roofline
