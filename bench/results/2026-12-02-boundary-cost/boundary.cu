// What a kernel boundary costs on the H200 against a grid-wide barrier inside one persistent
// kernel: the question behind a persistent decode-layer kernel (issue 8).
//
// Every "step" has the same all-to-all dependency a decode GEMM has on the kernel before it: each
// of G blocks reads all G values the previous step wrote (x), then writes one value of its own
// (its slice of y).
//   chain:      N kernels, one step each, captured in a CUDA graph; PDL on or off; each block
//               with `smem` bytes of dynamic shared memory (0: the next kernel's blocks fit beside
//               it on the SM; 120 KB: they do not, as with the GEMMs' rings).
//   persistent: one kernel of N steps, a grid-wide barrier between them (an arrival counter in
//               global memory, release add and acquire spin by one thread a block).
// Prints µs per step (median of 20 graph replays of N = 512 steps).
// Build: nvcc -O2 -std=c++17 -gencode arch=compute_90a,code=sm_90a boundary.cu -o boundary
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                      \
  do {                                                                                \
    cudaError_t e = (x);                                                              \
    if (e != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

__device__ __forceinline__ float step_body(const float* x, float* y, int g) {
  __shared__ float part[8];
  float s = 0.0f;
  for (int i = threadIdx.x; i < g; i += blockDim.x) s += x[i];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = s;
  __syncthreads();
  float t = 0.0f;
  if (threadIdx.x == 0) {
    for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) t += part[w];
    y[blockIdx.x] = t * 1e-3f + static_cast<float>(blockIdx.x);
  }
  __syncthreads();
  return t;
}

__global__ void chain_kernel(const float* x, float* y, int g) {
  extern __shared__ unsigned char dyn[];
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  if (threadIdx.x == 0) dyn[0] = 0;
  step_body(x, y, g);
}

__device__ __forceinline__ void grid_barrier(unsigned* counter, unsigned g) {
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

__global__ void persistent_kernel(float* a, float* b, int g, int steps, unsigned* counter) {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  for (int s = 0; s < steps; ++s) {
    const float* x = (s & 1) ? b : a;
    float* y = (s & 1) ? a : b;
    step_body(x, y, g);
    grid_barrier(counter, static_cast<unsigned>(g));
  }
}

static void launch(void (*k)(const float*, float*, int), int g, size_t smem, bool pdl,
                   cudaStream_t st, const float* x, float* y) {
  cudaLaunchConfig_t c = {};
  c.gridDim = dim3(g);
  c.blockDim = dim3(256);
  c.dynamicSmemBytes = smem;
  c.stream = st;
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  c.attrs = at;
  c.numAttrs = pdl ? 1 : 0;
  CHECK(cudaLaunchKernelEx(&c, k, x, y, g));
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
  return ms[ms.size() / 2] * 1000.0 / steps;
}

int main() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CHECK(cudaFuncSetAttribute(chain_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             120 * 1024));
  cudaStream_t st;
  CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  float *a, *b;
  unsigned* counter;
  CHECK(cudaMalloc(&a, 4096 * 4));
  CHECK(cudaMalloc(&b, 4096 * 4));
  CHECK(cudaMalloc(&counter, 4));
  CHECK(cudaMemset(a, 0, 4096 * 4));
  CHECK(cudaMemset(b, 0, 4096 * 4));
  CHECK(cudaMemset(counter, 0, 4));
  const int steps = 512;
  std::printf("us per step (median of 20 replays of %d steps), %d SMs\n", steps, sms);
  std::printf("%-34s %8s %8s\n", "mode", "G=132", "G=264");
  struct Chain {
    const char* name;
    bool pdl;
    size_t smem;
  };
  const Chain chains[] = {{"chain, PDL, no smem", true, 0},
                          {"chain, PDL, 120 KB smem a block", true, 120 * 1024},
                          {"chain, no PDL, no smem", false, 0},
                          {"chain, no PDL, 120 KB smem", false, 120 * 1024}};
  for (const Chain& c : chains) {
    double t[2];
    for (int i = 0; i < 2; ++i) {
      const int g = i == 0 ? sms : 2 * sms;
      if (c.smem > 0 && g > sms) {  // 120 KB: one block an SM; 2 per SM cannot be resident
        t[i] = -1;
        continue;
      }
      t[i] = time_graph(st, steps, [&] {
        for (int s = 0; s < steps; ++s)
          launch(chain_kernel, g, c.smem, c.pdl, st, (s & 1) ? b : a, (s & 1) ? a : b);
      });
    }
    std::printf("%-34s %8.3f %8.3f\n", c.name, t[0], t[1]);
  }
  double t[2];
  for (int i = 0; i < 2; ++i) {
    const int g = i == 0 ? sms : 2 * sms;
    t[i] = time_graph(st, steps, [&] {
      cudaLaunchConfig_t c = {};
      c.gridDim = dim3(g);
      c.blockDim = dim3(256);
      c.stream = st;
      CHECK(cudaLaunchKernelEx(&c, persistent_kernel, a, b, g, steps, counter));
    });
  }
  std::printf("%-34s %8.3f %8.3f\n", "persistent, grid barrier", t[0], t[1]);
  CHECK(cudaDeviceSynchronize());
  return 0;
}
