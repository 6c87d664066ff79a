// matmul_cuda / matmul_bias_cuda / matmul_residual_cuda: y[m, n] = x[m, k] · W[n, k]ᵀ (+ bias[n] |
// + residual[m, n]), bf16 x / W / bias / residual / y, fp32 accumulation, one rounding of y to
// bf16. Three implementations: cuBLASLt (CUBLAS_COMPUTE_32F; the bias added in fp32 by the BIAS
// epilogue, the residual as C with beta = 1) and, for m <= 64, our two weight-streaming kernels:
// the skinny one (matmul_skinny_cuda.cu: 16 weight rows a tile, mma.sync) and the wide one
// (matmul_wide_cuda.cu: 128 weight rows a tile, wgmma from copy-engine stages). The RMSNorm
// prologue (p.norm_weight) and the SwiGLU and RoPE epilogues (p.swiglu, p.qkv_rope) run inside the
// skinny kernel; on cuBLASLt and the wide kernel they are rms_norm_cuda into p.normed before the
// GEMM and silu_mul_cuda over p.gate_up or qkv_rope_cuda over p.y after it. The logit tile
// summaries (p.summaries) likewise: the skinny kernel writes them in its epilogue where their tiles
// are whole 16-column blocks (matmul_skinny_fuses_summaries); everywhere else the GEMM runs as
// without them and summarize_logit_tiles_cuda then reads y once — not a fallback that gives
// something else, but the same words and counts composed of two kernels (and the selection's
// timings include that pass, as they include the unfused kernels above).
//
// Selection (kAuto): problems outside the skinny kernel's domain go to cuBLASLt. For the others,
// the choice is made per (m bucket, n, k, epilogue) by measurement, once: the first call of such a
// problem outside stream capture times the skinny kernel (with the RMSNorm prologue: fused in warp
// slices, fused in block copies, and apart as rms_norm_cuda before the plain product, see
// MatmulSkinnyNorm), cuBLASLt with each of the
// first kTuneCandidates algorithms its heuristic offers for the bucket's m, and with
// ROOFLINE_MATMUL_WIDE=1 the wide kernel (scratch x and y of the context, the caller's W or copies
// of it, its bias; the weights from HBM, as in a decode step: a weight of at most 48 MiB timed as
// a chain of back-to-back calls over copies of W, each read cold, as a step chains its kernels, a
// larger one as one call after an L2 flush (matmul_measure_chain); each chain or call behind a
// 3 us stand-in for the short kernel before it in the step's programmatic-dependent-launch chain,
// under which the skinny kernel already streams weights; cuBLASLt's time includes its
// rms_norm, silu_mul and qkv_rope kernels where the call has the prologue or the SwiGLU or RoPE
// epilogue; the candidates' reps interleaved) and caches the fastest; near-ties (within 2 %)
// between the skinny kernel and the faster of the wide kernel and the best cuBLASLt algorithm go to
// the skinny kernel (see kSkinnyMaxTimeRatio). The fastest cuBLASLt algorithm becomes the algorithm
// of every plan of that (m bucket, n, k, bias, residual) product that it runs with operands at
// least as aligned as the measurement's, whichever implementation won (ROOFLINE_MATMUL_TUNE=N times
// the heuristic's first N instead; 0 or 1: its first only, the behaviour before tuning). Both
// choices are also published to a process-wide table per device that every context consults before
// measuring: the timings are noisy, and two contexts in one process (a graph-replaying and an eager
// runner compared bit for bit, say) must not pick different implementations or algorithms for the
// same problem. A call that finds no choice while its stream is being captured cannot measure (no
// synchronisation, no allocation inside a capture): it runs cuBLASLt, the implementation every
// shape supports, so a graph captured without warm-up is still deterministic and correct (and
// counted, for tests). matmul_bias_cuda on shapes where cuBLASLt would round twice (see
// kBiasAlignmentMessage) runs the skinny kernel whenever it can, measurement or not: it rounds
// once. ROOFLINE_MATMUL_IMPL=cublas in the environment forces cuBLASLt with its heuristic's
// algorithms, untuned, for every context created afterwards (the "before" of a decode step
// comparison, or a way around a suspected skinny-kernel problem without a rebuild);
// ROOFLINE_MATMUL_IMPL=skinny takes the skinny kernel for every problem it supports (the other side
// of that comparison), ROOFLINE_MATMUL_IMPL=wide the wide kernel for every problem it supports.
//
// Layout: cuBLASLt is column-major. A row-major [r, c] matrix with row stride ld is the
// column-major [c, r] matrix with leading dimension ld, so the row-major product y = x · Wᵀ is the
// column-major product yᵀ = W' · xᵀ where
//   A = W as stored: column-major [k, n], ld k, used transposed (TRANSA = T) -> op(A) is [n, k];
//   B = x as stored: column-major [k, m], ld k, used as is (TRANSB = N);
//   C = D = y as stored: column-major [n, m], ld y_row_stride.
// (cuBLASLt's M, N, K are our n, m, k.) This "TN" form is cuBLASLt's best-supported layout, and
// the bias vector runs along D's rows (length n), i.e. one bias value per output column of y.
//
// Algorithm choice: cublasLtMatmulAlgoGetHeuristic once per (m bucket, n, k, y row stride,
// pointer alignments, epilogue), for the bucket's upper bound m (matmul_cuda_m_bucket: the next
// power of two); each exact m then checks the bucket's candidates with cublasLtMatmulAlgoCheck and
// queries the heuristic for the exact m only when none fits; a tuned algorithm (above) replaces it
// where it runs the exact problem. Descriptors and the chosen algorithm are cached per exact
// problem, so after warm-up a call is a hash lookup plus cublasLtMatmul: no
// allocation and no heuristic (safe inside CUDA-graph capture). The workspace (split-K partials)
// is allocated once, at creation.
//
// Bound: decode (m <= 64) reads n·k·2 bytes of weights for 2·m·n·k FLOPs: memory bound; prefill
// (m in the thousands) is compute bound.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/check.h"
#include "core/cuda_check.h"
#include "core/log.h"
#include "ops/common/cuda_launch.cuh"
#include "ops/common/env_switch.h"
#include "ops/matmul/matmul.h"
#include "ops/matmul/matmul_measure.h"
#include "ops/matmul/matmul_skinny.h"
#include "ops/matmul/matmul_wide.h"

namespace roofline {

namespace {

// Heuristic candidates kept per m bucket: the first one that AlgoCheck accepts for an exact m is
// used, so a bucket rarely needs a second query.
constexpr int kBucketCandidates = 4;
// cuBLASLt algorithms the implementation measurement times for a decode problem (the heuristic's
// first ones; see measure_impl).
constexpr int kTuneCandidates = 8;
constexpr int kMaxTuneCandidates = 64;
// cuBLASLt assumes 256-byte aligned pointers unless told otherwise; we tell it the real alignment.
constexpr uint32_t kMaxAlignmentBytes = 256;

[[noreturn]] void cublas_check_failed(cublasStatus_t status, const char* expr, const char* file,
                                      int line) {
  std::fprintf(stderr, "roofline: cuBLASLt error %d (%s) in %s at %s:%d\n",
               static_cast<int>(status), cublasLtGetStatusString(status), expr, file, line);
  std::abort();
}

#define ROOFLINE_CUBLAS_CHECK(expr)                                                 \
  do {                                                                              \
    cublasStatus_t roofline_status_ = (expr);                                       \
    if (roofline_status_ != CUBLAS_STATUS_SUCCESS)                                  \
      ::roofline::cublas_check_failed(roofline_status_, #expr, __FILE__, __LINE__); \
  } while (0)

// The largest power of two (<= 256) that divides the address.
uint32_t alignment_bytes(const void* ptr) {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  uint32_t a = kMaxAlignmentBytes;
  while (a > 1 && address % a != 0) a /= 2;
  return a;
}

struct ProblemKey {
  int64_t m, n, k, ldy;
  uint32_t align_x, align_w, align_y, align_bias, align_c;  // align_c: the residual's, else y's
  bool bias;
  bool residual;
  bool operator==(const ProblemKey& o) const {
    return m == o.m && n == o.n && k == o.k && ldy == o.ldy && align_x == o.align_x &&
           align_w == o.align_w && align_y == o.align_y && align_bias == o.align_bias &&
           align_c == o.align_c && bias == o.bias && residual == o.residual;
  }
};

struct ProblemKeyHash {
  size_t operator()(const ProblemKey& key) const {
    uint64_t h = 1469598103934665603ull;
    auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    mix(static_cast<uint64_t>(key.m));
    mix(static_cast<uint64_t>(key.n));
    mix(static_cast<uint64_t>(key.k));
    mix(static_cast<uint64_t>(key.ldy));
    mix(key.align_x | (uint64_t{key.align_w} << 16) | (uint64_t{key.align_y} << 32) |
        (uint64_t{key.align_bias} << 48));
    mix(key.align_c | (key.bias ? uint64_t{1} << 32 : 0) | (key.residual ? uint64_t{1} << 33 : 0));
    return static_cast<size_t>(h);
  }
};

// The descriptors of one problem (for an exact m, or a bucket's upper bound).
struct Descriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr;  // W
  cublasLtMatrixLayout_t b = nullptr;  // x
  cublasLtMatrixLayout_t d = nullptr;  // y (also C)

  Descriptors(const ProblemKey& key, const void* bias) {
    ROOFLINE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t transpose = CUBLAS_OP_T;
    const cublasOperation_t no_transpose = CUBLAS_OP_N;
    ROOFLINE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA,
                                                         &transpose, sizeof(transpose)));
    ROOFLINE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB,
                                                         &no_transpose, sizeof(no_transpose)));
    const cublasLtEpilogue_t epilogue =
        key.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    ROOFLINE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                         &epilogue, sizeof(epilogue)));
    if (key.bias) {
      const int32_t bias_type = CUDA_R_16BF;
      ROOFLINE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                           &bias_type, sizeof(bias_type)));
      set_bias(bias);
    }
    const auto rows = [](int64_t v) { return static_cast<uint64_t>(v); };
    ROOFLINE_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, rows(key.k), rows(key.n), key.k));
    ROOFLINE_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, rows(key.k), rows(key.m), key.k));
    ROOFLINE_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&d, CUDA_R_16BF, rows(key.n), rows(key.m), key.ldy));
  }
  ~Descriptors() {
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;

  // The bias pointer is a descriptor attribute; its alignment is part of the cache key, so
  // swapping in another pointer of the same alignment keeps the chosen algorithm valid.
  void set_bias(const void* bias) {
    ROOFLINE_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  }
};

// A problem ready to run: its descriptors and the algorithm checked for them.
struct Plan {
  explicit Plan(const ProblemKey& key, const void* bias) : desc(key, bias) {}
  Descriptors desc;
  cublasLtMatmulAlgo_t algo{};
  // The shared tuned-algorithm generation this plan's algo reflects (see SharedChoices).
  uint64_t tuned_generation = 0;
};

bool same_algo(const cublasLtMatmulAlgo_t& a, const cublasLtMatmulAlgo_t& b) {
  return std::memcmp(&a, &b, sizeof(a)) == 0;
}

// A cuBLASLt algorithm that measured fastest, with the problem it was measured on. cuBLASLt's
// algorithm check sees the descriptors but not the pointers: an algorithm found for 256-byte
// aligned operands may need that alignment, so it is used only where every operand is at least
// as aligned as in the measurement.
struct TunedAlgo {
  cublasLtMatmulAlgo_t algo{};
  ProblemKey measured{};
  bool aligned_for(const ProblemKey& key) const {
    return key.align_x >= measured.align_x && key.align_w >= measured.align_w &&
           key.align_y >= measured.align_y && key.align_bias >= measured.align_bias &&
           key.align_c >= measured.align_c;
  }
};

// What runs a problem: the implementation and, for the skinny kernel with the RMSNorm prologue,
// whether the prologue runs apart (rms_norm_cuda, then the plain product) or, fused, with block
// copies rather than warp slices (MatmulSkinnyNorm).
struct MatmulChoice {
  MatmulImpl impl = MatmulImpl::kCublas;
  bool norm_apart = false;
  bool norm_block_copies = false;
};

// The process-wide choices (see the header comment), per device: the implementation per (m
// bucket, n, k, epilogue, prologue, SwiGLU, RoPE, summaries), and the cuBLASLt algorithm that
// measured fastest per (m bucket, n, k, bias, residual) of the product cuBLASLt runs. The first
// answer for a key stands. `generation` counts the algorithms published, so a plan notices a new
// one with one atomic load per call. Never destroyed: contexts may outlive static destruction
// order.
struct SharedChoices {
  std::mutex mutex;
  std::map<std::tuple<int, int64_t, int64_t, int64_t, MatmulEpilogue, bool, bool, bool, bool>,
           MatmulChoice>
      choices;
  std::map<std::tuple<int, int64_t, int64_t, int64_t, bool, bool>, TunedAlgo> algos;
  std::atomic<uint64_t> generation{0};
};
SharedChoices& shared_choices() {
  static SharedChoices* shared = new SharedChoices();
  return *shared;
}

std::tuple<int, int64_t, int64_t, int64_t, bool, bool> tuned_key(int device,
                                                                 const ProblemKey& key) {
  return {device, matmul_cuda_m_bucket(key.m), key.n, key.k, key.bias, key.residual};
}

}  // namespace

struct MatmulCudaContext::Impl {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;  // workspace limit; alignments set per query
  void* workspace = nullptr;
  // Heuristic results per bucket key (m replaced by the bucket's upper bound).
  std::unordered_map<ProblemKey, std::vector<cublasLtMatmulHeuristicResult_t>, ProblemKeyHash>
      buckets;
  std::unordered_map<ProblemKey, std::unique_ptr<Plan>, ProblemKeyHash> plans;
  int64_t heuristic_queries = 0;

  // The skinny kernel: its split-K workspace, the device facts its launch plan and the measurement
  // need, and the implementation selector's state.
  MatmulSkinnyWorkspace skinny_workspace;
  int num_sms = 0;
  int64_t l2_bytes = 0;
  int device = 0;
  MatmulImpl forced = MatmulImpl::kAuto;
  bool prefer_skinny = false;  // ROOFLINE_MATMUL_IMPL=skinny: the skinny kernel wherever it can
  bool prefer_wide = false;    // ROOFLINE_MATMUL_IMPL=wide: the wide kernel wherever it can
  // Whether the selection times the wide kernel: not by default, because in a chain of calls it
  // measured at best level with cuBLASLt while the selector's single timed call sometimes favoured
  // it (bench/results/2026-12-01-wide-decode-gemm.md); ROOFLINE_MATMUL_WIDE=1 makes it one. Nor
  // for an LM head with logit tile summaries, which it writes in its epilogue: slower there than
  // cuBLASLt with their own pass at every m (bench/results/2026-12-04-sampling-wide-summaries.md).
  bool wide_candidate = false;
  int skinny_splits = 0;  // 0: matmul_skinny_launch chooses
  int wide_splits = 0;    // 0: matmul_wide_launch chooses
  // The wide kernel's launches per (m, n, k, wide_splits), planned once: the plan asks the device
  // for its SM count and its cluster occupancy.
  std::map<std::tuple<int64_t, int64_t, int64_t, int>, MatmulWideLaunch> wide_launches;
  bool skinny_cluster_merge = true;  // MatmulSkinnyLaunch::cluster_merge of every launch
  MatmulSkinnyFewTokens skinny_few_tokens = MatmulSkinnyFewTokens::kAuto;
  // The RoPE epilogue fused where matmul_skinny_fuses_rope allows (ROOFLINE_SKINNY_ROPE=0: never,
  // the product then qkv_rope_cuda; A/B runs).
  bool skinny_fuse_rope = true;
  // Where the skinny kernel runs the RMSNorm prologue (set_skinny_norm, ROOFLINE_SKINNY_NORM).
  MatmulSkinnyNorm skinny_norm = MatmulSkinnyNorm::kAuto;
  // (m bucket, n, k, epilogue, RMSNorm prologue, SwiGLU, RoPE, logit tile summaries) -> what
  // measured fastest.
  std::map<std::tuple<int64_t, int64_t, int64_t, MatmulEpilogue, bool, bool, bool, bool>,
           MatmulChoice>
      choices;
  int64_t measurements = 0;
  int64_t timed_candidates = 0;
  int64_t unmeasured_captures = 0;
  // cuBLASLt algorithms a measurement times (ROOFLINE_MATMUL_TUNE; 0 or 1: the heuristic's first
  // only, i.e. untuned).
  int tune_candidates = kTuneCandidates;
  MatmulImpl last = MatmulImpl::kAuto;
  bool last_norm_apart = false;
  bool last_norm_block_copies = false;

  ~Impl() {
    if (skinny_workspace.partials) cudaFree(skinny_workspace.partials);
    if (skinny_workspace.counters) cudaFree(skinny_workspace.counters);
    if (workspace) cudaFree(workspace);
    if (preference) cublasLtMatmulPreferenceDestroy(preference);
    if (handle) cublasLtDestroy(handle);
  }

  // Up to `count` heuristic results for the problem described by `desc`, best first.
  std::vector<cublasLtMatmulHeuristicResult_t> query(const ProblemKey& key, const Descriptors& desc,
                                                     int count) {
    const uint32_t alignments[4] = {key.align_w, key.align_x, key.align_c, key.align_y};
    const cublasLtMatmulPreferenceAttributes_t attrs[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; ++i) {
      ROOFLINE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
          preference, attrs[i], &alignments[i], sizeof(alignments[i])));
    }
    std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(count));
    int returned = 0;
    ++heuristic_queries;
    const cublasStatus_t status =
        cublasLtMatmulAlgoGetHeuristic(handle, desc.op, desc.a, desc.b, desc.d, desc.d, preference,
                                       count, results.data(), &returned);
    if (status != CUBLAS_STATUS_SUCCESS) returned = 0;
    results.resize(static_cast<size_t>(returned));
    return results;
  }

  // True when `algo` runs the exact problem of `plan` within our workspace.
  bool fits(const Plan& plan, const cublasLtMatmulAlgo_t& algo) {
    cublasLtMatmulHeuristicResult_t result{};
    const cublasStatus_t status = cublasLtMatmulAlgoCheck(
        handle, plan.desc.op, plan.desc.a, plan.desc.b, plan.desc.d, plan.desc.d, &algo, &result);
    return status == CUBLAS_STATUS_SUCCESS &&
           result.workspaceSize <= static_cast<size_t>(MatmulCudaContext::kWorkspaceBytes);
  }

  Plan& plan_for(const ProblemKey& key, const void* bias) {
    auto it = plans.find(key);
    if (it != plans.end()) return *it->second;

    auto plan = std::make_unique<Plan>(key, bias);
    ProblemKey bucket_key = key;
    bucket_key.m = matmul_cuda_m_bucket(key.m);
    auto bucket = buckets.find(bucket_key);
    if (bucket == buckets.end()) {
      const Descriptors bucket_desc(bucket_key, bias);
      bucket = buckets.emplace(bucket_key, query(bucket_key, bucket_desc, kBucketCandidates)).first;
    }
    bool found = false;
    for (const auto& candidate : bucket->second) {
      if (fits(*plan, candidate.algo)) {
        plan->algo = candidate.algo;
        found = true;
        break;
      }
    }
    if (!found) {
      for (const auto& candidate : query(key, plan->desc, kBucketCandidates)) {
        if (fits(*plan, candidate.algo)) {
          plan->algo = candidate.algo;
          found = true;
          break;
        }
      }
    }
    if (!found) {
      std::fprintf(stderr,
                   "roofline: cuBLASLt has no bf16 algorithm for m=%lld n=%lld k=%lld "
                   "y_row_stride=%lld (alignments x %u, w %u, y %u, bias %u)\n",
                   static_cast<long long>(key.m), static_cast<long long>(key.n),
                   static_cast<long long>(key.k), static_cast<long long>(key.ldy), key.align_x,
                   key.align_w, key.align_y, key.align_bias);
      std::abort();
    }
    return *plans.emplace(key, std::move(plan)).first->second;
  }

  // Brings plan's algorithm up to date with the process's tuned algorithms: the one measured
  // fastest for its (m bucket, n, k, bias, residual), where that runs this exact problem. One
  // atomic load when nothing new was published.
  void refresh_tuned(const ProblemKey& key, Plan& plan) {
    SharedChoices& shared = shared_choices();
    const uint64_t generation = shared.generation.load(std::memory_order_acquire);
    if (plan.tuned_generation == generation) return;
    plan.tuned_generation = generation;
    TunedAlgo tuned;
    {
      std::lock_guard<std::mutex> lock(shared.mutex);
      const auto it = shared.algos.find(tuned_key(device, key));
      if (it == shared.algos.end()) return;
      tuned = it->second;
    }
    if (!same_algo(tuned.algo, plan.algo) && tuned.aligned_for(key) && fits(plan, tuned.algo))
      plan.algo = tuned.algo;
  }
};

MatmulCudaContext::MatmulCudaContext() : impl_(std::make_unique<Impl>()) {}
MatmulCudaContext::~MatmulCudaContext() = default;

std::unique_ptr<MatmulCudaContext> MatmulCudaContext::create() {
  std::unique_ptr<MatmulCudaContext> ctx(new MatmulCudaContext());
  Impl& impl = *ctx->impl_;
  ROOFLINE_CUBLAS_CHECK(cublasLtCreate(&impl.handle));
  ROOFLINE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&impl.preference));
  const uint64_t workspace_bytes = kWorkspaceBytes;
  ROOFLINE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      impl.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
      sizeof(workspace_bytes)));
  // Split-K partial sums must stay in f32: the in-place and output-type reduction schemes keep
  // them in bf16 (y's type) and round every partial sum, which costs more than one bf16 rounding.
  const uint32_t reduction_schemes = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  ROOFLINE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      impl.preference, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reduction_schemes,
      sizeof(reduction_schemes)));
  ROOFLINE_CUDA_CHECK(cudaMalloc(&impl.workspace, static_cast<size_t>(kWorkspaceBytes)));

  int l2_bytes = 0;
  ROOFLINE_CUDA_CHECK(cudaGetDevice(&impl.device));
  ROOFLINE_CUDA_CHECK(
      cudaDeviceGetAttribute(&impl.num_sms, cudaDevAttrMultiProcessorCount, impl.device));
  ROOFLINE_CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, impl.device));
  impl.l2_bytes = l2_bytes;
  ROOFLINE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&impl.skinny_workspace.partials),
                                 static_cast<size_t>(kMatmulSkinnyPartialBytes)));
  const size_t counter_bytes = static_cast<size_t>(kMatmulSkinnyMaxCounters) * sizeof(uint32_t);
  ROOFLINE_CUDA_CHECK(
      cudaMalloc(reinterpret_cast<void**>(&impl.skinny_workspace.counters), counter_bytes));
  // Zero once: every skinny launch leaves the counters at zero.
  ROOFLINE_CUDA_CHECK(cudaMemset(impl.skinny_workspace.counters, 0, counter_bytes));
  ROOFLINE_CUDA_CHECK(cudaDeviceSynchronize());

  switch (env_choice("ROOFLINE_MATMUL_IMPL", {"auto", "cublas", "skinny", "wide"},
                     "auto (measured, the default), cublas, skinny or wide")) {
    case 1:
      impl.forced = MatmulImpl::kCublas;
      break;
    case 2:
      impl.prefer_skinny = true;
      break;
    case 3:
      impl.prefer_wide = true;
      break;
    default:
      break;
  }
  // ROOFLINE_SKINNY_FEW_TOKENS: 0 off, 1 where the plan chooses it (the default), all wherever
  // m <= 4 and K is not split (A/B runs of the variant on other shapes).
  constexpr MatmulSkinnyFewTokens kFewTokens[] = {
      MatmulSkinnyFewTokens::kAuto, MatmulSkinnyFewTokens::kOff, MatmulSkinnyFewTokens::kOn};
  impl.skinny_few_tokens = kFewTokens[env_choice(
      "ROOFLINE_SKINNY_FEW_TOKENS", {"1", "0", "all"},
      "1 (where the plan chooses it), 0 (off) or all (wherever m <= 4 and K is not split)")];
  impl.skinny_fuse_rope =
      env_switch("ROOFLINE_SKINNY_ROPE", "never fuse", "fuse where the plan allows");
  // ROOFLINE_SKINNY_NORM: where the skinny kernel runs the RMSNorm prologue (A/B runs).
  constexpr MatmulSkinnyNorm kNorms[] = {MatmulSkinnyNorm::kAuto, MatmulSkinnyNorm::kFused,
                                         MatmulSkinnyNorm::kFusedBlockCopies,
                                         MatmulSkinnyNorm::kApart};
  impl.skinny_norm =
      kNorms[env_choice("ROOFLINE_SKINNY_NORM", {"auto", "fused", "block", "apart"},
                        "auto (measured, the default), fused (in the kernel, warp slices), block "
                        "(in the kernel, block copies) or apart (rms_norm_cuda first)")];
  impl.wide_candidate = env_choice("ROOFLINE_MATMUL_WIDE", {"0", "1"},
                                   "0 (not a candidate, the default) or 1 (a candidate)") == 1;
  if (const char* env = std::getenv("ROOFLINE_MATMUL_TUNE")) {
    char* end = nullptr;
    const long value = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && value >= 0 && value <= kMaxTuneCandidates) {
      impl.tune_candidates = std::max<int>(static_cast<int>(value), 1);
    } else {
      ROOFLINE_LOG(kWarning, "ROOFLINE_MATMUL_TUNE='"
                                 << env << "' is not a count of cuBLASLt algorithms in [0, "
                                 << kMaxTuneCandidates << "]: ignored (" << kTuneCandidates << ")");
    }
  }
  return ctx;
}

int64_t MatmulCudaContext::num_cached_problems() const {
  return static_cast<int64_t>(impl_->plans.size());
}

int64_t MatmulCudaContext::num_heuristic_queries() const { return impl_->heuristic_queries; }

void MatmulCudaContext::set_impl(MatmulImpl impl) { impl_->forced = impl; }

void MatmulCudaContext::set_skinny_splits(int splits) {
  impl_->skinny_splits = std::max(splits, 0);
}

void MatmulCudaContext::set_wide_splits(int splits) { impl_->wide_splits = std::max(splits, 0); }

void MatmulCudaContext::set_skinny_cluster_merge(bool allowed) {
  impl_->skinny_cluster_merge = allowed;
}

void MatmulCudaContext::set_skinny_norm(MatmulSkinnyNorm mode) { impl_->skinny_norm = mode; }

void MatmulCudaContext::set_skinny_few_tokens(MatmulSkinnyFewTokens mode) {
  impl_->skinny_few_tokens = mode;
}

int64_t MatmulCudaContext::num_impl_measurements() const { return impl_->measurements; }

int64_t MatmulCudaContext::num_timed_candidates() const { return impl_->timed_candidates; }

int64_t MatmulCudaContext::num_unmeasured_captures() const { return impl_->unmeasured_captures; }

MatmulImpl MatmulCudaContext::last_impl() const { return impl_->last; }

bool MatmulCudaContext::last_norm_apart() const { return impl_->last_norm_apart; }
bool MatmulCudaContext::last_norm_block_copies() const { return impl_->last_norm_block_copies; }

namespace {

// Measured on the H200 (cuBLASLt 13.1): when y (pointer or row stride), n or k is not a multiple of
// 16 bytes / 8 elements, the algorithms cuBLASLt offers round x·Wᵀ to bf16 before the BIAS
// epilogue adds the bias (errors up to one bf16 ulp, twice the single rounding); with everything
// 16-byte aligned the f32 sum plus bias is rounded once. Real models' projections always qualify.
constexpr const char* kBiasAlignmentMessage =
    "matmul_bias_cuda needs n, k and y_row_stride multiples of 8 and x, W, bias and y 16-byte "
    "aligned (cuBLASLt rounds twice otherwise)";

bool bias_epilogue_rounds_once(const MatmulParams& p) {
  return p.n % 8 == 0 && p.k % 8 == 0 && p.y_row_stride % 8 == 0 && alignment_bytes(p.x) >= 16 &&
         alignment_bytes(p.w) >= 16 && alignment_bytes(p.bias) >= 16 && alignment_bytes(p.y) >= 16;
}

// The logit tile summaries of p's y, where the implementation did not write them in its epilogue:
// summarize_logit_tiles_cuda over y once the GEMM (bias and residual included) has stored it.
void summarize_product(const MatmulParams& p, cudaStream_t stream) {
  if (p.summaries.words == nullptr) return;
  summarize_logit_tiles_cuda(p.y, p.dtype, p.m, p.n, p.y_row_stride, p.summaries, stream);
}

// The GEMM cuBLASLt runs for p: without the prologue (over p.normed, after rms_norm_cuda),
// without the SwiGLU epilogue (into p.gate_up, before silu_mul_cuda) and without the RoPE epilogue
// (into p.y, before qkv_rope_cuda).
MatmulParams cublas_product(const MatmulParams& p) {
  MatmulParams q = p.norm_weight != nullptr ? matmul_prologue_product(p) : p;
  if (q.qkv_rope) q = matmul_rope_product(q);
  return q.swiglu ? matmul_swiglu_product(q) : q;
}

ProblemKey problem_key(const MatmulParams& p, MatmulEpilogue epilogue) {
  const bool with_bias = epilogue == MatmulEpilogue::kBias;
  const bool with_residual = epilogue == MatmulEpilogue::kResidual;
  ProblemKey key{};
  key.m = p.m;
  key.n = p.n;
  key.k = p.k;
  key.ldy = p.y_row_stride;
  key.align_x = alignment_bytes(p.x);
  key.align_w = alignment_bytes(p.w);
  key.align_y = alignment_bytes(p.y);
  key.align_bias = with_bias ? alignment_bytes(p.bias) : 0;
  key.align_c = with_residual ? alignment_bytes(p.residual) : key.align_y;
  key.bias = with_bias;
  key.residual = with_residual;
  return key;
}

// p on cuBLASLt (with rms_norm_cuda before it for the prologue, silu_mul_cuda or qkv_rope_cuda
// after it for the SwiGLU or RoPE epilogue), with the plan's algorithm or, when the measurement
// times candidates, `algo` (which must run the product: it came from the heuristic for exactly this
// problem).
void cublas_matmul(const MatmulParams& p, MatmulCudaContext::Impl& impl, cudaStream_t stream,
                   MatmulEpilogue epilogue, const cublasLtMatmulAlgo_t* algo = nullptr) {
  if (p.norm_weight != nullptr) rms_norm_cuda(matmul_prologue_norm(p), stream);
  const MatmulParams q = cublas_product(p);
  const bool with_bias = epilogue == MatmulEpilogue::kBias;
  const bool with_residual = epilogue == MatmulEpilogue::kResidual;
  if (with_bias) ROOFLINE_CHECK_MSG(bias_epilogue_rounds_once(q), kBiasAlignmentMessage);
  const ProblemKey key = problem_key(q, epilogue);
  Plan& plan = impl.plan_for(key, q.bias);
  if (impl.forced != MatmulImpl::kCublas) impl.refresh_tuned(key, plan);
  if (with_bias) plan.desc.set_bias(q.bias);

  // D = alpha · op(A) · B + beta · C: C = residual with beta = 1 adds it in fp32 before D's single
  // rounding (C and D share y's layout; C may be D itself).
  const float alpha = 1.0f;
  const float beta = with_residual ? 1.0f : 0.0f;
  const void* c = with_residual ? q.residual : q.y;
  ROOFLINE_CUBLAS_CHECK(cublasLtMatmul(
      impl.handle, plan.desc.op, &alpha, q.w, plan.desc.a, q.x, plan.desc.b, &beta, c, plan.desc.d,
      q.y, plan.desc.d, algo != nullptr ? algo : &plan.algo, impl.workspace,
      static_cast<size_t>(MatmulCudaContext::kWorkspaceBytes), stream));
  ROOFLINE_CUDA_LAUNCH_CHECK(stream);
  if (p.swiglu) silu_mul_cuda(matmul_swiglu_activation(p), stream);
  if (p.qkv_rope) qkv_rope_cuda(matmul_rope_pass(p), stream);
  summarize_product(p, stream);
}

// p on the skinny kernel: with the RMSNorm prologue fused (in warp slices, or with
// norm_block_copies in block copies), or with norm_apart rms_norm_cuda into p.normed first and the
// plain product over it; with the RoPE epilogue fused where
// matmul_skinny_fuses_rope says so, else its product into p.y and qkv_rope_cuda over it; with the
// logit tile summaries fused where matmul_skinny_fuses_summaries says so, else the product
// without them and their own pass.
void skinny_matmul(const MatmulParams& p, MatmulCudaContext::Impl& impl, cudaStream_t stream,
                   MatmulEpilogue epilogue, bool norm_apart, bool norm_block_copies = false) {
  if (norm_apart && p.norm_weight != nullptr) {
    rms_norm_cuda(matmul_prologue_norm(p), stream);
    skinny_matmul(matmul_prologue_product(p), impl, stream, epilogue, false);
    return;
  }
  if (p.summaries.words != nullptr && !matmul_skinny_fuses_summaries(p)) {
    MatmulParams product = p;
    product.summaries = {};  // the launch may then split K
    skinny_matmul(product, impl, stream, epilogue, false);
    summarize_product(p, stream);
    return;
  }
  MatmulSkinnyLaunch launch =
      matmul_skinny_launch(p.m, p.n, p.k, impl.num_sms, impl.skinny_splits,
                           matmul_skinny_no_split(p), impl.skinny_few_tokens);
  launch.cluster_merge = impl.skinny_cluster_merge;
  launch.norm_warp_slices = !norm_block_copies;
  if (!p.qkv_rope || (impl.skinny_fuse_rope && matmul_skinny_fuses_rope(launch, impl.num_sms))) {
    matmul_skinny_cuda(p, epilogue, launch, impl.skinny_workspace, stream);
    return;
  }
  const MatmulParams product = matmul_rope_product(p);
  launch = matmul_skinny_launch(p.m, p.n, p.k, impl.num_sms, impl.skinny_splits,
                                matmul_skinny_no_split(product), impl.skinny_few_tokens);
  launch.cluster_merge = impl.skinny_cluster_merge;
  launch.norm_warp_slices = !norm_block_copies;
  matmul_skinny_cuda(product, epilogue, launch, impl.skinny_workspace, stream);
  qkv_rope_cuda(matmul_rope_pass(p), stream);
}

// p on the wide kernel (the product; rms_norm_cuda before it for the prologue, silu_mul_cuda or
// qkv_rope_cuda after it for the SwiGLU or RoPE epilogue, as on cuBLASLt), with the logit tile
// summaries in its epilogue where matmul_wide_fuses_summaries says so, else in their own pass.
void wide_matmul(const MatmulParams& p, MatmulCudaContext::Impl& impl, cudaStream_t stream,
                 MatmulEpilogue epilogue) {
  if (p.norm_weight != nullptr) rms_norm_cuda(matmul_prologue_norm(p), stream);
  MatmulParams q = cublas_product(p);
  const bool fused_summaries = matmul_wide_fuses_summaries(q);
  if (!fused_summaries) q.summaries = {};
  const auto key = std::make_tuple(q.m, q.n, q.k, impl.wide_splits);
  auto launch = impl.wide_launches.find(key);
  if (launch == impl.wide_launches.end())
    launch =
        impl.wide_launches.emplace(key, matmul_wide_cuda_launch(q.m, q.n, q.k, impl.wide_splits))
            .first;
  matmul_wide_cuda(q, epilogue, launch->second, stream);
  if (p.swiglu) silu_mul_cuda(matmul_swiglu_activation(p), stream);
  if (p.qkv_rope) qkv_rope_cuda(matmul_rope_pass(p), stream);
  if (!fused_summaries) summarize_product(p, stream);
}

// Why the wide kernel cannot run p (its product), or nullptr.
const char* wide_unsupported_reason(const MatmulParams& p, MatmulEpilogue epilogue) {
  return matmul_wide_unsupported_reason(cublas_product(p), epilogue);
}

// Timed calls per implementation in a measurement (median taken); each is preceded by an L2 flush.
constexpr int kMeasureReps = 7;
// The skinny kernel is chosen when its median takes less than this multiple of cuBLASLt's: a band
// around a tie, so run-to-run timing noise rarely flips a choice between processes, and one that
// leans to the skinny kernel, because one call timed between events carries ~7 us that both
// candidates share (launch, the stand-in, the first bytes after the flush), which pulls the ratio
// toward 1: on the H200, llama3-8b's q|k|v at m = 2 and 4 measured 0.986 and 1.001 here while 16
// calls chained in a graph, as a decode step runs them, gave the skinny kernel 0.93 and 0.97, and
// every near-tie measured here (q|k|v and gate_up at m = 1-4) was at least as fast on the skinny
// kernel in the chain (bench/results/2026-12-01-decode-attention-phase-trace.md). Shapes where
// cuBLASLt wins in the chain (gate_up at m = 8: 1.02) measured above the band (1.04).
constexpr float kSkinnyMaxTimeRatio = 1.02f;

// Reads a zero-filled buffer of `count` 16-byte words so that L2 afterwards holds clean lines of it
// and nothing of the weights. A read, not a memset: a memset would leave L2 full of dirty lines
// whose write-back would then compete with the timed GEMM for HBM bandwidth.
__global__ void l2_flush_kernel(const uint4* buffer, int64_t count, uint32_t* sink) {
  uint32_t acc = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint4 v = buffer[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;  // never true of zeros; keeps the loads alive
}

// How long the measurement's stand-in for the kernel before a decode GEMM runs. At decode every
// GEMM follows a short, latency-bound kernel (an RMSNorm, the gated activation, decode attention:
// 2-10 us at batch 1) in a programmatic-dependent-launch chain, and an implementation that issues
// its weight loads before griddepcontrol.wait (the skinny kernel) streams part of its weights
// while that kernel runs, which cuBLASLt's kernels cannot. Timing each candidate alone would hide
// that difference.
constexpr int64_t kChainPredecessorNs = 3000;

// The stand-in: one warp that waits `ns` nanoseconds of the global timer after its own
// griddepcontrol.wait, having let the next kernel launch (as every kernel of the step does).
__global__ void chain_predecessor_kernel(int64_t ns) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  uint64_t start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < static_cast<uint64_t>(ns));
}

// A device allocation for the duration of one measurement; null when the device is out of memory
// (the measurement happens after the backend sized its KV cache to the free memory).
struct ScratchMemory {
  void* ptr = nullptr;
  explicit ScratchMemory(size_t bytes) {
    if (cudaMalloc(&ptr, bytes) != cudaSuccess) {
      cudaGetLastError();  // clear the error: the caller goes on without this buffer
      ptr = nullptr;
    }
  }
  ~ScratchMemory() {
    if (ptr) cudaFree(ptr);
  }
  ScratchMemory(const ScratchMemory&) = delete;
  ScratchMemory& operator=(const ScratchMemory&) = delete;
};

// What a measurement found: the implementation to run, and the cuBLASLt algorithm that measured
// fastest for the product (tuned: false when the process already had one for it, which was then
// the only cuBLASLt candidate timed).
struct Measured {
  MatmulChoice choice;
  bool tuned = false;
  TunedAlgo algo;
};

// Times the candidates for p's (m bucket, n, k, epilogue) and returns the fastest: the skinny
// kernel, and cuBLASLt with each of the first kTuneCandidates algorithms its heuristic offers for
// the product (the heuristic ranks by a model of the GPU, and at decode sizes its first choice is
// often not the fastest; only the process's tuned algorithm when one exists, so that every
// context runs the same one). Each call runs behind the stand-in for the kernel before it in a
// decode step (see kChainPredecessorNs; the same for all, so it cancels in the comparison), and the
// candidates' timed calls are interleaved, rep by rep, so a clock or host drift during the
// measurement moves them all alike. Runs outside stream capture only (it allocates and
// synchronises). x, y and the residual are the context's scratch (the caller's y may alias its
// residual, and its x has only p.m rows); W and the bias are the caller's, read only. Without
// memory for the flush buffer (twice L2) the weights may be partly L2-resident for all candidates
// alike: the comparison stays fair, if optimistic. Without memory for x and y (a few MB) nothing
// can be timed: cuBLASLt with its heuristic's algorithm, as inside a capture.
Measured measure_impl(const MatmulParams& p, MatmulCudaContext::Impl& impl, cudaStream_t stream,
                      MatmulEpilogue epilogue) {
  Measured result;
  const int64_t m = matmul_cuda_m_bucket(p.m);
  ScratchMemory x(static_cast<size_t>(m * p.k) * 2);
  ScratchMemory y(static_cast<size_t>(m * p.n) * 2);
  ScratchMemory normed(p.norm_weight != nullptr ? static_cast<size_t>(m * p.k) * 2 : 16);
  ScratchMemory gate_up(p.swiglu ? static_cast<size_t>(m * p.n) * 2 : 16);
  // The RoPE epilogue's destinations: q [m, heads · D], one cache slot (every token writes slot 0,
  // at position 0), the positions and the slot map (zeros).
  const QkvRopeParams& rope = p.rope;
  const size_t kv_bytes =
      p.qkv_rope ? static_cast<size_t>(rope.num_kv_heads * rope.head_dim) * 2 : 16;
  ScratchMemory q_out(p.qkv_rope ? static_cast<size_t>(m * rope.num_heads * rope.head_dim) * 2
                                 : 16);
  ScratchMemory k_cache(kv_bytes), v_cache(kv_bytes);
  ScratchMemory positions(p.qkv_rope ? static_cast<size_t>(m) * 4 : 16);
  ScratchMemory slots(p.qkv_rope ? static_cast<size_t>(m) * 8 : 16);
  // The logit tile summaries' words and row counts for the bucket's m rows, and their epoch (1).
  const bool summarized = p.summaries.words != nullptr;
  const int64_t summary_tiles = summarized ? logit_tiles(p.n, p.summaries.tile_tokens) : 0;
  ScratchMemory summary_words(summarized ? static_cast<size_t>(m * summary_tiles) * 8 : 16);
  ScratchMemory summary_counts(summarized ? static_cast<size_t>(m) * 8 : 16);
  ScratchMemory summary_epoch(16);
  if (x.ptr == nullptr || y.ptr == nullptr || normed.ptr == nullptr || gate_up.ptr == nullptr ||
      q_out.ptr == nullptr || k_cache.ptr == nullptr || v_cache.ptr == nullptr ||
      positions.ptr == nullptr || slots.ptr == nullptr || summary_words.ptr == nullptr ||
      summary_counts.ptr == nullptr || summary_epoch.ptr == nullptr)
    return result;
  const size_t flush_bytes = static_cast<size_t>(2 * std::max<int64_t>(impl.l2_bytes, 1 << 20));
  ScratchMemory flush(flush_bytes);
  // A short weight's candidates are timed as chains of calls over copies of W that the flush
  // buffer holds instead (matmul_measure_chain): no flush then, every call reads a cold copy.
  const int64_t weight_bytes = p.n * p.k * dtype_size_bytes(p.w_dtype);
  const MatmulMeasureChain chain =
      flush.ptr != nullptr
          ? matmul_measure_chain(weight_bytes, impl.l2_bytes, static_cast<int64_t>(flush_bytes))
          : MatmulMeasureChain{};
  char* first_copy = nullptr;  // copy i at first_copy + i * chain.copy_stride
  const auto flush_l2 = [&] {
    if (flush.ptr == nullptr || chain.copies > 0) return;
    l2_flush_kernel<<<impl.num_sms * 4, 256, 0, stream>>>(static_cast<const uint4*>(flush.ptr),
                                                          static_cast<int64_t>(flush_bytes / 16),
                                                          static_cast<uint32_t*>(flush.ptr));
    ROOFLINE_CUDA_LAUNCH_CHECK(stream);
  };
  if (chain.copies > 0) {
    // W once, then the copies made so far doubled in one copy each time: a few copies, however
    // many thousand of a small weight the scratch holds.
    const int64_t offset =
        static_cast<int64_t>(reinterpret_cast<uintptr_t>(p.w) % kMatmulMeasureCopyAlign);
    first_copy = static_cast<char*>(flush.ptr) + offset;
    ROOFLINE_CUDA_CHECK(cudaMemcpyAsync(first_copy, p.w, static_cast<size_t>(weight_bytes),
                                        cudaMemcpyDeviceToDevice, stream));
    for (int64_t made = 1; made < chain.copies; made *= 2) {
      const int64_t more = std::min(made, chain.copies - made);
      const int64_t bytes = (more - 1) * chain.copy_stride + weight_bytes;
      ROOFLINE_CUDA_CHECK(cudaMemcpyAsync(first_copy + made * chain.copy_stride, first_copy,
                                          static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice,
                                          stream));
    }
  } else if (flush.ptr) {
    ROOFLINE_CUDA_CHECK(cudaMemsetAsync(flush.ptr, 0, flush_bytes, stream));
  }
  flush_l2();  // evicts the memset's dirty lines now, not during a timed call
  ROOFLINE_CUDA_CHECK(cudaMemsetAsync(x.ptr, 0, static_cast<size_t>(m * p.k) * 2, stream));
  ROOFLINE_CUDA_CHECK(cudaMemsetAsync(y.ptr, 0, static_cast<size_t>(m * p.n) * 2, stream));
  if (p.qkv_rope) {
    ROOFLINE_CUDA_CHECK(cudaMemsetAsync(positions.ptr, 0, static_cast<size_t>(m) * 4, stream));
    ROOFLINE_CUDA_CHECK(cudaMemsetAsync(slots.ptr, 0, static_cast<size_t>(m) * 8, stream));
  }
  if (summarized) {
    static const uint32_t kEpoch = 1;  // static: the copy may still read it after this returns
    ROOFLINE_CUDA_CHECK(
        cudaMemcpyAsync(summary_epoch.ptr, &kEpoch, 4, cudaMemcpyHostToDevice, stream));
  }

  MatmulParams q = p;
  q.m = m;
  q.x = x.ptr;
  q.y = y.ptr;
  q.y_row_stride = p.swiglu ? p.n / 2 : p.n;
  q.residual = epilogue == MatmulEpilogue::kResidual ? y.ptr : nullptr;
  q.normed = p.norm_weight != nullptr ? normed.ptr : nullptr;
  q.gate_up = p.swiglu ? gate_up.ptr : nullptr;
  if (p.qkv_rope) {
    q.rope.q_out = q_out.ptr;
    q.rope.k_cache = k_cache.ptr;
    q.rope.v_cache = v_cache.ptr;
    q.rope.positions = static_cast<const int32_t*>(positions.ptr);
    q.rope.slot_mapping = static_cast<const int64_t*>(slots.ptr);
    q.rope.block_size = 1;
    q.rope.num_blocks = 1;
  }
  if (summarized) {
    q.summaries.words = static_cast<uint64_t*>(summary_words.ptr);
    q.summaries.nonfinite = static_cast<uint64_t*>(summary_counts.ptr);
    q.summaries.epoch = static_cast<const uint32_t*>(summary_epoch.ptr);
  }

  // The cuBLASLt candidates: the tuned algorithm, or the heuristic's first few that run the
  // product.
  const MatmulParams product = cublas_product(q);
  const ProblemKey key = problem_key(product, epilogue);
  Plan& plan = impl.plan_for(key, product.bias);
  std::vector<cublasLtMatmulAlgo_t> algos;
  {
    SharedChoices& shared = shared_choices();
    std::lock_guard<std::mutex> lock(shared.mutex);
    const auto it = shared.algos.find(tuned_key(impl.device, key));
    if (it != shared.algos.end()) {
      // The only cuBLASLt candidate: the process's algorithm, or, where that cannot run this
      // problem, the plan's own.
      const bool runs = it->second.aligned_for(key) && impl.fits(plan, it->second.algo);
      algos.push_back(runs ? it->second.algo : plan.algo);
    }
  }
  result.tuned = algos.empty();
  if (result.tuned) {
    for (const auto& candidate : impl.query(key, plan.desc, impl.tune_candidates)) {
      const bool seen = std::any_of(algos.begin(), algos.end(),
                                    [&](const auto& a) { return same_algo(a, candidate.algo); });
      if (!seen && impl.fits(plan, candidate.algo)) algos.push_back(candidate.algo);
    }
    if (algos.empty()) algos.push_back(plan.algo);
  }

  // Candidate c < algos.size(): cuBLASLt with algos[c]; then the wide kernel where it takes the
  // problem; then the skinny kernel, with the RMSNorm prologue fused in warp slices, fused in block
  // copies and apart as impl.skinny_norm allows (without a prologue: once, as it is).
  const bool with_wide = impl.wide_candidate && wide_unsupported_reason(q, epilogue) == nullptr;
  const bool norm = p.norm_weight != nullptr;
  const MatmulSkinnyNorm mode = impl.skinny_norm;
  const bool any = mode == MatmulSkinnyNorm::kAuto;
  const bool with_fused = !norm || any || mode == MatmulSkinnyNorm::kFused;
  const bool with_block = norm && (any || mode == MatmulSkinnyNorm::kFusedBlockCopies);
  const bool with_apart = norm && (any || mode == MatmulSkinnyNorm::kApart);
  const size_t wide_at = algos.size();
  const size_t fused_at = wide_at + (with_wide ? 1 : 0);
  const size_t block_at = fused_at + (with_fused ? 1 : 0);
  const size_t apart_at = block_at + (with_block ? 1 : 0);
  const size_t candidates = apart_at + (with_apart ? 1 : 0);
  int64_t next_copy = 0;  // the chains' rotation over W's copies, across candidates and reps
  const auto call = [&](size_t c) {
    if (first_copy != nullptr) {
      q.w = first_copy + next_copy * chain.copy_stride;
      next_copy = (next_copy + 1) % chain.copies;
    }
    if (c >= fused_at) {
      skinny_matmul(q, impl, stream, epilogue, with_apart && c == apart_at,
                    with_block && c == block_at);
    } else if (with_wide && c == wide_at) {
      wide_matmul(q, impl, stream, epilogue);
    } else {
      cublas_matmul(q, impl, stream, epilogue, &algos[c]);
    }
  };
  // Warm-up: kernels load (and with copies, the copies' dirty lines leave L2 before any timing).
  for (size_t c = 0; c < candidates; ++c) {
    for (int i = 0; i < chain.calls; ++i) call(c);
  }
  std::vector<cudaEvent_t> events(2 * kMeasureReps * candidates);
  for (auto& e : events) ROOFLINE_CUDA_CHECK(cudaEventCreate(&e));
  for (int r = 0; r < kMeasureReps; ++r) {
    for (size_t c = 0; c < candidates; ++c) {
      const size_t at = 2 * (static_cast<size_t>(r) * candidates + c);
      flush_l2();
      ROOFLINE_CUDA_CHECK(cudaEventRecord(events[at], stream));
      cuda::launch_pdl(chain_predecessor_kernel, dim3(1), dim3(32), 0, stream, kChainPredecessorNs);
      for (int i = 0; i < chain.calls; ++i) call(c);
      ROOFLINE_CUDA_CHECK(cudaEventRecord(events[at + 1], stream));
    }
  }
  ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(stream));
  // A candidate's time: the median over reps of its chain's time per call (the stand-in's share
  // included).
  std::vector<float> median_ms(candidates);
  for (size_t c = 0; c < candidates; ++c) {
    std::vector<float> ms(kMeasureReps);
    for (int r = 0; r < kMeasureReps; ++r) {
      const size_t at = 2 * (static_cast<size_t>(r) * candidates + c);
      ROOFLINE_CUDA_CHECK(
          cudaEventElapsedTime(&ms[static_cast<size_t>(r)], events[at], events[at + 1]));
      ms[static_cast<size_t>(r)] /= static_cast<float>(chain.calls);
    }
    std::nth_element(ms.begin(), ms.begin() + kMeasureReps / 2, ms.end());
    median_ms[c] = ms[kMeasureReps / 2];
  }
  for (auto& e : events) ROOFLINE_CUDA_CHECK(cudaEventDestroy(e));
  ++impl.measurements;
  impl.timed_candidates += static_cast<int64_t>(candidates);

  const size_t best = static_cast<size_t>(
      std::min_element(median_ms.begin(), median_ms.begin() + static_cast<int64_t>(algos.size())) -
      median_ms.begin());
  result.algo = {algos[best], key};
  // The fastest of cuBLASLt and the wide kernel, then the skinny kernel against it (with its band).
  // The skinny kernel's own forms: the faster of the two fused copy layouts (one kernel either
  // way, the same bits), then the prologue apart only where that measured faster by more than the
  // band, since in the step it is one kernel and one handover more.
  const bool wide_wins = with_wide && median_ms[wide_at] < median_ms[best];
  const float other_ms = wide_wins ? median_ms[wide_at] : median_ms[best];
  const bool block_wins = with_block && (!with_fused || median_ms[block_at] < median_ms[fused_at]);
  const bool any_fused = with_fused || with_block;
  const float fused_ms = block_wins ? median_ms[block_at] : median_ms[fused_at];
  const bool apart_wins =
      with_apart && (!any_fused || kSkinnyMaxTimeRatio * median_ms[apart_at] < fused_ms);
  const float skinny_ms = apart_wins ? median_ms[apart_at] : fused_ms;
  result.choice.impl = skinny_ms < kSkinnyMaxTimeRatio * other_ms ? MatmulImpl::kSkinny
                       : wide_wins                                ? MatmulImpl::kWide
                                                                  : MatmulImpl::kCublas;
  result.choice.norm_apart = result.choice.impl == MatmulImpl::kSkinny && apart_wins;
  result.choice.norm_block_copies =
      result.choice.impl == MatmulImpl::kSkinny && !apart_wins && block_wins;
  // What the choice rests on (--verbose): each median includes the 3 us stand-in before the call,
  // or its share of it in a chain.
  ROOFLINE_LOG(
      kInfo,
      "matmul: m <= "
          << m << ", n " << p.n << ", k " << p.k
          << (p.norm_weight != nullptr ? ", rms_norm prologue" : "") << (p.swiglu ? ", SwiGLU" : "")
          << (p.qkv_rope ? ", RoPE" : "") << (summarized ? ", logit tile summaries" : "")
          << (epilogue == MatmulEpilogue::kBias       ? ", bias"
              : epilogue == MatmulEpilogue::kResidual ? ", residual"
                                                      : "")
          << ": skinny " << (with_fused ? median_ms[fused_at] * 1e3 : 0.0f)
          << " us, skinny block copies " << (with_block ? median_ms[block_at] * 1e3 : 0.0f)
          << " us, skinny after rms_norm " << (with_apart ? median_ms[apart_at] * 1e3 : 0.0f)
          << " us, wide " << (with_wide ? median_ms[wide_at] * 1e3 : 0.0f) << " us, cuBLASLt "
          << median_ms[best] * 1e3 << " us (best of " << algos.size() << " algorithms; "
          << (chain.calls > 1
                  ? "a call's share of a chain of " + std::to_string(chain.calls) + " over " +
                        std::to_string(chain.copies) + " copies of W, stand-in before it included"
                  : std::string("one call after an L2 flush, stand-in before it "
                                "included"))
          << "; 0: not timed) -> "
          << (result.choice.impl != MatmulImpl::kSkinny
                  ? (result.choice.impl == MatmulImpl::kWide ? "wide" : "cuBLASLt")
              : result.choice.norm_apart        ? "skinny after rms_norm"
              : result.choice.norm_block_copies ? "skinny block copies"
                                                : "skinny"));
  return result;
}

MatmulChoice choose_impl(const MatmulParams& p, MatmulCudaContext::Impl& impl, cudaStream_t stream,
                         MatmulEpilogue epilogue) {
  const char* unsupported = matmul_skinny_unsupported_reason(p, epilogue);
  // The skinny kernel where the choice is not measured: the prologue fused unless set apart.
  const MatmulChoice skinny{MatmulImpl::kSkinny, impl.skinny_norm == MatmulSkinnyNorm::kApart,
                            impl.skinny_norm == MatmulSkinnyNorm::kFusedBlockCopies};
  if (impl.forced == MatmulImpl::kSkinny) {
    ROOFLINE_CHECK_MSG(unsupported == nullptr, unsupported);
    return skinny;
  }
  if (impl.forced == MatmulImpl::kWide) {
    const char* wide_unsupported = wide_unsupported_reason(p, epilogue);
    ROOFLINE_CHECK_MSG(wide_unsupported == nullptr, wide_unsupported);
    return {MatmulImpl::kWide, false};
  }
  if (impl.forced == MatmulImpl::kCublas || unsupported != nullptr)
    return {MatmulImpl::kCublas, false};
  if (impl.prefer_skinny) return skinny;
  if (impl.prefer_wide && wide_unsupported_reason(p, epilogue) == nullptr)
    return {MatmulImpl::kWide, false};
  if (epilogue == MatmulEpilogue::kBias && !bias_epilogue_rounds_once(p)) return skinny;

  const auto key =
      std::make_tuple(matmul_cuda_m_bucket(p.m), p.n, p.k, epilogue, p.norm_weight != nullptr,
                      p.swiglu, p.qkv_rope, p.summaries.words != nullptr);
  const auto it = impl.choices.find(key);
  if (it != impl.choices.end()) return it->second;
  // With logit tile summaries the skinny kernel keeps the plain problem's choice where it writes
  // them in its epilogue: there they cost nothing measurable (-1.1 to +0.3 us on Llama-3-8B's LM
  // head at m = 1), while one call timed alone put cuBLASLt plus the summaries' own pass within
  // the band and chose it, 2 % slower in a chain of calls
  // (bench/results/2026-12-04-sampling-wide-summaries.md).
  if (p.summaries.words != nullptr && matmul_skinny_fuses_summaries(p)) {
    MatmulParams plain = p;
    plain.summaries = {};
    const MatmulChoice plain_choice = choose_impl(plain, impl, stream, epilogue);
    if (plain_choice.impl == MatmulImpl::kSkinny)
      return impl.choices.emplace(key, plain_choice).first->second;
  }
  const auto shared_key = std::tuple_cat(std::make_tuple(impl.device), key);
  SharedChoices& shared = shared_choices();
  {
    std::lock_guard<std::mutex> lock(shared.mutex);
    const auto found = shared.choices.find(shared_key);
    if (found != shared.choices.end())
      return impl.choices.emplace(key, found->second).first->second;
  }
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  ROOFLINE_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone) {
    // No measurement inside a capture (see the header comment): cuBLASLt, not cached, so a later
    // call outside capture still measures.
    ++impl.unmeasured_captures;
    return {MatmulImpl::kCublas, false};
  }
  const Measured measured = measure_impl(p, impl, stream, epilogue);
  MatmulChoice chosen = measured.choice;
  {
    // Another context may have measured the same problem meanwhile: the first answer stands.
    std::lock_guard<std::mutex> lock(shared.mutex);
    if (measured.tuned) {
      const auto tuned = tuned_key(impl.device, measured.algo.measured);
      if (shared.algos.emplace(tuned, measured.algo).second)
        shared.generation.fetch_add(1, std::memory_order_release);
    }
    chosen = shared.choices.emplace(shared_key, chosen).first->second;
  }
  impl.choices.emplace(key, chosen);
  return chosen;
}

void matmul_dispatch(const MatmulParams& p, MatmulCudaContext::Impl& impl, cudaStream_t stream,
                     MatmulEpilogue epilogue) {
  ROOFLINE_CHECK(p.m >= 0 && p.n > 0 && p.k > 0);
  if (p.swiglu) {
    const char* unsupported = matmul_swiglu_unsupported_reason(p, epilogue);
    ROOFLINE_CHECK_MSG(unsupported == nullptr, unsupported);
  } else if (p.qkv_rope) {
    const char* unsupported = matmul_rope_unsupported_reason(p, epilogue);
    ROOFLINE_CHECK_MSG(unsupported == nullptr, unsupported);
    ROOFLINE_CHECK_MSG(p.rope.kv_dtype == DType::kBF16, "the CUDA KV cache is bf16");
  } else {
    ROOFLINE_CHECK(p.y_row_stride >= p.n);
  }
  ROOFLINE_CHECK_MSG(p.dtype == DType::kBF16 && p.w_dtype == DType::kBF16,
                     "the CUDA matmul takes bf16 x, W and y");
  if (epilogue == MatmulEpilogue::kBias)
    ROOFLINE_CHECK_MSG(p.bias != nullptr && p.bias_dtype == DType::kBF16,
                       "matmul_bias_cuda needs a bf16 bias");
  if (epilogue == MatmulEpilogue::kResidual)
    ROOFLINE_CHECK_MSG(p.residual != nullptr, "matmul_residual_cuda needs a residual");
  if (p.norm_weight != nullptr)
    ROOFLINE_CHECK_MSG(p.normed != nullptr,
                       "the CUDA matmul's RMSNorm prologue needs params.normed ([m, k] scratch)");
  const char* no_summaries = matmul_summaries_unsupported_reason(p);
  ROOFLINE_CHECK_MSG(no_summaries == nullptr, no_summaries);
  if (p.m == 0) return;
  ROOFLINE_CHECK(p.x != nullptr && p.w != nullptr && p.y != nullptr);
  MatmulChoice use = choose_impl(p, impl, stream, epilogue);
  // A set mode overrides a choice measured under kAuto (the process-wide choices are shared).
  if (use.impl == MatmulImpl::kSkinny && impl.skinny_norm != MatmulSkinnyNorm::kAuto) {
    use.norm_apart = impl.skinny_norm == MatmulSkinnyNorm::kApart;
    use.norm_block_copies = impl.skinny_norm == MatmulSkinnyNorm::kFusedBlockCopies;
  }
  if (use.impl == MatmulImpl::kSkinny) {
    skinny_matmul(p, impl, stream, epilogue, use.norm_apart, use.norm_block_copies);
  } else if (use.impl == MatmulImpl::kWide) {
    wide_matmul(p, impl, stream, epilogue);
  } else {
    cublas_matmul(p, impl, stream, epilogue);
  }
  impl.last = use.impl;
  impl.last_norm_apart =
      p.norm_weight != nullptr && (use.impl != MatmulImpl::kSkinny || use.norm_apart);
  impl.last_norm_block_copies = p.norm_weight != nullptr && use.impl == MatmulImpl::kSkinny &&
                                !use.norm_apart && use.norm_block_copies;
}

}  // namespace

void matmul_cuda(const MatmulParams& p, MatmulCudaContext& ctx, CudaStream stream) {
  matmul_dispatch(p, *ctx.impl_, stream, MatmulEpilogue::kNone);
}

void matmul_bias_cuda(const MatmulParams& p, MatmulCudaContext& ctx, CudaStream stream) {
  matmul_dispatch(p, *ctx.impl_, stream, MatmulEpilogue::kBias);
}

void matmul_residual_cuda(const MatmulParams& p, MatmulCudaContext& ctx, CudaStream stream) {
  matmul_dispatch(p, *ctx.impl_, stream, MatmulEpilogue::kResidual);
}

void matmul_cuda_forget_shared_choices() {
  SharedChoices& shared = shared_choices();
  std::lock_guard<std::mutex> lock(shared.mutex);
  shared.choices.clear();
  shared.algos.clear();
}

}  // namespace roofline
