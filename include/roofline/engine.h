// roofline's request-level engine: many requests, continuous batching, streaming, abort.
//
// Example:
//   roofline::EngineOptions options;
//   options.model.model_dir = "path/to/model";
//   auto engine = roofline::Engine::load(options);
//   roofline::SamplingParams p;
//   p.max_tokens = 64;
//   auto id = (*engine)->add_text_request("Once upon a time", p);
//   while ((*engine)->has_unfinished())
//     for (const roofline::RequestOutput& out : (*engine)->step()) std::cout << out.new_text;
//
// Every step runs one forward pass over a batch the scheduler builds: first one token for every
// request that is decoding, then chunks of the prompts that still need prefilling, within
// max_num_batched_tokens. A prompt's cached prefix (an equal prompt start seen before) is not
// recomputed. When the KV cache runs out, the newest running request is preempted: its KV blocks
// are freed and it is recomputed later from its prompt and the tokens it already generated, which
// stay delivered (greedy output is the same as running alone).
//
// Threads: add_request, add_text_request and abort may be called from any thread while another
// thread calls step(); step(), run_to_completion() and stats() belong to one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "roofline/model.h"
#include "roofline/profile.h"
#include "roofline/status.h"

namespace roofline {

// How one request picks its tokens and when it stops. The chain: logit bias -> penalties ->
// temperature -> top-k -> top-p -> min-p -> a draw from the request's own random stream.
struct SamplingParams {
  std::vector<std::pair<int32_t, float>> logit_bias;  // OpenAI's: (token, bias in [-100, 100])
                                                      // added to its logit before the chain
  float temperature = 0.0f;                           // >= 0; 0: greedy
  int32_t top_k = 0;                                  // >= 0; 0: all tokens
  float top_p = 1.0f;                                 // (0, 1]
  float min_p = 0.0f;               // [0, 1]: drop tokens below min_p x the best one's probability
  float repetition_penalty = 1.0f;  // > 0, HF's: over the prompt and the generated tokens; 1: off
  float frequency_penalty = 0.0f;   // [-2, 2], OpenAI's: x each occurrence in the generated tokens
  float presence_penalty = 0.0f;    // [-2, 2], OpenAI's: once per distinct generated token
  std::optional<uint64_t> seed;     // same seed, same tokens (whatever else runs); none: random
  std::vector<std::string> stop;    // stop strings: the text ends before the first one (needs a
                                    // tokenizer); each non-empty
  std::vector<int32_t> stop_token_ids;  // extra stop tokens besides the model's end-of-sequence
  int64_t max_tokens = 16;              // >= 1: most tokens to generate
  bool ignore_eos = false;              // keep going past end-of-sequence tokens
  // Log-probabilities with each generated token: -1 none; k in [0, 20]: the chosen token's and
  // the k most likely tokens'. They are the model's (log-softmax of the raw logits), before
  // penalties, temperature and filtering, as OpenAI and vLLM report them.
  int32_t logprobs = -1;
};

// One generated token's log-probability and the most likely alternatives at its position.
struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // (token, logprob), most likely first
};

// InvalidArgument naming the first bad field ("sampling param 'top_p' must be in (0, 1], got 2").
// vocab_size bounds stop_token_ids.
Status validate_sampling_params(const SamplingParams& params, int64_t vocab_size);

struct EngineOptions {
  ModelOptions model;                    // its max_step_tokens and max_seqs are replaced by these:
  int64_t max_num_batched_tokens = 512;  // tokens per step (decode tokens + prefill chunks)
  int64_t max_num_seqs = 8;              // requests running at once (holding KV blocks)
  bool enable_prefix_cache = true;       // reuse the KV blocks of equal prompt prefixes
  // Overlapped decode (off by default: on the H200 it measured no faster yet, bench/results/
  // 2026-12-06-overlapped-decode.md): while every running request decodes (no prompt left to prefill, no request
  // waiting, no penalties: their edit lists need the token not yet back), the next step is
  // launched before this step's tokens reach the host, its tokens fed from this step's on the
  // device, so the host's work between steps hides behind the GPU's. A request that stops on this
  // step's token has its row of the next step dropped. A request's draws are the same either way
  // (seeds and draw counters); on the GPU a dropped row can change a step's padded batch and so
  // round a near-tie logit differently (7 of 160 dummy-weight requests on the H200).
  bool overlap_steps = false;
};

using RequestId = uint64_t;

enum class FinishReason {
  kNone,    // still running
  kStop,    // an end-of-sequence token, a stop token or a stop string
  kLength,  // max_tokens generated
  kAbort,   // abort() was called
  kError,   // the request could not run; RequestOutput::error says why
};
// "stop", "length", "abort", "error" (and "" for kNone).
const char* finish_reason_name(FinishReason reason);

// What one step produced for one request. A request appears in a step's outputs when it produced a
// token or finished.
struct RequestOutput {
  RequestId id = 0;
  std::vector<int32_t> new_token_ids;  // generated this step (stop tokens included)
  std::vector<TokenLogprob> logprobs;  // one per new token when SamplingParams::logprobs >= 0
  std::string new_text;                // complete UTF-8; empty without a tokenizer. Never holds
                                       // stop tokens, stop strings or what follows a stop string
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  std::string error;  // when finish_reason is kError
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;  // generated so far, this step's included
};

// One finished request, whole (run_to_completion).
struct RequestResult {
  RequestId id = 0;
  std::vector<int32_t> token_ids;
  std::string text;
  FinishReason finish_reason = FinishReason::kNone;
  std::string error;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};

struct EngineStats {
  int64_t steps = 0;
  int64_t requests_finished = 0;
  int64_t prompt_tokens_computed = 0;  // prefill tokens run through the model (recompute included)
  int64_t prompt_tokens_cached = 0;    // prompt tokens taken from the prefix cache instead
  int64_t generated_tokens = 0;
  int64_t preemptions = 0;
  int64_t overlapped_steps = 0;  // steps launched before the step before them was collected
  // KV cache, from the runner.
  int64_t kv_total_blocks = 0;
  int64_t kv_free_blocks = 0;
  int64_t prefix_hit_blocks = 0;
  int64_t prefix_miss_blocks = 0;
};

class Engine {
 public:
  static StatusOr<std::unique_ptr<Engine>> load(const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const ModelInfo& info() const;
  bool has_tokenizer() const;
  StatusOr<std::vector<int32_t>> tokenize(const std::string& text, bool add_special_tokens) const;
  // One token's text (valid UTF-8: a piece of a multi-byte character shows as U+FFFD); "" without
  // a tokenizer or for an id outside the vocabulary.
  std::string token_text(int32_t id) const;
  // Token ids as text (valid UTF-8), as the model's tokenizer decodes them; "" without one.
  std::string decode(const std::vector<int32_t>& ids) const;
  // The conversation rendered with the model's chat template; feed the result to
  // tokenize(text, /*add_special_tokens=*/false) (the template writes its own special tokens).
  StatusOr<std::string> render_chat(const std::vector<ChatTurn>& turns,
                                    bool add_generation_prompt) const;

  // Queues a request; it starts at the next step. Fails (and queues nothing) on an empty prompt,
  // a token id outside the vocabulary or bad params. A request that can never fit (prompt +
  // max_tokens beyond the model length or the KV cache) is accepted and finishes with kError.
  StatusOr<RequestId> add_request(const std::vector<int32_t>& prompt_ids,
                                  const SamplingParams& params);
  // The same from text, tokenised with the model's tokenizer (its BOS/EOS added as it asks).
  StatusOr<RequestId> add_text_request(const std::string& prompt, const SamplingParams& params);
  // Ends the request at the next step (its KV blocks are freed in that step; its output says
  // kAbort). Unknown or finished ids are ignored.
  void abort(RequestId id);

  // Runs one step and returns what it produced. Empty when nothing is queued or running.
  std::vector<RequestOutput> step();
  // Requests queued or running (those added from other threads included).
  bool has_unfinished() const;
  // Steps until every request has finished; on_step (may be empty) sees each step's outputs.
  // Returns every request that finished meanwhile, by id.
  std::vector<RequestResult> run_to_completion(
      const std::function<void(const std::vector<RequestOutput>&)>& on_step = {});

  EngineStats stats() const;

  // Profiles the next `steps` steps that run, whatever they hold (roofline/profile.h's analysis
  // of live traffic): every plan call is timed — with CUDA events on the GPU, so those steps run
  // kernel by kernel instead of as graph replays; with the host clock on the CPU — and the steps
  // are analysed together against their calls' analytic costs, the time between steps (scheduling,
  // sampling, waiting for requests) counted as idle. Ceilings as ProfileOptions says (no
  // calibration here: 0 takes the cached one or the H200's). Any thread; a new call replaces a
  // profile not yet finished. InvalidArgument for steps outside [1, 10000] or negative ceilings.
  Status start_profile(int64_t steps, double bandwidth_gbps = 0, double peak_tflops = 0);
  // The finished profile (handed out once), or nothing while its steps are still to run (or none
  // was started). Any thread.
  std::optional<ProfileResult> take_profile();
  // Forgets a profile not yet finished.
  void cancel_profile();

 private:
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace roofline
