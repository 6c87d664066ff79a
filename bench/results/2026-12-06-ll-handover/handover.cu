// Does a handover whose data carries its own readiness (8-byte words of a 4-byte value and a
// 4-byte tag, polled by the reader: NCCL's "LL" protocol) beat what the engine pays today?
// Two questions behind issues 8 and 6:
//
// A. All-to-all handover (a persistent decode kernel's phase boundary, issue 8). Every "step":
//    each of G blocks reads all G values the previous step wrote, then writes its own.
//      chain PDL:       a kernel per step, griddepcontrol.wait first (the engine's boundary).
//      grid barrier:    one persistent kernel, an arrival counter between steps (2026-12-02).
//      LL words:        one persistent kernel; a block's value goes out as {value, tag = step}
//                       in one 8-byte store, and every reader spins on the words themselves.
//
// B. A split-K merge at the end of a kernel (decode attention's count-in and merge, issue 6;
//    the skinny GEMM's split merge). A chain of PDL kernels of G = groups · splits blocks; each
//    block reads its group's 512-float q (the previous kernel's output), writes a 512-float
//    partial, and the group's partials are summed in split order into the next q.
//      no merge:        the partials are written and nothing merges them (the chain's floor).
//      counter:         threadfence, one atomicAdd per block; the last arrival reads the partials
//                       and sums them (what the engine does).
//      LL poll:         partials as LL words; the group's split 0 sums them as they arrive.
//    Every variant checks its last q against the host's sums (bit for bit: the same order).
//
// Prints µs per step: median of 20 replays of a CUDA graph of `steps` steps (a memset of the LL
// buffers first, so every replay starts from tag 0).
// Build: nvcc -O2 -std=c++17 -gencode arch=compute_90a,code=sm_90a handover.cu -o handover
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                     \
  do {                                                                               \
    cudaError_t e = (x);                                                             \
    if (e != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

constexpr int kThreads = 256;
constexpr int kWidth = 512;  // floats a partial (4 q heads × 128)

__device__ __forceinline__ void st_word(unsigned long long* p, float v, unsigned tag) {
  const unsigned long long w = (static_cast<unsigned long long>(tag) << 32) | __float_as_uint(v);
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;\n" ::"l"(p), "l"(w) : "memory");
}

__device__ __forceinline__ float ld_word(const unsigned long long* p, unsigned tag) {
  unsigned long long w;
  do {
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];\n" : "=l"(w) : "l"(p) : "memory");
  } while (static_cast<unsigned>(w >> 32) != tag);
  return __uint_as_float(static_cast<unsigned>(w));
}

__device__ __forceinline__ float block_sum(float s) {
  __shared__ float part[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = s;
  __syncthreads();
  float t = 0.0f;
  for (int w = 0; w < kThreads / 32; ++w) t += part[w];
  __syncthreads();
  return t;
}

// ---- A: all-to-all ----
__global__ void a_chain(const float* x, float* y, int g) {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  float s = 0.0f;
  for (int i = threadIdx.x; i < g; i += kThreads) s += x[i];
  const float t = block_sum(s);
  if (threadIdx.x == 0) y[blockIdx.x] = t * 1e-3f + static_cast<float>(blockIdx.x);
}

__global__ void a_barrier(float* a, float* b, int g, int steps, unsigned* counter) {
  for (int s = 0; s < steps; ++s) {
    const float* x = (s & 1) ? b : a;
    float* y = (s & 1) ? a : b;
    float v = 0.0f;
    for (int i = threadIdx.x; i < g; i += kThreads) v += x[i];
    const float t = block_sum(v);
    if (threadIdx.x == 0) y[blockIdx.x] = t * 1e-3f + static_cast<float>(blockIdx.x);
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned old;
      asm volatile("atom.add.release.gpu.u32 %0, [%1], 1;\n" : "=r"(old) : "l"(counter) : "memory");
      const unsigned target = (old / g + 1) * g;
      unsigned now;
      do {
        asm volatile("ld.acquire.gpu.u32 %0, [%1];\n" : "=r"(now) : "l"(counter) : "memory");
      } while (static_cast<int>(now - target) < 0);
    }
    __syncthreads();
  }
}

// buf: 2 × g words, zeroed before the kernel (tag 0, value 0). Step s reads buf[s & 1] at tag s
// and writes buf[(s + 1) & 1] at tag s + 1. Writing there is safe: a block reaches step s only
// after every block has written at step s − 1, which each did after its reads of step s − 1.
__global__ void a_ll(unsigned long long* buf, int g, int steps) {
  for (int s = 0; s < steps; ++s) {
    const unsigned long long* x = buf + (s & 1) * g;
    unsigned long long* y = buf + ((s + 1) & 1) * g;
    float v = 0.0f;
    for (int i = threadIdx.x; i < g; i += kThreads) v += ld_word(x + i, static_cast<unsigned>(s));
    const float t = block_sum(v);
    if (threadIdx.x == 0)
      st_word(y + blockIdx.x, t * 1e-3f + static_cast<float>(blockIdx.x),
              static_cast<unsigned>(s + 1));
  }
}

// ---- B: split merge ----
// q: [groups][kWidth]; partials: [g][kWidth] floats or LL words; every block of group c (blocks
// c · splits .. + splits) makes partial[i] = q[i] · w(split) + 1e-3 · i, rounded as written
// (no contraction), with the w summing to 0.5 so that 512 merges stay finite.
__host__ __device__ __forceinline__ float split_weight(int split, int splits) {
  return ((split & 1) ? 0.25f : 0.75f) / static_cast<float>(splits);
}
__device__ __forceinline__ float partial_value(float q, int split, int splits, int i) {
  return __fadd_rn(__fmul_rn(q, split_weight(split, splits)), 1e-3f * static_cast<float>(i));
}

__global__ void b_none(const float* q_in, float* q_out, float* part, int splits) {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  const int group = blockIdx.x / splits, split = blockIdx.x % splits;
  for (int i = threadIdx.x; i < kWidth; i += kThreads)
    part[blockIdx.x * kWidth + i] = partial_value(q_in[group * kWidth + i], split, splits, i);
  if (split == 0)
    for (int i = threadIdx.x; i < kWidth; i += kThreads)
      q_out[group * kWidth + i] = q_in[group * kWidth + i] * 0.5f;
}

__global__ void b_counter(const float* q_in, float* q_out, float* part, unsigned* counters,
                          int splits) {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  __shared__ int last;
  const int group = blockIdx.x / splits, split = blockIdx.x % splits;
  for (int i = threadIdx.x; i < kWidth; i += kThreads)
    part[blockIdx.x * kWidth + i] = partial_value(q_in[group * kWidth + i], split, splits, i);
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned old = atomicAdd(counters + group, 1u);
    last = (old % splits) == static_cast<unsigned>(splits - 1);
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (int i = threadIdx.x; i < kWidth; i += kThreads) {
    float s = 0.0f;
    for (int j = 0; j < splits; ++j)
      s = __fadd_rn(s, __ldcg(part + (group * splits + j) * kWidth + i));
    q_out[group * kWidth + i] = s;
  }
}

// LL: splits 1.. write their partial as words at tag `step + 1` (the buffer zeroed before the
// replay); split 0 keeps its own in registers and polls the others' words in split order.
__global__ void b_ll(const float* q_in, float* q_out, unsigned long long* part, int splits,
                     int step) {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  const int group = blockIdx.x / splits, split = blockIdx.x % splits;
  const unsigned tag = static_cast<unsigned>(step + 1);
  if (split != 0) {
    for (int i = threadIdx.x; i < kWidth; i += kThreads)
      st_word(part + blockIdx.x * kWidth + i,
              partial_value(q_in[group * kWidth + i], split, splits, i), tag);
    return;
  }
  for (int i = threadIdx.x; i < kWidth; i += kThreads) {
    float s = partial_value(q_in[group * kWidth + i], 0, splits, i);
    for (int j = 1; j < splits; ++j)
      s = __fadd_rn(s, ld_word(part + (group * splits + j) * kWidth + i, tag));
    q_out[group * kWidth + i] = s;
  }
}

// LL, batched: split 0's threads issue the loads of every split's words for both of their values
// before checking any tag, and re-issue only the ones not yet written: one round trip after the
// last partial lands, instead of one a split.
constexpr int kMaxSplits = 32;
constexpr int kPer = kWidth / kThreads;  // values a thread
__global__ void __launch_bounds__(kThreads)
    b_ll_batched(const float* q_in, float* q_out, unsigned long long* part, int splits, int step) {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  const int group = blockIdx.x / splits, split = blockIdx.x % splits;
  const unsigned tag = static_cast<unsigned>(step + 1);
  if (split != 0) {
    for (int i = threadIdx.x; i < kWidth; i += kThreads)
      st_word(part + blockIdx.x * kWidth + i,
              partial_value(q_in[group * kWidth + i], split, splits, i), tag);
    return;
  }
  const unsigned long long* base = part + group * splits * kWidth;
  float v[kPer][kMaxSplits];
  unsigned pending[kPer];
#pragma unroll
  for (int r = 0; r < kPer; ++r) {
    const int i = threadIdx.x + r * kThreads;
    v[r][0] = partial_value(q_in[group * kWidth + i], 0, splits, i);
    pending[r] = (splits >= 32 ? 0xffffffffu : (1u << splits) - 1u) & ~1u;
  }
  while ((pending[0] | pending[kPer - 1]) != 0) {
    unsigned long long w[kPer][kMaxSplits];
#pragma unroll
    for (int r = 0; r < kPer; ++r)
#pragma unroll
      for (int j = 1; j < kMaxSplits; ++j)
        if ((pending[r] >> j) & 1u)
          asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];\n"
                       : "=l"(w[r][j])
                       : "l"(base + j * kWidth + threadIdx.x + r * kThreads)
                       : "memory");
#pragma unroll
    for (int r = 0; r < kPer; ++r)
#pragma unroll
      for (int j = 1; j < kMaxSplits; ++j)
        if (((pending[r] >> j) & 1u) && static_cast<unsigned>(w[r][j] >> 32) == tag) {
          v[r][j] = __uint_as_float(static_cast<unsigned>(w[r][j]));
          pending[r] &= ~(1u << j);
        }
  }
#pragma unroll
  for (int r = 0; r < kPer; ++r) {
    float s = v[r][0];
#pragma unroll
    for (int j = 1; j < kMaxSplits; ++j)
      if (j < splits) s = __fadd_rn(s, v[r][j]);
    q_out[group * kWidth + threadIdx.x + r * kThreads] = s;
  }
}

// The counter merge with the last arrival's loads of every split issued before any add.
__global__ void __launch_bounds__(kThreads)
    b_counter_batched(const float* q_in, float* q_out, float* part, unsigned* counters,
                      int splits) {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  __shared__ int last;
  const int group = blockIdx.x / splits, split = blockIdx.x % splits;
  for (int i = threadIdx.x; i < kWidth; i += kThreads)
    part[blockIdx.x * kWidth + i] = partial_value(q_in[group * kWidth + i], split, splits, i);
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned old = atomicAdd(counters + group, 1u);
    last = (old % splits) == static_cast<unsigned>(splits - 1);
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  const float* base = part + group * splits * kWidth;
  float v[kPer][kMaxSplits];
#pragma unroll
  for (int r = 0; r < kPer; ++r)
#pragma unroll
    for (int j = 0; j < kMaxSplits; ++j)
      if (j < splits) v[r][j] = __ldcg(base + j * kWidth + threadIdx.x + r * kThreads);
#pragma unroll
  for (int r = 0; r < kPer; ++r) {
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < kMaxSplits; ++j)
      if (j < splits) s = __fadd_rn(s, v[r][j]);
    q_out[group * kWidth + threadIdx.x + r * kThreads] = s;
  }
}

// ---- timing ----
template <typename K, typename... Args>
static void launch(K kernel, int g, bool pdl, cudaStream_t st, Args... args) {
  cudaLaunchConfig_t c = {};
  c.gridDim = dim3(g);
  c.blockDim = dim3(kThreads);
  c.stream = st;
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  c.attrs = at;
  c.numAttrs = pdl ? 1 : 0;
  CHECK(cudaLaunchKernelEx(&c, kernel, args...));
}

template <typename F>
static double time_graph(cudaStream_t st, int steps, F record) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  record();
  CHECK(cudaStreamEndCapture(st, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  for (int w = 0; w < 3; ++w) CHECK(cudaGraphLaunch(exec, st));
  std::vector<float> ms;
  for (int r = 0; r < 20; ++r) {
    CHECK(cudaEventRecord(e0, st));
    CHECK(cudaGraphLaunch(exec, st));
    CHECK(cudaEventRecord(e1, st));
    CHECK(cudaEventSynchronize(e1));
    float t;
    CHECK(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
  return ms[ms.size() / 2] * 1000.0 / steps;
}

// The host's q after `steps` merges (the same float order as the kernels); `none` halves q.
static std::vector<float> host_q(int groups, int splits, int steps, bool none) {
  std::vector<float> q(groups * kWidth, 1.0f);
  for (int s = 0; s < steps; ++s)
    for (int c = 0; c < groups; ++c)
      for (int i = 0; i < kWidth; ++i) {
        float& v = q[c * kWidth + i];
        if (none) {
          v = v * 0.5f;  // b_none: q_out = q_in · 0.5
          continue;
        }
        float sum = 0.0f;
        for (int j = 0; j < splits; ++j) {
          const float p = v * split_weight(j, splits);
          sum += p + 1e-3f * static_cast<float>(i);
        }
        v = sum;
      }
  return q;
}

int main() {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  std::printf("%s, %d SMs\n", prop.name, sms);
  cudaStream_t st;
  CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  const int steps = 512;

  // A
  float *a, *b;
  unsigned* counter;
  unsigned long long* words;
  CHECK(cudaMalloc(&a, 4096 * 4));
  CHECK(cudaMalloc(&b, 4096 * 4));
  CHECK(cudaMalloc(&counter, 4));
  CHECK(cudaMalloc(&words, 2 * 4096 * 8));
  CHECK(cudaMemset(a, 0, 4096 * 4));
  CHECK(cudaMemset(b, 0, 4096 * 4));
  CHECK(cudaMemset(counter, 0, 4));
  std::printf("\nA. all-to-all handover, us a step (median of 20 replays of %d steps)\n", steps);
  std::printf("%-28s %8s %8s\n", "mode", "G=SMs", "G=2*SMs");
  for (int mode = 0; mode < 3; ++mode) {
    double t[2];
    for (int i = 0; i < 2; ++i) {
      const int g = (i + 1) * sms;
      t[i] = time_graph(st, steps, [&] {
        if (mode == 0) {
          for (int s = 0; s < steps; ++s)
            launch(a_chain, g, true, st, (const float*)((s & 1) ? b : a), (s & 1) ? a : b, g);
        } else if (mode == 1) {
          launch(a_barrier, g, false, st, a, b, g, steps, counter);
        } else {
          CHECK(cudaMemsetAsync(words, 0, 2 * g * 8, st));
          launch(a_ll, g, false, st, words, g, steps);
        }
      });
    }
    const char* names[] = {"chain, PDL", "persistent, grid barrier", "persistent, LL words"};
    std::printf("%-28s %8.3f %8.3f\n", names[mode], t[0], t[1]);
  }

  // B
  const int groups = 8;
  float *q0, *q1, *part;
  unsigned* counters;
  unsigned long long* llpart;
  const int max_g = groups * 32;
  CHECK(cudaMalloc(&q0, groups * kWidth * 4));
  CHECK(cudaMalloc(&q1, groups * kWidth * 4));
  CHECK(cudaMalloc(&part, max_g * kWidth * 4));
  CHECK(cudaMalloc(&llpart, max_g * kWidth * 8));
  CHECK(cudaMalloc(&counters, groups * 4));
  std::printf("\nB. split merge in a chain of PDL kernels, %d groups of 512 floats, us a step\n",
              groups);
  std::printf("%-10s %10s %10s %10s %10s %11s   %s\n", "splits", "no merge", "counter", "LL poll",
              "LL batched", "cnt batched", "checks");
  const int ones_n = groups * kWidth;
  std::vector<float> ones(ones_n, 1.0f);
  float* q_init;  // the replays' starting q, copied on the device (a graph cannot hold a pageable
                  // host copy)
  CHECK(cudaMalloc(&q_init, ones_n * 4));
  CHECK(cudaMemcpy(q_init, ones.data(), ones_n * 4, cudaMemcpyHostToDevice));
  for (int splits : {4, 8, 16, 32}) {
    const int g = groups * splits;
    double t[5];
    const char* verdict[5];
    for (int mode = 0; mode < 5; ++mode) {
      CHECK(cudaMemset(counters, 0, groups * 4));
      // Each replay restarts from q = 1 (a copy in the graph), so the last q is checkable.
      t[mode] = time_graph(st, steps, [&] {
        CHECK(cudaMemcpyAsync(q0, q_init, ones_n * 4, cudaMemcpyDeviceToDevice, st));
        if (mode == 2 || mode == 3) CHECK(cudaMemsetAsync(llpart, 0, size_t(g) * kWidth * 8, st));
        for (int s = 0; s < steps; ++s) {
          const float* in = (s & 1) ? q1 : q0;
          float* out = (s & 1) ? q0 : q1;
          if (mode == 0) launch(b_none, g, true, st, in, out, part, splits);
          if (mode == 1) launch(b_counter, g, true, st, in, out, part, counters, splits);
          if (mode == 2) launch(b_ll, g, true, st, in, out, llpart, splits, s);
          if (mode == 3) launch(b_ll_batched, g, true, st, in, out, llpart, splits, s);
          if (mode == 4) launch(b_counter_batched, g, true, st, in, out, part, counters, splits);
        }
      });
      CHECK(cudaStreamSynchronize(st));
      std::vector<float> got(ones_n);
      CHECK(cudaMemcpy(got.data(), (steps & 1) ? q1 : q0, ones_n * 4, cudaMemcpyDeviceToHost));
      const std::vector<float> want = host_q(groups, splits, steps, mode == 0);
      bool same = true;
      for (int i = 0; i < ones_n; ++i)
        if (!(got[i] == want[i]) || !std::isfinite(got[i])) same = false;
      verdict[mode] = same ? "ok" : "MISMATCH";
    }
    std::printf("%-10d %10.3f %10.3f %10.3f %10.3f %11.3f   %s %s %s %s %s\n", splits, t[0], t[1],
                t[2], t[3], t[4], verdict[0], verdict[1], verdict[2], verdict[3], verdict[4]);
  }
  CHECK(cudaDeviceSynchronize());
  return 0;
}
