// Engine: requests in, tokens and text out, many at a time (see include/roofline/engine.h).
//
// The scheduler (Impl::schedule_and_run) keeps two queues: `running` (requests holding a runner
// sequence, in admission order, at most max_num_seqs) and `waiting` (not yet admitted, or
// preempted; FCFS). Each request tracks how many of its tokens (prompt, then generated) are in
// the KV cache; `pending` = tokens not yet computed. pending == 1 is a decode, more is a (chunked)
// prefill. A step's batch: every decode first (one token each), then prefill chunks of running
// requests, then newly admitted ones, until max_num_batched_tokens is used. When the runner
// answers ResourceExhausted the newest running request is preempted (sequence released, back to
// the front of `waiting`, recomputed later from prompt + generated tokens) and the step is
// planned again, admitting no one new.
//
// Threads: add_request / abort / start_profile / take_profile / cancel_profile touch only the
// inbox (under inbox_mu_) and the atomic counters; step() drains the inbox at its start and owns
// everything else.
//
// Sampling: each step hands the runner a sampling row per entry (the request's next draw, or an
// inert greedy row for a prefill chunk that does not finish its prompt) and gets tokens back; the
// backend samples where the logits are (on the GPU inside the decode step's graph).
#include "roofline/engine.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <unordered_map>
#include <unordered_set>

#include "engine/loaded_model.h"
#include "engine/profile_internal.h"
#include "graph/plan.h"
#include "runtime/model_runner.h"
#include "runtime/sampler.h"

namespace roofline {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return "";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
    case FinishReason::kError:
      return "error";
  }
  return "";
}

namespace {

template <typename T>
std::string num(T v) {
  std::string s = std::to_string(v);
  // std::to_string prints floats as "2.000000"; trim the zeros for messages.
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

Status bad_param(const std::string& field, const std::string& rule, const std::string& got) {
  return invalid_argument("sampling param '" + field + "' " + rule + ", got " + got);
}

}  // namespace

Status validate_sampling_params(const SamplingParams& p, int64_t vocab_size) {
  if (!std::isfinite(p.temperature) || p.temperature < 0.0f)
    return bad_param("temperature", "must be >= 0 (0: greedy)", num(p.temperature));
  if (p.top_k < 0) return bad_param("top_k", "must be >= 0 (0: all tokens)", num(p.top_k));
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f))
    return bad_param("top_p", "must be in (0, 1]", num(p.top_p));
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f))
    return bad_param("min_p", "must be in [0, 1]", num(p.min_p));
  if (!std::isfinite(p.repetition_penalty) || p.repetition_penalty <= 0.0f)
    return bad_param("repetition_penalty", "must be > 0 (1: off)", num(p.repetition_penalty));
  if (!(p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f))
    return bad_param("frequency_penalty", "must be in [-2, 2]", num(p.frequency_penalty));
  if (!(p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f))
    return bad_param("presence_penalty", "must be in [-2, 2]", num(p.presence_penalty));
  if (p.max_tokens < 1) return bad_param("max_tokens", "must be >= 1", num(p.max_tokens));
  for (const auto& [token, bias] : p.logit_bias) {
    if (token < 0 || token >= vocab_size)
      return bad_param("logit_bias", "must name tokens in [0, " + num(vocab_size) + ")",
                       num(token));
    if (!(bias >= -100.0f && bias <= 100.0f))
      return bad_param("logit_bias", "values must be in [-100, 100]", num(bias));
  }
  if (p.logprobs < -1 || p.logprobs > 20)
    return bad_param("logprobs", "must be in [0, 20] (or -1: none)", num(p.logprobs));
  for (size_t i = 0; i < p.stop.size(); ++i)
    if (p.stop[i].empty())
      return bad_param("stop", "must hold non-empty strings", "an empty one at " + num(i));
  for (int32_t id : p.stop_token_ids)
    if (id < 0 || id >= vocab_size)
      return bad_param("stop_token_ids", "must be in [0, " + num(vocab_size) + ")", num(id));
  return ok_status();
}

namespace {

struct Request {
  RequestId id = 0;
  std::vector<int32_t> prompt;
  SamplingParams params;
  std::unique_ptr<Sampler> sampler;
  std::vector<int32_t> output;                        // generated tokens
  int32_t seq = -1;                                   // runner sequence while running
  int64_t computed = 0;                               // tokens of prompt + output in the KV cache
  std::unique_ptr<Tokenizer::StreamDecoder> decoder;  // null without a tokenizer
  std::string held;  // decoded, not yet delivered: it may begin a stop string
  std::string text;  // delivered so far

  int64_t total() const { return static_cast<int64_t>(prompt.size() + output.size()); }
  int64_t pending() const { return total() - computed; }
  int32_t token_at(int64_t i) const {
    const int64_t p = static_cast<int64_t>(prompt.size());
    return i < p ? prompt[static_cast<size_t>(i)] : output[static_cast<size_t>(i - p)];
  }
  std::vector<int32_t> tokens(int64_t begin, int64_t end) const {
    std::vector<int32_t> t;
    t.reserve(static_cast<size_t>(end - begin));
    for (int64_t i = begin; i < end; ++i) t.push_back(token_at(i));
    return t;
  }
};

// Length of the longest suffix of `text` that is a proper prefix of one of `stops`: text that may
// still become a stop string and so must not be delivered yet.
size_t stop_prefix_suffix(const std::string& text, const std::vector<std::string>& stops) {
  size_t best = 0;
  for (const std::string& s : stops) {
    for (size_t n = std::min(text.size(), s.size() - 1); n > best; --n) {
      if (text.compare(text.size() - n, n, s, 0, n) == 0) {
        best = n;
        break;
      }
    }
  }
  return best;
}

// Earliest position of any stop string in `text`, or npos.
size_t find_stop(const std::string& text, const std::vector<std::string>& stops) {
  size_t first = std::string::npos;
  for (const std::string& s : stops) first = std::min(first, text.find(s));
  return first;
}

}  // namespace

struct Engine::Impl {
  EngineOptions options;
  LoadedModel model;
  int64_t kv_capacity_tokens = 0;

  // The inbox: written by any thread, drained by step().
  mutable std::mutex inbox_mu;
  std::vector<std::unique_ptr<Request>> inbox_requests;
  std::vector<RequestId> inbox_aborts;
  // Live-traffic profiling (start_profile): armed from any thread, picked up by step().
  struct ProfileRequest {
    int64_t steps = 0;  // 0: cancel
    Ceilings ceilings;
    std::string ceilings_source;
  };
  std::optional<ProfileRequest> inbox_profile;
  std::optional<ProfileResult> profile_done;  // finished, not yet taken (under inbox_mu)
  std::atomic<RequestId> next_id{0};
  std::atomic<int64_t> unfinished{0};

  // Owned by the stepping thread.
  std::vector<std::unique_ptr<Request>> running;  // admission order: the newest is last
  std::deque<std::unique_ptr<Request>> waiting;
  StepSampling sampling;  // the step's sampling rows and edits, rebuilt every step
  SampledRows sampled;
  // The profile being recorded: steps still to record; every recorded call as one event of one
  // long step (call indices run on across steps), with its analytic cost at that step's shape.
  struct Recording {
    ProfileRequest request;
    int64_t left = 0;
    int64_t recorded = 0;
    std::chrono::steady_clock::time_point start;
    double wall_ms = 0;  // summed over the recorded steps
    std::vector<TraceEvent> events;
    std::vector<CallModel> models;
  };
  std::optional<Recording> recording;
  EngineStats stats;

  // This step's outputs, one per request touched.
  std::vector<RequestOutput> outs;
  std::unordered_map<RequestId, size_t> out_index;
  std::vector<RequestResult>* results = nullptr;  // run_to_completion's sink, or null

  RequestOutput& out_for(const Request& r) {
    auto [it, added] = out_index.emplace(r.id, outs.size());
    if (added) {
      outs.emplace_back();
      outs.back().id = r.id;
      outs.back().prompt_tokens = static_cast<int64_t>(r.prompt.size());
    }
    RequestOutput& o = outs[it->second];
    o.completion_tokens = static_cast<int64_t>(r.output.size());
    return o;
  }

  void deliver(Request& r, const std::string& piece) {
    if (piece.empty()) return;
    r.text += piece;
    out_for(r).new_text += piece;
  }

  // Ends `r` (which the caller has already taken out of running / waiting).
  void finish(std::unique_ptr<Request> r, FinishReason reason, const std::string& error = {}) {
    if (r->seq >= 0) {
      (void)model.runner->release_sequence(r->seq);
      r->seq = -1;
    }
    if (reason != FinishReason::kError && reason != FinishReason::kAbort) {
      // Whatever the stream decoder held back is real text now (a dangling byte becomes U+FFFD).
      if (r->decoder) r->held += r->decoder->finish();
      const size_t stop_at = find_stop(r->held, r->params.stop);
      if (stop_at != std::string::npos) {
        r->held.resize(stop_at);
        reason = FinishReason::kStop;
      }
      deliver(*r, r->held);
      r->held.clear();
    }
    RequestOutput& o = out_for(*r);
    o.finished = true;
    o.finish_reason = reason;
    o.error = error;
    ++stats.requests_finished;
    if (results) {
      RequestResult res;
      res.id = r->id;
      res.token_ids = r->output;
      res.text = r->text;
      res.finish_reason = reason;
      res.error = error;
      res.prompt_tokens = static_cast<int64_t>(r->prompt.size());
      res.completion_tokens = static_cast<int64_t>(r->output.size());
      results->push_back(std::move(res));
    }
    unfinished.fetch_sub(1);
  }

  // Removes and returns the request with `id` from running or waiting; null if neither has it.
  std::unique_ptr<Request> take(RequestId id) {
    for (auto it = running.begin(); it != running.end(); ++it) {
      if ((*it)->id == id) {
        auto r = std::move(*it);
        running.erase(it);
        return r;
      }
    }
    for (auto it = waiting.begin(); it != waiting.end(); ++it) {
      if ((*it)->id == id) {
        auto r = std::move(*it);
        waiting.erase(it);
        return r;
      }
    }
    return nullptr;
  }

  // Why `r` can never run, or an empty string.
  std::string never_fits(const Request& r) const {
    const int64_t need = static_cast<int64_t>(r.prompt.size()) + r.params.max_tokens;
    const int64_t max_len = model.runner->options().max_model_len;
    if (need > max_len)
      return "the prompt (" + num(r.prompt.size()) + " tokens) + max_tokens (" +
             num(r.params.max_tokens) + ") = " + num(need) +
             " tokens exceeds the model length of " + num(max_len) +
             " (--max-model-len): shorten the prompt or lower max_tokens";
    if (need > kv_capacity_tokens)
      return "the prompt (" + num(r.prompt.size()) + " tokens) + max_tokens (" +
             num(r.params.max_tokens) + ") = " + num(need) + " tokens exceeds the KV cache's " +
             num(kv_capacity_tokens) +
             " tokens even when empty: raise --kv-cache-tokens or lower max_tokens";
    return {};
  }

  void drain_inbox() {
    std::vector<std::unique_ptr<Request>> added;
    std::vector<RequestId> aborts;
    std::optional<ProfileRequest> profile;
    {
      std::lock_guard<std::mutex> lock(inbox_mu);
      added.swap(inbox_requests);
      aborts.swap(inbox_aborts);
      profile.swap(inbox_profile);
    }
    if (profile) {
      recording.reset();
      if (profile->steps > 0) {
        recording.emplace();
        recording->request = *profile;
        recording->left = profile->steps;
        recording->start = std::chrono::steady_clock::now();
      }
    }
    for (auto& r : added) {
      const std::string why = never_fits(*r);
      if (!why.empty())
        finish(std::move(r), FinishReason::kError, why);
      else
        waiting.push_back(std::move(r));
    }
    for (RequestId id : aborts) {
      if (auto r = take(id)) finish(std::move(r), FinishReason::kAbort);
    }
  }

  void preempt(std::unique_ptr<Request> r) {
    (void)model.runner->release_sequence(r->seq);
    r->seq = -1;
    r->computed = 0;
    ++stats.preemptions;
    waiting.push_front(std::move(r));
  }

  // Gives `r` a runner sequence and its cached prefix; the runner's refusal otherwise.
  Status admit(Request& r) {
    auto seq = model.runner->add_sequence();
    if (!seq.ok()) return seq.status();
    r.seq = *seq;
    r.computed = 0;
    auto adopted = model.runner->adopt_cached_prefix(r.seq, r.tokens(0, r.total()));
    if (adopted.ok() && *adopted > 0 && *adopted < r.total()) {
      r.computed = *adopted;
      stats.prompt_tokens_cached +=
          std::min<int64_t>(*adopted, static_cast<int64_t>(r.prompt.size()));
    }
    return ok_status();
  }

  // Takes `token`, sampled for r from row `row` of `sampled` (r's tokens are all in the cache
  // now), and decides whether r stops. Returns true when r finished: `slot` is null then (the
  // caller drops it).
  bool accept_token(std::unique_ptr<Request>& slot, size_t row, int32_t token) {
    Request& r = *slot;
    if (token < 0) {
      const std::string why =
          r.sampler->last_error() & kSamplingNonFiniteLogits
              ? "the model produced " + num(r.sampler->last_nonfinite()) +
                    " NaN or infinite logits at generated token " + num(r.output.size()) +
                    ": the weights may be corrupt"
              : "the sampling parameters or logit bias could not be applied at generated token " +
                    num(r.output.size());
      finish(std::move(slot), FinishReason::kError, why);
      return true;
    }
    r.output.push_back(token);
    ++stats.generated_tokens;
    out_for(r).new_token_ids.push_back(token);
    if (r.params.logprobs >= 0) {
      TokenLogprob t;
      t.token = token;
      t.logprob = sampled.logprobs[row];
      for (int32_t j = 0; j < r.params.logprobs; ++j) {
        const size_t slot_index = row * kMaxTopLogprobs + static_cast<size_t>(j);
        if (sampled.top_ids[slot_index] < 0) break;
        t.top.emplace_back(sampled.top_ids[slot_index], sampled.top_logprobs[slot_index]);
      }
      out_for(r).logprobs.push_back(std::move(t));
    }
    const auto& eos = model.info.eos_token_ids;
    const auto& extra = r.params.stop_token_ids;
    const bool stop_token =
        (!r.params.ignore_eos && std::find(eos.begin(), eos.end(), token) != eos.end()) ||
        std::find(extra.begin(), extra.end(), token) != extra.end();
    if (stop_token) {
      finish(std::move(slot), FinishReason::kStop);
      return true;
    }
    if (r.decoder) r.held += r.decoder->next(token);
    if (!r.params.stop.empty()) {
      const size_t stop_at = find_stop(r.held, r.params.stop);
      if (stop_at != std::string::npos) {
        r.held.resize(stop_at);
        deliver(r, r.held);
        r.held.clear();
        finish(std::move(slot), FinishReason::kStop);
        return true;
      }
    }
    if (static_cast<int64_t>(r.output.size()) >= r.params.max_tokens) {
      finish(std::move(slot), FinishReason::kLength);
      return true;
    }
    const size_t keep = stop_prefix_suffix(r.held, r.params.stop);
    deliver(r, r.held.substr(0, r.held.size() - keep));
    r.held.erase(0, r.held.size() - keep);
    return false;
  }

  // Adds the step just run (its entries, started at step_start) to the recording: each call as an
  // event placed at the step's host start time plus the call's own offset, and its analytic cost
  // at this step's shape. The last recorded step analyses them and leaves the result for
  // take_profile().
  void record_step(const std::vector<StepEntry>& entries,
                   std::chrono::steady_clock::time_point step_start) {
    Recording& rec = *recording;
    using ms = std::chrono::duration<double, std::milli>;
    const double offset_ms = ms(step_start - rec.start).count();
    rec.wall_ms += ms(std::chrono::steady_clock::now() - step_start).count();
    const Plan& plan = *model.runner->last_plan();
    const auto& times = model.runner->last_call_times();
    StepShape shape;
    shape.num_seqs = static_cast<int64_t>(entries.size());
    for (const StepEntry& e : entries) {
      const int64_t n = static_cast<int64_t>(e.tokens.size());
      const int64_t len = model.runner->sequence_length(e.seq);  // after the step
      shape.num_tokens += n;
      shape.kv_tokens += len;
      shape.attended_pairs += n * (len - n) + n * (n + 1) / 2;
    }
    const DType kv_dtype = model.runner->backend().kv_dtype();
    for (size_t i = 0; i < plan.calls.size() && i < times.size(); ++i) {
      const CallCost cost = call_cost(plan.calls[i], shape, kv_dtype);
      TraceEvent e;
      e.name = plan.calls[i].name;
      e.op = call_kind_name(plan.calls[i].op, plan.calls[i].attrs);
      e.start_ns = static_cast<int64_t>((offset_ms + times[i].start_ms) * 1e6);
      e.end_ns = static_cast<int64_t>((offset_ms + times[i].end_ms) * 1e6);
      e.step = 0;  // all recorded steps analysed as one: their calls index on
      e.call_index = static_cast<int>(rec.models.size());
      rec.events.push_back(std::move(e));
      rec.models.push_back({plan.calls[i].name,
                            call_kind_name(plan.calls[i].op, plan.calls[i].attrs), cost.bytes,
                            cost.flops});
    }
    ++rec.recorded;
    if (--rec.left > 0) return;
    ProfileResult out;
    out.model = model.info.architecture;
    out.backend = model.runner->backend().name();
    out.gpu = out.backend.rfind("cuda", 0) == 0;
    out.ceilings_source = rec.request.ceilings_source;
    out.ms_per_step = rec.wall_ms / static_cast<double>(rec.recorded);
    analyse_into(rec.events, rec.models, rec.request.ceilings, 0, &out);
    // The analysis saw one long step; per step, its device window is spread over the steps.
    out.device_ms_per_step /= static_cast<double>(rec.recorded);
    recording.reset();
    std::lock_guard<std::mutex> lock(inbox_mu);
    profile_done = std::move(out);
  }

  struct Scheduled {
    Request* request;  // while the step is built; afterwards only `id` is used (see Launched)
    RequestId id;
    int64_t num_tokens;
  };
  // A step launched (ModelRunner::launch_step) and not yet collected. A request of it may finish
  // or be aborted before it is collected (its row is then dropped), so it is found again by id.
  struct Launched {
    std::vector<Scheduled> scheduled;
  };
  std::optional<Launched> ahead;  // the overlapped step in flight across step() calls
  StepSampling ahead_sampling;    // its rows, built while the step before it runs

  // Where each running request sits in `running`, by id: built once a step, so finding a
  // launched step's requests again costs one lookup a row rather than a walk of `running`.
  std::unordered_map<RequestId, size_t> running_index() const {
    std::unordered_map<RequestId, size_t> at;
    at.reserve(running.size());
    for (size_t i = 0; i < running.size(); ++i)
      if (running[i]) at.emplace(running[i]->id, i);
    return at;
  }

  void schedule_and_run() {
    const int64_t max_seqs = options.max_num_seqs;
    bool may_admit = true;
    std::vector<StepEntry> entries;
    std::vector<Scheduled> scheduled;
    Status status;
    bool ran_whole = false;  // a recorded step (its profile may be done with it: recording reset)
    while (true) {
      entries.clear();
      scheduled.clear();
      int64_t budget = options.max_num_batched_tokens;
      auto add = [&](Request& r, int64_t n) {
        entries.push_back({r.seq, r.tokens(r.computed, r.computed + n)});
        scheduled.push_back({&r, r.id, n});
        budget -= n;
      };
      // Decodes first: one token for every running request that has its prompt in the cache.
      for (auto& r : running)
        if (r->pending() == 1) add(*r, 1);
      // Then prefill chunks: running requests part-way through their prompt, then new ones.
      for (auto& r : running)
        if (r->pending() > 1 && budget > 0) add(*r, std::min(r->pending(), budget));
      while (may_admit && budget > 0 && !waiting.empty() &&
             static_cast<int64_t>(running.size()) < max_seqs) {
        Request& r = *waiting.front();
        Status admitted = admit(r);
        if (!admitted.ok()) {
          // With nothing running the runner has every sequence free: this request cannot start.
          if (running.empty()) {
            auto failed = std::move(waiting.front());
            waiting.pop_front();
            finish(std::move(failed), FinishReason::kError, admitted.to_string());
            continue;
          }
          break;
        }
        running.push_back(std::move(waiting.front()));
        waiting.pop_front();
        add(r, std::min(r.pending(), budget));
      }
      if (entries.empty()) return;
      // A sampling row per entry: the request's next draw where this step completes its prompt
      // (or decodes), an inert greedy row for a prefill chunk that does not reach the end.
      sampling.rows.clear();
      sampling.edits.clear();
      for (const Scheduled& sch : scheduled) {
        const Request& r = *sch.request;
        if (r.pending() == sch.num_tokens) {
          SamplingRowParams row = r.sampler->next_row(model.info.vocab_size, &sampling.edits);
          row.num_top_logprobs = r.params.logprobs;
          sampling.rows.push_back(row);
        } else {
          sampling.rows.push_back(SamplingRowParams{});
        }
      }
      ran_whole = recording.has_value();
      if (ran_whole) {
        // A recorded step runs whole, its calls timed one by one.
        model.runner->set_record_call_times(true);
        const auto step_start = std::chrono::steady_clock::now();
        status = model.runner->step(entries, sampling, &sampled);
        model.runner->set_record_call_times(false);
        if (status.ok()) record_step(entries, step_start);
      } else {
        status = model.runner->launch_step(entries, sampling, {});
      }
      if (status.ok()) break;
      if (status.code() != StatusCode::kResourceExhausted || running.size() < 2) break;
      // Out of KV blocks: free the newest request's and plan again without admitting anyone.
      auto victim = std::move(running.back());
      running.pop_back();
      preempt(std::move(victim));
      may_admit = false;
    }
    ++stats.steps;
    Launched cur;
    cur.scheduled = scheduled;
    if (!status.ok() || ran_whole) {
      complete(cur.scheduled, status);  // ran whole (or not at all)
      return;
    }
    advance(std::move(cur));
  }

  // `cur` is in flight: launches the step after it where it may overlap (launch_ahead), then
  // collects `cur` and takes its tokens.
  void advance(Launched cur) {
    Launched next;
    Status next_failed;
    const bool overlapped = options.overlap_steps && launch_ahead(cur, &next, &next_failed);
    const Status collected = model.runner->collect_step(&sampled);
    complete(cur.scheduled, collected);
    if (overlapped) {
      ++stats.steps;
      ++stats.overlapped_steps;
      ahead = std::move(next);
    } else if (!next_failed.ok()) {
      complete(next.scheduled, next_failed);  // its requests cannot go on
    }
  }

  // The step after `cur`, launched before `cur` is collected, where every running request is in
  // `cur` and draws its next token there (no prompt left, no inert row), none is waiting to be
  // admitted (it would wait a step longer), no profile is being recorded, and no request's
  // penalties need the token `cur` has not brought back yet. Each request decodes the token `cur`
  // samples for it, fed on the device; one whose draw in `cur` is its last (max_tokens) gets no
  // row. Returns whether it launched; a refusal that changed nothing (KV blocks, model length)
  // leaves the step unoverlapped, any other failure is in *failed for next's requests.
  bool launch_ahead(const Launched& cur, Launched* next, Status* failed) {
    if (recording || !waiting.empty() || cur.scheduled.size() != running.size()) return false;
    std::vector<StepEntry> entries;
    std::vector<int32_t> feed;
    ahead_sampling.rows.clear();
    ahead_sampling.edits.clear();
    const auto at = running_index();
    for (size_t i = 0; i < cur.scheduled.size(); ++i) {
      const Scheduled& sch = cur.scheduled[i];
      const auto found = at.find(sch.id);
      if (found == at.end()) return false;
      const Request* r = running[found->second].get();
      if (r->pending() != sch.num_tokens || r->sampler->penalised()) return false;
      if (static_cast<int64_t>(r->output.size()) + 1 >= r->params.max_tokens) continue;
      entries.push_back({r->seq, {0}});
      feed.push_back(static_cast<int32_t>(i));
      SamplingRowParams row =
          r->sampler->next_row(model.info.vocab_size, &ahead_sampling.edits, /*ahead=*/1);
      row.num_top_logprobs = r->params.logprobs;
      ahead_sampling.rows.push_back(row);
      next->scheduled.push_back({nullptr, r->id, 1});
    }
    if (entries.empty()) return false;
    const int64_t before = model.runner->sequence_length(entries[0].seq);
    const Status s = model.runner->launch_step(entries, ahead_sampling, feed);
    if (s.ok()) return true;
    if (model.runner->sequence_length(entries[0].seq) != before) *failed = s;
    return false;
  }

  // Takes the tokens of a step that ran (status ok) for the requests still running, or fails
  // them (not ok: not a shortage one preemption can fix; the requests of the step cannot go on).
  void complete(const std::vector<Scheduled>& scheduled, const Status& status) {
    if (!status.ok()) {
      std::unordered_set<RequestId> failed;
      for (const Scheduled& s : scheduled) failed.insert(s.id);
      for (auto it = running.begin(); it != running.end();) {
        if (*it && failed.count((*it)->id)) {
          auto r = std::move(*it);
          it = running.erase(it);
          finish(std::move(r), FinishReason::kError, status.to_string());
        } else {
          ++it;
        }
      }
      return;
    }
    // Rows whose request now samples a token, with the request's slot in `running`.
    std::vector<std::pair<size_t, size_t>> ready;
    const auto at = running_index();
    for (size_t i = 0; i < scheduled.size(); ++i) {
      const auto found = at.find(scheduled[i].id);
      if (found == at.end()) continue;  // finished or aborted since the step was launched
      Request* r = running[found->second].get();
      if (r->pending() > 1) stats.prompt_tokens_computed += scheduled[i].num_tokens;
      r->computed += scheduled[i].num_tokens;
      if (r->pending() == 0) ready.emplace_back(i, found->second);  // else a prefill chunk
    }
    // The backend sampled every row (on the GPU inside the decode step's graph, or the CPU twin
    // over the rows in parallel); each ready request's sampler records its draw.
    // (accept_token may move a finished request out of its slot; the slots stay in place until
    // the erase below, so the indices hold.)
    for (const auto& [i, slot] : ready) {
      running[slot]->sampler->accept(sampled.tokens[i], sampled.errors[i], sampled.nonfinite[i]);
      accept_token(running[slot], i, sampled.tokens[i]);
    }
    running.erase(
        std::remove_if(running.begin(), running.end(), [](const auto& r) { return r == nullptr; }),
        running.end());
  }

  std::vector<RequestOutput> step() {
    outs.clear();
    out_index.clear();
    drain_inbox();
    if (ahead) {
      Launched cur = std::move(*ahead);
      ahead.reset();
      advance(std::move(cur));
    } else if (!running.empty() || !waiting.empty()) {
      schedule_and_run();
    }
    return std::move(outs);
  }
};

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Engine::~Engine() {
  // Release every sequence still held, so the runner is left clean even when requests are left.
  for (auto& r : impl_->running)
    if (r && r->seq >= 0) (void)impl_->model.runner->release_sequence(r->seq);
}

StatusOr<std::unique_ptr<Engine>> Engine::load(const EngineOptions& options) {
  if (options.max_num_batched_tokens < 1 || options.max_num_batched_tokens > (1 << 20))
    return invalid_argument("max_num_batched_tokens must be in [1, 1048576], got " +
                            num(options.max_num_batched_tokens));
  if (options.max_num_seqs < 1 || options.max_num_seqs > options.max_num_batched_tokens)
    return invalid_argument("max_num_seqs must be in [1, max_num_batched_tokens = " +
                            num(options.max_num_batched_tokens) +
                            "] (every running request decodes "
                            "one token per step), got " +
                            num(options.max_num_seqs));
  ModelOptions mo = options.model;
  mo.max_step_tokens = options.max_num_batched_tokens;
  mo.max_seqs = options.max_num_seqs;
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  ROOFLINE_ASSIGN_OR_RETURN(impl->model, load_model(mo, options.enable_prefix_cache));
  const KvCacheShape& kv = impl->model.runner->kv_shape();
  impl->kv_capacity_tokens = kv.num_blocks * kv.block_size;
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

const ModelInfo& Engine::info() const { return impl_->model.info; }
bool Engine::has_tokenizer() const { return impl_->model.tokenizer != nullptr; }

std::string Engine::token_text(int32_t id) const {
  if (id < 0 || id >= impl_->model.info.vocab_size) return "";
  return decode({id});
}

std::string Engine::decode(const std::vector<int32_t>& ids) const {
  if (!impl_->model.tokenizer) return "";
  return impl_->model.tokenizer->decode(ids);
}

StatusOr<std::vector<int32_t>> Engine::tokenize(const std::string& text,
                                                bool add_special_tokens) const {
  ROOFLINE_RETURN_IF_ERROR(impl_->model.need_tokenizer());
  return impl_->model.tokenizer->encode(text, add_special_tokens);
}

StatusOr<std::string> Engine::render_chat(const std::vector<ChatTurn>& turns,
                                          bool add_generation_prompt) const {
  return impl_->model.render_chat(turns, add_generation_prompt);
}

StatusOr<RequestId> Engine::add_request(const std::vector<int32_t>& prompt_ids,
                                        const SamplingParams& params) {
  const int64_t vocab = impl_->model.info.vocab_size;
  if (prompt_ids.empty())
    return invalid_argument("the prompt is empty: give at least one token id");
  for (int32_t id : prompt_ids)
    if (id < 0 || id >= vocab)
      return invalid_argument("prompt token id " + num(id) +
                              " is out of range for this model's vocabulary of " + num(vocab));
  ROOFLINE_RETURN_IF_ERROR(validate_sampling_params(params, vocab));
  if (!params.stop.empty() && !impl_->model.tokenizer)
    return invalid_argument("sampling param 'stop' needs text, and this model has no tokenizer (" +
                            impl_->model.no_tokenizer_reason + "): use stop_token_ids instead");
  auto r = std::make_unique<Request>();
  r->prompt = prompt_ids;
  r->params = params;
  SamplerSettings s;
  s.temperature = params.temperature;
  s.top_k = params.top_k;
  s.top_p = params.top_p;
  s.min_p = params.min_p;
  s.repetition_penalty = params.repetition_penalty;
  s.frequency_penalty = params.frequency_penalty;
  s.presence_penalty = params.presence_penalty;
  s.logit_bias = params.logit_bias;
  const uint64_t seed =
      params.seed ? *params.seed
                  : (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  r->sampler = std::make_unique<Sampler>(s, seed);
  r->sampler->set_prompt(prompt_ids);
  if (impl_->model.tokenizer)
    r->decoder =
        std::make_unique<Tokenizer::StreamDecoder>(*impl_->model.tokenizer, /*skip_special=*/true);
  std::lock_guard<std::mutex> lock(impl_->inbox_mu);
  r->id = impl_->next_id.fetch_add(1);
  const RequestId id = r->id;
  impl_->inbox_requests.push_back(std::move(r));
  impl_->unfinished.fetch_add(1);
  return id;
}

StatusOr<RequestId> Engine::add_text_request(const std::string& prompt,
                                             const SamplingParams& params) {
  ROOFLINE_ASSIGN_OR_RETURN(std::vector<int32_t> ids,
                            tokenize(prompt, /*add_special_tokens=*/true));
  if (ids.empty()) return invalid_argument("the prompt is empty after tokenisation");
  return add_request(ids, params);
}

void Engine::abort(RequestId id) {
  std::lock_guard<std::mutex> lock(impl_->inbox_mu);
  impl_->inbox_aborts.push_back(id);
}

std::vector<RequestOutput> Engine::step() { return impl_->step(); }

bool Engine::has_unfinished() const { return impl_->unfinished.load() > 0; }

std::vector<RequestResult> Engine::run_to_completion(
    const std::function<void(const std::vector<RequestOutput>&)>& on_step) {
  std::vector<RequestResult> results;
  impl_->results = &results;
  while (has_unfinished()) {
    std::vector<RequestOutput> outs = impl_->step();
    if (on_step) on_step(outs);
  }
  impl_->results = nullptr;
  std::sort(results.begin(), results.end(),
            [](const auto& a, const auto& b) { return a.id < b.id; });
  return results;
}

EngineStats Engine::stats() const {
  EngineStats s = impl_->stats;
  const KvStats kv = impl_->model.runner->kv_stats();
  s.kv_total_blocks = kv.total_blocks;
  s.kv_free_blocks = kv.free_blocks;
  s.prefix_hit_blocks = kv.prefix_hit_blocks;
  s.prefix_miss_blocks = kv.prefix_miss_blocks;
  return s;
}

Status Engine::start_profile(int64_t steps, double bandwidth_gbps, double peak_tflops) {
  if (steps < 1 || steps > 10000)
    return invalid_argument("profile steps must be in [1, 10000], got " + std::to_string(steps));
  ROOFLINE_RETURN_IF_ERROR(
      check_ceiling_overrides(bandwidth_gbps, peak_tflops, {"bandwidth_gbps", "peak_tflops"}));
  ROOFLINE_ASSIGN_OR_RETURN(auto ceilings, profile_ceilings(impl_->model.runner->options().device,
                                                            false, bandwidth_gbps, peak_tflops));
  // Its events are plan calls timed whole, not kernels: no kernel count, no handover floor.
  ceilings.first.handover_ns = 0;
  std::lock_guard<std::mutex> lock(impl_->inbox_mu);
  impl_->inbox_profile = Impl::ProfileRequest{steps, ceilings.first, ceilings.second};
  impl_->profile_done.reset();
  return ok_status();
}

std::optional<ProfileResult> Engine::take_profile() {
  std::lock_guard<std::mutex> lock(impl_->inbox_mu);
  std::optional<ProfileResult> out;
  out.swap(impl_->profile_done);
  return out;
}

void Engine::cancel_profile() {
  std::lock_guard<std::mutex> lock(impl_->inbox_mu);
  impl_->inbox_profile = Impl::ProfileRequest{};  // steps 0: step() drops the recording
  impl_->profile_done.reset();
}

}  // namespace roofline
