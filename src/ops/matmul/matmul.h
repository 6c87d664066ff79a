// matmul: y = x · Wᵀ with W in nn.Linear layout [n, k], fp32 accumulation; matmul_bias adds a
// bias row and matmul_residual adds a residual matrix (y = x · Wᵀ + residual: the o and down
// projections writing the new residual stream in one kernel), both as GEMM epilogues before the
// single rounding of y. The output row stride lets several weights write adjacent column ranges of
// one buffer (q|k|v, gate|up) without concatenating the weights on the host.
//
// RMSNorm prologue (any of the three, when MatmulParams::norm_weight is set): the GEMM multiplies
// rms_norm(x) · norm_weight instead of x — the norm before every qkv and gate_up projection of a
// decoder, without a kernel of its own where the implementation can fold it in. Our skinny kernel
// does (it sums each row's squares while it multiplies, scales x by norm_weight on its way to the
// tensor cores and y by the row's 1 / rms before the epilogue); the CPU backend and cuBLASLt run
// rms_norm into `normed` first.
//
// SwiGLU epilogue (MatmulParams::swiglu, no bias or residual): W stacks the gated MLP's gate rows
// then its up rows ([2I, k], n = 2I), and y is the activation itself, y[:, j] = silu(x·W[j]) ·
// (x·W[I + j]) for j < I — the gate_up projection and silu_mul in one kernel where the
// implementation can (the skinny kernel pairs gate row j with up row j in one tile); cuBLASLt and
// the CPU write the [m, 2I] product to `gate_up` and run silu_mul over it.
//
// RoPE epilogue (MatmulParams::qkv_rope, no residual, no SwiGLU): the product is the fused q|k|v
// projection ([m, n], n = (num_heads + 2·num_kv_heads)·head_dim) and the call ends with qkv_rope
// over it (MatmulParams::rope: rotated q to rope.q_out, rotated k and v into the paged KV cache) —
// the qkv projection and qkv_rope in one kernel where the implementation can (the skinny kernel
// pairs each head's rows i and i + head_dim / 2 in one tile and rotates them in its epilogue);
// cuBLASLt and the CPU write the product to y ([m, n], dense: the scratch) and run qkv_rope over
// it.
//
// Logit tile summaries (MatmulParams::summaries, the LM head; plain, bias or residual epilogue):
// besides y, the call leaves the summaries of y's rows in the step's epoch (logit_tiles.h), which
// sample_rows_tiles_cuda samples from without reading the rows again. They describe y as stored
// (rounded, bias and residual added). The skinny kernel writes them in its epilogue where their
// tiles are whole 16-column blocks (matmul_skinny_fuses_summaries), the wide kernel where they are
// 8 to 128 tokens dividing its 128-column tile (matmul_wide_fuses_summaries); otherwise, and on
// cuBLASLt and the CPU, the summaries' own pass runs over y after the GEMM
// (summarize_logit_tiles_cuda / _cpu).
//
// Element types: the CPU backend takes f32 activations (x, y, residual) and f32/f16/bf16 weights
// and bias; the CUDA backend takes bf16 for all of them, with fp32 accumulation, through cuBLASLt
// or, for decode's m <= 64 rows, our weight-streaming kernel (matmul_skinny.h) — whichever measured
// faster for the shape.
#pragma once

#include <cstdint>
#include <memory>

#include "core/cuda_stream.h"
#include "core/dtype.h"
#include "ops/qkv_rope/qkv_rope.h"
#include "ops/rms_norm/rms_norm.h"
#include "ops/sampling/logit_tiles.h"
#include "ops/silu_mul/silu_mul.h"

namespace roofline {

struct MatmulParams {
  const void* x = nullptr;  // [m, k] in dtype, row stride k
  const void* w = nullptr;  // [n, k] in w_dtype
  DType w_dtype = DType::kF32;
  const void* bias = nullptr;  // [n] in bias_dtype; read only by matmul_bias_*
  DType bias_dtype = DType::kF32;
  // [m, n] in dtype, row stride y_row_stride; read only by matmul_residual_*; may be y itself.
  const void* residual = nullptr;
  void* y = nullptr;          // [m, n] in dtype, row stride y_row_stride (>= n)
  DType dtype = DType::kF32;  // of x and y
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  int64_t y_row_stride = 0;
  // The RMSNorm prologue: when norm_weight is set, x is the un-normalised rows and the GEMM
  // multiplies x / sqrt(mean_k(x²) + norm_eps) · norm_weight. `normed` ([m, k] in dtype, row stride
  // k) is where an implementation that normalises in a kernel of its own writes the normalised
  // rows: required with norm_weight, read by nothing after the call.
  const void* norm_weight = nullptr;  // [k] in norm_weight_dtype
  DType norm_weight_dtype = DType::kF32;
  float norm_eps = 1e-6f;
  void* normed = nullptr;
  // The SwiGLU epilogue: y is [m, n / 2] (row stride y_row_stride == n / 2) = silu(gate) · up of
  // the [m, n] product, whose first n / 2 columns are the gate; `gate_up` ([m, n] in dtype) is the
  // scratch of implementations that materialise the product. Required with swiglu.
  bool swiglu = false;
  void* gate_up = nullptr;
  // The RoPE epilogue: when qkv_rope is set, y is the [m, n] q|k|v product (dense: y_row_stride ==
  // n), the scratch of implementations that materialise it, and the call applies qkv_rope with
  // `rope` to it (rope.qkv, num_tokens and dtype are the call's own: y, m and dtype).
  bool qkv_rope = false;
  QkvRopeParams rope;
  // The logit tile summaries of y (logit_tiles.h: [m, logit_tiles(n, tile_tokens)] words and [m]
  // row counts), in epoch *summaries.epoch: what the LM head leaves for sample_rows_tiles_cuda.
  // Off when summaries.words is null; with the plain, bias or residual epilogue only (see
  // matmul_summaries_unsupported_reason).
  LogitTileSummaries summaries;
};

// What a matmul adds to x · Wᵀ before y is stored (rounded once, on the GPU).
enum class MatmulEpilogue : uint8_t {
  kNone,      // y = x · Wᵀ             (matmul_*)
  kBias,      // y = x · Wᵀ + bias      (matmul_bias_*)
  kResidual,  // y = x · Wᵀ + residual  (matmul_residual_*)
};

// The RMSNorm an implementation without a fused prologue runs first: p.x normalised into p.normed.
inline RmsNormParams matmul_prologue_norm(const MatmulParams& p) {
  RmsNormParams n;
  n.x = p.x;
  n.weight = p.norm_weight;
  n.weight_dtype = p.norm_weight_dtype;
  n.out = p.normed;
  n.num_rows = p.m;
  n.hidden = p.k;
  n.eps = p.norm_eps;
  n.dtype = p.dtype;
  return n;
}

// The GEMM such an implementation runs after it: over p.normed, without the prologue.
inline MatmulParams matmul_prologue_product(const MatmulParams& p) {
  MatmulParams q = p;
  q.x = p.normed;
  q.norm_weight = nullptr;
  return q;
}

// Why p's SwiGLU epilogue cannot run with `epilogue` (nullptr when it can): every implementation
// needs the [m, n] scratch, an even n (gate rows, then up rows), no other epilogue and a dense
// [m, n / 2] y.
inline const char* matmul_swiglu_unsupported_reason(const MatmulParams& p,
                                                    MatmulEpilogue epilogue) {
  if (p.gate_up == nullptr)
    return "the matmul's SwiGLU epilogue needs params.gate_up ([m, n] scratch)";
  if (epilogue != MatmulEpilogue::kNone || p.n % 2 != 0 || p.y_row_stride != p.n / 2)
    return "the SwiGLU epilogue takes an even n, no bias or residual, and a dense y";
  return nullptr;
}

// The activation an implementation without a fused SwiGLU epilogue runs after the GEMM:
// silu_mul of p.gate_up into p.y.
inline SiluMulParams matmul_swiglu_activation(const MatmulParams& p) {
  SiluMulParams s;
  s.gate_up = p.gate_up;
  s.out = p.y;
  s.num_tokens = p.m;
  s.intermediate = p.n / 2;
  s.dtype = p.dtype;
  return s;
}
// What such an implementation's GEMM computes instead: the [m, n] product into p.gate_up.
inline MatmulParams matmul_swiglu_product(const MatmulParams& p) {
  MatmulParams q = p;
  q.swiglu = false;
  q.y = p.gate_up;
  q.y_row_stride = p.n;
  return q;
}

// Why p's RoPE epilogue cannot run with `epilogue` (nullptr when it can): every implementation
// needs n to be the q|k|v width of rope's heads, a dense y (the product's scratch), no residual and
// no SwiGLU.
inline const char* matmul_rope_unsupported_reason(const MatmulParams& p, MatmulEpilogue epilogue) {
  const QkvRopeParams& r = p.rope;
  if (epilogue == MatmulEpilogue::kResidual || p.swiglu)
    return "the matmul's RoPE epilogue takes no residual and no SwiGLU epilogue";
  if (r.num_heads < 1 || r.num_kv_heads < 1 || r.head_dim < 2 || r.head_dim % 2 != 0 ||
      p.n != (r.num_heads + 2 * r.num_kv_heads) * r.head_dim)
    return "the matmul's RoPE epilogue needs n = (num_heads + 2 * num_kv_heads) * head_dim, "
           "head_dim even";
  if (p.y_row_stride != p.n)
    return "the matmul's RoPE epilogue needs a dense y (the q|k|v product's scratch)";
  return nullptr;
}

// The qkv_rope an implementation without a fused RoPE epilogue runs after the GEMM, over the
// product in p.y.
inline QkvRopeParams matmul_rope_pass(const MatmulParams& p) {
  QkvRopeParams r = p.rope;
  r.qkv = p.y;
  r.num_tokens = p.m;
  r.dtype = p.dtype;
  return r;
}
// What such an implementation's GEMM computes first: the product into p.y.
inline MatmulParams matmul_rope_product(const MatmulParams& p) {
  MatmulParams q = p;
  q.qkv_rope = false;
  return q;
}

// Why p's logit tile summaries cannot be written (nullptr when they can, or when they are off):
// they describe an f32 or bf16 y of the plain, bias or residual epilogue (the SwiGLU and RoPE
// epilogues' y is no row of logits), within logit_tiles_unsupported_reason's limits for n.
inline const char* matmul_summaries_unsupported_reason(const MatmulParams& p) {
  if (p.summaries.words == nullptr) return nullptr;
  if (p.swiglu || p.qkv_rope)
    return "the matmul's logit tile summaries take the plain, bias or residual epilogue only (no "
           "SwiGLU or RoPE epilogue)";
  if (p.dtype != DType::kF32 && p.dtype != DType::kBF16)
    return "the matmul's logit tile summaries take an f32 or bf16 y";
  return logit_tiles_unsupported_reason(p.summaries, p.n);
}

// Why a CUDA GEMM epilogue cannot write p's logit tile summaries (nullptr when it can, or when they
// are off): matmul_summaries_unsupported_reason's, then words and counts 8-byte aligned (the
// epilogues' 64-bit stores and atomics). Whether a kernel fuses them at all is its own domain
// (matmul_skinny_fuses_summaries, matmul_wide_fuses_summaries).
inline const char* matmul_summaries_epilogue_reason(const MatmulParams& p) {
  if (const char* reason = matmul_summaries_unsupported_reason(p)) return reason;
  if (p.summaries.words == nullptr) return nullptr;
  if (reinterpret_cast<uintptr_t>(p.summaries.words) % 8 != 0 ||
      reinterpret_cast<uintptr_t>(p.summaries.nonfinite) % 8 != 0)
    return "the logit tile summaries' words must be 8-byte aligned";
  return nullptr;
}

// CPU backend: dtype == kF32.
void matmul_cpu(const MatmulParams& p);
void matmul_bias_cpu(const MatmulParams& p);
void matmul_residual_cpu(const MatmulParams& p);

// Which implementation a CUDA matmul runs. kAuto: our skinny kernel or cuBLASLt (and our wide
// kernel where ROOFLINE_MATMUL_WIDE=1 makes it a candidate), whichever measured faster for the
// (m bucket, n, k, epilogue) (problems the skinny kernel cannot take always go to cuBLASLt),
// cuBLASLt with the algorithm that measured fastest among its heuristic's first few; kCublas /
// kSkinny / kWide force one (tests, benchmarks; kCublas with the heuristic's algorithm, untuned).
// Forcing kSkinny or kWide on a problem outside its domain (matmul_skinny_unsupported_reason,
// matmul_wide_unsupported_reason) aborts with the reason. The wide kernel (matmul_wide.h) runs the
// plain product; the RMSNorm prologue and the SwiGLU and RoPE epilogues run around it as kernels of
// their own, as they do around cuBLASLt.
enum class MatmulImpl : uint8_t { kAuto, kCublas, kSkinny, kWide };

// Whether the skinny kernel's launch plan may choose its few-token variant (kAuto), must not
// (kOff: ROOFLINE_SKINNY_FEW_TOKENS=0, A/B runs) or must wherever m <= 4 and K is not split (kOn:
// the tests). See matmul_skinny_launch.
enum class MatmulSkinnyFewTokens { kAuto, kOff, kOn };

// Where the skinny kernel runs a problem's RMSNorm prologue (MatmulParams::norm_weight): in the
// kernel, its warps copying their own K slices of each stage (kFused) or the block copying each
// stage together (kFusedBlockCopies: the same bits, faster on some shapes and GPUs;
// MatmulSkinnyLaunch::norm_warp_slices), or as rms_norm_cuda into p.normed before the plain
// product (kApart), as cuBLASLt and the wide kernel run it. kAuto (the default) lets the selection
// time all three, so that a problem
// whose fused prologue costs the kernel more than the norm kernel and its handover (the LM head
// with the final norm folded in measured ~3 % slower fused on Llama-3-8B:
// bench/results/2026-12-02-epilogue-preload.md) runs it apart: the graph pass that folds a norm
// into its GEMM can then never make the step slower than the two kernels it replaced. A forced
// skinny kernel (kSkinny, ROOFLINE_MATMUL_IMPL=skinny) fuses it unless kApart is set.
enum class MatmulSkinnyNorm : uint8_t { kAuto, kFused, kFusedBlockCopies, kApart };

// The GEMM state of the CUDA backend: a cuBLASLt handle and workspace, the skinny kernel's split-K
// workspace (both allocated once at creation), the cuBLASLt algorithm chosen per (m bucket, n, k,
// row stride, alignments, epilogue) (by heuristic, or by measurement for the problems kAuto
// measures) and the implementation chosen per (m bucket, n, k, epilogue),
// cached so that after warm-up a call allocates nothing, queries no heuristic and measures nothing
// (CUDA-graph capture safe). The implementation choice is measured the first time a problem is seen
// outside stream capture; see matmul_cuda.cu for what happens inside one. Not thread-safe, and its
// workspaces serve one stream at a time: one context per executor stream.
class MatmulCudaContext {
 public:
  static constexpr int64_t kWorkspaceBytes = int64_t{32} << 20;  // cuBLASLt split-K scratch

  // Aborts when no CUDA device or cuBLASLt is usable (a broken invariant of a CUDA backend).
  static std::unique_ptr<MatmulCudaContext> create();
  ~MatmulCudaContext();
  MatmulCudaContext(const MatmulCudaContext&) = delete;
  MatmulCudaContext& operator=(const MatmulCudaContext&) = delete;

  // Distinct (m, n, k, …) problems seen so far, and heuristic queries made for them (for tests:
  // one query per m bucket unless the bucket's algorithm rejects the exact m).
  int64_t num_cached_problems() const;
  int64_t num_heuristic_queries() const;

  // Forces an implementation for every later call (kAuto: measure and choose, the default), and a
  // split count for the skinny kernel (0: matmul_skinny_launch chooses). For tests and benchmarks.
  void set_impl(MatmulImpl impl);
  void set_skinny_splits(int splits);
  // A split count for the wide kernel (0: matmul_wide_launch chooses).
  void set_wide_splits(int splits);
  // Whether the skinny kernel's splits may merge in thread-block clusters (default true; false
  // sends every split through the workspace): the tests' A/B of the two merges.
  void set_skinny_cluster_merge(bool allowed);
  // The skinny launches' few-token variant: chosen by the plan (kAuto, the default), off or forced.
  void set_skinny_few_tokens(MatmulSkinnyFewTokens mode);
  // Where the skinny kernel runs the RMSNorm prologue: chosen by measurement (kAuto, the default),
  // fused (in warp slices or block copies) or apart (ROOFLINE_SKINNY_NORM=fused|block|apart for
  // every context created afterwards).
  void set_skinny_norm(MatmulSkinnyNorm mode);
  // Implementation choices this context measured (one per (m bucket, n, k, epilogue) that no
  // context of the process had measured before: choices are shared per device, so that two contexts
  // never disagree), and calls that found no choice while their stream was being captured (they
  // ran cuBLASLt, unmeasured).
  int64_t num_impl_measurements() const;
  int64_t num_unmeasured_captures() const;
  // Candidates those measurements timed: the skinny kernel, the wide kernel and each cuBLASLt
  // algorithm.
  int64_t num_timed_candidates() const;
  // The implementation the last call ran (kCublas, kSkinny or kWide; kAuto before any call).
  MatmulImpl last_impl() const;
  // Whether the last call ran its RMSNorm prologue as rms_norm_cuda before the GEMM (always so on
  // cuBLASLt and the wide kernel; false for a call without the prologue).
  bool last_norm_apart() const;
  // Whether the last call ran the prologue fused with block copies (false for warp slices, apart,
  // or a call without the prologue).
  bool last_norm_block_copies() const;

  struct Impl;  // cuBLASLt types live in matmul_cuda.cu only

 private:
  MatmulCudaContext();
  std::unique_ptr<Impl> impl_;
  friend void matmul_cuda(const MatmulParams&, MatmulCudaContext&, CudaStream);
  friend void matmul_bias_cuda(const MatmulParams&, MatmulCudaContext&, CudaStream);
  friend void matmul_residual_cuda(const MatmulParams&, MatmulCudaContext&, CudaStream);
};

// The m bucket whose cached algorithm serves a GEMM with m rows: the next power of two >= m. A pure
// host function, tested on the CPU.
constexpr int64_t matmul_cuda_m_bucket(int64_t m) {
  int64_t bucket = 1;
  while (bucket < m) bucket *= 2;
  return bucket;
}

// CUDA backend: dtype == w_dtype (== bias_dtype for matmul_bias_cuda) == kBF16; every pointer on
// the device (the summaries' words 8-byte aligned). matmul_bias_cuda also needs n, k and
// y_row_stride multiples of 8 and x, w, bias and y 16-byte aligned (true of every real model's
// projections) when it runs on cuBLASLt: otherwise cuBLASLt's bias epilogue rounds twice, so such a
// call runs the skinny kernel when that supports it and aborts otherwise (or when cuBLASLt is
// forced). matmul_residual_cuda adds the residual (on cuBLASLt as C with beta = 1), rounding once.
// Asynchronous on `stream`; launches nothing when m == 0.
void matmul_cuda(const MatmulParams& p, MatmulCudaContext& ctx, CudaStream stream);
void matmul_bias_cuda(const MatmulParams& p, MatmulCudaContext& ctx, CudaStream stream);
void matmul_residual_cuda(const MatmulParams& p, MatmulCudaContext& ctx, CudaStream stream);

// Forgets the process-wide implementation choices and tuned cuBLASLt algorithms (contexts keep
// those they already hold), so a test can watch a fresh context measure. For tests only.
void matmul_cuda_forget_shared_choices();

}  // namespace roofline
