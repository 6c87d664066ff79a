// Runs 3 and 7 of bench/results/2026-12-01-wide-stream-k.md: what slows the wide kernel's stream
// below the pure copy pattern? The wide kernel's ring (8 stages of 16 KB W [+ x's box]) over 132
// balanced ranges of gate_up / down / o, adding its pieces one at a time: x boxes, the consumer
// holding a stage until the next one's multiplies are issued, the wgmma themselves, 256 B L2
// promotion on W; then zero against random data.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ops/common/cuda_async.cuh"
#include "ops/common/cuda_barrier.cuh"
#include "ops/common/cuda_tensor_map.cuh"
#include "ops/common/cuda_wgmma.cuh"

using namespace roofline;

#define CK(x)                                                                               \
  do {                                                                                      \
    cudaError_t e = (x);                                                                    \
    if (e != cudaSuccess) {                                                                 \
      std::printf("CUDA %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__);        \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

// Fills n bf16 with pseudo-random values in about [-1, 1] (a hash of the index and seed).
__global__ void fill_random(unsigned short* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    const float v = (static_cast<float>(h & 0xffff) / 32768.0f) - 1.0f;
    p[i] = static_cast<unsigned short>(__float_as_uint(v) >> 16);
  }
}

constexpr int kW = 16384, kX = 8192, kStage = kW + kX, kStages = 8;

struct Args {
  long long units;
  int per_tile;
  int load_x, hold, mma, m;
  unsigned* sink;
};

template <bool kMma>
__global__ void __launch_bounds__(160, 1) k(const __grid_constant__ CUtensorMap wm,
                                            const __grid_constant__ CUtensorMap xm, const Args a) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* ring = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~static_cast<uintptr_t>(1023));
  uint64_t* full = reinterpret_cast<uint64_t*>(ring + kStages * kStage);
  uint64_t* empty = full + kStages;
  const long long G = gridDim.x;
  const long long u0 = a.units * blockIdx.x / G, u1 = a.units * (blockIdx.x + 1) / G;
  const int n = static_cast<int>(u1 - u0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const unsigned bytes = a.load_x ? kW + a.m * 128 : kW;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      cuda::mbarrier_init(&full[s], 1);
      cuda::mbarrier_init(&empty[s], 4);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if (warp == 4) {
    if (lane != 0) return;
    for (int i = 0; i < n; ++i) {
      const int s = i % kStages;
      if (i >= kStages) cuda::mbarrier_wait(&empty[s], ((i / kStages) - 1) & 1);
      cuda::mbarrier_arrive_expect_tx(&full[s], bytes);
      const long long u = u0 + i;
      const int tile = static_cast<int>(u / a.per_tile), chunk = static_cast<int>(u % a.per_tile);
      cuda::tma_load_3d(ring + s * kStage, &wm, chunk * 64, tile * 128, 0, &full[s]);
      if (a.load_x) cuda::tma_load_3d(ring + s * kStage + kW, &xm, chunk * 64, 0, 0, &full[s]);
    }
    return;
  }
  float acc[64];
  for (int e = 0; e < 64; ++e) acc[e] = 0.0f;
  const unsigned ring_addr = static_cast<unsigned>(__cvta_generic_to_shared(ring));
  int pending = -1;
  for (int i = 0; i < n; ++i) {
    const int s = i % kStages;
    cuda::mbarrier_wait(&full[s], (i / kStages) & 1);
    if constexpr (kMma) {
      const unsigned w_addr = ring_addr + s * kStage, x_addr = w_addr + kW;
      cuda::fence_registers(acc);
      cuda::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        cuda::wgmma_m64n128k16_ss(acc, cuda::wgmma_desc(x_addr + kk * 32, 16, 1024),
                                  cuda::wgmma_desc(w_addr + kk * 32, 16, 1024), 1);
      cuda::wgmma_commit();
      cuda::wgmma_wait<1>();
    }
    if (a.hold) {
      if (pending >= 0 && lane == 0) cuda::mbarrier_arrive(&empty[pending]);
      pending = s;
    } else if (lane == 0) {
      cuda::mbarrier_arrive(&empty[s]);
    }
  }
  if constexpr (kMma) {
    cuda::wgmma_wait<0>();
    cuda::fence_registers(acc);
  }
  float t = 0;
  for (int e = 0; e < 64; ++e) t += acc[e];
  if (t == 12345.0f) a.sink[0] = 1;
}

int main() {
  setvbuf(stdout, nullptr, _IONBF, 0);
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  struct Shape { const char* name; long long n, k; };
  const Shape shapes[] = {{"gate_up", 28672, 4096}, {"down", 4096, 14336}, {"o", 4096, 4096}};
  const int smem = 1024 + kStages * kStage + 2 * kStages * 8;
  CK(cudaFuncSetAttribute(k<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CK(cudaFuncSetAttribute(k<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  unsigned* sink;
  CK(cudaMalloc(&sink, 4));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
    // box64: x's box is 64 rows whatever m (rows past the tensor's m arrive as zeros), as the wide
  // kernel asked before run 3; otherwise it is m rows.
  struct V { const char* name; int x, hold, mma, promo, m, random, box64; };
  const V vs[] = {
      // run 3 (zero data)
      {"W only, release at once", 0, 0, 0, 0, 64, 0, 1},
      {"+ x boxes (m=64)", 1, 0, 0, 0, 64, 0, 1},
      {"+ x, hold until next", 1, 1, 0, 0, 64, 0, 1},
      {"+ x, hold, wgmma (the wide kernel's loop)", 1, 1, 1, 0, 64, 0, 1},
      {"same, W 256B promotion (committed)", 1, 1, 1, 2, 64, 0, 1},
      {"same, W 128B promotion", 1, 1, 1, 1, 64, 0, 1},
      {"x, hold, wgmma, m=1 x box", 1, 1, 1, 0, 1, 0, 1},
      {"x, wgmma, release at once (no hold)", 1, 0, 1, 0, 64, 0, 1},
      // run 7 (data; x's box of m rows)
      {"loop, m=64, zero W and x", 1, 1, 1, 0, 64, 0, 0},
      {"loop, m=64, random W and x", 1, 1, 1, 0, 64, 1, 0},
      {"W + x only (no wgmma), m=64, random", 1, 1, 0, 0, 64, 1, 0},
      {"loop, m=1 exact box, random", 1, 1, 1, 0, 1, 1, 0},
      {"loop, m=64, random, 256B promotion", 1, 1, 1, 2, 64, 1, 0},
  };
  for (const Shape& sh : shapes) {
    const size_t bytes = static_cast<size_t>(sh.n * sh.k * 2);
    const int copies = bytes > (200u << 20) ? 1 : 4;
    std::vector<void*> w(copies);
    for (auto& p : w) CK(cudaMalloc(&p, bytes));
    void* x;
    CK(cudaMalloc(&x, 64 * sh.k * 2));
    for (const V& v : vs) {
      for (size_t c = 0; c < w.size(); ++c) {
        if (v.random) {
          fill_random<<<1024, 256>>>(static_cast<unsigned short*>(w[c]), bytes / 2, 7 + c);
        } else {
          CK(cudaMemset(w[c], 0, bytes));
        }
      }
      if (v.random) {
        fill_random<<<256, 256>>>(static_cast<unsigned short*>(x), 64 * sh.k, 99);
      } else {
        CK(cudaMemset(x, 0, 64 * sh.k * 2));
      }
      CK(cudaDeviceSynchronize());
      const CUtensorMapL2promotion promo = v.promo == 2 ? CU_TENSOR_MAP_L2_PROMOTION_L2_256B
                                           : v.promo == 1 ? CU_TENSOR_MAP_L2_PROMOTION_L2_128B
                                                          : CU_TENSOR_MAP_L2_PROMOTION_NONE;
      std::vector<CUtensorMap> wm(copies);
      CUtensorMap xm;
      for (int c = 0; c < copies; ++c) {
        const uint64_t d[3] = {(uint64_t)sh.k, (uint64_t)sh.n, 1};
        const uint32_t box[3] = {64, 128, 1};
        if (!cuda::encode_bf16_tensor_map_3d(&wm[c], w[c], d, sh.k * 2, bytes, box, promo)) { std::printf("enc\n"); return 1; }
      }
      const uint64_t dx[3] = {(uint64_t)sh.k, (uint64_t)v.m, 1};
      const uint32_t bx[3] = {64, static_cast<uint32_t>(v.box64 ? 64 : v.m), 1};
      if (!cuda::encode_bf16_tensor_map_3d(&xm, x, dx, sh.k * 2, 64 * sh.k * 2, bx, CU_TENSOR_MAP_L2_PROMOTION_L2_128B)) { std::printf("enc x\n"); return 1; }
      Args a{};
      a.units = (long long)(bytes / kW);
      a.per_tile = static_cast<int>(sh.k / 64);
      a.load_x = v.x; a.hold = v.hold; a.mma = v.mma; a.m = v.box64 ? 64 : v.m; a.sink = sink;
      auto launch = [&](int c) { if (v.mma) k<true><<<sms, 160, smem>>>(wm[c], xm, a); else k<false><<<sms, 160, smem>>>(wm[c], xm, a); };
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
      std::printf("%-8s %-44s %7.2f us  %5.1f %%\n", sh.name, v.name, med * 1e3,
                  100.0 * bytes / (med * 1e-3) / 4.28e12);
    }
    for (auto& p : w) CK(cudaFree(p));
    CK(cudaFree(x));
  }
  return 0;
}
