// Backend: where a model's plans run. The CPU backend executes on host memory (weights used in
// place from the mapped files); the CUDA backend uploads weights as bf16 (stacked weights merged so
// q|k|v and gate|up are one GEMM each), keeps activations in bf16 and the KV cache on the device.
// Both turn plan calls into op params through run_plan_call (plan_executor.h).
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "graph/graph.h"
#include "graph/plan.h"
#include "io/weight_store.h"
#include "ops/sampling/sampling.h"
#include "roofline/status.h"
#include "runtime/kv_cache.h"
#include "runtime/step_buffers.h"

namespace roofline {

// When one plan call ran, in milliseconds from the start of its step (host wall clock on the CPU,
// CUDA events around each call on the GPU, so launch gaps between calls are visible).
struct CallTime {
  double start_ms = 0;
  double end_ms = 0;
};

struct BackendSetup {
  KvCacheShape kv_shape;
  int64_t workspace_bytes = 0;       // the largest plan's
  std::vector<float> rope_inv_freq;  // [head_dim / 2]
  int64_t max_tokens = 0;            // per step
  int64_t max_seqs = 0;              // per step
  int64_t max_blocks_per_seq = 0;    // block-table width
  bool cuda_graphs = false;          // CUDA: replay decode steps as graphs (decode_padding.h)
};

// The nodes of one captured decode-step graph, by kind (child graphs counted through): the
// kernels (ours, cuBLASLt's, the sampling chain's), each a handover in the chain a replay walks,
// and the copies and memsets captured beside them.
struct DecodeGraphNodes {
  int64_t kernels = 0;
  int64_t memcpys = 0;
  int64_t memsets = 0;
  int64_t other = 0;  // event, host, empty and any other nodes
};

// What capturing the decode-step graphs cost at start-up.
struct DecodeGraphReport {
  int64_t graphs = 0;        // batch buckets captured
  int64_t tile_graphs = 0;   // of those, also with the tile sampler (runtime/tile_sampling.h)
  double capture_ms = 0;     // wall time, one eager warm-up step per bucket included
  int64_t device_bytes = 0;  // device memory the graphs took (free memory before - after)
  std::map<int64_t, DecodeGraphNodes> nodes;  // each captured graph's, by batch bucket
};

// The sampling chain of one step (ops/sampling's sample_rows): a row of parameters per logits row
// of a last-token plan (one per step entry, in entry order) and the edit list the rows' ranges
// point into.
struct StepSampling {
  std::vector<SamplingRowParams> rows;
  std::vector<TokenEdit> edits;
};

// What sampling gave each row: a token (-1 and error bits when the row could not give one), the
// row's NaN / inf logit count, and for rows with num_top_logprobs >= 0 the token's log-softmax and
// the top alternatives (kMaxTopLogprobs slots per row, a row's count filled, ids -1 past it).
struct SampledRows {
  std::vector<int32_t> tokens;
  std::vector<uint32_t> errors;
  std::vector<int32_t> nonfinite;
  std::vector<float> logprobs;
  std::vector<int32_t> top_ids;     // [rows * kMaxTopLogprobs]
  std::vector<float> top_logprobs;  // [rows * kMaxTopLogprobs]
};

// Sizes every output of `out` for `rows` rows (tokens -1, top ids -1, the rest 0).
void resize_sampled_rows(int64_t rows, SampledRows* out);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual DType activation_dtype() const = 0;
  virtual DType kv_dtype() const = 0;
  // Bytes one KV-cache token slot takes for one layer's K and V together.
  int64_t kv_bytes_per_token_per_layer(int64_t num_kv_heads, int64_t head_dim) const {
    return 2 * num_kv_heads * head_dim * dtype_size_bytes(kv_dtype());
  }
  // Free memory the KV cache may use (device memory after weights and workspace on the GPU).
  virtual int64_t free_memory_bytes() const = 0;

  // Makes the weights the graphs name available to plans.
  virtual Status load_weights(const WeightStore& store,
                              const std::vector<const Graph*>& graphs) = 0;
  virtual StatusOr<TensorView> resolve_weight(const std::string& name) const = 0;
  // Workspace, KV cache, rope table and step-input buffers.
  virtual Status allocate(const BackendSetup& setup) = 0;
  // Runs `plan` for `step`; its output (the logits) comes back as f32 rows. When call_times is
  // given it receives each call's start and end (an event pair around every call on the GPU).
  virtual void execute(const Plan& plan, const StepBuffers& step, std::vector<float>* logits,
                       std::vector<CallTime>* call_times) = 0;
  // Runs a last-token `plan` for `step` and samples every logits row where the logits are
  // (sampling.rows.size() == step.num_seqs): this default runs execute() and sample_rows_cpu over
  // the rows on the thread pool; the CUDA backend samples on the device (inside the decode step's
  // CUDA graph) and copies back only the tokens. An error only when the device cannot hold the
  // step's edit lists.
  virtual Status execute_sampled(const Plan& plan, const StepBuffers& step,
                                 const StepSampling& sampling, SampledRows* out,
                                 std::vector<CallTime>* call_times);
  // The sampled step in two halves, for the overlapped decode loop (ModelRunner::launch_step):
  // launch_sampled queues what execute_sampled runs and returns without waiting for it;
  // collect_sampled waits for the oldest launched step not yet collected and gives its rows.
  // `feed` is empty or holds one value per entry: r >= 0 makes that entry's token (the entry has
  // exactly one; its id in step.token_ids is a placeholder) the token row r of the step launched
  // just before sampled, read where it was sampled (on the GPU: copied on the device, so the host
  // need not have it yet); a row that gave no token (-1) feeds token 0, and its step's caller
  // drops what follows from it. At most kMaxStepsInFlight steps are uncollected at once. This
  // default runs execute_sampled at launch (its tokens are known at once) and queues the rows.
  static constexpr int kMaxStepsInFlight = 2;
  virtual Status launch_sampled(const Plan& plan, const StepBuffers& step,
                                const StepSampling& sampling, const std::vector<int32_t>& feed);
  virtual Status collect_sampled(SampledRows* out);
  // Launched steps not yet collected.
  virtual int steps_in_flight() const { return static_cast<int>(queued_.size()); }
  // CUDA: replays the last replayed decode graph `times` times back to back, with no host work
  // between replays, and returns the median device milliseconds of a replay (CUDA events): the step
  // time the GPU reaches when the host never holds it up, so the difference from a measured step
  // is what the step boundary (tokens back, the next step's inputs up, the launch) costs. Every
  // replay reads the same staged inputs, so it rewrites the same KV slots with the same values and
  // samples the same rows again. InvalidArgument for times outside [1, 100000] or when no decode
  // graph has been replayed since start-up; Unimplemented elsewhere.
  virtual StatusOr<double> replay_last_decode_graph(int64_t times) {
    (void)times;
    return unimplemented("replaying a decode graph needs the CUDA backend with CUDA graphs");
  }
  // CUDA: the nodes of the decode graph replay_last_decode_graph replays (the one the last
  // graph-replayed decode step launched), counted when it was captured. InvalidArgument when no
  // decode graph has been replayed since start-up (or since the graphs were last dropped);
  // Unimplemented elsewhere.
  virtual StatusOr<DecodeGraphNodes> last_decode_graph_nodes() const {
    return unimplemented("a decode graph's nodes need the CUDA backend with CUDA graphs");
  }
  // CUDA: how many sampled steps took the tile sampler (runtime/tile_sampling.h) since start-up;
  // 0 elsewhere.
  virtual int64_t tile_sampled_steps() const { return 0; }
  // CUDA with cuda_graphs set: captures the decode step of every batch bucket (decode_padding.h),
  // largest first, with plan_for(bucket) as its plan; later decode steps of that bucket replay
  // it; the report counts each graph's nodes. Elsewhere: nothing to do.
  virtual DecodeGraphReport capture_decode_graphs(
      const std::function<const Plan*(int64_t batch)>& plan_for) {
    (void)plan_for;
    return {};
  }

  // launch_sampled's check of a feed (every backend's, before anything is queued): OK for an
  // empty feed; InvalidArgument unless there is one value per entry of step, each fed row (>= 0)
  // is below previous_rows (the rows the step launched before sampled) and each fed entry is one
  // token.
  static Status check_feed(const StepBuffers& step, const std::vector<int32_t>& feed,
                           int64_t previous_rows);

 protected:
  // The tokens a fed entry takes: step's ids with every fed entry's placeholder replaced by the
  // token row feed[i] of `previous` gave (0 where it gave none). InvalidArgument for a feed that
  // names a row `previous` does not have or an entry of more than one token.
  static Status apply_feed(const StepBuffers& step, const std::vector<int32_t>& feed,
                           const std::vector<int32_t>& previous, std::vector<int32_t>* token_ids);

 private:
  std::deque<SampledRows> queued_;      // the default launch_sampled's rows, oldest first
  std::vector<int32_t> last_launched_;  // the tokens of the step launched last
};

std::unique_ptr<Backend> create_cpu_backend();
// The N of "cuda" (0) or "cuda:N" (up to three digits); InvalidArgument naming --device for any
// other text. Only the spelling: whether that GPU exists is create_cuda_backend's to say.
StatusOr<int> cuda_device_index(const std::string& device);
// OK for "cpu" and for a device cuda_device_index accepts.
Status check_device_name(const std::string& device);
// "cuda" or "cuda:N". Unimplemented in a CPU-only build, NotFound without a GPU.
StatusOr<std::unique_ptr<Backend>> create_cuda_backend(const std::string& device);
// "cpu", "cuda", "cuda:N".
StatusOr<std::unique_ptr<Backend>> create_backend(const std::string& device);

}  // namespace roofline
