// sampling: turns logits into token ids. argmax (greedy, one row or a batch, CPU and CUDA);
// sample_cpu, one row's draw restricted by top-k and top-p given a uniform number in [0, 1) (an
// inverse-CDF lookup over the kept tokens in descending-probability order, so a fixed uniform
// always yields the same token); and sample_rows (below), the whole batched chain -- bias,
// penalties, temperature, top-k, top-p, min-p, a Philox draw, logprobs -- with per-row parameters,
// a CPU twin and one CUDA kernel that agree token for token.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/cuda_stream.h"
#include "core/dtype.h"
#include "ops/common/phase_trace.h"
#include "ops/sampling/logit_tiles.h"
#include "ops/sampling/sampling_math.h"

namespace roofline {

struct SamplingConfig {
  float temperature = 0.0f;  // 0: greedy
  int32_t top_k = 0;         // 0: all tokens
  float top_p = 1.0f;        // (0, 1]
};

// Index of the largest logit; the lowest index wins ties. NaN logits are never chosen; -1 when
// every logit is NaN (or vocab_size is 0), as sample_cpu.
int32_t argmax_cpu(const float* logits, int64_t vocab_size);

// Greedy decoding of a batch: argmax_cpu of every row of logits.
struct ArgmaxParams {
  const void* logits = nullptr;  // [num_rows, vocab_size] in dtype
  int32_t* out = nullptr;        // [num_rows]: the row's argmax, -1 for an all-NaN row
  int64_t num_rows = 0;
  int64_t vocab_size = 0;     // < INT32_MAX
  DType dtype = DType::kF32;  // of logits: kF32 or kBF16
};

// CPU backend: dtype kF32 or kBF16 (bf16 -> f32 is exact, so the result is the same either way).
void argmax_rows_cpu(const ArgmaxParams& p);
// CUDA backend: dtype kF32 or kBF16, every pointer on the device. Asynchronous on `stream`.
void argmax_cuda(const ArgmaxParams& p, CudaStream stream);

int32_t sample_cpu(const float* logits, int64_t vocab_size, const SamplingConfig& config,
                   double uniform);

// ---------------------------------------------------------------------------------------------
// The batched sampling chain: one launch turns [num_rows, vocab_size] logits into one token per
// row, every row with its own parameters, penalties, bias and random stream. Per row, in order
// (runtime/sampler.h's chain):
//   edits (logit bias, then repetition penalty over prompt + generated tokens, then frequency and
//   presence penalties over generated tokens; only the tokens of the row's edit list change)
//   -> temperature 0: argmax of the edited logits (lowest id on ties), no random number used
//   -> s = edited / temperature; rank by (s descending, id ascending)
//   -> top-k: the first k ranked (exactly k; top_k = 1 is the argmax of s)
//   -> top-p over the top-k survivors: rank r is kept while the weight ranked before it is below
//      top_p * (total weight of the survivors); the first is always kept
//   -> min-p: of those, the tokens whose relative probability exp(s - s_max) >= min_p
//   -> draw: U uniform in [0, kept weight) from Philox(seed, step); the first kept token in rank
//      order whose cumulative weight exceeds U.
// Weights are integers (sampling_math.h: floor(2^45 exp(s - s_max)) with a deterministic f32
// exp), so every sum, every top-p cut and the draw are exact integer arithmetic: the CPU twin and
// the GPU give the same token for the same inputs and seed, and the token is drawn from exactly
// the distribution those weights define (no approximation beyond the f32 exp itself).
// A row with a NaN or infinite logit, bad parameters or a bad edit list gets token -1 and error
// bits, never a token. If s_max overflows to +inf (tiny temperature) or every s is -inf, the first
// ranked token is the only candidate (runtime/sampler.h does the same).

// Per-row error bits (SampleRowsParams::errors).
enum SamplingError : uint32_t {
  kSamplingNonFiniteLogits = 1u,  // a NaN or +-inf logit: nonfinite_counts says how many
  kSamplingBadParams = 2u,        // a parameter out of its range (SamplingRowParams)
  kSamplingBadEdits = 4u,         // edit list outside the edit array, token out of [0, vocab),
                                  // a token listed twice, a negative count or in_prompt not 0/1
  kSamplingNeedsFullRow = 8u,     // sample_rows_tiles_cuda only: a valid row its tile summaries
                                  // cannot finish (sample_row_uses_tiles is false); no token
};

// The most top-n alternatives a row may ask for (OpenAI's top_logprobs limit).
constexpr int32_t kMaxTopLogprobs = 20;
// The most top-k for which the GPU keeps the candidates on chip (a larger k still works, through
// more passes over the logits).
constexpr int32_t kSamplingFastTopK = 512;

struct SamplingRowParams {
  float temperature = 0.0f;         // finite, >= 0; 0: greedy
  int32_t top_k = 0;                // >= 0; 0 (or >= vocab): off
  float top_p = 1.0f;               // (0, 1]; 1: off
  float min_p = 0.0f;               // [0, 1]; 0: off
  float repetition_penalty = 1.0f;  // finite, > 0
  float frequency_penalty = 0.0f;   // finite
  float presence_penalty = 0.0f;    // finite
  int32_t num_top_logprobs = -1;    // -1: no logprobs; 0..kMaxTopLogprobs: the token's logprob and
                                    // that many alternatives (log-softmax of the raw logits,
                                    // as the engine reports them)
  uint64_t seed = 0;                // the request's seed (Philox key)
  int64_t step = 0;                 // >= 0: the sequence's step index (tokens generated so far)
  int64_t edit_begin = 0;           // this row's edits: edits[edit_begin, edit_begin + edit_count)
  int32_t edit_count = 0;           // >= 0
  int32_t reserved = 0;
};

// The parameter checks of the chain (the CPU twin's and sample_rows_tiles_cuda's;
// sample_rows_cuda's kernel spells out the same conditions): finite temperature >= 0, top_k >= 0,
// top_p in (0, 1], min_p in [0, 1], a finite repetition penalty > 0, finite frequency and presence
// penalties, num_top_logprobs in [-1, max_top_logprobs], step >= 0.
ROOFLINE_HD bool sampling_row_params_valid(const SamplingRowParams& r, int32_t max_top_logprobs) {
  return sampling::is_finite(r.temperature) && r.temperature >= 0.0f && r.top_k >= 0 &&
         r.top_p > 0.0f && r.top_p <= 1.0f && r.min_p >= 0.0f && r.min_p <= 1.0f &&
         sampling::is_finite(r.repetition_penalty) && r.repetition_penalty > 0.0f &&
         sampling::is_finite(r.frequency_penalty) && sampling::is_finite(r.presence_penalty) &&
         r.num_top_logprobs >= -1 && r.num_top_logprobs <= max_top_logprobs && r.step >= 0;
}

// The edit list of a row: one entry per distinct token whose logit changes (a biased token, a
// prompt token under a repetition penalty, a generated token). A row's entries are a range of
// the shared edit array, so a runtime can keep each sequence's list in a fixed region and update
// it in place (one entry per generated token) instead of re-uploading histories every step.
using sampling::TokenEdit;

struct SampleRowsParams {
  const void* logits = nullptr;             // [num_rows, vocab_size] in dtype
  const SamplingRowParams* rows = nullptr;  // [num_rows]
  const TokenEdit* edits = nullptr;         // [num_edits]
  int64_t num_edits = 0;
  int64_t num_rows = 0;                 // GPU: <= 65535
  int64_t vocab_size = 0;               // [1, sampling::kMaxVocab]
  DType dtype = DType::kF32;            // of logits: kF32 or kBF16
  int32_t* tokens = nullptr;            // [num_rows]: the token, -1 for a row in error
  uint32_t* errors = nullptr;           // [num_rows]: SamplingError bits, 0 when fine
  int32_t* nonfinite_counts = nullptr;  // [num_rows] or null: NaN / inf logits of the row
  // Optional (null: not computed): for rows with num_top_logprobs >= 0, the token's log-softmax
  // of the raw logits, and the top num_top_logprobs raw tokens (ties: lower id first) with theirs;
  // slots past a row's count hold id -1 and -inf. Rows without logprobs leave these untouched.
  float* logprobs = nullptr;      // [num_rows]
  int32_t* top_ids = nullptr;     // [num_rows, max_top_logprobs]
  float* top_logprobs = nullptr;  // [num_rows, max_top_logprobs]
  int32_t max_top_logprobs = 0;   // [0, kMaxTopLogprobs]: the row stride of the above
  // CUDA only: sample_rows_cuda_workspace_bytes() of device memory, zero-filled once (the kernel
  // leaves it zeroed, so CUDA-graph replays need no reset), that lets a small batch split its rows
  // across vocabulary slices (sample_rows_split). Null: one block per row.
  void* workspace = nullptr;
};

// The CUDA kernel's split (sampling_cuda.cu). One block per row cannot pull a row at the memory's
// pace: a 128k-token bf16 row is 256 KB and a block keeps ~16 KB in flight, so a decode batch of 1
// spent ~35 us in one block on the H200. A batch of few rows cuts each row into `slices` slices
// of `slice_tokens` tokens (a multiple of 32: whole words of the edit bitmap), one block each, for
// the pass that reads the logits from DRAM; the last block of a row to finish merges their partial
// results and runs the rest of the chain. A pure function of the batch, the vocabulary and the
// GPU's SM count, tested on the CPU.
// At most 16 slices: the row's last block folds every slice's 512 thread keys (slices loads a
// thread, in batches of 8 round trips to L2), and that merge outgrew what more slices save in
// pass 1. Swept on an H100 at a 128k vocabulary, bf16, top-k 50 + top-p 0.9 + penalties, µs a
// launch at 1 / 2 / 4 / 8 rows (bench/results/2026-12-07-sampler-slices.md): 62-33 slices (the
// old cap of 64) 14.9 / 15.4 / 16.4 / 15.1, 32 slices 12.8 / 13.0 / 13.2 / 14.2, 16 slices
// 12.3 / 12.4 / 12.5 / 12.8, 8 slices 12.5 / 12.6 / 12.7 / 13.0. Greedy rows (no key merge) gain
// from more slices: 5.1 us at 1 row with 32-62 slices, 5.5 with 16.
inline constexpr int64_t kSampleMaxSlices = 16;
inline constexpr int64_t kSampleMinSliceTokens = 2048;  // below it a slice is all fixed cost
// A vocabulary of fewer than kSampleMinSlices slices of kSampleMinSliceTokens is never split.
inline constexpr int64_t kSampleMinSlices = 4;
// One block per SM: a split launch has at most as many blocks as the GPU has SMs, so each row's
// last block runs its chain on an SM of its own. Swept on an H100 (bench/results/
// 2026-12-07-sampler-slices.md, run 3), µs a launch sampled / greedy: 64 rows in 2 slices (128
// blocks) 20.1 / 12.8, in 4 (256 blocks, two an SM) 20.9 / 12.9, unsplit 23.0 / 14.8; 32 rows
// in 4 slices 16.4 / 9.3, in 8 17.0 / 9.8; 96 and 128 rows in 2 slices (two blocks an SM on some
// SMs) slower than unsplit. On the H200 2 slices at 96-132 rows had also measured slower
// (2026-12-02-sampling-pass-one-addresses.md), and so had 3 at 72-88 rows (216-264 blocks).
// At 1 to 8 rows the cap of 16 slices binds first. A/B against two blocks per SM (run 4, H100):
// 32 rows 17.0 -> 16.3 us, 64 rows 20.7 -> 20.1, 1 and 256 rows level, 64 f32 rows +0.1.
// Blocks of one split launch, at most: sizes the workspace (the rule above keeps a launch within
// the SM count, 132 on the H100 and H200; this caps a GPU of more SMs).
inline constexpr int64_t kSampleSplitMaxBlocks = 512;
inline constexpr int64_t kSampleThreadsPerBlock = 512;  // the kernel's block

struct SampleSplit {
  int64_t slices = 1;        // blocks per row
  int64_t slice_tokens = 0;  // tokens per slice (the last may be shorter); the vocab when 1 slice
};

// As many slices as keep the batch within one block per SM, each at least kSampleMinSliceTokens,
// at most kSampleMaxSlices; 1 without a workspace, when that leaves fewer than 2 slices (rows
// past half the SMs), or for a vocabulary of fewer than kSampleMinSlices slices.
inline SampleSplit sample_rows_split(int64_t num_rows, int64_t vocab, int num_sms,
                                     bool has_workspace) {
  SampleSplit s;
  s.slice_tokens = vocab;
  if (!has_workspace || num_rows < 1 || vocab < 1 || num_sms < 1) return s;
  int64_t slices = int64_t{num_sms} / num_rows;
  slices = std::min(slices, kSampleMaxSlices);
  slices = std::min(slices, vocab / kSampleMinSliceTokens);
  slices = std::min(slices, kSampleSplitMaxBlocks / num_rows);
  if (slices < 2 || vocab / kSampleMinSliceTokens < kSampleMinSlices) return s;
  s.slice_tokens = ((vocab + slices - 1) / slices + 31) / 32 * 32;
  s.slices = (vocab + s.slice_tokens - 1) / s.slice_tokens;
  return s;
}

// Bytes of SampleRowsParams::workspace: per block of a split launch its partial (counts, log-sum-
// exp, best key: 32 bytes) and each thread's best keys (16 bytes), then one arrival counter per
// row.
inline constexpr int64_t kSampleSplitPartialBytes = 32;
inline constexpr int64_t sample_rows_cuda_workspace_bytes() {
  return kSampleSplitMaxBlocks * (kSampleSplitPartialBytes + kSampleThreadsPerBlock * 16) +
         kSampleSplitMaxBlocks * 4;
}

// The CPU twin: the oracle for sample_rows_cuda and the CPU backend's sampler. Host pointers.
// Size errors (vocab, dtype, null outputs) abort: they are the caller's bug; everything that can
// come from a request is reported per row through errors.
void sample_rows_cpu(const SampleRowsParams& p);
// CUDA: every pointer on the device; asynchronous on `stream`, no allocation, no host sync, so
// it can be captured in a CUDA graph (the row parameters are read from device memory at run time).
void sample_rows_cuda(const SampleRowsParams& p, CudaStream stream);
#if defined(ROOFLINE_PHASE_TRACE)
// The kernel's phase records (phase_trace.h), in trace builds only (sampling_trace_bench).
PhaseTraceRecorder& sample_rows_phase_trace();
#endif

// ---------------------------------------------------------------------------------------------
// The chain from tile summaries: how a step samples without reading its logits a second time.
// sample_rows_cuda must read every logit once (pass 1: ~16 MB at batch 64 and a 128k vocabulary,
// ~7 us cold on the H200) before it knows where a row's best tokens are. The LM head that writes
// the logits already holds them in registers, so its epilogue can leave, per row and per tile of
// `tile_tokens` consecutive tokens, the tile's largest finite logit and where it is, and per row
// how many logits are not finite (LogitTileSummaries, logit_tiles.h). From those the sampler finds,
// for a row that asks for greedy decoding or a top-k of at most kSamplingFastTopK, every token the
// chain can keep without looking at the rest of the row:
//   - L = the largest logit of every tile whose largest token is not edited: values of distinct
//     unedited tokens of the row;
//   - v = a lower bound on the k-th largest of L (a radix prefix of its key; k = 1 when greedy),
//     so at least k tokens have a value >= v, and (s = x / T being monotone) every token of the
//     top k by s has s >= s(v);
//   - the candidates: the unedited tokens with s >= s(v), which lie in the tiles whose largest
//     logit reaches s(v) (read from the logits: typically about k tiles), and the edited tokens
//     with s >= s(v); then the exact top k by rank key among them, and top-p, min-p and the draw
//     over those k as in sample_rows_cpu.
// So the tokens, errors and non-finite counts are exactly sample_rows_cpu's for such rows; a row
// that asks for logprobs (they need the whole row's normaliser) or a sampled row without a top-k
// of at most kSamplingFastTopK (below the vocabulary) gets kSamplingNeedsFullRow and no token:
// the caller runs it through sample_rows_cuda instead. So does a row whose summaries are stale
// (a word of another epoch than the step's: the writer did not run).

// True when sample_rows_tiles_cuda can finish a row with valid parameters: no logprobs, and greedy
// or 1 <= top_k <= kSamplingFastTopK with top_k < vocab.
ROOFLINE_HD bool sample_row_uses_tiles(const SamplingRowParams& r, int64_t vocab) {
  if (r.num_top_logprobs >= 0) return false;
  if (r.temperature == 0.0f) return true;
  return r.top_k >= 1 && r.top_k <= kSamplingFastTopK && r.top_k < vocab;
}

// The chain over p's rows from their tile summaries (`tiles`: the rows' words and counts in the
// epoch *tiles.epoch, on the device, written by the same step as p.logits). p.logits is read only
// at the tiles that can hold a kept token and at edited tokens; p.workspace and the logprob
// outputs are not used. Every pointer on the device; asynchronous on `stream`, no allocation, no
// host sync (CUDA-graph safe). Sizes outside the limits abort.
void sample_rows_tiles_cuda(const SampleRowsParams& p, const LogitTileSummaries& tiles,
                            CudaStream stream);

#if defined(ROOFLINE_PHASE_TRACE)
// The kernel's phase records (phase_trace.h), in trace builds only (sampling_trace_bench).
PhaseTraceRecorder& sample_rows_tiles_phase_trace();
#endif

}  // namespace roofline
