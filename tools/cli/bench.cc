// `roofline bench throughput` and `roofline bench coldstart` (issue 10). `roofline bench` itself
// (decode-step latency against the roofline) lives in main.cc beside `profile`, which shares its
// set-up.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "batch_input.h"
#include "cli.h"

namespace roofline::cli {

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

// Set before main() runs: cold start is measured from here.
const Clock::time_point kProcessStart = Clock::now();

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// "lo:hi" with 1 <= lo <= hi.
StatusOr<std::pair<int64_t, int64_t>> parse_range(const std::string& flag,
                                                  const std::string& text) {
  const size_t colon = text.find(':');
  try {
    if (colon != std::string::npos) {
      size_t used = 0;
      const long long lo = std::stoll(text.substr(0, colon), &used);
      if (used != colon) throw std::invalid_argument(text);
      const std::string rest = text.substr(colon + 1);
      const long long hi = std::stoll(rest, &used);
      if (used != rest.size()) throw std::invalid_argument(text);
      if (lo >= 1 && hi >= lo && hi <= (1 << 20)) return std::make_pair<int64_t, int64_t>(lo, hi);
    }
  } catch (const std::exception&) {
  }
  return invalid_argument(
      flag + " must be LO:HI with 1 <= LO <= HI <= 1048576, e.g. 32:1024; got '" + text + "'");
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = p / 100.0 * static_cast<double>(v.size() - 1);
  const size_t i = static_cast<size_t>(pos);
  const double frac = pos - static_cast<double>(i);
  return i + 1 < v.size() ? v[i] * (1 - frac) + v[i + 1] * frac : v[i];
}

std::string model_label(const CommonFlags& f) {
  return f.model.dummy_weights.empty() ? f.model.model_dir : "dummy " + f.model.dummy_weights;
}

std::string today() {
  char buf[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  return buf;
}

// The JSON result to --json (a path, or - for stdout) and a Markdown section to --markdown.
Status emit(const json& result, const std::string& json_path, const std::string& markdown_path,
            const std::string& markdown) {
  if (json_path == "-") {
    std::printf("%s\n", result.dump(2).c_str());
  } else if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << result.dump(2) << "\n";
    if (!out) return io_error("cannot write --json '" + json_path + "'");
  }
  if (!markdown_path.empty()) {
    std::ofstream out(markdown_path, std::ios::app);
    out << markdown;
    if (!out) return io_error("cannot append to --markdown '" + markdown_path + "'");
  }
  return ok_status();
}

}  // namespace

int run_bench_throughput(CommonFlags& f, const ThroughputFlags& t) {
  if (t.requests < 1 || t.requests > 1000000)
    return usage_error(invalid_argument("--requests must be in [1, 1000000]"));
  if (Status s = check_max_num_seqs(t.max_num_seqs); !s.ok()) return usage_error(s);
  auto prompt_range = parse_range("--prompt-len", t.prompt_len);
  if (!prompt_range.ok()) return usage_error(prompt_range.status());
  auto output_range = parse_range("--output-len", t.output_len);
  if (!output_range.ok()) return usage_error(output_range.status());
  // Requests from a file: every line read and checked before the model loads (and again against
  // it once loaded); their own sampling fields apply (greedy by default).
  std::vector<BatchItem> items;
  if (!t.input.empty()) {
    auto read = read_batch(t.input, SamplingParams{});
    if (!read.ok()) return fail(read.status());
    items = std::move(read).value();
  }
  if (Status s = resolve_model(f); !s.ok()) return fail(s);
  EngineOptions eo;
  eo.model = f.model;
  eo.overlap_steps = f.overlap_steps;
  eo.max_num_seqs = t.max_num_seqs;
  eo.max_num_batched_tokens = std::max<int64_t>(f.model.max_step_tokens, t.max_num_seqs);
  auto engine = Engine::load(eo);
  if (!engine.ok()) return fail(engine.status());
  Engine& e = **engine;
  const int64_t vocab = e.info().vocab_size;
  const int64_t max_len = e.info().max_model_len;
  if (!t.input.empty()) {
    if (Status s = resolve_batch(e, t.input, &items); !s.ok()) return fail(s);
  } else if (prompt_range->second + output_range->second > max_len)
    return fail(invalid_argument(
        "--prompt-len's and --output-len's maxima (" + std::to_string(prompt_range->second) +
        " + " + std::to_string(output_range->second) + ") exceed the model length of " +
        std::to_string(max_len) + ": lower them or raise --max-model-len"));
  // Token ids avoid the low ids (special and byte tokens of most vocabularies) when there is room.
  const int32_t lo_id = vocab > 512 ? 256 : 0;
  std::mt19937_64 rng(t.seed);
  std::uniform_int_distribution<int64_t> plen(prompt_range->first, prompt_range->second);
  std::uniform_int_distribution<int64_t> olen(output_range->first, output_range->second);
  std::uniform_int_distribution<int32_t> tok(lo_id, static_cast<int32_t>(vocab - 1));
  struct Track {
    Clock::time_point first, last, done;
    bool started = false;
    int64_t tokens = 0;
  };
  std::map<RequestId, Track> track;
  std::vector<double> itl_ms;
  int64_t prompt_tokens = 0, failed = 0;
  const int64_t requests = t.input.empty() ? t.requests : static_cast<int64_t>(items.size());
  const std::string workload = t.input.empty()
                                   ? "prompts U[" + t.prompt_len + "], outputs U[" + t.output_len +
                                         "] tokens, seed " + std::to_string(t.seed)
                                   : "requests from " + t.input;
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < requests; ++i) {
    std::vector<int32_t> prompt;
    SamplingParams p;
    if (t.input.empty()) {
      prompt.resize(static_cast<size_t>(plen(rng)));
      for (auto& tid : prompt) tid = tok(rng);
      p.max_tokens = olen(rng);
      p.ignore_eos = true;
    } else {
      prompt = items[static_cast<size_t>(i)].ids;
      p = items[static_cast<size_t>(i)].params;
    }
    prompt_tokens += static_cast<int64_t>(prompt.size());
    auto id = e.add_request(prompt, p);
    if (!id.ok())
      return fail(t.input.empty() ? id.status()
                                  : line_error(t.input, items[static_cast<size_t>(i)].line,
                                               id.status().message()));
    track[*id] = Track{};
  }
  int64_t done = 0, generated = 0;
  while (e.has_unfinished()) {
    const std::vector<RequestOutput> outs = e.step();
    const auto now = Clock::now();
    for (const RequestOutput& o : outs) {
      Track& tr = track[o.id];
      const int64_t n = static_cast<int64_t>(o.new_token_ids.size());
      if (n > 0) {
        if (!tr.started) {
          tr.first = now;
          tr.started = true;
        } else {
          itl_ms.push_back(ms_between(tr.last, now) / static_cast<double>(n));
        }
        tr.last = now;
        tr.tokens += n;
        generated += n;
      }
      if (o.finished) {
        tr.done = now;
        ++done;
        if (o.finish_reason == FinishReason::kError) ++failed;
      }
    }
    print_progress(done, requests, generated, ms_between(t0, now) / 1e3);
  }
  std::fprintf(stderr, "\n");
  const double wall_s = ms_between(t0, Clock::now()) / 1e3;
  std::vector<double> ttft_ms, e2e_ms;
  for (const auto& [id, tr] : track) {
    if (!tr.started) continue;
    ttft_ms.push_back(ms_between(t0, tr.first));
    e2e_ms.push_back(ms_between(t0, tr.done));
  }
  const EngineStats st = e.stats();
  const int64_t lookups = st.prefix_hit_blocks + st.prefix_miss_blocks;
  json result{{"mode", "throughput"},
              {"model", model_label(f)},
              {"device", f.model.device},
              {"requests", requests},
              {"failed", failed},
              {"workload", workload},
              {"max_num_seqs", t.max_num_seqs},
              {"wall_s", wall_s},
              {"requests_per_s", requests / wall_s},
              {"output_tokens_per_s", generated / wall_s},
              {"total_tokens_per_s", (generated + prompt_tokens) / wall_s},
              {"prompt_tokens", prompt_tokens},
              {"output_tokens", generated},
              {"ttft_ms",
               {{"p50", percentile(ttft_ms, 50)},
                {"p90", percentile(ttft_ms, 90)},
                {"p99", percentile(ttft_ms, 99)}}},
              {"itl_ms",
               {{"p50", percentile(itl_ms, 50)},
                {"p90", percentile(itl_ms, 90)},
                {"p99", percentile(itl_ms, 99)}}},
              {"latency_ms", {{"p50", percentile(e2e_ms, 50)}, {"p99", percentile(e2e_ms, 99)}}},
              {"prefix_cache_hit_rate",
               lookups > 0 ? static_cast<double>(st.prefix_hit_blocks) / lookups : 0.0},
              {"preemptions", st.preemptions}};
  std::printf("throughput: %s on %s, %lld requests (%s), %lld at once\n", model_label(f).c_str(),
              f.model.device.c_str(), static_cast<long long>(requests), workload.c_str(),
              static_cast<long long>(t.max_num_seqs));
  std::printf("  %.2f requests/s, %.1f output tokens/s, %.1f total tokens/s in %.2f s\n",
              requests / wall_s, generated / wall_s, (generated + prompt_tokens) / wall_s, wall_s);
  std::printf("  time to first token  p50 %.1f ms, p90 %.1f ms, p99 %.1f ms\n",
              percentile(ttft_ms, 50), percentile(ttft_ms, 90), percentile(ttft_ms, 99));
  std::printf("  inter-token latency  p50 %.2f ms, p90 %.2f ms, p99 %.2f ms\n",
              percentile(itl_ms, 50), percentile(itl_ms, 90), percentile(itl_ms, 99));
  std::printf("  request latency      p50 %.1f ms, p99 %.1f ms; %lld preemptions; %lld failed\n",
              percentile(e2e_ms, 50), percentile(e2e_ms, 99),
              static_cast<long long>(st.preemptions), static_cast<long long>(failed));
  std::ostringstream md;
  md << "\n## bench throughput, " << today() << "\n\n"
     << "`roofline bench throughput` — " << model_label(f) << " on " << f.model.device << ", "
     << requests << " requests, " << workload << ", " << t.max_num_seqs << " at once\n\n"
     << "| requests/s | output tok/s | total tok/s | TTFT p50 / p99 ms | ITL p50 / p99 ms | "
        "preemptions |\n"
     << "|---|---|---|---|---|---|\n"
     << "| " << requests / wall_s << " | " << generated / wall_s << " | "
     << (generated + prompt_tokens) / wall_s << " | " << percentile(ttft_ms, 50) << " / "
     << percentile(ttft_ms, 99) << " | " << percentile(itl_ms, 50) << " / "
     << percentile(itl_ms, 99) << " | " << st.preemptions << " |\n";
  if (Status s = emit(result, t.json_path, t.markdown_path, md.str()); !s.ok()) return fail(s);
  return failed > 0 ? 1 : 0;
}

int run_bench_coldstart(CommonFlags& f, const ColdstartFlags& c) {
  if (c.prompt_tokens < 1 || c.prompt_tokens > 65536)
    return usage_error(invalid_argument("--prompt-tokens must be in [1, 65536]"));
  if (Status s = resolve_model(f); !s.ok()) return fail(s);
  const auto entered = Clock::now();
  auto runner = create_runner(f);
  if (!runner.ok()) return fail(runner.status());
  const auto created = Clock::now();
  ModelRunner& r = **runner;
  const int64_t vocab = r.config().vocab_size;
  auto seq = r.add_sequence();
  if (!seq.ok()) return fail(seq.status());
  std::vector<int32_t> prompt(static_cast<size_t>(c.prompt_tokens));
  for (size_t i = 0; i < prompt.size(); ++i)
    prompt[i] = static_cast<int32_t>((1 + 7919 * i) % vocab);
  std::vector<float> logits;
  const auto t_first = Clock::now();
  // The prompt in the model's step-size chunks; the first token is the argmax of the last row.
  for (size_t i = 0; i < prompt.size(); i += static_cast<size_t>(r.options().max_step_tokens)) {
    std::vector<int32_t> chunk(
        prompt.begin() + static_cast<int64_t>(i),
        prompt.begin() + static_cast<int64_t>(std::min(
                             prompt.size(), i + static_cast<size_t>(r.options().max_step_tokens))));
    if (Status s = r.step({{*seq, chunk}}, false, &logits); !s.ok()) return fail(s);
  }
  const int32_t first =
      static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  const auto t_token = Clock::now();
  if (Status s = r.step({{*seq, {first}}}, false, &logits); !s.ok()) return fail(s);
  const auto t_second = Clock::now();
  const ModelRunner::LoadTimings& lt = r.load_timings();
  const double to_main = ms_between(kProcessStart, entered);
  const double create_ms = ms_between(entered, created);
  const double other = create_ms - lt.open_ms - lt.graph_ms - lt.weights_ms - lt.plan_ms -
                       lt.allocate_ms - lt.capture_ms;
  const double first_step = ms_between(t_first, t_token);
  const double total = ms_between(kProcessStart, t_token);
  json phases = {{"process_start_to_load", to_main},
                 {"open_model_files", lt.open_ms},
                 {"build_graph", lt.graph_ms},
                 {"weights_to_backend", lt.weights_ms},
                 {"plans", lt.plan_ms},
                 {"allocate", lt.allocate_ms},
                 {"cuda_graph_capture", lt.capture_ms},
                 {"other", other},
                 {"first_step_prefill", first_step}};
  json result{{"mode", "coldstart"},
              {"model", model_label(f)},
              {"device", f.model.device},
              {"prompt_tokens", c.prompt_tokens},
              {"phases_ms", phases},
              {"time_to_first_token_ms", total},
              {"next_decode_step_ms", ms_between(t_token, t_second)},
              {"plan_cache", "none (an ahead-of-time plan cache is a later issue)"}};
  std::printf("coldstart: %s on %s, %lld-token prompt\n", model_label(f).c_str(),
              f.model.device.c_str(), static_cast<long long>(c.prompt_tokens));
  const std::pair<const char*, double> rows[] = {
      {"process start to load", to_main},
      {"open model files", lt.open_ms},
      {"build graph + passes", lt.graph_ms},
      {"weights to the backend", lt.weights_ms},
      {"plans (every token bucket)", lt.plan_ms},
      {"allocate (workspace, KV)", lt.allocate_ms},
      {"CUDA graph capture", lt.capture_ms},
      {"other", other},
      {"first step (prefill; GEMM algorithm choice)", first_step}};
  std::ostringstream md;
  md << "\n## bench coldstart, " << today() << "\n\n`roofline bench coldstart` — " << model_label(f)
     << " on " << f.model.device << ", " << c.prompt_tokens
     << "-token prompt, no plan cache\n\n| phase | ms |\n|---|---|\n";
  for (const auto& [name, ms] : rows) {
    std::printf("  %-44s %10.1f ms\n", name, ms);
    md << "| " << name << " | " << ms << " |\n";
  }
  std::printf("  %-44s %10.1f ms\n", "time to first token", total);
  std::printf("  %-44s %10.1f ms\n", "(next decode step)", ms_between(t_token, t_second));
  md << "| **time to first token** | **" << total << "** |\n";
  if (Status s = emit(result, c.json_path, c.markdown_path, md.str()); !s.ok()) return fail(s);
  return 0;
}

}  // namespace roofline::cli
