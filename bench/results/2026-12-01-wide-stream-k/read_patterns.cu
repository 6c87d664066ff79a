// Read-pattern experiment for the wide decode GEMM (issue 13): how fast can 132 SMs stream a
// row-major bf16 weight matrix [n][k] into a shared-memory ring, by access pattern, with no
// multiply at all? Each block streams a contiguous range of "units" (one unit = one ring stage
// of 16 KB), tile-major: unit u = (tile u / C, chunk-group u % C), a tile being `rows` weight rows.
//   tma R G : TMA boxes of R rows x 64 bf16 (128 B, 128B swizzle), G boxes of consecutive chunks a stage
//   tiled   : TMA boxes of 16 KB contiguous (a pre-tiled copy of W)
//   cpa R B : cp.async by 128 threads, R rows x B bytes a stage
// Usage: wpat  (runs the whole grid, prints TB/s a pattern and shape)
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <vector>

#include "ops/common/cuda_async.cuh"
#include "ops/common/cuda_barrier.cuh"
#include "ops/common/cuda_tensor_map.cuh"

using namespace roofline;

#define CK(x)                                                                  \
  do {                                                                         \
    cudaError_t e = (x);                                                       \
    if (e != cudaSuccess) {                                                    \
      std::printf("CUDA %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

constexpr int kStageBytes = 16384;

struct Args {
  long long units;     // total stages of the whole matrix
  int per_tile;        // stages per tile (C)
  int rows;            // weight rows per tile
  int groups;          // TMA: boxes a stage (consecutive 64-col chunks); cpa: bytes per row
  int mode;            // 0 tma rows-major, 1 tiled, 2 cp.async
  const unsigned char* w;  // cp.async: base of W
  long long row_bytes;     // cp.async: k * 2
  int stages;
  unsigned* sink;
};

__global__ void __launch_bounds__(160) stream_kernel(const __grid_constant__ CUtensorMap map,
                                                     const Args a) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* ring = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~static_cast<uintptr_t>(1023));
  uint64_t* full = reinterpret_cast<uint64_t*>(ring + a.stages * kStageBytes);
  uint64_t* empty = full + a.stages;
  const long long G = gridDim.x;
  const long long u0 = a.units * blockIdx.x / G;
  const long long u1 = a.units * (blockIdx.x + 1) / G;
  const int n = static_cast<int>(u1 - u0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const bool cpa = a.mode == 2;
  if (threadIdx.x == 0) {
    for (int s = 0; s < a.stages; ++s) {
      cuda::mbarrier_init(&full[s], cpa ? 128 : 1);
      cuda::mbarrier_init(&empty[s], 1);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if (warp == 4) {
    // consumer: one lane waits and releases
    if (lane != 0) return;
    unsigned acc = 0;
    for (int i = 0; i < n; ++i) {
      const int s = i % a.stages;
      cuda::mbarrier_wait(&full[s], (i / a.stages) & 1);
      acc += ring[s * kStageBytes + (i & 1023)];
      cuda::mbarrier_arrive(&empty[s]);
    }
    if (acc == 0xdeadbeef) a.sink[0] = acc;
    return;
  }
  if (!cpa) {
    if (threadIdx.x != 0) return;
    for (int i = 0; i < n; ++i) {
      const int s = i % a.stages;
      if (i >= a.stages) cuda::mbarrier_wait(&empty[s], ((i / a.stages) - 1) & 1);
      cuda::mbarrier_arrive_expect_tx(&full[s], kStageBytes);
      const long long u = u0 + i;
      const int tile = static_cast<int>(u / a.per_tile);
      const int cg = static_cast<int>(u % a.per_tile);
      if (a.mode == 1) {
        cuda::tma_load_3d(ring + s * kStageBytes, &map, 0, 0, static_cast<int>(u), &full[s]);
      } else {
        const int box_bytes = kStageBytes / a.groups;
        for (int g = 0; g < a.groups; ++g)
          cuda::tma_load_3d(ring + s * kStageBytes + g * box_bytes, &map, (cg * a.groups + g) * 64,
                            tile * a.rows, 0, &full[s]);
      }
    }
    return;
  }
  // cp.async: 128 threads, stage = rows x (groups) bytes; chunk = 16 B
  const int bpr = a.groups;
  const int chunks_per_row = bpr / 16;
  const int t = threadIdx.x;
  for (int i = 0; i < n; ++i) {
    const int s = i % a.stages;
    if (i >= a.stages) cuda::mbarrier_wait(&empty[s], ((i / a.stages) - 1) & 1);
    const long long u = u0 + i;
    const long long tile = u / a.per_tile;
    const long long cg = u % a.per_tile;
    for (int c = t; c < kStageBytes / 16; c += 128) {
      const int r = c / chunks_per_row, cc = c % chunks_per_row;
      const unsigned char* src = a.w + (tile * a.rows + r) * a.row_bytes + cg * bpr + cc * 16;
      cuda::cp_async_16(ring + s * kStageBytes + c * 16, src, true);
    }
    cuda::cp_async_mbarrier_arrive(&full[s]);
  }
  cuda::cp_async_wait_all();
}

struct Shape {
  const char* name;
  long long n, k;
};

int main() {
  setvbuf(stdout, nullptr, _IONBF, 0);
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const Shape shapes[] = {{"gate_up", 28672, 4096}, {"down", 4096, 14336}, {"o", 4096, 4096},
                          {"qkv", 6144, 4096}};
  CK(cudaFuncSetAttribute(stream_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  unsigned* sink;
  CK(cudaMalloc(&sink, 4));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  struct Variant {
    const char* name;
    int mode, rows, groups, stages, per_sm;
  };
  const Variant variants[] = {
      {"tma 128x128B (wide today), 8 st, 1/SM", 0, 128, 1, 8, 1},
      {"tma 128x128B, 4 st, 2/SM", 0, 128, 1, 4, 2},
      {"tma 64x128B x2 chunks, 8 st, 1/SM", 0, 64, 2, 8, 1},
      {"tma 32x128B x4 chunks, 8 st, 1/SM", 0, 32, 4, 8, 1},
      {"tma 16x128B x8 chunks, 8 st, 1/SM", 0, 16, 8, 8, 1},
      {"tiled 16KB contiguous, 8 st, 1/SM", 1, 128, 1, 8, 1},
      {"tiled 16KB contiguous, 4 st, 2/SM", 1, 128, 1, 4, 2},
      {"cp.async 16 rows x 1KB, 8 st, 1/SM", 2, 16, 1024, 8, 1},
      {"cp.async 16 rows x 1KB, 4 st, 2/SM", 2, 16, 1024, 4, 2},
      {"cp.async 128 rows x 128B, 8 st, 1/SM", 2, 128, 128, 8, 1},
  };
  for (const Shape& sh : shapes) {
    const size_t bytes = static_cast<size_t>(sh.n * sh.k * 2);
    const int copies = bytes > (200u << 20) ? 1 : 4;
    std::vector<unsigned char*> w(copies);
    for (auto& p : w) {
      CK(cudaMalloc(&p, bytes));
      CK(cudaMemset(p, 1, bytes));
    }
    for (const Variant& v : variants) {
      const long long units = static_cast<long long>(bytes / kStageBytes);
      Args a{};
      a.units = units;
      a.rows = v.mode == 1 ? 128 : v.rows;
      a.groups = v.groups;
      a.mode = v.mode;
      a.row_bytes = sh.k * 2;
      a.stages = v.stages;
      a.sink = sink;
      // stages per tile: tile of `rows` rows, each stage covers (stage bytes / rows) bytes per row
      const long long bytes_per_row_per_stage = kStageBytes / a.rows;
      a.per_tile = static_cast<int>(sh.k * 2 / bytes_per_row_per_stage);
      std::vector<CUtensorMap> maps(copies);
      for (int c = 0; c < copies; ++c) {
        if (v.mode == 1) {
          const uint64_t dims[3] = {64, 128, static_cast<uint64_t>(units)};
          const uint32_t box[3] = {64, 128, 1};
          if (!cuda::encode_bf16_tensor_map_3d(&maps[c], w[c], dims, 128, kStageBytes, box,
                                               CU_TENSOR_MAP_L2_PROMOTION_NONE)) {
            std::printf("encode failed\n");
            return 1;
          }
        } else if (v.mode == 0) {
          const uint64_t dims[3] = {static_cast<uint64_t>(sh.k), static_cast<uint64_t>(sh.n), 1};
          const uint32_t box[3] = {64, static_cast<uint32_t>(v.rows), 1};
          if (!cuda::encode_bf16_tensor_map_3d(&maps[c], w[c], dims, sh.k * 2, bytes, box,
                                               CU_TENSOR_MAP_L2_PROMOTION_NONE)) {
            std::printf("encode failed\n");
            return 1;
          }
        } else {
          std::memset(&maps[c], 0, sizeof(CUtensorMap));
        }
      }
      const int grid = sms * v.per_sm;
      // force per_sm blocks per SM by shared memory: 1/SM asks for > half of the SM
      const int smem = v.per_sm == 1 ? 120 * 1024 + 1024 + 256 : v.stages * kStageBytes + 1024 + 256;
      const int smem_req = std::max(smem, v.stages * kStageBytes + 1024 + 256);
      auto launch = [&](int c) {
        a.w = w[c];
        stream_kernel<<<grid, 160, smem_req>>>(maps[c], a);
      };
      for (int i = 0; i < 3; ++i) launch(i % copies);
      CK(cudaDeviceSynchronize());
      std::vector<float> ms;
      for (int r = 0; r < 15; ++r) {
        CK(cudaEventRecord(e0));
        for (int i = 0; i < 8; ++i) launch(i % copies);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float t = 0;
        CK(cudaEventElapsedTime(&t, e0, e1));
        ms.push_back(t / 8);
      }
      CK(cudaGetLastError());
      std::sort(ms.begin(), ms.end());
      const double med = ms[ms.size() / 2];
      std::printf("%-8s %-42s %7.2f us  %5.2f TB/s  %5.1f %%\n", sh.name, v.name, med * 1e3,
                  bytes / (med * 1e-3) / 1e12, 100.0 * bytes / (med * 1e-3) / 4.28e12);
    }
    for (auto& p : w) CK(cudaFree(p));
  }
  return 0;
}
