// roofline: the command line.
//   roofline generate --model DIR --prompt-ids 1,2,3 --max-tokens N   streams token ids
//   roofline logits   --model DIR --prompt-ids 1,2,3 --out logits.npy  prefill + decode logits
//   roofline info     --model DIR [--dump-graph] [--dump-plan]         what was loaded, how it runs
// Exit status: 0 success, 1 the request failed (message on stderr), 2 bad command line.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/log.h"
#include "core/npy.h"
#include "graph/plan.h"
#include "roofline/model.h"
#include "runtime/model_runner.h"

namespace {

using roofline::Status;
using roofline::StatusOr;

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
      return roofline::invalid_argument("--prompt-ids must be comma-separated non-negative integers; '" +
                                        item.substr(0, 20) + "' is not one");
    const long long v = std::stoll(item);
    if (v > 0x7fffffffLL) return roofline::invalid_argument("token id " + item + " is too large");
    ids.push_back(static_cast<int32_t>(v));
    i = j + 1;
  }
  if (ids.empty()) return roofline::invalid_argument("--prompt-ids is empty: give at least one id");
  return ids;
}

int fail(const Status& s) {
  std::fprintf(stderr, "roofline: %s\n", s.to_string().c_str());
  return 1;
}

struct CommonFlags {
  roofline::ModelOptions model;
  bool verbose = false;
  void add(CLI::App* cmd) {
    cmd->add_option("--model", model.model_dir, "Hugging Face model directory (config.json + safetensors)")
        ->required();
    cmd->add_option("--kv-block-size", model.kv_block_size, "Tokens per KV-cache block")
        ->capture_default_str();
    cmd->add_option("--max-step-tokens", model.max_step_tokens,
                    "Tokens per forward step (longer prompts are prefilled in chunks)")
        ->capture_default_str();
    cmd->add_option("--max-model-len", model.max_model_len, "Context cap; 0 = the model's");
    cmd->add_option("--kv-cache-tokens", model.kv_cache_tokens, "KV-cache capacity; 0 = default");
    cmd->add_option("--threads", model.num_threads, "CPU threads; 0 = all");
    cmd->add_flag("--no-fuse", [this](int64_t) { model.fuse = false; }, "Skip the fusion passes");
    cmd->add_flag("-v,--verbose", verbose, "Log what is loaded and planned");
  }
};

int run_generate(CommonFlags& f, const std::string& ids_text, roofline::GenerateOptions& g) {
  auto ids = parse_ids(ids_text);
  if (!ids.ok()) return fail(ids.status());
  auto model = roofline::Model::load(f.model);
  if (!model.ok()) return fail(model.status());
  roofline::GenerateStats stats;
  bool first = true;
  auto out = (*model)->generate(*ids, g, [&](int32_t t) {
    std::printf(first ? "%d" : " %d", t);
    std::fflush(stdout);
    first = false;
    return true;
  }, &stats);
  std::printf("\n");
  if (!out.ok()) return fail(out.status());
  const double decode_tps = stats.generated_tokens > 1 && stats.decode_ms > 0
                                ? (stats.generated_tokens - 1) / (stats.decode_ms / 1e3) : 0.0;
  std::fprintf(stderr, "prompt %lld tokens: %.1f ms to first token; %lld tokens generated, %.1f tok/s decode\n",
               static_cast<long long>(stats.prompt_tokens), stats.prefill_ms,
               static_cast<long long>(stats.generated_tokens), decode_tps);
  return 0;
}

int run_logits(CommonFlags& f, const std::string& ids_text, int64_t steps, const std::string& out_path) {
  auto ids = parse_ids(ids_text);
  if (!ids.ok()) return fail(ids.status());
  auto model = roofline::Model::load(f.model);
  if (!model.ok()) return fail(model.status());
  std::vector<int32_t> greedy;
  auto logits = (*model)->logits(*ids, steps, &greedy);
  if (!logits.ok()) return fail(logits.status());
  const int64_t vocab = (*model)->info().vocab_size;
  const int64_t rows = static_cast<int64_t>(logits->size()) / vocab;
  Status s = roofline::write_npy_f32(out_path, {rows, vocab}, logits->data());
  if (!s.ok()) return fail(s);
  std::fprintf(stderr, "wrote %lld x %lld logits to %s; greedy tokens:", static_cast<long long>(rows),
               static_cast<long long>(vocab), out_path.c_str());
  for (int32_t t : greedy) std::fprintf(stderr, " %d", t);
  std::fprintf(stderr, "\n");
  return 0;
}

int run_info(CommonFlags& f, bool dump_graph, bool dump_plan) {
  roofline::RunnerOptions ro;
  ro.model_dir = f.model.model_dir;
  ro.kv_block_size = f.model.kv_block_size;
  ro.max_step_tokens = f.model.max_step_tokens;
  ro.max_model_len = f.model.max_model_len;
  ro.kv_cache_tokens = f.model.kv_cache_tokens;
  ro.fuse = f.model.fuse;
  auto runner = roofline::ModelRunner::create(ro);
  if (!runner.ok()) return fail(runner.status().with_context("loading '" + ro.model_dir + "'"));
  const auto& c = (*runner)->config();
  std::printf("architecture   %s\nlayers         %lld\nhidden         %lld\nheads          %lld (kv %lld, head_dim %lld)\n"
              "intermediate   %lld\nvocab          %lld\nmax positions  %lld\nweights        %.1f MiB\n",
              c.architecture_name.c_str(), (long long)c.num_layers, (long long)c.hidden_size,
              (long long)c.num_heads, (long long)c.num_kv_heads, (long long)c.head_dim,
              (long long)c.intermediate_size, (long long)c.vocab_size,
              (long long)c.max_position_embeddings, (*runner)->weights().total_bytes() / 1048576.0);
  const auto& plans = (*runner)->plans(false);
  std::printf("plans          %zu token buckets, %zu calls each (last-token logits)\n", plans.size(),
              plans.front().calls.size());
  if (dump_graph) std::printf("\n%s", (*runner)->graph(false).to_string().c_str());
  if (dump_plan) std::printf("\n%s", plans.back().to_string().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"roofline: LLM inference at the speed of light of the GPU"};
  app.require_subcommand(1);

  CommonFlags gen_flags, logit_flags, info_flags;
  std::string gen_ids, logit_ids, out_path;
  roofline::GenerateOptions gen;
  int64_t decode_steps = 16;
  bool ignore_eos = false, dump_graph = false, dump_plan = false;

  CLI::App* g = app.add_subcommand("generate", "Generate from prompt token ids, streaming ids to stdout");
  gen_flags.add(g);
  g->add_option("--prompt-ids", gen_ids, "Comma-separated prompt token ids")->required();
  g->add_option("--max-tokens", gen.max_new_tokens, "Tokens to generate")->capture_default_str();
  g->add_option("--temperature", gen.temperature, "0 = greedy")->capture_default_str();
  g->add_option("--top-k", gen.top_k, "Keep the k most likely tokens; 0 = all");
  g->add_option("--top-p", gen.top_p, "Nucleus sampling mass")->capture_default_str();
  g->add_option("--seed", gen.seed, "Random seed for sampling");
  g->add_flag("--ignore-eos", ignore_eos, "Keep generating past end-of-sequence tokens");

  CLI::App* l = app.add_subcommand("logits", "Write prefill + greedy-decode logits to a .npy file");
  logit_flags.add(l);
  l->add_option("--prompt-ids", logit_ids, "Comma-separated prompt token ids")->required();
  l->add_option("--decode-steps", decode_steps, "Greedy decode steps after the prefill")->capture_default_str();
  l->add_option("--out", out_path, "Output .npy path ([prompt + decode steps, vocab] float32)")->required();

  CLI::App* i = app.add_subcommand("info", "Describe a model and how roofline plans it");
  info_flags.add(i);
  i->add_flag("--dump-graph", dump_graph, "Print the graph after fusion");
  i->add_flag("--dump-plan", dump_plan, "Print the largest bucket's plan");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  for (CommonFlags* f : {&gen_flags, &logit_flags, &info_flags})
    if (f->verbose) roofline::set_log_level(roofline::LogLevel::kInfo);
  if (g->parsed()) {
    gen.stop_at_eos = !ignore_eos;
    return run_generate(gen_flags, gen_ids, gen);
  }
  if (l->parsed()) return run_logits(logit_flags, logit_ids, decode_steps, out_path);
  return run_info(info_flags, dump_graph, dump_plan);
}
