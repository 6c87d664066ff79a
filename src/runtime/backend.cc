// Backend's default execute_sampled: the logits come to the host (execute) and the sampling
// chain's CPU twin samples the rows in parallel on the thread pool (each row's draw depends on its
// own seed and step only, so the split across threads does not change a token).
#include "runtime/backend.h"

#include <algorithm>
#include <string>

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

namespace roofline {

Status Backend::check_feed(const StepBuffers& step, const std::vector<int32_t>& feed,
                           int64_t previous_rows) {
  if (feed.empty()) return ok_status();
  if (static_cast<int64_t>(feed.size()) != step.num_seqs)
    return invalid_argument(
        "a fed step needs one feed value per entry: " + std::to_string(step.num_seqs) +
        " entries, " + std::to_string(feed.size()) + " values");
  for (size_t i = 0; i < feed.size(); ++i) {
    const int32_t r = feed[i];
    if (r < 0) continue;
    if (r >= previous_rows)
      return invalid_argument("entry " + std::to_string(i) + " is fed from row " +
                              std::to_string(r) + " of the step launched before, which has " +
                              std::to_string(previous_rows) + " sampled rows");
    if (step.query_start[i + 1] - step.query_start[i] != 1)
      return invalid_argument("entry " + std::to_string(i) +
                              " is fed a sampled token but has more than one token");
  }
  return ok_status();
}

Status Backend::apply_feed(const StepBuffers& step, const std::vector<int32_t>& feed,
                           const std::vector<int32_t>& previous, std::vector<int32_t>* token_ids) {
  ROOFLINE_RETURN_IF_ERROR(check_feed(step, feed, static_cast<int64_t>(previous.size())));
  *token_ids = step.token_ids;
  for (size_t i = 0; i < feed.size(); ++i) {
    if (feed[i] < 0) continue;
    const int32_t token = previous[static_cast<size_t>(feed[i])];
    (*token_ids)[static_cast<size_t>(step.query_start[i])] = token < 0 ? 0 : token;
  }
  return ok_status();
}

Status Backend::launch_sampled(const Plan& plan, const StepBuffers& step,
                               const StepSampling& sampling, const std::vector<int32_t>& feed) {
  if (steps_in_flight() >= kMaxStepsInFlight)
    return invalid_argument("launch_sampled: " + std::to_string(kMaxStepsInFlight) +
                            " steps are in flight already; collect one first");
  const StepBuffers* run = &step;
  StepBuffers fed;
  if (!feed.empty()) {
    fed = step;
    ROOFLINE_RETURN_IF_ERROR(apply_feed(step, feed, last_launched_, &fed.token_ids));
    run = &fed;
  }
  SampledRows rows;
  ROOFLINE_RETURN_IF_ERROR(execute_sampled(plan, *run, sampling, &rows, nullptr));
  last_launched_ = rows.tokens;
  queued_.push_back(std::move(rows));
  return ok_status();
}

Status Backend::collect_sampled(SampledRows* out) {
  if (queued_.empty()) return invalid_argument("collect_sampled: no launched step to collect");
  *out = std::move(queued_.front());
  queued_.pop_front();
  return ok_status();
}

}  // namespace roofline
