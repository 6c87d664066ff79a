// ModelRunner: one loaded model with its plans, paged KV cache (BlockManager: refcounted blocks and
// a prefix cache of full blocks) and sequences.
//
// It owns the path from model files to logits: config + weights -> graph -> passes -> a plan per
// token bucket -> execution. A step is a list of (sequence, new tokens) entries — prefill, chunked
// prefill and decode entries mix freely — and returns logits for each entry's last token, or for
// every token. Scheduling across requests (issue 7) sits above this.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/plan.h"
#include "io/gguf.h"
#include "io/model_config.h"
#include "io/weight_store.h"
#include "roofline/status.h"
#include "runtime/backend.h"
#include "runtime/block_manager.h"
#include "runtime/kv_cache.h"
#include "runtime/step_buffers.h"

namespace roofline {

struct RunnerOptions {
  std::string model_dir;       // HF directory (config.json + safetensors) or a .gguf file
  std::string dummy_weights;   // instead of model_dir: random weights of a known shape
  std::string device = "cpu";  // "cpu", "cuda", "cuda:N"
  int64_t kv_block_size = 16;
  int64_t max_step_tokens = 512;  // largest token bucket; longer prompts are fed in chunks
  int64_t max_seqs = 8;           // sequences in one step
  int64_t max_model_len = 0;      // 0: the config's max_position_embeddings
  int64_t kv_cache_tokens = 0;    // 0: derived (below)
  int64_t kv_memory_bytes = 0;    // KV budget in bytes instead of tokens
  double kv_memory_fraction = 0;  // KV budget as a share of free memory after weights + workspace
                                  // (at most one of the three; none: 0.8 on a GPU, 1 GiB on a CPU,
                                  // capped at max_seqs full-length sequences)
  bool fuse = true;               // run the fusion passes
  bool cuda_graphs = true;        // CUDA: capture decode steps per batch bucket and replay them
  bool enable_prefix_cache = true;  // share full KV blocks between sequences with equal prefixes
};

// KV-cache block accounting, for tests, logs and /metrics.
struct KvStats {
  int64_t total_blocks = 0;
  int64_t free_blocks = 0;         // allocatable now (unreferenced cached blocks count as free)
  int64_t cached_blocks = 0;       // full blocks registered in the prefix cache
  int64_t prefix_hit_blocks = 0;   // blocks adopted from the cache, summed over sequences
  int64_t prefix_miss_blocks = 0;  // full prompt blocks looked up and not found (at most one per
                                   // adopt_cached_prefix: the walk stops at the first miss)
  int64_t evictions = 0;           // cached blocks reused for new data (LRU)
};

// The options' own ranges and spelling (one model source, a known dummy shape, the device's name,
// sizes, the KV-cache budget), each error naming its flag: what can be refused before any model
// file is opened. ModelRunner::create checks them first, then what needs the model.
Status check_runner_options(const RunnerOptions& options);

struct StepEntry {
  int32_t seq = -1;
  std::vector<int32_t> tokens;  // appended to the sequence in this step; at least one
};

class ModelRunner {
 public:
  static StatusOr<std::unique_ptr<ModelRunner>> create(const RunnerOptions& options);

  const ModelConfig& config() const { return config_; }
  const RunnerOptions& options() const { return options_; }
  const WeightStore& weights() const { return *weights_; }
  const Backend& backend() const { return *backend_; }
  // The GGUF file the model came from (its metadata holds the tokenizer), or null.
  std::shared_ptr<const GgufFile> gguf() const { return gguf_; }
  const KvCacheShape& kv_shape() const { return kv_shape_; }
  // The plans for all-token and last-token logits, one per bucket, smallest first. A step of one
  // token a sequence (every decode step) runs the all-token plan, whose logits are then the
  // last tokens' without the last-token plan's gather; the decode graphs are captured from it.
  const std::vector<Plan>& plans(bool all_logits) const {
    return all_logits ? plans_all_ : plans_last_;
  }
  const Graph& graph(bool all_logits) const { return all_logits ? graph_all_ : graph_last_; }

  // A new empty sequence, or ResourceExhausted when max_seqs * 4 sequences are open.
  StatusOr<int32_t> add_sequence();
  // Drops the sequence's references to its KV blocks; cached ones stay reusable until evicted.
  Status release_sequence(int32_t seq);
  int64_t sequence_length(int32_t seq) const;

  // Prefix caching: gives `seq` (open and still empty) the longest run of full cached blocks whose
  // token ids equal the start of `prompt`, capped so at least one prompt token is left to compute
  // (its logits are needed). Returns how many tokens the sequence now holds (0 when nothing
  // matched or caching is off); the caller feeds prompt[returned:] next. InvalidArgument when
  // the sequence is not open or already holds tokens.
  StatusOr<int64_t> adopt_cached_prefix(int32_t seq, const std::vector<int32_t>& prompt);
  KvStats kv_stats() const;
  // Blocks allocatable now, unreferenced cached blocks included.
  int64_t free_kv_blocks() const { return blocks_.num_free(); }

  // Runs one step. logits receives [entries, vocab] (all_logits false) or [total tokens, vocab].
  // Bad entries (unknown sequence, token out of range, too long) fail before anything changes.
  Status step(const std::vector<StepEntry>& entries, bool all_logits, std::vector<float>* logits);
  // Runs one last-token step and samples each entry's row where the logits are (on the GPU inside
  // the decode step's CUDA graph): sampling.rows holds one row per entry, in entry order.
  Status step(const std::vector<StepEntry>& entries, const StepSampling& sampling,
              SampledRows* sampled);

  // The overlapped decode loop, in two halves: launch_step queues a sampled last-token step (as
  // step() with sampling runs it) and returns without waiting for its tokens; collect_step waits
  // for the oldest launched step and gives its rows. So the host can queue step N + 1 before step
  // N's tokens are back, and the GPU does not idle across the step boundary (tokens back, the
  // next step's inputs up, its launch).
  // `feed` is empty or holds one value per entry: r >= 0 says the entry's one token is the token
  // row r of the step launched just before (by launch_step, with no other step since) samples;
  // its id in `entries` is ignored, and the runner learns it when that step is collected (a row
  // that gave no token feeds token 0; the caller drops that sequence's later rows). At most
  // Backend::kMaxStepsInFlight steps are uncollected at once; step() and release of nothing else
  // change: a sequence released while a step holding it is in flight just has that row dropped.
  // Bad feeds and a full pipeline fail before anything changes (InvalidArgument).
  Status launch_step(const std::vector<StepEntry>& entries, const StepSampling& sampling,
                     const std::vector<int32_t>& feed);
  Status collect_step(SampledRows* sampled);
  // Steps launched and not yet collected.
  int64_t steps_in_flight() const { return static_cast<int64_t>(in_flight_.size()); }

  // The last decode step's CUDA graph replayed `times` times back to back: median device ms a
  // replay (Backend::replay_last_decode_graph). Leaves every sequence as it was.
  StatusOr<double> replay_last_decode_graph(int64_t times) {
    return backend_->replay_last_decode_graph(times);
  }

  // The nodes (kernels, copies, memsets) of the CUDA graph replay_last_decode_graph replays
  // (Backend::last_decode_graph_nodes).
  StatusOr<DecodeGraphNodes> last_decode_graph_nodes() const {
    return backend_->last_decode_graph_nodes();
  }

  // How many sampled steps took the tile sampler (Backend::tile_sampled_steps).
  int64_t tile_sampled_steps() const { return backend_->tile_sampled_steps(); }

  // Wall time of each call of the last step's plan, and that plan (for `roofline profile`).
  const std::vector<CallTime>& last_call_times() const { return last_call_times_; }
  // What start-up capture of the decode graphs cost (all zero without CUDA graphs).
  const DecodeGraphReport& graph_report() const { return graph_report_; }
  // Where create() spent its time, in milliseconds (cold start, `roofline bench coldstart`).
  struct LoadTimings {
    double open_ms = 0;      // model files: parse headers, map weights (or dummy shapes)
    double graph_ms = 0;     // build both graphs and run the passes
    double weights_ms = 0;   // the backend's weights: upload / convert / generate dummies
    double plan_ms = 0;      // plans for every token bucket
    double allocate_ms = 0;  // workspace, KV cache, step buffers
    double capture_ms = 0;   // CUDA graphs (0 without)
  };
  const LoadTimings& load_timings() const { return load_timings_; }
  const Plan* last_plan() const { return last_plan_; }
  void set_record_call_times(bool on) { record_call_times_ = on; }

 private:
  struct Sequence {
    bool open = false;
    int64_t length = 0;           // tokens in the KV cache
    std::vector<int32_t> tokens;  // [length]: the ids whose KV is cached
    std::vector<int32_t> blocks;  // block table; full blocks may be shared with other sequences
    std::vector<uint64_t> nodes;  // prefix-cache node of each full block (kNoNode: not cached)
    int64_t written = 0;          // leading tokens whose KV is written and whose ids are known
    uint64_t generation = 0;      // which opening of this slot (add_sequence) it is
  };
  // A step launch_step queued: each entry's sequence (and which opening of it), the
  // sequence's length after the step, and for fed entries the position of the token to learn.
  struct InFlight {
    std::vector<int32_t> seqs;
    std::vector<uint64_t> generations;
    std::vector<int64_t> ends;
    std::vector<int32_t> feed;    // empty or one per entry (launch_step)
    std::vector<int64_t> fed_at;  // per entry: the fed token's position, -1 when not fed
  };

  ModelRunner(const RunnerOptions& options, ModelConfig config,
              std::unique_ptr<WeightStore> weights, std::unique_ptr<Backend> backend);
  const Plan* select_plan(int64_t num_tokens, int64_t num_seqs, bool all_logits) const;
  // step()'s validation and step-buffer filling (sequences grow by their tokens); the plan to run.
  StatusOr<const Plan*> prepare_step(const std::vector<StepEntry>& entries, bool all_logits);
  // After the backend ran `plan`: registers newly full blocks with the prefix cache.
  void finish_step(const std::vector<StepEntry>& entries, const Plan* plan);
  // Registers the blocks of `s` that are full of written tokens (s.written) but not yet in
  // s.nodes.
  void register_full_blocks(Sequence& s);
  // Whether `seq` is open and still the opening `generation` names.
  bool same_opening(int32_t seq, uint64_t generation) const {
    return seq >= 0 && seq < static_cast<int32_t>(seqs_.size()) && seqs_[seq].open &&
           seqs_[seq].generation == generation;
  }

  RunnerOptions options_;
  ModelConfig config_;
  std::unique_ptr<WeightStore> weights_;
  Graph graph_all_, graph_last_;
  std::vector<Plan> plans_all_, plans_last_;
  std::unique_ptr<Backend> backend_;
  std::shared_ptr<const GgufFile> gguf_;
  BlockManager blocks_;
  std::vector<Sequence> seqs_;
  StepBuffers step_;
  KvCacheShape kv_shape_;
  std::vector<CallTime> last_call_times_;
  const Plan* last_plan_ = nullptr;
  bool record_call_times_ = false;
  DecodeGraphReport graph_report_;
  LoadTimings load_timings_;
  std::deque<InFlight> in_flight_;  // launch_step's, oldest first
  int64_t feed_rows_ = 0;           // rows of the last step if launch_step ran it, else 0
  uint64_t openings_ = 0;           // add_sequence calls so far
};

// The token buckets plans are built for: 16, 32, 64, ... up to and including max_step_tokens.
std::vector<int64_t> token_buckets(int64_t max_step_tokens);

}  // namespace roofline
