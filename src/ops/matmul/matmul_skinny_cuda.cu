// matmul_skinny_cuda: y[m, n] = x[m, k] · W[n, k]ᵀ (+ bias[n] | + residual[m, n]) for decode's
// m <= 64 rows: a weight-streaming GEMM, bf16 in and out, fp32 accumulation on the tensor cores.
//
// Bound: it must read n·k·2 bytes of weights and does 2·m·n·k FLOPs: at m <= 64 that is <= 64
// FLOP/byte, far below the H200's ~180 FLOP/byte ridge — memory bound; the goal is the 4.28 TB/s
// copy ceiling. x (m·k·2 bytes) is re-read once per column block from L2, i.e. m / 32 times the
// weight bytes in L2 traffic (3 % at m = 1, 25 % at m = 8, 2x at m = 64: why large m may lose to
// cuBLASLt, and why the selector measures).
//
// Algorithm. The grid is (column blocks, K splits). A block of 4 warps owns 32 weight rows (two
// 16-row mma tiles) and the K chunks of its split; its warps take interleaved 2-chunk steps, so the
// four warps together read 4·2·64 = 512 contiguous bytes of each weight row per step. Each thread
// issues its 8 weight loads (4 rows × 2 chunks, 16 bytes each, L1-bypassing, 256-byte L2 prefetch)
// before it multiplies, so 128 bytes per thread are in flight.
//   MMA without shared memory: mma.sync m16n8k16 with the weight tile as A (16 weight rows × 16 k)
// and x as B (16 k × 8 tokens). The sum over k does not care in which order k is enumerated as
// long as A and B agree, so we pick the order that makes both fragments plain 16-byte loads: lane
// (g = lane / 4, t = lane % 4) loads W[row g][8t, 8t + 8) and W[row g + 8][8t, 8t + 8) of a 32-wide
// chunk and x[token g][8t, 8t + 8); PTX's logical columns {2t, 2t+1} / {2t+8, 2t+9} of the first
// MMA map to physical 8t + {0,1} / {2,3}, and the second MMA's to 8t + {4,5} / {6,7}.
//   Reduction: the 4 warps' fp32 accumulators meet in shared memory. With one split the block then
// writes y. With several, every block writes its fp32 partial [split][m][n] (2·splits·m / k of the
// weight bytes, L2-resident: 0.2 % at m = 1, 16 % at m = 64 for llama3-8b's o with 5 splits) to
// the context's workspace, fences, and bumps the column block's arrival counter; the last block to
// arrive sums the partials in split order (deterministic) from L2 and writes y, then resets the
// counter to zero, so the next launch — or a CUDA-graph replay — starts clean. There is no second
// kernel and no second pass over memory.
//
// Numerics: products of bf16 values are exact in fp32; sums in fp32 (tensor-core order within an
// MMA, chunk order within a warp, warp order within a block, split order across blocks); bias or
// residual added in fp32; one rounding to bf16.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/check.h"
#include "core/cuda_check.h"
#include "ops/matmul/matmul_skinny.h"

namespace roofline {

namespace {

constexpr int kThreads = kMatmulSkinnyWarps * 32;
constexpr int kTilesPerWarp = static_cast<int>(kMatmulSkinnyBlockRows / 16);  // 16-row mma tiles
constexpr int kChunkK = static_cast<int>(kMatmulSkinnyChunkK);
constexpr int kUnroll = kMatmulSkinnyUnroll;

static_assert(kChunkK == 32, "a chunk is 4 lanes × 8 bf16: the fragment layout above");
static_assert(kMatmulSkinnyBlockRows % 16 == 0, "the block's rows are whole 16-row mma tiles");

struct SkinnyArgs {
  const __nv_bfloat16* x;         // [m, k]
  const __nv_bfloat16* w;         // [n, k]
  const __nv_bfloat16* bias;      // [n] or null
  const __nv_bfloat16* residual;  // [m, n] row stride y_row_stride, or null; may equal y
  __nv_bfloat16* y;               // [m, n] row stride y_row_stride
  float* partials;                // [splits, m, n] when splits > 1
  uint32_t* counters;             // [n_blocks] when splits > 1, zero between launches
  int m;
  int n;
  int k;
  int64_t y_row_stride;
  int splits;
  int chunks_per_split;
  int num_chunks;
};

// 16 bytes of weights that no other block reads: skip L1, prefetch the rest of the 256-byte L2
// line pair (the next chunks of the same row).
__device__ __forceinline__ uint4 load_weights(const __nv_bfloat16* ptr) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(ptr));
  return v;
}

// 16 bytes of x: read by every column block, so let L1 and L2 keep it.
__device__ __forceinline__ uint4 load_x(const __nv_bfloat16* ptr) {
  return __ldg(reinterpret_cast<const uint4*>(ptr));
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// kMTiles: 8-token mma tiles of x (1, 2, 4, 8: m rounded up to 8 · a power of two).
template <int kMTiles>
__global__ void __launch_bounds__(kThreads) matmul_skinny_kernel(const SkinnyArgs a) {
  static_assert(kMTiles == 1 || kMTiles == 2 || kMTiles == 4 || kMTiles == 8, "m tiles");
  constexpr int kTokens = kMTiles * 8;
  constexpr int kRows = static_cast<int>(kMatmulSkinnyBlockRows);
  // +1: the reduction below reads along rows; an odd stride keeps those reads conflict-free.
  __shared__ float red[kMatmulSkinnyWarps][kRows][kTokens + 1];
  __shared__ bool is_last;

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int g = lane / 4;
  const int t = lane % 4;
  const int row0 = blockIdx.x * kRows;
  const int split = blockIdx.y;
  const int chunk_begin = split * a.chunks_per_split;
  const int chunk_end = min(chunk_begin + a.chunks_per_split, a.num_chunks);

  // This lane's 4 weight rows: tile j, rows g and g + 8. Rows past n read nothing (zeros).
  const __nv_bfloat16* w_row[kTilesPerWarp][2];
  bool row_ok[kTilesPerWarp][2];
#pragma unroll
  for (int j = 0; j < kTilesPerWarp; ++j) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + j * 16 + h * 8 + g;
      row_ok[j][h] = row < a.n;
      w_row[j][h] = a.w + static_cast<int64_t>(row_ok[j][h] ? row : 0) * a.k + 8 * t;
    }
  }
  // This lane's x rows: token tile mt, token g. Tokens past m read nothing.
  const __nv_bfloat16* x_row[kMTiles];
  bool token_ok[kMTiles];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
    const int token = mt * 8 + g;
    token_ok[mt] = token < a.m;
    x_row[mt] = a.x + static_cast<int64_t>(token_ok[mt] ? token : 0) * a.k + 8 * t;
  }

  float acc[kTilesPerWarp][kMTiles][4];
#pragma unroll
  for (int j = 0; j < kTilesPerWarp; ++j)
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[j][mt][e] = 0.0f;

  const uint4 zero = make_uint4(0, 0, 0, 0);
  for (int c0 = chunk_begin + warp * kUnroll; c0 < chunk_end; c0 += kMatmulSkinnyWarps * kUnroll) {
    // All weight loads of the step first: they are what must be in flight.
    uint4 wv[kUnroll][kTilesPerWarp][2];
    bool k_ok[kUnroll];
    int kk[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      kk[u] = (c0 + u) * kChunkK;
      // k % 8 == 0, so an 8-element group is wholly inside K or wholly past it.
      k_ok[u] = c0 + u < chunk_end && kk[u] + 8 * t < a.k;
#pragma unroll
      for (int j = 0; j < kTilesPerWarp; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          wv[u][j][h] = (k_ok[u] && row_ok[j][h]) ? load_weights(w_row[j][h] + kk[u]) : zero;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        const uint4 xv = (k_ok[u] && token_ok[mt]) ? load_x(x_row[mt] + kk[u]) : zero;
#pragma unroll
        for (int j = 0; j < kTilesPerWarp; ++j) {
          const uint4 lo = wv[u][j][0];  // row g
          const uint4 hi = wv[u][j][1];  // row g + 8
          mma_bf16(acc[j][mt], lo.x, hi.x, lo.y, hi.y, xv.x, xv.y);
          mma_bf16(acc[j][mt], lo.z, hi.z, lo.w, hi.w, xv.z, xv.w);
        }
      }
    }
  }

  // C fragment: acc[e] is (weight row g + 8·(e / 2), token 2t + e % 2) of its tile.
#pragma unroll
  for (int j = 0; j < kTilesPerWarp; ++j)
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        red[warp][j * 16 + g + 8 * (e / 2)][mt * 8 + 2 * t + e % 2] = acc[j][mt][e];
  __syncthreads();

  // Element i of the block's [m, 32] output: consecutive threads take consecutive columns, so the
  // stores of a row are contiguous.
  const int num_out = a.m * kRows;
  const auto epilogue = [&](int token, int col, float sum) {
    if (a.bias) sum += __bfloat162float(a.bias[col]);
    const int64_t at = static_cast<int64_t>(token) * a.y_row_stride + col;
    if (a.residual) sum += __bfloat162float(a.residual[at]);
    a.y[at] = __float2bfloat16(sum);
  };

  if (a.splits == 1) {
    for (int i = threadIdx.x; i < num_out; i += kThreads) {
      const int token = i / kRows;
      const int r = i % kRows;
      const int col = row0 + r;
      if (col >= a.n) continue;
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < kMatmulSkinnyWarps; ++w) sum += red[w][r][token];
      epilogue(token, col, sum);
    }
    return;
  }

  float* my_partial = a.partials + static_cast<int64_t>(split) * a.m * a.n;
  for (int i = threadIdx.x; i < num_out; i += kThreads) {
    const int token = i / kRows;
    const int r = i % kRows;
    const int col = row0 + r;
    if (col >= a.n) continue;
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kMatmulSkinnyWarps; ++w) sum += red[w][r][token];
    __stcg(my_partial + static_cast<int64_t>(token) * a.n + col, sum);
  }
  // Release: every thread's partial is visible device-wide before the block announces itself.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    const uint32_t arrived = atomicAdd(a.counters + blockIdx.x, 1u);
    is_last = arrived == static_cast<uint32_t>(a.splits - 1);
  }
  __syncthreads();
  if (!is_last) return;
  // Acquire: the other splits' partials (read from L2, never from a stale L1 line).
  __threadfence();
  for (int i = threadIdx.x; i < num_out; i += kThreads) {
    const int token = i / kRows;
    const int col = row0 + i % kRows;
    if (col >= a.n) continue;
    float sum = 0.0f;
    for (int s = 0; s < a.splits; ++s)
      sum += __ldcg(a.partials + (static_cast<int64_t>(s) * a.m + token) * a.n + col);
    epilogue(token, col, sum);
  }
  // Every split has arrived, so no block of this launch touches the counter again.
  if (threadIdx.x == 0) a.counters[blockIdx.x] = 0;
}

}  // namespace

void matmul_skinny_cuda(const MatmulParams& p, MatmulEpilogue epilogue,
                        const MatmulSkinnyLaunch& launch, const MatmulSkinnyWorkspace& workspace,
                        CudaStream stream) {
  const char* unsupported = matmul_skinny_unsupported_reason(p, epilogue);
  ROOFLINE_CHECK_MSG(unsupported == nullptr, unsupported);
  ROOFLINE_CHECK(p.y != nullptr);
  const MatmulSkinnyLaunch expected = matmul_skinny_launch(p.m, p.n, p.k, 1, launch.splits);
  ROOFLINE_CHECK_MSG(launch.m_tiles == expected.m_tiles && launch.n_blocks == expected.n_blocks &&
                         launch.num_chunks == expected.num_chunks &&
                         launch.splits == expected.splits &&
                         launch.chunks_per_split == expected.chunks_per_split,
                     "the skinny launch was planned for another problem");
  ROOFLINE_CHECK(launch.splits == 1 ||
                 (workspace.partials != nullptr && workspace.counters != nullptr));

  SkinnyArgs a;
  a.x = static_cast<const __nv_bfloat16*>(p.x);
  a.w = static_cast<const __nv_bfloat16*>(p.w);
  a.bias = epilogue == MatmulEpilogue::kBias ? static_cast<const __nv_bfloat16*>(p.bias) : nullptr;
  a.residual = epilogue == MatmulEpilogue::kResidual ? static_cast<const __nv_bfloat16*>(p.residual)
                                                     : nullptr;
  a.y = static_cast<__nv_bfloat16*>(p.y);
  a.partials = workspace.partials;
  a.counters = workspace.counters;
  a.m = static_cast<int>(p.m);
  a.n = static_cast<int>(p.n);
  a.k = static_cast<int>(p.k);
  a.y_row_stride = p.y_row_stride;
  a.splits = launch.splits;
  a.chunks_per_split = static_cast<int>(launch.chunks_per_split);
  a.num_chunks = static_cast<int>(launch.num_chunks);

  const dim3 grid(static_cast<unsigned>(launch.n_blocks), static_cast<unsigned>(launch.splits));
  switch (launch.m_tiles) {
    case 1:
      matmul_skinny_kernel<1><<<grid, kThreads, 0, stream>>>(a);
      break;
    case 2:
      matmul_skinny_kernel<2><<<grid, kThreads, 0, stream>>>(a);
      break;
    case 4:
      matmul_skinny_kernel<4><<<grid, kThreads, 0, stream>>>(a);
      break;
    case 8:
      matmul_skinny_kernel<8><<<grid, kThreads, 0, stream>>>(a);
      break;
    default:
      ROOFLINE_CHECK_MSG(false, "skinny matmul: m_tiles must be 1, 2, 4 or 8");
  }
  ROOFLINE_CUDA_LAUNCH_CHECK(stream);
}

}  // namespace roofline
