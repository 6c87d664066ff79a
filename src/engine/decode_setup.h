// What `roofline bench latency` and the profiler (roofline/profile.h) measure: B sequences
// prefilled to `context` tokens on a fresh runner, ready for decode steps of one token each, and
// the analytic cost of each call of such a step.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "graph/plan.h"
#include "roofline/model.h"
#include "roofline/status.h"
#include "runtime/model_runner.h"

namespace roofline {

// The largest batch a decode measurement (bench, bench latency, profile) sets up, and the check
// that names --batch when `batch` is outside [1, kMaxDecodeBatch].
inline constexpr int64_t kMaxDecodeBatch = 4096;
Status check_decode_batch(int64_t batch);
// check_decode_batch, then InvalidArgument naming the flag for a context below 1, steps outside
// [1, 100000], or a context that leaves no room for the steps within the longest model length
// roofline plans. What prepare_decode refuses before it loads anything.
Status check_decode_shape(int64_t batch, int64_t context, int64_t steps);

struct DecodeSetup {
  std::unique_ptr<ModelRunner> runner;
  std::vector<int32_t> seqs;
  double prefill_ms = 0;
  double prefill_flops = 0;  // the cost model's, summed over the prefill steps
};

// Sizes `model` (max_seqs, step tokens, model length, KV cache) for `batch` sequences of `context`
// tokens plus `steps` decode steps and a few more, creates the runner and prefills the sequences
// (in chunks of max_step_tokens). check_decode_shape's errors; the runner's with the model named.
StatusOr<DecodeSetup> prepare_decode(ModelOptions& model, int64_t batch, int64_t context,
                                     int64_t steps);

// The analytic cost of each call of the runner's last plan for a decode step of `seqs`.
std::vector<CallCost> decode_step_costs(const ModelRunner& r, const std::vector<int32_t>& seqs);

}  // namespace roofline
