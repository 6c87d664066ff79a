// Model: the public API over ModelRunner for single-prompt generation and logits.
#include "roofline/model.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "engine/loaded_model.h"
#include "runtime/model_runner.h"
#include "runtime/sampler.h"
#include "tokenizer/tokenizer.h"

namespace roofline {

struct Model::Impl {
  LoadedModel m;  // runner, info, tokenizer and chat template (shared with Engine)

  // Appends `tokens` to `seq` in chunks of at most max_step_tokens. Returns the logits of every
  // token when all_logits, else of the last token only.
  Status feed(int32_t seq, const std::vector<int32_t>& tokens, bool all_logits,
              std::vector<float>* out) {
    const int64_t chunk = m.runner->options().max_step_tokens;
    out->clear();
    std::vector<float> part;
    for (size_t begin = 0; begin < tokens.size(); begin += static_cast<size_t>(chunk)) {
      const size_t end = std::min(tokens.size(), begin + static_cast<size_t>(chunk));
      StepEntry e{seq, std::vector<int32_t>(tokens.begin() + begin, tokens.begin() + end)};
      ROOFLINE_RETURN_IF_ERROR(m.runner->step({e}, all_logits, &part));
      if (all_logits)
        out->insert(out->end(), part.begin(), part.end());
      else
        *out = part;
    }
    return ok_status();
  }
};

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;

StatusOr<std::unique_ptr<Model>> Model::load(const ModelOptions& o) {
  auto impl = std::make_unique<Impl>();
  ROOFLINE_ASSIGN_OR_RETURN(impl->m, load_model(o, /*enable_prefix_cache=*/true));
  return std::unique_ptr<Model>(new Model(std::move(impl)));
}

const ModelInfo& Model::info() const { return impl_->m.info; }

namespace {

// Releases a runner sequence on every exit path.
class SequenceGuard {
 public:
  SequenceGuard(ModelRunner& r, int32_t seq) : r_(r), seq_(seq) {}
  ~SequenceGuard() { (void)r_.release_sequence(seq_); }

 private:
  ModelRunner& r_;
  int32_t seq_;
};

Status check_prompt(const std::vector<int32_t>& prompt) {
  if (prompt.empty()) return invalid_argument("the prompt is empty: give at least one token id");
  return ok_status();
}

}  // namespace

Status check_generate_options(const GenerateOptions& o) {
  if (o.max_new_tokens < 0) return invalid_argument("--max-tokens must not be negative");
  if (!(o.top_p > 0.0f && o.top_p <= 1.0f)) return invalid_argument("--top-p must be in (0, 1]");
  if (o.top_k < 0) return invalid_argument("--top-k must not be negative");
  if (!(o.temperature >= 0.0f) || std::isinf(o.temperature))
    return invalid_argument("--temperature must be finite and not negative");
  return ok_status();
}

StatusOr<std::vector<int32_t>> Model::generate(const std::vector<int32_t>& prompt,
                                               const GenerateOptions& o,
                                               const std::function<bool(int32_t)>& on_token,
                                               GenerateStats* stats) {
  ROOFLINE_RETURN_IF_ERROR(check_prompt(prompt));
  ROOFLINE_RETURN_IF_ERROR(check_generate_options(o));
  ModelRunner& runner = *impl_->m.runner;
  const int64_t max_len = runner.options().max_model_len;
  if (o.max_new_tokens > 0 && static_cast<int64_t>(prompt.size()) >= max_len)
    return out_of_range("the prompt (" + std::to_string(prompt.size()) +
                        " tokens) leaves no room to generate within the model length of " +
                        std::to_string(max_len) +
                        " (--max-model-len): shorten the prompt or raise --max-model-len");
  ROOFLINE_ASSIGN_OR_RETURN(int32_t seq, runner.add_sequence());
  SequenceGuard guard(runner, seq);
  Sampler sampler(SamplingConfig{o.temperature, o.top_k, o.top_p}, o.seed);
  const int64_t vocab = impl_->m.info.vocab_size;
  std::vector<int32_t> out;
  std::vector<float> logits;
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  auto t_first = t0;
  std::vector<int32_t> next = prompt;
  GenerateEnd end = GenerateEnd::kMaxTokens;
  for (int64_t i = 0; i < o.max_new_tokens; ++i) {
    ROOFLINE_RETURN_IF_ERROR(impl_->feed(seq, next, /*all_logits=*/false, &logits));
    const int32_t token = sampler.sample(logits.data(), vocab);
    if (token < 0 && (sampler.last_error() & kSamplingNonFiniteLogits))
      return internal_error("the model produced " + std::to_string(sampler.last_nonfinite()) +
                            " NaN or infinite logits at generated token " + std::to_string(i) +
                            ": the weights may be corrupt");
    if (token < 0)
      return internal_error("the sampler rejected its settings at generated token " +
                            std::to_string(i));
    if (i == 0) t_first = clock::now();
    out.push_back(token);
    const bool eos =
        std::find(impl_->m.info.eos_token_ids.begin(), impl_->m.info.eos_token_ids.end(), token) !=
        impl_->m.info.eos_token_ids.end();
    const bool keep_going = !on_token || on_token(token);
    if (o.stop_at_eos && eos) {
      end = GenerateEnd::kEos;
      break;
    }
    if (!keep_going) {
      end = GenerateEnd::kStopped;
      break;
    }
    if (i + 1 == o.max_new_tokens) break;
    // The model length bounds prompt + generated tokens, as the engine's requests are bounded
    // (prompt + max_tokens): at it, stop and say so.
    if (runner.sequence_length(seq) + 1 >= max_len) {
      end = GenerateEnd::kModelLength;
      break;
    }
    next.assign(1, token);
  }
  if (stats) {
    auto t1 = clock::now();
    stats->prompt_tokens = static_cast<int64_t>(prompt.size());
    stats->generated_tokens = static_cast<int64_t>(out.size());
    stats->prefill_ms = std::chrono::duration<double, std::milli>(t_first - t0).count();
    stats->decode_ms = std::chrono::duration<double, std::milli>(t1 - t_first).count();
    stats->end = end;
    stats->max_model_len = max_len;
  }
  return out;
}

const char* generate_end_name(GenerateEnd end) {
  switch (end) {
    case GenerateEnd::kMaxTokens:
      return "max_tokens";
    case GenerateEnd::kEos:
      return "eos";
    case GenerateEnd::kModelLength:
      return "model_length";
    case GenerateEnd::kStopped:
      return "stopped";
  }
  return "unknown";
}

StatusOr<std::vector<float>> Model::logits(const std::vector<int32_t>& prompt, int64_t decode_steps,
                                           std::vector<int32_t>* greedy_tokens) {
  ROOFLINE_RETURN_IF_ERROR(check_prompt(prompt));
  if (decode_steps < 0) return invalid_argument("--decode-steps must not be negative");
  ModelRunner& runner = *impl_->m.runner;
  const int64_t max_len = runner.options().max_model_len;
  if (decode_steps > max_len - static_cast<int64_t>(prompt.size()))
    return out_of_range("the prompt (" + std::to_string(prompt.size()) +
                        " tokens) + --decode-steps (" + std::to_string(decode_steps) +
                        ") exceed the model length of " + std::to_string(max_len) +
                        " (--max-model-len): each step feeds one more token");
  ROOFLINE_ASSIGN_OR_RETURN(int32_t seq, runner.add_sequence());
  SequenceGuard guard(runner, seq);
  const int64_t vocab = impl_->m.info.vocab_size;
  std::vector<float> all, step;
  ROOFLINE_RETURN_IF_ERROR(impl_->feed(seq, prompt, /*all_logits=*/true, &all));
  if (greedy_tokens) greedy_tokens->clear();
  int32_t token = argmax_cpu(all.data() + (all.size() - static_cast<size_t>(vocab)), vocab);
  for (int64_t i = 0;; ++i) {
    if (greedy_tokens) greedy_tokens->push_back(token);
    if (i == decode_steps) break;
    ROOFLINE_RETURN_IF_ERROR(impl_->feed(seq, {token}, /*all_logits=*/true, &step));
    all.insert(all.end(), step.begin(), step.end());
    token = argmax_cpu(step.data(), vocab);
  }
  return all;
}

}  // namespace roofline

namespace roofline {

bool Model::has_tokenizer() const { return impl_->m.tokenizer != nullptr; }

Status Model::need_tokenizer() const { return impl_->m.need_tokenizer(); }

StatusOr<std::vector<int32_t>> Model::tokenize(const std::string& text,
                                               bool add_special_tokens) const {
  ROOFLINE_RETURN_IF_ERROR(impl_->m.need_tokenizer());
  return impl_->m.tokenizer->encode(text, add_special_tokens);
}

StatusOr<std::string> Model::detokenize(const std::vector<int32_t>& ids) const {
  ROOFLINE_RETURN_IF_ERROR(impl_->m.need_tokenizer());
  for (int32_t id : ids)
    if (id < 0 || id >= impl_->m.tokenizer->vocab_size())
      return invalid_argument("token id " + std::to_string(id) + " is outside the vocabulary");
  return impl_->m.tokenizer->decode(ids, /*skip_special=*/false);
}

StatusOr<std::string> Model::render_chat(const std::vector<ChatTurn>& turns,
                                         bool add_generation_prompt) const {
  return impl_->m.render_chat(turns, add_generation_prompt);
}

StatusOr<std::string> Model::generate_text(const std::string& prompt, bool add_special_tokens,
                                           const GenerateOptions& options,
                                           const std::function<bool(const std::string&)>& on_text,
                                           GenerateStats* stats) {
  ROOFLINE_RETURN_IF_ERROR(impl_->m.need_tokenizer());
  const Tokenizer& tok = *impl_->m.tokenizer;
  std::vector<int32_t> ids = tok.encode(prompt, add_special_tokens);
  if (ids.empty()) return invalid_argument("the prompt is empty after tokenisation");
  Tokenizer::StreamDecoder decoder(tok, /*skip_special=*/true);
  std::string text;
  bool keep = true;
  bool saw_eos = false;
  const auto& eos = tok.eos_ids();
  auto out = generate(
      ids, options,
      [&](int32_t id) {
        if (options.stop_at_eos && std::find(eos.begin(), eos.end(), id) != eos.end()) {
          saw_eos = true;  // the tokenizer's end token, which the model config may not list
          return false;
        }
        std::string piece = decoder.next(id);
        if (!piece.empty()) {
          text += piece;
          if (on_text) keep = on_text(piece);
        }
        return keep;
      },
      stats);
  if (!out.ok()) return out.status();
  if (saw_eos && stats != nullptr) stats->end = GenerateEnd::kEos;
  std::string tail = decoder.finish();
  if (!tail.empty()) {
    text += tail;
    if (on_text) on_text(tail);
  }
  return text;
}

}  // namespace roofline
