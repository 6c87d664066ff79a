// Backend's default execute_sampled: the logits come to the host (execute) and the sampling
// chain's CPU twin samples the rows in parallel on the thread pool (each row's draw depends on its
// own seed and step only, so the split across threads does not change a token).
#include "runtime/backend.h"

#include <algorithm>

#include "core/check.h"
#include "core/thread_pool.h"

namespace roofline {

void resize_sampled_rows(int64_t rows, SampledRows* out) {
  const auto n = static_cast<size_t>(rows);
  out->tokens.assign(n, -1);
  out->errors.assign(n, 0);
  out->nonfinite.assign(n, 0);
  out->logprobs.assign(n, 0.0f);
  out->top_ids.assign(n * kMaxTopLogprobs, -1);
  out->top_logprobs.assign(n * kMaxTopLogprobs, 0.0f);
}

Status Backend::execute_sampled(const Plan& plan, const StepBuffers& step,
                                const StepSampling& sampling, SampledRows* out,
                                std::vector<CallTime>* call_times) {
  // Reused across steps; a reference, since a thread_local named inside the lambda below would be
  // each worker thread's own (empty) vector.
  thread_local std::vector<float> step_logits;
  std::vector<float>& logits = step_logits;
  execute(plan, step, &logits, call_times);
  const auto rows = static_cast<int64_t>(sampling.rows.size());
  ROOFLINE_CHECK_MSG(rows == step.num_seqs && rows > 0 && logits.size() % rows == 0,
                     "execute_sampled: one sampling row per step entry of a last-token plan");
  const int64_t vocab = static_cast<int64_t>(logits.size()) / rows;
  resize_sampled_rows(rows, out);
  ThreadPool::global().parallel_for(rows, 1, [&](int64_t b, int64_t e) {
    SampleRowsParams p;
    p.logits = logits.data() + b * vocab;
    p.rows = sampling.rows.data() + b;
    p.edits = sampling.edits.data();
    p.num_edits = static_cast<int64_t>(sampling.edits.size());
    p.num_rows = e - b;
    p.vocab_size = vocab;
    p.dtype = DType::kF32;
    p.tokens = out->tokens.data() + b;
    p.errors = out->errors.data() + b;
    p.nonfinite_counts = out->nonfinite.data() + b;
    p.logprobs = out->logprobs.data() + b;
    p.top_ids = out->top_ids.data() + b * kMaxTopLogprobs;
    p.top_logprobs = out->top_logprobs.data() + b * kMaxTopLogprobs;
    p.max_top_logprobs = kMaxTopLogprobs;
    sample_rows_cpu(p);
  });
  return ok_status();
}

}  // namespace roofline
