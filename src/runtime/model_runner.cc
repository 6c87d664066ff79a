// ModelRunner: loading, planning and stepping (see model_runner.h).
#include "runtime/model_runner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <unordered_set>

#include "core/check.h"
#include "core/log.h"
#include "graph/passes.h"
#include "models/dense_decoder.h"
#include "models/dummy_models.h"
#include "models/rope.h"
#include "runtime/model_source.h"

namespace roofline {

namespace {

// Default KV cache budget on the CPU when the user gives none: enough for max_seqs full-length
// sequences, capped so a model with a 128k context does not ask for tens of GiB up front.
constexpr int64_t kDefaultKvBudgetBytes = 1ll << 30;

Status check_range(const char* flag, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi)
    return invalid_argument(std::string(flag) + " must be in [" + std::to_string(lo) + ", " +
                            std::to_string(hi) + "], got " + std::to_string(v));
  return ok_status();
}

std::string short_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

}  // namespace

std::vector<int64_t> token_buckets(int64_t max_step_tokens) {
  std::vector<int64_t> b;
  for (int64_t t = 16; t < max_step_tokens; t *= 2) b.push_back(t);
  b.push_back(max_step_tokens);
  return b;
}

ModelRunner::ModelRunner(const RunnerOptions& options, ModelConfig config,
                         std::unique_ptr<WeightStore> weights, std::unique_ptr<Backend> backend)
    : options_(options),
      config_(std::move(config)),
      weights_(std::move(weights)),
      backend_(std::move(backend)) {}

Status check_runner_options(const RunnerOptions& opts) {
  if (!opts.model_dir.empty() && !opts.dummy_weights.empty())
    return invalid_argument("give either --model PATH or --dummy-weights NAME (exactly one)");
  if (!opts.dummy_weights.empty())
    ROOFLINE_RETURN_IF_ERROR(dummy_model_config(opts.dummy_weights).status());
  ROOFLINE_RETURN_IF_ERROR(check_device_name(opts.device));
  ROOFLINE_RETURN_IF_ERROR(check_range("--kv-block-size", opts.kv_block_size, 1, 4096));
  ROOFLINE_RETURN_IF_ERROR(check_range("--max-step-tokens", opts.max_step_tokens, 1, 1 << 20));
  ROOFLINE_RETURN_IF_ERROR(check_range("--max-seqs", opts.max_seqs, 1, 4096));
  ROOFLINE_RETURN_IF_ERROR(check_range("--max-model-len", opts.max_model_len, 0, 1 << 24));
  ROOFLINE_RETURN_IF_ERROR(check_range("--kv-cache-tokens", opts.kv_cache_tokens, 0, 1ll << 32));
  if ((opts.kv_cache_tokens != 0) + (opts.kv_memory_bytes != 0) + (opts.kv_memory_fraction != 0) >
      1)
    return invalid_argument(
        "give at most one of --kv-cache-tokens, --kv-memory and --kv-memory-fraction");
  if (opts.kv_memory_bytes < 0) return invalid_argument("--kv-memory must be positive");
  if (!(opts.kv_memory_fraction >= 0 && opts.kv_memory_fraction <= 0.95))
    return invalid_argument("--kv-memory-fraction must be in (0, 0.95], got " +
                            short_number(opts.kv_memory_fraction));
  return ok_status();
}

StatusOr<std::unique_ptr<ModelRunner>> ModelRunner::create(const RunnerOptions& opts_in) {
  RunnerOptions opts = opts_in;
  ROOFLINE_RETURN_IF_ERROR(check_runner_options(opts));
  if (opts.max_seqs > opts.max_step_tokens)
    return invalid_argument("--max-seqs (" + std::to_string(opts.max_seqs) +
                            ") cannot exceed --max-step-tokens (" +
                            std::to_string(opts.max_step_tokens) + ")");
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  };
  LoadTimings timings;
  auto t = Clock::now();
  ROOFLINE_ASSIGN_OR_RETURN(ModelSource source,
                            open_model_source(opts.model_dir, opts.dummy_weights));
  ROOFLINE_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, create_backend(opts.device));
  if (opts.max_model_len == 0) opts.max_model_len = source.config.max_position_embeddings;
  ROOFLINE_RETURN_IF_ERROR(check_range("--max-model-len", opts.max_model_len, 1, 1 << 24));

  std::unique_ptr<ModelRunner> r(new ModelRunner(opts, std::move(source.config),
                                                 std::move(source.weights), std::move(backend)));
  r->gguf_ = std::move(source.gguf);
  const ModelConfig& c = r->config_;
  Backend& be = *r->backend_;
  timings.open_ms = ms_since(t);
  t = Clock::now();
  PassOptions pass_options;
  pass_options.fuse = opts.fuse;
  for (bool all : {true, false}) {
    GraphOptions go;
    go.all_logits = all;
    go.activation_dtype = be.activation_dtype();
    ROOFLINE_ASSIGN_OR_RETURN(Graph g, build_model_graph(c, *r->weights_, go));
    run_passes(g, pass_options);
    (all ? r->graph_all_ : r->graph_last_) = std::move(g);
  }
  timings.graph_ms = ms_since(t);
  t = Clock::now();
  ROOFLINE_RETURN_IF_ERROR(be.load_weights(*r->weights_, {&r->graph_all_, &r->graph_last_}));
  timings.weights_ms = ms_since(t);
  t = Clock::now();
  WeightResolver resolve = [&be](const std::string& name) { return be.resolve_weight(name); };
  int64_t workspace = 0;
  for (int64_t tokens : token_buckets(opts.max_step_tokens)) {
    const int64_t seqs = std::min(opts.max_seqs, tokens);
    ROOFLINE_ASSIGN_OR_RETURN(Plan all, build_plan(r->graph_all_, tokens, seqs, resolve));
    ROOFLINE_ASSIGN_OR_RETURN(Plan last, build_plan(r->graph_last_, tokens, seqs, resolve));
    workspace = std::max({workspace, all.workspace_bytes, last.workspace_bytes});
    r->plans_all_.push_back(std::move(all));
    r->plans_last_.push_back(std::move(last));
  }

  timings.plan_ms = ms_since(t);
  t = Clock::now();
  // KV cache: what the user asked for (tokens, bytes or a share of the free memory), else enough
  // for max_seqs full-length sequences within a budget (a fixed 1 GiB on the CPU; 80 % of the
  // memory left on the GPU).
  const int64_t bytes_per_token =
      c.num_layers * be.kv_bytes_per_token_per_layer(c.num_kv_heads, c.head_dim);
  const int64_t free_bytes = be.free_memory_bytes() - (be.name() == "cpu" ? 0 : workspace);
  if (opts.kv_memory_bytes > 0 || opts.kv_memory_fraction > 0) {
    const int64_t budget =
        opts.kv_memory_bytes > 0
            ? opts.kv_memory_bytes
            : static_cast<int64_t>(opts.kv_memory_fraction * static_cast<double>(free_bytes));
    const std::string flag = opts.kv_memory_bytes > 0 ? "--kv-memory" : "--kv-memory-fraction";
    if (budget > free_bytes)
      return resource_exhausted(flag + " asks for " + std::to_string(budget >> 20) +
                                " MiB of KV cache and " +
                                std::to_string(std::max<int64_t>(free_bytes, 0) >> 20) +
                                " MiB are free on " + be.name() + ": ask for less");
    const int64_t min_bytes = bytes_per_token * opts.kv_block_size;
    if (budget < min_bytes)
      return invalid_argument(flag + " gives " + std::to_string(budget) +
                              " bytes, less than one KV block (" + std::to_string(min_bytes) +
                              " bytes for " + std::to_string(opts.kv_block_size) +
                              " tokens of this model): ask for more");
    opts.kv_cache_tokens = budget / bytes_per_token;
  } else if (opts.kv_cache_tokens == 0) {
    const int64_t budget = be.name() == "cpu"
                               ? kDefaultKvBudgetBytes
                               : static_cast<int64_t>(0.8 * static_cast<double>(free_bytes));
    opts.kv_cache_tokens =
        std::min(opts.max_seqs * opts.max_model_len,
                 std::max<int64_t>(budget / bytes_per_token, opts.max_model_len));
  }
  ROOFLINE_RETURN_IF_ERROR(check_range("--kv-cache-tokens", opts.kv_cache_tokens, 1, 1ll << 32));
  r->options_ = opts;
  BackendSetup setup;
  setup.kv_shape.num_layers = c.num_layers;
  setup.kv_shape.block_size = opts.kv_block_size;
  setup.kv_shape.num_blocks = (opts.kv_cache_tokens + opts.kv_block_size - 1) / opts.kv_block_size;
  setup.kv_shape.num_kv_heads = c.num_kv_heads;
  setup.kv_shape.head_dim = c.head_dim;
  setup.workspace_bytes = workspace;
  setup.rope_inv_freq = rope_inv_freq(c.rope_theta, c.head_dim, c.rope_scaling);
  setup.max_tokens = opts.max_step_tokens;
  setup.max_seqs = opts.max_seqs;
  setup.max_blocks_per_seq = (opts.max_model_len + opts.kv_block_size - 1) / opts.kv_block_size;
  setup.cuda_graphs = opts.cuda_graphs;
  ROOFLINE_RETURN_IF_ERROR(be.allocate(setup));
  timings.allocate_ms = ms_since(t);
  if (opts.cuda_graphs) {
    ModelRunner* runner = r.get();
    r->graph_report_ = be.capture_decode_graphs(
        [runner](int64_t batch) { return runner->select_plan(batch, batch, true); });
    if (r->graph_report_.graphs > 0)
      ROOFLINE_LOG(kInfo, "cuda graphs: "
                              << r->graph_report_.graphs << " decode batch buckets captured ("
                              << r->graph_report_.tile_graphs << " also with the tile sampler) in "
                              << r->graph_report_.capture_ms << " ms, "
                              << (r->graph_report_.device_bytes >> 20) << " MiB of device memory");
  }
  timings.capture_ms = r->graph_report_.capture_ms;
  r->load_timings_ = timings;
  r->kv_shape_ = setup.kv_shape;
  r->blocks_ = BlockManager(setup.kv_shape.num_blocks, setup.kv_shape.block_size);
  ROOFLINE_LOG(kInfo, "loaded " << c.architecture_name << " on " << be.name() << ": "
                                << c.num_layers << " layers, hidden " << c.hidden_size << ", "
                                << (r->weights_->total_bytes() >> 20)
                                << " MiB of weights; KV cache " << setup.kv_shape.num_blocks
                                << " blocks x " << setup.kv_shape.block_size
                                << " tokens; workspace " << workspace << " B");
  return r;
}

StatusOr<int32_t> ModelRunner::add_sequence() {
  for (size_t i = 0; i < seqs_.size(); ++i) {
    if (!seqs_[i].open) {
      seqs_[i] = Sequence{};
      seqs_[i].open = true;
      seqs_[i].generation = ++openings_;
      return static_cast<int32_t>(i);
    }
  }
  if (static_cast<int64_t>(seqs_.size()) >= options_.max_seqs * 4)
    return resource_exhausted("too many open sequences (" + std::to_string(seqs_.size()) +
                              "): release finished ones first");
  seqs_.push_back(Sequence{});
  seqs_.back().open = true;
  seqs_.back().generation = ++openings_;
  return static_cast<int32_t>(seqs_.size() - 1);
}

Status ModelRunner::release_sequence(int32_t seq) {
  if (seq < 0 || seq >= static_cast<int32_t>(seqs_.size()) || !seqs_[seq].open)
    return invalid_argument("sequence " + std::to_string(seq) + " is not open");
  // Last block first: of blocks released together, the deepest in a prefix is evicted first, so
  // the blocks that the most prompts share stay cached longest.
  const std::vector<int32_t>& blocks = seqs_[seq].blocks;
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) blocks_.release(*it);
  seqs_[seq] = Sequence{};
  return ok_status();
}

StatusOr<int64_t> ModelRunner::adopt_cached_prefix(int32_t seq,
                                                   const std::vector<int32_t>& prompt) {
  if (seq < 0 || seq >= static_cast<int32_t>(seqs_.size()) || !seqs_[seq].open)
    return invalid_argument("sequence " + std::to_string(seq) + " is not open");
  Sequence& s = seqs_[seq];
  if (s.length != 0)
    return invalid_argument("sequence " + std::to_string(seq) + " already holds " +
                            std::to_string(s.length) +
                            " tokens: a cached prefix can only be adopted by an empty sequence");
  if (!options_.enable_prefix_cache) return 0;
  const int64_t bs = options_.kv_block_size;
  // At least one prompt token stays to be computed: its logits are the step's output.
  const int64_t usable =
      std::min<int64_t>(static_cast<int64_t>(prompt.size()), options_.max_model_len);
  const int64_t max_blocks = usable > 0 ? (usable - 1) / bs : 0;
  uint64_t parent = BlockManager::kRootNode;
  for (int64_t i = 0; i < max_blocks; ++i) {
    const BlockManager::Hit hit = blocks_.lookup(parent, prompt.data() + i * bs);
    if (hit.block < 0) break;
    s.blocks.push_back(hit.block);
    s.nodes.push_back(hit.node);
    parent = hit.node;
  }
  s.length = static_cast<int64_t>(s.blocks.size()) * bs;
  s.written = s.length;
  s.tokens.assign(prompt.begin(), prompt.begin() + s.length);
  return s.length;
}

KvStats ModelRunner::kv_stats() const {
  KvStats k;
  k.total_blocks = blocks_.num_blocks();
  k.free_blocks = blocks_.num_free();
  k.cached_blocks = blocks_.num_cached();
  k.prefix_hit_blocks = blocks_.hits();
  k.prefix_miss_blocks = blocks_.misses();
  k.evictions = blocks_.evictions();
  return k;
}

void ModelRunner::register_full_blocks(Sequence& s) {
  const int64_t bs = options_.kv_block_size;
  const int64_t full = s.written / bs;
  for (int64_t i = static_cast<int64_t>(s.nodes.size()); i < full; ++i) {
    const uint64_t parent = i == 0 ? BlockManager::kRootNode : s.nodes[i - 1];
    s.nodes.push_back(blocks_.register_block(parent, s.tokens.data() + i * bs, s.blocks[i]));
  }
}

int64_t ModelRunner::sequence_length(int32_t seq) const {
  if (seq < 0 || seq >= static_cast<int32_t>(seqs_.size()) || !seqs_[seq].open) return -1;
  return seqs_[seq].length;
}

const Plan* ModelRunner::select_plan(int64_t num_tokens, int64_t num_seqs, bool all_logits) const {
  for (const Plan& p : plans(all_logits))
    if (p.max_tokens >= num_tokens && p.max_seqs >= num_seqs) return &p;
  return nullptr;
}

StatusOr<const Plan*> ModelRunner::prepare_step(const std::vector<StepEntry>& entries,
                                                bool all_logits) {
  // Validate everything before changing anything.
  if (entries.empty()) return invalid_argument("a step needs at least one sequence");
  if (static_cast<int64_t>(entries.size()) > options_.max_seqs)
    return invalid_argument("a step holds at most " + std::to_string(options_.max_seqs) +
                            " sequences (--max-seqs), got " + std::to_string(entries.size()));
  int64_t total_tokens = 0, new_blocks = 0;
  std::unordered_set<int32_t> seen;
  for (const StepEntry& e : entries) {
    if (e.seq < 0 || e.seq >= static_cast<int32_t>(seqs_.size()) || !seqs_[e.seq].open)
      return invalid_argument("sequence " + std::to_string(e.seq) + " is not open");
    if (!seen.insert(e.seq).second)
      return invalid_argument("sequence " + std::to_string(e.seq) + " appears twice in one step");
    if (e.tokens.empty())
      return invalid_argument("sequence " + std::to_string(e.seq) + " has no tokens in this step");
    for (int32_t t : e.tokens)
      if (t < 0 || t >= config_.vocab_size)
        return invalid_argument("token id " + std::to_string(t) +
                                " is out of range for this model's vocabulary of " +
                                std::to_string(config_.vocab_size));
    const Sequence& s = seqs_[e.seq];
    const int64_t new_len = s.length + static_cast<int64_t>(e.tokens.size());
    if (new_len > options_.max_model_len)
      return out_of_range("sequence " + std::to_string(e.seq) + " would reach " +
                          std::to_string(new_len) + " tokens, beyond the model length of " +
                          std::to_string(options_.max_model_len) + " (--max-model-len)");
    const int64_t bs = options_.kv_block_size;
    new_blocks += (new_len + bs - 1) / bs - static_cast<int64_t>(s.blocks.size());
    total_tokens += static_cast<int64_t>(e.tokens.size());
  }
  if (total_tokens > options_.max_step_tokens)
    return invalid_argument("a step holds at most " + std::to_string(options_.max_step_tokens) +
                            " tokens (--max-step-tokens), got " + std::to_string(total_tokens));
  if (new_blocks > blocks_.num_free())
    return resource_exhausted("the KV cache is full: this step needs " +
                              std::to_string(new_blocks) + " more blocks and " +
                              std::to_string(blocks_.num_free()) +
                              " are free; raise --kv-cache-tokens or release sequences");
  // A step of one token a sequence (decode) runs the all-token plan: its rows are the last tokens
  // already, so the last-token plan's gather would only copy them.
  const bool one_token_each = total_tokens == static_cast<int64_t>(entries.size());
  const Plan* plan =
      select_plan(total_tokens, static_cast<int64_t>(entries.size()), all_logits || one_token_each);
  ROOFLINE_CHECK(plan != nullptr);

  // Grow block lists, then fill the step buffers.
  const int64_t bs = options_.kv_block_size;
  int64_t width = 0;
  for (const StepEntry& e : entries) {
    Sequence& s = seqs_[e.seq];
    const int64_t need = (s.length + static_cast<int64_t>(e.tokens.size()) + bs - 1) / bs;
    while (static_cast<int64_t>(s.blocks.size()) < need) {
      const int32_t b = blocks_.allocate();
      ROOFLINE_CHECK(b >= 0);
      s.blocks.push_back(b);
    }
    width = std::max<int64_t>(width, static_cast<int64_t>(s.blocks.size()));
  }
  StepBuffers& sb = step_;
  sb.num_tokens = total_tokens;
  sb.num_seqs = static_cast<int64_t>(entries.size());
  sb.block_table_width = width;
  sb.token_ids.clear();
  sb.positions.clear();
  sb.slot_mapping.clear();
  sb.block_tables.assign(static_cast<size_t>(sb.num_seqs * width), -1);
  sb.seq_lens.clear();
  sb.query_start.assign(1, 0);
  sb.last_token_index.clear();
  for (size_t i = 0; i < entries.size(); ++i) {
    const StepEntry& e = entries[i];
    Sequence& s = seqs_[e.seq];
    for (size_t j = 0; j < e.tokens.size(); ++j) {
      const int64_t pos = s.length + static_cast<int64_t>(j);
      // KV is only ever written into a block this sequence holds alone and that is not cached:
      // adopted and registered blocks are full, so appends land after them.
      const int32_t block = s.blocks[pos / bs];
      ROOFLINE_CHECK(blocks_.ref_count(block) == 1 && !blocks_.is_cached(block));
      sb.token_ids.push_back(e.tokens[j]);
      sb.positions.push_back(static_cast<int32_t>(pos));
      sb.slot_mapping.push_back(static_cast<int64_t>(block) * bs + pos % bs);
    }
    std::copy(s.blocks.begin(), s.blocks.end(),
              sb.block_tables.begin() + static_cast<int64_t>(i) * width);
    s.length += static_cast<int64_t>(e.tokens.size());
    s.tokens.insert(s.tokens.end(), e.tokens.begin(), e.tokens.end());
    sb.seq_lens.push_back(static_cast<int32_t>(s.length));
    sb.query_start.push_back(sb.query_start.back() + static_cast<int32_t>(e.tokens.size()));
    sb.last_token_index.push_back(sb.query_start.back() - 1);
  }
  return plan;
}

void ModelRunner::finish_step(const std::vector<StepEntry>& entries, const Plan* plan) {
  last_plan_ = plan;
  // Only now is the KV of the blocks this step filled written, so only now can they be shared.
  for (const StepEntry& e : entries) {
    Sequence& s = seqs_[e.seq];
    s.written = s.length;
    if (options_.enable_prefix_cache) register_full_blocks(s);
  }
  feed_rows_ = 0;  // a fed step must follow a launch_step directly
}

Status ModelRunner::step(const std::vector<StepEntry>& entries, bool all_logits,
                         std::vector<float>* logits) {
  if (!in_flight_.empty())
    return invalid_argument("step: " + std::to_string(in_flight_.size()) +
                            " launched step(s) are not collected yet (collect_step)");
  ROOFLINE_ASSIGN_OR_RETURN(const Plan* plan, prepare_step(entries, all_logits));
  backend_->execute(*plan, step_, logits, record_call_times_ ? &last_call_times_ : nullptr);
  finish_step(entries, plan);
  return ok_status();
}

Status ModelRunner::step(const std::vector<StepEntry>& entries, const StepSampling& sampling,
                         SampledRows* sampled) {
  if (sampling.rows.size() != entries.size())
    return invalid_argument(
        "a sampled step needs one sampling row per entry: " + std::to_string(entries.size()) +
        " entries, " + std::to_string(sampling.rows.size()) + " rows");
  if (!in_flight_.empty())
    return invalid_argument("step: " + std::to_string(in_flight_.size()) +
                            " launched step(s) are not collected yet (collect_step)");
  ROOFLINE_ASSIGN_OR_RETURN(const Plan* plan, prepare_step(entries, /*all_logits=*/false));
  const Status run = backend_->execute_sampled(*plan, step_, sampling, sampled,
                                               record_call_times_ ? &last_call_times_ : nullptr);
  // A failed step wrote no KV the prefix cache may share; its sequences cannot go on (the caller
  // releases them).
  if (!run.ok()) return run;
  finish_step(entries, plan);
  return ok_status();
}

}  // namespace roofline

namespace roofline {

Status ModelRunner::launch_step(const std::vector<StepEntry>& entries, const StepSampling& sampling,
                                const std::vector<int32_t>& feed) {
  if (sampling.rows.size() != entries.size())
    return invalid_argument(
        "a sampled step needs one sampling row per entry: " + std::to_string(entries.size()) +
        " entries, " + std::to_string(sampling.rows.size()) + " rows");
  if (static_cast<int>(in_flight_.size()) >= Backend::kMaxStepsInFlight)
    return invalid_argument("launch_step: " + std::to_string(in_flight_.size()) +
                            " steps are in flight already; collect one first (collect_step)");
  if (!feed.empty() && feed.size() != entries.size())
    return invalid_argument(
        "a fed step needs one feed value per entry: " + std::to_string(entries.size()) +
        " entries, " + std::to_string(feed.size()) + " values");
  // The fed entries' ids are not known yet: 0 stands in for them until the step they come from
  // is collected.
  std::vector<StepEntry> placed;
  const std::vector<StepEntry>* run = &entries;
  for (size_t i = 0; i < feed.size(); ++i) {
    if (feed[i] < 0) continue;
    if (feed[i] >= feed_rows_)
      return invalid_argument(
          "entry " + std::to_string(i) + " is fed from row " + std::to_string(feed[i]) +
          (feed_rows_ == 0 ? std::string(", but the step before was not launched by launch_step")
                           : " of the step launched before, which has " +
                                 std::to_string(feed_rows_) + " rows"));
    if (entries[i].tokens.size() != 1)
      return invalid_argument("entry " + std::to_string(i) + " is fed a sampled token and so " +
                              "holds exactly one token, got " +
                              std::to_string(entries[i].tokens.size()));
    if (run == &entries) {
      placed = entries;
      run = &placed;
    }
    placed[i].tokens[0] = 0;
  }
  ROOFLINE_ASSIGN_OR_RETURN(const Plan* plan, prepare_step(*run, /*all_logits=*/false));
  InFlight f;
  f.feed = feed;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Sequence& s = seqs_[entries[i].seq];
    f.seqs.push_back(entries[i].seq);
    f.generations.push_back(s.generation);
    f.ends.push_back(s.length);
    f.fed_at.push_back(!feed.empty() && feed[i] >= 0 ? s.length - 1 : -1);
  }
  // A failed launch queued nothing; like a failed step(), its sequences cannot go on (the caller
  // releases them).
  ROOFLINE_RETURN_IF_ERROR(backend_->launch_sampled(*plan, step_, sampling, feed));
  in_flight_.push_back(std::move(f));
  last_plan_ = plan;
  feed_rows_ = static_cast<int64_t>(entries.size());
  return ok_status();
}

Status ModelRunner::collect_step(SampledRows* sampled) {
  if (in_flight_.empty()) return invalid_argument("collect_step: no launched step to collect");
  const InFlight done = std::move(in_flight_.front());
  in_flight_.pop_front();
  ROOFLINE_RETURN_IF_ERROR(backend_->collect_sampled(sampled));
  // Its KV is written: its sequences' blocks full of known ids can be shared.
  for (size_t i = 0; i < done.seqs.size(); ++i) {
    if (!same_opening(done.seqs[i], done.generations[i])) continue;  // released since
    Sequence& s = seqs_[done.seqs[i]];
    // Its fed ids were learnt when the step before it was collected.
    s.written = std::max(s.written, done.ends[i]);
    if (options_.enable_prefix_cache) register_full_blocks(s);
  }
  // The step launched after it learns its fed ids.
  if (!in_flight_.empty()) {
    const InFlight& next = in_flight_.front();
    for (size_t i = 0; i < next.fed_at.size(); ++i) {
      if (next.fed_at[i] < 0 || !same_opening(next.seqs[i], next.generations[i])) continue;
      const int32_t token = sampled->tokens[static_cast<size_t>(next.feed[i])];
      seqs_[next.seqs[i]].tokens[static_cast<size_t>(next.fed_at[i])] = token < 0 ? 0 : token;
    }
  }
  return ok_status();
}

}  // namespace roofline
