// matmul_cuda / matmul_bias_cuda: y[m, n] = x[m, k] · W[n, k]ᵀ (+ bias[n]) through cuBLASLt, bf16
// x / W / bias / y, fp32 accumulation (CUBLAS_COMPUTE_32F), the bias added in fp32 by the BIAS
// epilogue before the single rounding of y to bf16.
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
// queries the heuristic for the exact m only when none fits. Descriptors and the chosen algorithm
// are cached per exact problem, so after warm-up a call is a hash lookup plus cublasLtMatmul: no
// allocation and no heuristic (safe inside CUDA-graph capture). The workspace (split-K partials)
// is allocated once, at creation.
//
// Bound: decode (m <= 64) reads n·k·2 bytes of weights for 2·m·n·k FLOPs: memory bound; prefill
// (m in the thousands) is compute bound.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <unordered_map>
#include <vector>

#include "core/check.h"
#include "core/cuda_check.h"
#include "ops/matmul/matmul.h"

namespace roofline {

namespace {

// Heuristic candidates kept per m bucket: the first one that AlgoCheck accepts for an exact m is
// used, so a bucket rarely needs a second query.
constexpr int kBucketCandidates = 4;
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
  uint32_t align_x, align_w, align_y, align_bias;
  bool bias;
  bool operator==(const ProblemKey& o) const {
    return m == o.m && n == o.n && k == o.k && ldy == o.ldy && align_x == o.align_x &&
           align_w == o.align_w && align_y == o.align_y && align_bias == o.align_bias &&
           bias == o.bias;
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
    mix(key.bias ? 1 : 0);
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
};

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

  ~Impl() {
    if (workspace) cudaFree(workspace);
    if (preference) cublasLtMatmulPreferenceDestroy(preference);
    if (handle) cublasLtDestroy(handle);
  }

  // Up to `count` heuristic results for the problem described by `desc`, best first.
  std::vector<cublasLtMatmulHeuristicResult_t> query(const ProblemKey& key, const Descriptors& desc,
                                                     int count) {
    const uint32_t alignments[4] = {key.align_w, key.align_x, key.align_y, key.align_y};
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
  return ctx;
}

int64_t MatmulCudaContext::num_cached_problems() const {
  return static_cast<int64_t>(impl_->plans.size());
}

int64_t MatmulCudaContext::num_heuristic_queries() const { return impl_->heuristic_queries; }

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

void matmul_cuda_impl(const MatmulParams& p, MatmulCudaContext::Impl& impl, cudaStream_t stream,
                      bool with_bias) {
  ROOFLINE_CHECK(p.m >= 0 && p.n > 0 && p.k > 0);
  ROOFLINE_CHECK(p.y_row_stride >= p.n);
  ROOFLINE_CHECK(p.dtype == DType::kBF16 && p.w_dtype == DType::kBF16);
  if (with_bias) {
    ROOFLINE_CHECK(p.bias != nullptr && p.bias_dtype == DType::kBF16);
    ROOFLINE_CHECK_MSG(bias_epilogue_rounds_once(p), kBiasAlignmentMessage);
  }
  if (p.m == 0) return;
  ROOFLINE_CHECK(p.x != nullptr && p.w != nullptr && p.y != nullptr);

  ProblemKey key{};
  key.m = p.m;
  key.n = p.n;
  key.k = p.k;
  key.ldy = p.y_row_stride;
  key.align_x = alignment_bytes(p.x);
  key.align_w = alignment_bytes(p.w);
  key.align_y = alignment_bytes(p.y);
  key.align_bias = with_bias ? alignment_bytes(p.bias) : 0;
  key.bias = with_bias;
  Plan& plan = impl.plan_for(key, p.bias);
  if (with_bias) plan.desc.set_bias(p.bias);

  const float alpha = 1.0f;
  const float beta = 0.0f;
  ROOFLINE_CUBLAS_CHECK(
      cublasLtMatmul(impl.handle, plan.desc.op, &alpha, p.w, plan.desc.a, p.x, plan.desc.b, &beta,
                     p.y, plan.desc.d, p.y, plan.desc.d, &plan.algo, impl.workspace,
                     static_cast<size_t>(MatmulCudaContext::kWorkspaceBytes), stream));
  ROOFLINE_CUDA_LAUNCH_CHECK(stream);
}

}  // namespace

void matmul_cuda(const MatmulParams& p, MatmulCudaContext& ctx, CudaStream stream) {
  matmul_cuda_impl(p, *ctx.impl_, stream, /*with_bias=*/false);
}

void matmul_bias_cuda(const MatmulParams& p, MatmulCudaContext& ctx, CudaStream stream) {
  matmul_cuda_impl(p, *ctx.impl_, stream, /*with_bias=*/true);
}

}  // namespace roofline
