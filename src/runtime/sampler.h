// Sampler: the host side of token selection for one sequence: its sampling settings, the edit
// list its bias and penalties need (sampling.h's TokenEdit: one entry per distinct prompt or
// generated token), and its seed and step index, so a sequence's draws do not depend on what else
// is in the batch.
//
// The chain, in this order:
//   logit bias (OpenAI's: added to the chosen tokens' logits) -> penalties (repetition over
//   prompt + generated tokens, as HF; frequency and presence over the generated tokens, as
//   OpenAI) -> temperature -> top-k -> top-p -> min-p -> seeded draw.
// Temperature 0 is greedy: the argmax of the penalised logits, and no random number is used.
// Sampler::sample runs it through sample_rows_cpu (ops/sampling), the CPU twin of the GPU's
// batched chain: the same integer weights and the same Philox draw keyed by (seed, step), so a
// request draws the same tokens on either backend. The free functions below are the chain's
// stages written plainly in double precision: the readable reference the twin is tested against.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ops/sampling/sampling.h"

namespace roofline {

// Every knob of the chain; the defaults switch each stage off. Validation (ranges per field) is the
// caller's: roofline::validate_sampling_params in the engine.
struct SamplerSettings {
  float temperature = 0.0f;         // 0: greedy
  int32_t top_k = 0;                // 0: all tokens
  float top_p = 1.0f;               // (0, 1]; 1: off
  float min_p = 0.0f;               // [0, 1]; 0: off
  float repetition_penalty = 1.0f;  // > 0; 1: off
  float frequency_penalty = 0.0f;   // per occurrence in the generated tokens; 0: off
  float presence_penalty = 0.0f;    // once per distinct generated token; 0: off
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token, added to its logit); ids < vocab
};

// Token ids ranked best first: the survivors of the truncation stages and their logits.
struct Candidates {
  std::vector<int32_t> ids;
  std::vector<float> logits;  // [ids.size()], descending; ties keep the lower id first
};

// Stage 0, in place on logits [vocab_size]: logits[token] += bias for each pair (a token named
// twice gets both biases).
void apply_logit_bias(float* logits, int64_t vocab_size,
                      const std::vector<std::pair<int32_t, float>>& bias);
// Stage 1, in place on logits [vocab_size]. Repetition (HF's RepetitionPenaltyLogitsProcessor):
// every token in `seen` (prompt and generated) has a positive logit divided by the penalty and a
// negative one multiplied by it. Then frequency and presence: logit -= frequency * count +
// presence, for every token generated `count` > 0 times.
void apply_penalties(float* logits, int64_t vocab_size, const SamplerSettings& s,
                     const std::unordered_set<int32_t>& seen,
                     const std::unordered_map<int32_t, int32_t>& generated_counts);
// Stage 2, in place: logits / temperature (temperature > 0).
void apply_temperature(float* logits, int64_t vocab_size, float temperature);
// Ranks the non-NaN logits best first (the input of stages 3-6). Keeps only the first `limit`
// when limit > 0 (a partial sort: top-k needs no more).
Candidates rank_candidates(const float* logits, int64_t vocab_size, int32_t limit);
// Stage 3: keeps exactly the first k (k > 0; exact k makes top_k = 1 the same as argmax).
void apply_top_k(Candidates& c, int32_t top_k);
// Stage 4, as HF's TopPLogitsWarper: over the softmax of the candidates, candidate r is kept while
// the mass ranked before it is < top_p; the first is always kept.
void apply_top_p(Candidates& c, float top_p);
// Stage 5: drops candidates whose probability is below min_p times the largest one's.
void apply_min_p(Candidates& c, float min_p);
// Stage 6: the first candidate whose cumulative probability exceeds uniform * total; -1 if empty.
int32_t draw_candidate(const Candidates& c, double uniform);

class Sampler {
 public:
  Sampler(const SamplerSettings& settings, uint64_t seed);
  // The plain chain of Model::generate (no penalties, no min-p).
  Sampler(const SamplingConfig& config, uint64_t seed) : Sampler(plain_settings(config), seed) {}

  // The prompt, for the repetition penalty (call once, before the first sample).
  void set_prompt(const std::vector<int32_t>& prompt);
  // A token id, or -1 when the row cannot give one (last_error() says why: NaN or infinite
  // logits, or settings out of range); the caller reports it as an error. Records the token as
  // generated, for the penalties of later calls.
  int32_t sample(const float* logits, int64_t vocab_size);
  // The same draw in two halves, for a backend that samples a whole step at once (the engine):
  // the row of this sampler's next draw over a vocabulary of vocab_size, its edits appended to
  // `edits` (edit_begin / edit_count set; edits naming tokens past the vocabulary left out; no
  // logprobs asked); then what that draw gave (a token, or -1 with SamplingError bits, and the
  // row's NaN / inf count), which advances the step and counts the token for the penalties.
  // `ahead`: draws already handed out whose results are not accepted yet (the overlapped decode
  // loop): the row is for the draw after them, and is only right where the penalties are off
  // (penalised(): the edits would miss those draws' tokens).
  SamplingRowParams next_row(int64_t vocab_size, std::vector<TokenEdit>* edits,
                             int64_t ahead = 0) const;
  void accept(int32_t token, uint32_t errors, int32_t nonfinite);
  // Whether a draw's edit list depends on the tokens drawn before it (a penalty is on).
  bool penalised() const {
    return settings_.repetition_penalty != 1.0f || settings_.frequency_penalty != 0.0f ||
           settings_.presence_penalty != 0.0f;
  }
  // sampling.h's SamplingError bits of the last sample() or accept(), 0 when it gave a token.
  uint32_t last_error() const { return last_error_; }
  // NaN / inf logits in the last sample()'s (or accept()'s) row.
  int32_t last_nonfinite() const { return last_nonfinite_; }

 private:
  static SamplerSettings plain_settings(const SamplingConfig& config) {
    SamplerSettings s;
    s.temperature = config.temperature;
    s.top_k = config.top_k;
    s.top_p = config.top_p;
    return s;
  }
  // The edit entry of `token`, created (all zero) when missing.
  TokenEdit& edit_for(int32_t token);

  SamplerSettings settings_;
  uint64_t seed_;
  int64_t step_ = 0;                                // tokens sampled so far: the Philox counter
  std::vector<TokenEdit> edits_;                    // one per distinct touched token
  std::unordered_map<int32_t, size_t> edit_index_;  // token -> its entry in edits_
  uint32_t last_error_ = 0;
  int32_t last_nonfinite_ = 0;
};

}  // namespace roofline
