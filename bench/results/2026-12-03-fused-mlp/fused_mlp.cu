// A feasibility prototype (issue 8): the whole gated MLP of a small model's decode layer at one
// token — RMSNorm, gate_up, SwiGLU, down and the residual add — as ONE kernel, against the
// engine's two (`matmul_cuda_bench mlp`: gate_up with its norm prologue and SwiGLU epilogue, then
// down with its residual epilogue, chained as in a step).
//
// Why: the qwen2.5-0.5b bs 1 step is 0.583 ms against a 0.45 ms goal; its down projection runs at
// ~39 % of the copy ceiling because its 8.7 MB are too few bytes for a kernel's fixed chain, and
// gate_up -> down is one of a layer's all-to-all handovers. Split the MLP by the intermediate
// dimension instead: block b owns intermediate units [j0, j0 + U) (U = 32 or 40 here), and
//   - issues bulk copies of ALL its weight bytes before the PDL wait (gate and up rows j0.., the
//     same units' down weights: U x H, ~215 KB, one block an SM);
//   - after the wait: x, its RMSNorm (bf16, as the engine's prologue), U values of
//     h = silu(gate) * up (bf16, as the engine's SwiGLU epilogue), and its partial of
//     y = W_down · h over its units: H fp32 values to a workspace row;
//   - the last R blocks to arrive (an arrival counter) each sum one H / R column slice of every
//     block's partial in a fixed order and add the residual: deterministic, bit for bit.
// So gate_up -> down needs no handover, and the down bytes stream with the gate_up bytes.
//
// Down's weights are read in two layouts: "t" = transposed [I][H] (each block's slice one
// contiguous run; the engine would transpose at load), "n" = the checkpoint's [H][I] (H bulk
// copies of U * 2 bytes a block). "nored" skips the reduction (partials only), to price it.
//
// Usage: fused_mlp [H I]   (default: qwen2.5-0.5b 896 4864, then qwen3-0.6b 1024 3072)
// Build: nvcc -O3 -std=c++20 -gencode arch=compute_90a,code=sm_90a fused_mlp.cu -o fused_mlp
// Method: 16 calls in one CUDA graph (PDL between them), weights rotated past L2, x / y ping-pong,
// median of 50 replays; bandwidth = weight bytes / time against the 4.28 TB/s copy ceiling.
// Checked first against a host reference with the same bf16 roundings, on every element, and
// for bit-identical output over two runs.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK(x)                                                                      \
  do {                                                                                \
    cudaError_t e = (x);                                                              \
    if (e != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxGroups = 6;  // groups of 8 units a block (a barrier each) at most
constexpr int kReduceCols = 64;  // columns of a reducer's slice

struct Args {
  const __nv_bfloat16* w_gu;    // [2I][H]: gate rows, then up rows
  const __nv_bfloat16* w_d;     // down_t: [I][H]; else [H][I]
  const __nv_bfloat16* norm_w;  // [H]
  const __nv_bfloat16* x;       // [H]
  __nv_bfloat16* y;             // [H] = x + W_d · swiglu(W_gu · rmsnorm(x))
  float* partial;               // [gridDim.x][H]
  unsigned* counter;            // [2], zero between calls (the kernel resets them)
  int H, I;
  float eps;
  int down_t, reduce;
};

struct Layout {  // dynamic shared memory offsets, bytes
  int bars, xn, gu, h, red, w, wd, pitch, total;
};
__host__ __device__ inline Layout layout(int H, int U, int down_t) {
  Layout l;
  l.bars = 0;                        // kMaxGroups + 1 mbarriers
  l.xn = 128;                        // H floats
  l.gu = l.xn + H * 4;               // 2U floats
  l.h = l.gu + 2 * 8 * kMaxGroups * 4;  // U floats
  l.red = l.h + 8 * kMaxGroups * 4;  // kWarps x kReduceCols floats... (kThreads floats)
  l.w = (l.red + kThreads * 4 + 127) / 128 * 128;
  l.wd = l.w + 2 * U * H * 2;
  int p = U * 2;
  if ((p / 16) % 2 == 0) p += 16;  // n layout: an odd number of 16-byte units a row
  l.pitch = down_t ? H * 2 : p;
  l.total = l.wd + (down_t ? U * H * 2 : H * p);
  return l;
}

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, unsigned bytes, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}
__device__ __forceinline__ void bar_wait(uint64_t* bar) {
  const unsigned a = smem_addr(bar);
  unsigned done = 0;
  while (!done) {
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }\n"
        : "=r"(done)
        : "r"(a)
        : "memory");
  }
}
__device__ __forceinline__ unsigned ld_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ float bf(float v) { return __bfloat162float(__float2bfloat16(v)); }

__global__ void __launch_bounds__(kThreads, 1) fused_mlp(Args a) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
  const int H = a.H, G = a.I / 8, nb = gridDim.x, b = blockIdx.x;
  const int g0 = static_cast<int>(static_cast<int64_t>(b) * G / nb);
  const int g1 = static_cast<int>(static_cast<int64_t>(b + 1) * G / nb);
  const int groups = g1 - g0, U = groups * 8, j0 = g0 * 8;
  const Layout L = layout(H, U, a.down_t);
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + L.bars);
  float* s_xn = reinterpret_cast<float*>(smem + L.xn);
  float* s_gu = reinterpret_cast<float*>(smem + L.gu);
  float* s_h = reinterpret_cast<float*>(smem + L.h);
  float* s_red = reinterpret_cast<float*>(smem + L.red);
  __nv_bfloat16* s_w = reinterpret_cast<__nv_bfloat16*>(smem + L.w);
  unsigned char* s_wd = smem + L.wd;
  __shared__ unsigned s_k;

  // Every weight byte of the block requested before the PDL wait: group c's gate and up rows on
  // bar c, the down slice on bar `groups`.
  if (warp == 0) {
    const unsigned row_bytes = H * 2;
    const unsigned wd_bytes = a.down_t ? U * H * 2 : H * U * 2;
    if (lane == 0) {
      for (int c = 0; c <= groups; ++c)
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_addr(bars + c)));
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
      for (int c = 0; c < groups; ++c)
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(
                         smem_addr(bars + c)),
                     "r"(16 * row_bytes)
                     : "memory");
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(
                       smem_addr(bars + groups)),
                   "r"(wd_bytes)
                   : "memory");
      for (int c = 0; c < groups; ++c) {
        bulk_copy(s_w + static_cast<size_t>(c) * 16 * H, a.w_gu + static_cast<size_t>(j0 + 8 * c) * H,
                  8 * row_bytes, bars + c);
        bulk_copy(s_w + static_cast<size_t>(c * 16 + 8) * H,
                  a.w_gu + static_cast<size_t>(a.I + j0 + 8 * c) * H, 8 * row_bytes, bars + c);
      }
      if (a.down_t) bulk_copy(s_wd, a.w_d + static_cast<size_t>(j0) * H, wd_bytes, bars + groups);
    }
    __syncwarp();
    if (!a.down_t)
      for (int n = lane; n < H; n += 32)
        bulk_copy(s_wd + n * L.pitch, a.w_d + static_cast<size_t>(n) * a.I + j0, U * 2,
                  bars + groups);
  }
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");

  // RMSNorm of x (bf16 out, as the engine's prologue).
  float ss = 0.0f;
  for (int i = t; i < H; i += kThreads) {
    const float v = __bfloat162float(a.x[i]);
    s_xn[i] = v;
    ss += v * v;
  }
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (lane == 0) s_red[warp] = ss;
  __syncthreads();
  float tot = 0.0f;
  for (int w = 0; w < kWarps; ++w) tot += s_red[w];
  const float inv = rsqrtf(tot / H + a.eps);
  for (int i = t; i < H; i += kThreads) s_xn[i] = bf(s_xn[i] * inv * __bfloat162float(a.norm_w[i]));
  __syncthreads();

  // gate and up: a warp a row, 16 bytes a lane at a time.
  for (int r = warp; r < 2 * U; r += kWarps) {
    const int c = r / 16;
    bar_wait(bars + c);
    const uint4* row = reinterpret_cast<const uint4*>(s_w + static_cast<size_t>(r) * H);
    float acc = 0.0f;
    for (int k = lane; k < H / 8; k += 32) {
      const uint4 v = row[k];
      const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&v);
      const float4 x0 = reinterpret_cast<const float4*>(s_xn)[2 * k];
      const float4 x1 = reinterpret_cast<const float4*>(s_xn)[2 * k + 1];
      float2 f;
      f = __bfloat1622float2(p[0]); acc += f.x * x0.x + f.y * x0.y;
      f = __bfloat1622float2(p[1]); acc += f.x * x0.z + f.y * x0.w;
      f = __bfloat1622float2(p[2]); acc += f.x * x1.x + f.y * x1.y;
      f = __bfloat1622float2(p[3]); acc += f.x * x1.z + f.y * x1.w;
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) s_gu[r] = acc;
  }
  __syncthreads();
  if (t < U) {
    const int c = t / 8, u = t % 8;
    const float g = bf(s_gu[c * 16 + u]), up = bf(s_gu[c * 16 + 8 + u]);
    s_h[t] = bf(g / (1.0f + __expf(-g)) * up);
  }
  __syncthreads();

  // This block's partial of W_down · h.
  bar_wait(bars + groups);
  float* part = a.partial + static_cast<size_t>(b) * H;
  if (a.down_t) {
    for (int n2 = t; n2 < H / 2; n2 += kThreads) {
      float2 acc = make_float2(0.0f, 0.0f);
      for (int j = 0; j < U; ++j) {
        const float2 w = __bfloat1622float2(
            reinterpret_cast<const __nv_bfloat162*>(s_wd + static_cast<size_t>(j) * H * 2)[n2]);
        acc.x += s_h[j] * w.x;
        acc.y += s_h[j] * w.y;
      }
      reinterpret_cast<float2*>(part)[n2] = acc;
    }
  } else {
    for (int n = t; n < H; n += kThreads) {
      const uint4* row = reinterpret_cast<const uint4*>(s_wd + n * L.pitch);
      float acc = 0.0f;
      for (int k = 0; k < U / 8; ++k) {
        const uint4 v = row[k];
        const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float2 f = __bfloat1622float2(p[e]);
          acc += f.x * s_h[8 * k + 2 * e] + f.y * s_h[8 * k + 2 * e + 1];
        }
      }
      part[n] = acc;
    }
  }
  if (!a.reduce) return;

  // The last R = H / 64 blocks to arrive each sum one 64-column slice over every block's partial.
  const int R = H / kReduceCols;
  __syncthreads();
  if (t == 0) {
    __threadfence();
    s_k = atomicAdd(a.counter, 1u);
  }
  __syncthreads();
  const int k = static_cast<int>(s_k);
  if (k < nb - R) return;
  const int slice = k - (nb - R);
  if (t == 0) {
    while (ld_acquire(a.counter) < static_cast<unsigned>(nb)) {
    }
    // The last reducer past the spin resets both counters for the next call.
    if (atomicAdd(a.counter + 1, 1u) == static_cast<unsigned>(R - 1)) {
      a.counter[0] = 0;
      a.counter[1] = 0;
    }
  }
  __syncthreads();
  const int col = slice * kReduceCols + (t % kReduceCols), rg = t / kReduceCols;
  constexpr int kGroups = kThreads / kReduceCols;
  float sum = 0.0f;
#pragma unroll 8
  for (int r = rg; r < nb; r += kGroups) sum += __ldcg(a.partial + static_cast<size_t>(r) * H + col);
  s_red[t] = sum;
  __syncthreads();
  if (t < kReduceCols) {
    float s = 0.0f;
    for (int g = 0; g < kGroups; ++g) s += s_red[g * kReduceCols + t];
    a.y[col] = __float2bfloat16(__bfloat162float(a.x[col]) + s);
  }
}

// Host side.
static std::vector<uint16_t> rnd(size_t n, uint64_t seed, float scale, float base = 0.0f) {
  std::vector<uint16_t> v(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const float f = base + scale * (static_cast<float>((s >> 40) & 0xFFFFFF) / 8388608.0f - 1.0f);
    __nv_bfloat16 h = __float2bfloat16(f);
    v[i] = *reinterpret_cast<uint16_t*>(&h);
  }
  return v;
}
static float h2f(uint16_t u) {
  uint32_t w = static_cast<uint32_t>(u) << 16;
  float f;
  std::memcpy(&f, &w, 4);
  return f;
}
static float rb(float v) { return __bfloat162float(__float2bfloat16(v)); }

int main(int argc, char** argv) {
  std::vector<std::pair<int, int>> shapes = {{896, 4864}, {1024, 3072}};
  if (argc == 3) shapes = {{std::atoi(argv[1]), std::atoi(argv[2])}};
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  int max_smem = 0;
  CHECK(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  CHECK(cudaFuncSetAttribute(fused_mlp, cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem - 1024));
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (auto [H, I] : shapes) {
    if (H % kReduceCols || I % 8 || H / kReduceCols > sms) {
      std::fprintf(stderr, "H %d I %d: H must be a multiple of %d and I of 8\n", H, I, kReduceCols);
      return 2;
    }
    const int nb = sms, G = I / 8, max_u = (G + nb - 1) / nb * 8;
    if ((G + nb - 1) / nb > kMaxGroups) {
      std::fprintf(stderr, "H %d I %d: %d groups a block exceed %d\n", H, I, (G + nb - 1) / nb, kMaxGroups);
      return 2;
    }
    const size_t gu_n = size_t{2} * I * H, d_n = static_cast<size_t>(I) * H;
    const double wbytes = 2.0 * (gu_n + d_n + H);
    const int copies = static_cast<int>(std::ceil(200e6 / wbytes));
    const std::vector<uint16_t> gu = rnd(gu_n, 1, 0.05f), dn = rnd(d_n, 2, 0.05f),
                                nw = rnd(H, 3, 0.1f, 1.0f), x = rnd(H, 4, 1.0f);
    std::vector<uint16_t> dt(d_n);  // transposed: [I][H]
    for (int n = 0; n < H; ++n)
      for (int j = 0; j < I; ++j) dt[static_cast<size_t>(j) * H + n] = dn[static_cast<size_t>(n) * I + j];
    // Host reference: the engine's roundings (normed x and h in bf16), fp32 sums.
    std::vector<float> ref(H);
    {
      double ss = 0;
      for (int i = 0; i < H; ++i) ss += double(h2f(x[i])) * h2f(x[i]);
      const float inv = 1.0f / std::sqrt(static_cast<float>(ss / H) + 1e-6f);
      std::vector<float> xn(H), h(I);
      for (int i = 0; i < H; ++i) xn[i] = rb(h2f(x[i]) * inv * h2f(nw[i]));
      for (int j = 0; j < I; ++j) {
        double g = 0, u = 0;
        for (int i = 0; i < H; ++i) {
          g += double(h2f(gu[size_t(j) * H + i])) * xn[i];
          u += double(h2f(gu[size_t(I + j) * H + i])) * xn[i];
        }
        const float gf = rb(static_cast<float>(g)), uf = rb(static_cast<float>(u));
        h[j] = rb(gf / (1.0f + std::exp(-gf)) * uf);
      }
      for (int n = 0; n < H; ++n) {
        double s = 0;
        for (int j = 0; j < I; ++j) s += double(h2f(dn[size_t(n) * I + j])) * h[j];
        ref[n] = h2f(x[n]) + static_cast<float>(s);
      }
    }
    std::vector<void*> w_gu(copies), w_dn(copies), w_dt(copies);
    for (int c = 0; c < copies; ++c) {
      CHECK(cudaMalloc(&w_gu[c], gu_n * 2));
      CHECK(cudaMalloc(&w_dn[c], d_n * 2));
      CHECK(cudaMalloc(&w_dt[c], d_n * 2));
      CHECK(cudaMemcpy(w_gu[c], gu.data(), gu_n * 2, cudaMemcpyHostToDevice));
      CHECK(cudaMemcpy(w_dn[c], dn.data(), d_n * 2, cudaMemcpyHostToDevice));
      CHECK(cudaMemcpy(w_dt[c], dt.data(), d_n * 2, cudaMemcpyHostToDevice));
    }
    void *d_nw, *d_x[2], *d_part, *d_cnt;
    CHECK(cudaMalloc(&d_nw, H * 2));
    CHECK(cudaMemcpy(d_nw, nw.data(), H * 2, cudaMemcpyHostToDevice));
    for (auto& p : d_x) {
      CHECK(cudaMalloc(&p, H * 2));
      CHECK(cudaMemcpy(p, x.data(), H * 2, cudaMemcpyHostToDevice));
    }
    CHECK(cudaMalloc(&d_part, size_t(nb) * H * 4));
    CHECK(cudaMalloc(&d_cnt, 8));
    CHECK(cudaMemset(d_cnt, 0, 8));
    auto args = [&](int i, int down_t, int reduce) {
      Args a;
      a.w_gu = static_cast<const __nv_bfloat16*>(w_gu[i % copies]);
      a.w_d = static_cast<const __nv_bfloat16*>(down_t ? w_dt[i % copies] : w_dn[i % copies]);
      a.norm_w = static_cast<const __nv_bfloat16*>(d_nw);
      a.x = static_cast<const __nv_bfloat16*>(d_x[i % 2]);
      a.y = static_cast<__nv_bfloat16*>(d_x[(i + 1) % 2]);
      a.partial = static_cast<float*>(d_part);
      a.counter = static_cast<unsigned*>(d_cnt);
      a.H = H;
      a.I = I;
      a.eps = 1e-6f;
      a.down_t = down_t;
      a.reduce = reduce;
      return a;
    };
    const int smem = layout(H, max_u, 1).total > layout(H, max_u, 0).total ? layout(H, max_u, 1).total
                                                                           : layout(H, max_u, 0).total;
    if (smem > max_smem - 1024) {
      std::fprintf(stderr, "H %d I %d: %d bytes of shared memory a block exceed %d\n", H, I, smem,
                   max_smem - 1024);
      return 2;
    }
    auto launch = [&](const Args& a) {
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(nb);
      cfg.blockDim = dim3(kThreads);
      cfg.dynamicSmemBytes = smem;
      cfg.stream = stream;
      cudaLaunchAttribute attr[1];
      attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr[0].val.programmaticStreamSerializationAllowed = 1;
      cfg.attrs = attr;
      cfg.numAttrs = 1;
      CHECK(cudaLaunchKernelEx(&cfg, fused_mlp, a));
    };
    std::printf("H %d I %d: %d blocks of %d-%d units, %d B shared memory, %.1f MB of weights a call, %d copies\n",
                H, I, nb, G / nb * 8, max_u, smem, wbytes / 1e6, copies);
    bool all_ok = true;
    for (int down_t = 1; down_t >= 0; --down_t) {
      // Correctness: one call from x, every element against the reference; twice, bit for bit.
      std::vector<uint16_t> out[2];
      for (int rep = 0; rep < 2; ++rep) {
        CHECK(cudaMemcpy(d_x[0], x.data(), H * 2, cudaMemcpyHostToDevice));
        CHECK(cudaMemset(d_x[1], 0xFF, H * 2));
        launch(args(0, down_t, 1));
        CHECK(cudaStreamSynchronize(stream));
        out[rep].resize(H);
        CHECK(cudaMemcpy(out[rep].data(), d_x[1], H * 2, cudaMemcpyDeviceToHost));
      }
      double max_err = 0;
      int bad = 0;
      for (int n = 0; n < H; ++n) {
        const float got = h2f(out[0][n]);
        const double err = std::fabs(double(got) - ref[n]);
        const double tol = 1e-2 * std::fabs(ref[n]) + 1e-2;
        if (!(err <= tol)) ++bad;
        max_err = std::max(max_err, err);
      }
      const bool same = out[0] == out[1];
      all_ok = all_ok && bad == 0 && same;
      std::printf("  down %s: check %s (max |err| %.3g over %d outputs, %d beyond 1e-2 |ref| + 1e-2; "
                  "two runs %s)\n",
                  down_t ? "t" : "n", bad == 0 && same ? "PASS" : "FAIL", max_err, H, bad,
                  same ? "bit-identical" : "DIFFER");
      for (int reduce = 1; reduce >= 0; --reduce) {
        CHECK(cudaMemcpy(d_x[0], x.data(), H * 2, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(d_x[1], x.data(), H * 2, cudaMemcpyHostToDevice));
        cudaGraph_t graph;
        CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
        for (int i = 0; i < 16; ++i) launch(args(i, down_t, reduce));
        CHECK(cudaStreamEndCapture(stream, &graph));
        cudaGraphExec_t exec;
        CHECK(cudaGraphInstantiate(&exec, graph, 0));
        cudaEvent_t e0, e1;
        CHECK(cudaEventCreate(&e0));
        CHECK(cudaEventCreate(&e1));
        std::vector<float> ms;
        for (int r = 0; r < 55; ++r) {
          CHECK(cudaEventRecord(e0, stream));
          CHECK(cudaGraphLaunch(exec, stream));
          CHECK(cudaEventRecord(e1, stream));
          CHECK(cudaEventSynchronize(e1));
          float m;
          CHECK(cudaEventElapsedTime(&m, e0, e1));
          if (r >= 5) ms.push_back(m);
        }
        std::sort(ms.begin(), ms.end());
        const double us = ms[ms.size() / 2] * 1e3 / 16;
        std::printf("  down %s%s: %.2f us a call, %.1f %% of the 4.28 TB/s copy ceiling\n",
                    down_t ? "t" : "n", reduce ? "" : " nored", us, wbytes / (us * 1e-6) / 4.28e12 * 100);
        CHECK(cudaGraphExecDestroy(exec));
        CHECK(cudaGraphDestroy(graph));
      }
    }
    for (int c = 0; c < copies; ++c) {
      CHECK(cudaFree(w_gu[c]));
      CHECK(cudaFree(w_dn[c]));
      CHECK(cudaFree(w_dt[c]));
    }
    CHECK(cudaFree(d_nw));
    for (auto p : d_x) CHECK(cudaFree(p));
    CHECK(cudaFree(d_part));
    CHECK(cudaFree(d_cnt));
    if (!all_ok) return 1;
  }
  return 0;
}
