// prepare_decode and decode_step_costs (decode_setup.h).
#include "engine/decode_setup.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "engine/loaded_model.h"

namespace roofline {

namespace {
constexpr int64_t kExtraSteps = 8;  // warm-up and breakdown steps beyond the timed ones
constexpr int64_t kMaxModelLen = int64_t{1} << 24;  // the longest model length roofline plans
}  // namespace

Status check_decode_batch(int64_t batch) {
  if (batch < 1 || batch > kMaxDecodeBatch)
    return invalid_argument("batch (--batch) must be in [1, " + std::to_string(kMaxDecodeBatch) +
                            "]");
  return ok_status();
}

Status check_decode_shape(int64_t batch, int64_t context, int64_t steps) {
  ROOFLINE_RETURN_IF_ERROR(check_decode_batch(batch));
  if (context < 1) return invalid_argument("context (--context) must be positive");
  if (steps < 1 || steps > 100000) return invalid_argument("--steps must be in [1, 100000]");
  if (context > kMaxModelLen - steps - kExtraSteps)
    return invalid_argument("--context " + std::to_string(context) + " leaves no room for the " +
                            std::to_string(steps + kExtraSteps) + " decode steps within " +
                            std::to_string(kMaxModelLen) +
                            " tokens a sequence, the longest model length roofline plans: lower "
                            "--context");
  return ok_status();
}

StatusOr<DecodeSetup> prepare_decode(ModelOptions& model, int64_t batch, int64_t context,
                                     int64_t steps) {
  ROOFLINE_RETURN_IF_ERROR(check_decode_shape(batch, context, steps));
  model.max_seqs = std::max<int64_t>(model.max_seqs, batch);
  model.max_step_tokens = std::max<int64_t>(model.max_step_tokens, batch);
  // Every sequence grows by the warm-up, timed and breakdown steps; whole blocks per sequence.
  const int64_t per_seq = context + steps + kExtraSteps;
  const int64_t bs = std::max<int64_t>(1, model.kv_block_size);
  if (model.max_model_len == 0) model.max_model_len = per_seq;
  if (model.kv_cache_tokens == 0 && model.kv_memory_bytes == 0 && model.kv_memory_fraction == 0)
    model.kv_cache_tokens = batch * ((per_seq + bs - 1) / bs) * bs;
  DecodeSetup d;
  const RunnerOptions ro = runner_options(model);
  auto runner = ModelRunner::create(ro);
  if (!runner.ok())
    return runner.status().with_context("loading " + (ro.dummy_weights.empty()
                                                          ? "'" + ro.model_dir + "'"
                                                          : "dummy '" + ro.dummy_weights + "'"));
  d.runner = std::move(*runner);
  ModelRunner& r = *d.runner;
  const int64_t vocab = r.config().vocab_size;
  std::vector<float> logits;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t b = 0; b < batch; ++b) {
    ROOFLINE_ASSIGN_OR_RETURN(int32_t seq, r.add_sequence());
    d.seqs.push_back(seq);
    std::vector<int32_t> prompt(static_cast<size_t>(context));
    for (int64_t i = 0; i < context; ++i)
      prompt[i] = static_cast<int32_t>((1 + 7919 * (i + 31 * b)) % vocab);
    for (int64_t i = 0; i < context; i += model.max_step_tokens) {
      std::vector<int32_t> chunk(prompt.begin() + i,
                                 prompt.begin() + std::min(context, i + model.max_step_tokens));
      ROOFLINE_RETURN_IF_ERROR(r.step({{seq, chunk}}, false, &logits));
      StepShape shape;  // this chunk: its tokens attend to the i before them and causally
      const int64_t n = static_cast<int64_t>(chunk.size());
      shape.num_tokens = n;
      shape.num_seqs = 1;
      shape.kv_tokens = i + n;
      shape.attended_pairs = n * i + n * (n + 1) / 2;
      for (const auto& c : r.last_plan()->calls)
        d.prefill_flops += call_cost(c, shape, r.backend().kv_dtype()).flops;
    }
  }
  d.prefill_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return d;
}

std::vector<CallCost> decode_step_costs(const ModelRunner& r, const std::vector<int32_t>& seqs) {
  StepShape shape;
  shape.num_tokens = static_cast<int64_t>(seqs.size());
  shape.num_seqs = static_cast<int64_t>(seqs.size());
  for (int32_t s : seqs) {
    shape.kv_tokens += r.sequence_length(s);
    shape.attended_pairs += r.sequence_length(s);
  }
  std::vector<CallCost> costs;
  for (const auto& c : r.last_plan()->calls)
    costs.push_back(call_cost(c, shape, r.backend().kv_dtype()));
  return costs;
}

}  // namespace roofline
