// The CUDA backend: bf16 weights (uploaded once; stacked q|k|v and gate|up weights merged into one
// matrix each so every projection is a single cuBLASLt GEMM), bf16 activations in one planned
// workspace, a bf16 paged KV cache, and fixed device buffers for the per-step metadata — nothing is
// allocated on the step path. Calls go through run_plan_call (plan_executor.h) to <op>_cuda.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/cuda_check.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "runtime/backend.h"
#include "runtime/decode_padding.h"
#include "runtime/dummy_weights.h"
#include "runtime/plan_executor.h"
#include "runtime/tile_sampling.h"

namespace roofline {

namespace {

constexpr int64_t kAlign = 256;
// Logits come back through a pinned buffer of this many bf16 elements (16 MiB): 64 sequences of
// a 128k vocabulary in one copy, larger outputs (all-token logits) in chunks.
constexpr int64_t kLogitsChunkElems = 8ll << 20;
int64_t align_up(int64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// The overlapped decode loop's hand-over on the device, the first node of every decode graph:
// feed = [count, then count pairs]; token_ids[pair[0]] = the token row pair[1] of the step before
// sampled (`sampled`, that step's sampling outputs), 0 where it gave none (-1), so a row that
// failed cannot index the embedding out of range. A step that is not fed uploads count 0.
__global__ void feed_sampled_tokens(int32_t* token_ids, const int32_t* feed,
                                    const int32_t* sampled) {
  const int32_t count = feed[0];
  const int32_t* pairs = feed + 1;
  for (int32_t i = static_cast<int32_t>(threadIdx.x); i < count;
       i += static_cast<int32_t>(blockDim.x)) {
    const int32_t token = sampled[pairs[2 * i + 1]];
    token_ids[pairs[2 * i]] = token < 0 ? 0 : token;
  }
}

// Adds the nodes of `graph` to *out by kind, a child graph's (none from stream capture today, but
// a library may capture one) counted through.
void count_graph_nodes(cudaGraph_t graph, DecodeGraphNodes* out) {
  size_t n = 0;
  ROOFLINE_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  ROOFLINE_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &n));
  for (size_t i = 0; i < n; ++i) {
    cudaGraphNodeType type;
    ROOFLINE_CUDA_CHECK(cudaGraphNodeGetType(nodes[i], &type));
    switch (type) {
      case cudaGraphNodeTypeKernel:
        ++out->kernels;
        break;
      case cudaGraphNodeTypeMemcpy:
        ++out->memcpys;
        break;
      case cudaGraphNodeTypeMemset:
        ++out->memsets;
        break;
      case cudaGraphNodeTypeGraph: {
        cudaGraph_t child = nullptr;
        ROOFLINE_CUDA_CHECK(cudaGraphChildGraphNodeGetGraph(nodes[i], &child));
        count_graph_nodes(child, out);
        break;
      }
      default:
        ++out->other;
        break;
    }
  }
}

__global__ void fill_dummy_kernel(__nv_bfloat16* out, int64_t n, DummyTensor t) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16(dummy_value(t, i));
}

struct CudaKernels {
  cudaStream_t stream;
  MatmulCudaContext* matmul_ctx;
  void embedding(const EmbeddingParams& p) { embedding_cuda(p, stream); }
  void rms_norm(const RmsNormParams& p) { rms_norm_cuda(p, stream); }
  void rms_norm_residual(const RmsNormResidualParams& p) { rms_norm_residual_cuda(p, stream); }
  void add(const AddParams& p) { add_cuda(p, stream); }
  void matmul(const MatmulParams& p) { matmul_cuda(p, *matmul_ctx, stream); }
  void matmul_bias(const MatmulParams& p) { matmul_bias_cuda(p, *matmul_ctx, stream); }
  void matmul_residual(const MatmulParams& p) { matmul_residual_cuda(p, *matmul_ctx, stream); }
  void qkv_rope(const QkvRopeParams& p) { qkv_rope_cuda(p, stream); }
  void attention(const PagedAttentionParams& p) { paged_attention_cuda(p, stream); }
  void silu_mul(const SiluMulParams& p) { silu_mul_cuda(p, stream); }
  void gather_rows(const GatherRowsParams& p) { gather_rows_cuda(p, stream); }
};

// A device allocation freed with the backend.
struct DeviceMemory {
  void* ptr = nullptr;
  DeviceMemory() = default;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory() { reset(); }
  void reset() {
    if (ptr) cudaFree(ptr);
    ptr = nullptr;
  }
  Status allocate(int64_t bytes, const char* what) {
    if (bytes <= 0) bytes = kAlign;
    cudaError_t err = cudaMalloc(&ptr, static_cast<size_t>(bytes));
    if (err != cudaSuccess) {
      cudaGetLastError();
      ptr = nullptr;
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      return resource_exhausted(std::string("cannot allocate ") + std::to_string(bytes >> 20) +
                                " MiB of GPU memory for the " + what + " (" +
                                std::to_string(free_b >> 20) +
                                " MiB free): lower --max-step-tokens or "
                                "--kv-cache-tokens, or use a smaller model");
    }
    return ok_status();
  }
  template <typename T = uint8_t>
  T* as() const {
    return static_cast<T*>(ptr);
  }
};

class CudaBackend final : public Backend {
 public:
  static StatusOr<std::unique_ptr<Backend>> create(int device) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
      cudaGetLastError();
      return not_found("--device cuda: no CUDA device is visible on this machine");
    }
    if (device >= count)
      return invalid_argument("--device cuda:" + std::to_string(device) + ": only " +
                              std::to_string(count) + " CUDA device(s) visible");
    ROOFLINE_CUDA_CHECK(cudaSetDevice(device));
    cudaDeviceProp prop{};
    ROOFLINE_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    if (prop.major != 9)
      return unimplemented(std::string("this roofline is built for sm_90a (Hopper); ") + prop.name +
                           " is sm_" + std::to_string(prop.major) + std::to_string(prop.minor));
    std::unique_ptr<CudaBackend> b(new CudaBackend());
    b->device_ = device;
    b->device_name_ = prop.name;
    ROOFLINE_CUDA_CHECK(cudaStreamCreateWithFlags(&b->stream_, cudaStreamNonBlocking));
    b->matmul_ctx_ = MatmulCudaContext::create();
    return std::unique_ptr<Backend>(std::move(b));
  }

  ~CudaBackend() override {
    if (stream_) {
      cudaStreamSynchronize(stream_);
      cudaStreamDestroy(stream_);
    }
    if (pinned_) cudaFreeHost(pinned_);
    if (logits_pinned_) cudaFreeHost(logits_pinned_);
    if (sample_in_pinned_) cudaFreeHost(sample_in_pinned_);
    if (sample_out_pinned_) cudaFreeHost(sample_out_pinned_);
    for (auto& e : events_) cudaEventDestroy(e);
    for (cudaEvent_t e : {staged_, done_[0], done_[1]})
      if (e) cudaEventDestroy(e);
    for (auto& g : graphs_) cudaGraphExecDestroy(g.second.exec);
  }

  std::string name() const override {
    return "cuda:" + std::to_string(device_) + " (" + device_name_ + ")";
  }
  DType activation_dtype() const override { return DType::kBF16; }
  DType kv_dtype() const override { return DType::kBF16; }
  int64_t free_memory_bytes() const override {
    size_t free_b = 0, total_b = 0;
    ROOFLINE_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    return static_cast<int64_t>(free_b);
  }

  Status load_weights(const WeightStore& store, const std::vector<const Graph*>& graphs) override {
    // Every kernel this model needs must exist for its shapes: say so now, not mid-step.
    for (const Graph* g : graphs)
      for (const Node& n : g->nodes())
        if (n.op == OpKind::kAttention && !paged_attention_cuda_supports_head_dim(n.attrs.head_dim))
          return unimplemented(
              "the CUDA attention kernel supports head_dim 32, 64, 128 and 256; this "
              "model has head_dim " +
              std::to_string(n.attrs.head_dim) + ": run it with --device cpu");
    // Groups of weights that one GEMM reads stacked along N (and their biases).
    std::vector<std::vector<std::string>> groups;
    std::set<std::vector<std::string>> seen;
    for (const Graph* g : graphs) {
      for (const Node& n : g->nodes()) {
        if ((n.op != OpKind::kMatmul && n.op != OpKind::kMatmulBias) ||
            n.attrs.num_weight_parts < 2)
          continue;
        const int parts = static_cast<int>(n.attrs.num_weight_parts);
        std::vector<std::string> w, b;
        for (int i = 0; i < parts; ++i) w.push_back(g->value(n.inputs[1 + i]).weight_name);
        if (n.op == OpKind::kMatmulBias)
          for (int i = 0; i < parts; ++i)
            b.push_back(g->value(n.inputs[1 + parts + i]).weight_name);
        for (auto* list : {&w, &b})
          if (!list->empty() && seen.insert(*list).second) groups.push_back(*list);
      }
    }
    // Lay out every weight in one allocation: grouped parts back to back, the rest after.
    std::map<std::string, bool> placed;
    std::vector<std::pair<std::string, TensorView>> order;
    int64_t total = 0;
    auto place = [&](const std::string& name, bool aligned) -> Status {
      ROOFLINE_ASSIGN_OR_RETURN(TensorView v, store.get(name));
      if (!is_float_dtype(v.dtype))
        return invalid_argument("weight '" + name + "' has dtype " + dtype_name(v.dtype) +
                                "; the CUDA backend needs f32, f16 or bf16");
      if (aligned) total = align_up(total);
      offsets_[name] = total;
      total += v.numel() * 2;
      order.emplace_back(name, v);
      placed[name] = true;
      return ok_status();
    };
    for (const auto& group : groups)
      for (size_t i = 0; i < group.size(); ++i) ROOFLINE_RETURN_IF_ERROR(place(group[i], i == 0));
    for (const std::string& name : store.names())
      if (!placed.count(name)) ROOFLINE_RETURN_IF_ERROR(place(name, true));
    ROOFLINE_RETURN_IF_ERROR(weights_.allocate(align_up(total), "model weights"));
    weight_bytes_ = total;

    // Upload: bf16 straight from the mapped file, other float types converted on the host in
    // chunks, dummy weights generated on the device.
    std::vector<uint16_t> staging;
    for (const auto& entry : order) {
      const std::string& name = entry.first;
      const TensorView& v = entry.second;  // not a structured binding: the lambda below captures it
      uint8_t* dst = weights_.as() + offsets_[name];
      const int64_t n = v.numel();
      views_[name] = TensorView{dst, DType::kBF16, v.shape};
      if (!v.data) {
        const DummyTensor t = dummy_tensor(name, v.shape.rank, v.shape[v.shape.rank - 1]);
        fill_dummy_kernel<<<1024, 256, 0, stream_>>>(reinterpret_cast<__nv_bfloat16*>(dst), n, t);
        ROOFLINE_CUDA_LAUNCH_CHECK(stream_);
        continue;
      }
      if (v.dtype == DType::kBF16) {
        ROOFLINE_CUDA_CHECK(
            cudaMemcpy(dst, v.data, static_cast<size_t>(n * 2), cudaMemcpyHostToDevice));
        continue;
      }
      staging.resize(static_cast<size_t>(n));
      ThreadPool::global().parallel_for(n, 1 << 16, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
          staging[i] = f32_to_bf16_bits(load_as_f32(v.data, v.dtype, i));
      });
      ROOFLINE_CUDA_CHECK(
          cudaMemcpy(dst, staging.data(), static_cast<size_t>(n * 2), cudaMemcpyHostToDevice));
    }
    // The whole device, not only stream_: a cudaMemcpy from pageable memory runs on the legacy
    // stream and may return before its DMA lands, and stream_ (non-blocking) is not ordered after
    // it. The first step must not read a weight still in flight.
    ROOFLINE_CUDA_CHECK(cudaDeviceSynchronize());
    return ok_status();
  }

  StatusOr<TensorView> resolve_weight(const std::string& name) const override {
    auto it = views_.find(name);
    if (it == views_.end()) return not_found("weight '" + name + "' was not uploaded to the GPU");
    return it->second;
  }

  Status allocate(const BackendSetup& s) override {
    setup_ = s;
    ROOFLINE_RETURN_IF_ERROR(workspace_.allocate(s.workspace_bytes, "activation workspace"));
    // Split-K partials and arrival counters of the decode attention kernel: zeroed once, the
    // kernel leaves its counters at zero after every call.
    ROOFLINE_RETURN_IF_ERROR(
        attention_ws_.allocate(paged_attention_cuda_workspace_bytes(), "attention workspace"));
    ROOFLINE_CUDA_CHECK(cudaMemsetAsync(attention_ws_.ptr, 0,
                                        static_cast<size_t>(paged_attention_cuda_workspace_bytes()),
                                        stream_));
    const int64_t layer_elems = s.kv_shape.elements_per_layer();
    ROOFLINE_RETURN_IF_ERROR(kv_.allocate(2 * s.kv_shape.num_layers * layer_elems * 2, "KV cache"));
    // NaN everywhere: a read of a slot nothing wrote shows up in the logits.
    ROOFLINE_CUDA_CHECK(cudaMemsetAsync(
        kv_.ptr, 0xff, static_cast<size_t>(2 * s.kv_shape.num_layers * layer_elems * 2), stream_));
    ctx_.k_cache.clear();
    ctx_.v_cache.clear();
    for (int64_t l = 0; l < s.kv_shape.num_layers; ++l) {
      ctx_.k_cache.push_back(kv_.as() + (2 * l) * layer_elems * 2);
      ctx_.v_cache.push_back(kv_.as() + (2 * l + 1) * layer_elems * 2);
    }
    ROOFLINE_RETURN_IF_ERROR(
        rope_.allocate(static_cast<int64_t>(s.rope_inv_freq.size() * 4), "rope table"));
    // On stream_, so that every kernel after it sees the table (see load_weights).
    ROOFLINE_CUDA_CHECK(cudaMemcpyAsync(rope_.ptr, s.rope_inv_freq.data(),
                                        s.rope_inv_freq.size() * 4, cudaMemcpyHostToDevice,
                                        stream_));

    // Step inputs: one device region and one pinned host region with the same layout, so a step
    // uploads all its metadata in one copy.
    // The block table goes last, so a step uploads one prefix: everything else plus the rows it
    // uses.
    const int64_t T = s.max_tokens, B = s.max_seqs, W = s.max_blocks_per_seq;
    const int64_t sizes[kNumStepInputs] = {T * 4, T * 4,       T * 8, B * W * 4,
                                           B * 4, (B + 1) * 4, B * 4};
    const int order[kNumStepInputs] = {0, 1, 2, 4, 5, 6, 3};
    static_assert(static_cast<int>(StepInput::kBlockTables) == 3, "the table is input 3");
    int64_t off = 0;
    for (int i : order) {
      if (i == static_cast<int>(StepInput::kBlockTables)) {
        // The overlapped loop's feed (feed_sampled_tokens), the tile sampler's epoch and the
        // sampling rows travel in the same copy: a step's uploads are one copy unless it has
        // edit lists (each copy is a stream operation between two steps' graphs).
        feed_offset_ = off;
        off = align_up(off + 4 + B * 8);
        epoch_offset_ = off;
        off = align_up(off + 4);
        rows_offset_ = off;
        off = align_up(off + B * static_cast<int64_t>(sizeof(SamplingRowParams)));
      }
      input_offsets_[i] = off;
      off = align_up(off + sizes[i]);
    }
    input_bytes_ = off;
    ROOFLINE_RETURN_IF_ERROR(inputs_.allocate(input_bytes_, "step inputs"));
    pinned_bytes_ = input_bytes_;
    ROOFLINE_CUDA_CHECK(cudaMallocHost(&pinned_, static_cast<size_t>(pinned_bytes_)));
    std::memset(pinned_, 0, static_cast<size_t>(pinned_bytes_));  // feed count 0, epoch 0
    ROOFLINE_CUDA_CHECK(
        cudaMallocHost(&logits_pinned_, static_cast<size_t>(kLogitsChunkElems * 2)));
    // Sampling (execute_sampled): per-row parameters and outputs for max_seqs rows, the edit
    // lists in a buffer that grows when a step needs more (graphs are then captured again).
    ROOFLINE_RETURN_IF_ERROR(sample_out_.allocate(sample_out_bytes(B), "sampling outputs"));
    // The sampling kernel's split of small batches across vocabulary slices: zeroed once, the
    // kernel leaves its counters at zero.
    ROOFLINE_RETURN_IF_ERROR(
        sample_ws_.allocate(sample_rows_cuda_workspace_bytes(), "sampling workspace"));
    ROOFLINE_CUDA_CHECK(cudaMemsetAsync(
        sample_ws_.ptr, 0, static_cast<size_t>(sample_rows_cuda_workspace_bytes()), stream_));
    // One pinned copy of the outputs per step that may be in flight (launch_sampled).
    ROOFLINE_CUDA_CHECK(cudaMallocHost(
        &sample_out_pinned_, static_cast<size_t>(kMaxStepsInFlight * sample_out_bytes(B))));
    for (cudaEvent_t* e : {&staged_, &done_[0], &done_[1]})
      ROOFLINE_CUDA_CHECK(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
    ROOFLINE_RETURN_IF_ERROR(reserve_edits(std::max<int64_t>(kMinEditCapacity, B * 256)));
    // The tile sampler's bound (tile_sampling.h) and the pinned word its epoch is uploaded from.
    std::string bound_error;
    tile_max_rows_ = tile_sampler_max_rows(std::getenv("ROOFLINE_TILE_SAMPLER_ROWS"), &bound_error);
    if (!bound_error.empty()) ROOFLINE_LOG(kWarning, bound_error);

    ctx_.workspace = workspace_.as();
    ctx_.attention_workspace = attention_ws_.ptr;
    ctx_.act_dtype = DType::kBF16;
    ctx_.kv_dtype = DType::kBF16;
    ctx_.kv_shape = s.kv_shape;
    ctx_.rope_inv_freq = rope_.as<float>();
    for (int i = 0; i < kNumStepInputs; ++i)
      ctx_.step_inputs[static_cast<size_t>(i)] = inputs_.as() + input_offsets_[i];
    buckets_ = decode_batch_buckets(std::min(s.max_seqs, s.max_tokens));
    ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(stream_));
    ROOFLINE_LOG(kInfo, "cuda: weights " << (weight_bytes_ >> 20) << " MiB, workspace "
                                         << (s.workspace_bytes >> 20) << " MiB, KV cache "
                                         << ((2 * s.kv_shape.num_layers * layer_elems * 2) >> 20)
                                         << " MiB");
    return ok_status();
  }

  // A step on the device: the buffers it runs with (the caller's, or padded_ for a decode step at
  // its bucket's fixed shape) and that bucket (0: eager, at the step's own shape).
  struct StagedStep {
    const StepBuffers* run;
    int64_t bucket;
    bool fixed_shape;
  };

  // Checks the step against the set-up sizes, pads a decode step to its bucket (decode_padding.h)
  // — graphs or not, so the same kernels see the same shapes either way — and uploads its inputs
  // (a step that is not fed: feed count 0).
  StagedStep stage_step(const Plan& plan, const StepBuffers& step) {
    const StagedStep staged = pad_step(plan, step);
    *reinterpret_cast<int32_t*>(static_cast<uint8_t*>(pinned_) + feed_offset_) = 0;
    upload_step(staged, step);
    return staged;
  }

  StagedStep pad_step(const Plan& plan, const StepBuffers& step) {
    ROOFLINE_CHECK(step.num_tokens <= setup_.max_tokens && step.num_seqs <= setup_.max_seqs &&
                   step.block_table_width <= setup_.max_blocks_per_seq);
    StagedStep staged{&step, is_decode_step(step) ? decode_bucket(buckets_, step.num_seqs) : 0,
                      false};
    staged.fixed_shape =
        staged.bucket > 0 && staged.bucket <= plan.max_seqs && staged.bucket <= plan.max_tokens;
    if (staged.fixed_shape) {
      pad_decode_step(step, staged.bucket, setup_.max_blocks_per_seq, &padded_);
      staged.run = &padded_;
    }
    return staged;
  }

  // The padded step's inputs up (with whatever feed, epoch and sampling rows the pinned staging
  // holds: one copy) and its shape in the op context.
  void upload_step(const StagedStep& staged, const StepBuffers& step) {
    upload(*staged.run);
    set_shape(*staged.run, step, staged.fixed_shape);
  }

  // feed_sampled_tokens over the uploaded feed (a no-op for a step that is not fed).
  void launch_feed() {
    const int token_ids = static_cast<int>(StepInput::kTokenIds);
    feed_sampled_tokens<<<1, 256, 0, stream_>>>(
        reinterpret_cast<int32_t*>(inputs_.as() + input_offsets_[token_ids]),
        reinterpret_cast<const int32_t*>(inputs_.as() + feed_offset_), sample_out_.as<int32_t>());
    ROOFLINE_CUDA_CHECK(cudaGetLastError());
  }

  void execute(const Plan& plan, const StepBuffers& step, std::vector<float>* logits,
               std::vector<CallTime>* call_times) override {
    ROOFLINE_CHECK_MSG(launched_.empty(), "execute: a launched step is not collected yet");
    last_launch_rows_ = 0;  // the graph's sampling rewrites the outputs a feed would read
    const auto [run, bucket, fixed_shape] = stage_step(plan, step);
    // NVTX: a range per step (and per plan call when eager) for nsys and other NVTX tools; free
    // when no tool is attached.
    nvtxRangePushA(fixed_shape ? "roofline decode step" : "roofline step");
    set_tile_sampling(plan, false);
    if (fixed_shape && setup_.cuda_graphs && !call_times) {
      upload_sampling(nullptr, bucket);  // the graph samples too: inert greedy rows
      replay(plan, bucket, false);
    } else {
      run_eager(plan, call_times);
    }
    nvtxRangePop();
    // Logits: bf16 rows come back through a fixed pinned buffer in chunks, each widened to f32 by
    // the host thread pool (at decode sizes one chunk holds them all); padding rows stay behind.
    // A single-threaded widening of 64 x 128k logits cost ~9 ms per step on the H200 host
    // (measured 2026-11-30).
    const BufferRef& out = plan.outputs[0];
    const int64_t rows = out.shape[0].eval(step.num_tokens, step.num_seqs);
    const int64_t n = rows * out.shape[1].eval(step.num_tokens, step.num_seqs);
    logits->resize(static_cast<size_t>(n));
    const auto* src = workspace_.as() + out.offset_bytes;
    auto* staging = static_cast<uint16_t*>(logits_pinned_);
    for (int64_t begin = 0; begin < n; begin += kLogitsChunkElems) {
      const int64_t count = std::min(kLogitsChunkElems, n - begin);
      ROOFLINE_CUDA_CHECK(cudaMemcpyAsync(staging, src + begin * 2, static_cast<size_t>(count * 2),
                                          cudaMemcpyDeviceToHost, stream_));
      ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(stream_));
      float* dst = logits->data() + begin;
      ThreadPool::global().parallel_for(count, 1 << 15, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) dst[i] = bf16_bits_to_f32(staging[i]);
      });
    }
    record_call_times(plan, call_times);
  }

  Status execute_sampled(const Plan& plan, const StepBuffers& step, const StepSampling& sampling,
                         SampledRows* out, std::vector<CallTime>* call_times) override {
    if (!launched_.empty())
      return invalid_argument("execute_sampled: " + std::to_string(launched_.size()) +
                              " launched step(s) are not collected yet");
    ROOFLINE_RETURN_IF_ERROR(launch(plan, step, sampling, {}, call_times));
    ROOFLINE_RETURN_IF_ERROR(collect_sampled(out));
    record_call_times(plan, call_times);
    return ok_status();
  }

  Status launch_sampled(const Plan& plan, const StepBuffers& step, const StepSampling& sampling,
                        const std::vector<int32_t>& feed) override {
    return launch(plan, step, sampling, feed, nullptr);
  }

  int steps_in_flight() const override { return static_cast<int>(launched_.size()); }

  Status collect_sampled(SampledRows* out) override {
    if (launched_.empty()) return invalid_argument("collect_sampled: no launched step to collect");
    const Launched l = launched_.front();
    launched_.pop_front();
    ROOFLINE_CUDA_CHECK(cudaEventSynchronize(done_[l.slot]));
    const int64_t rows = l.rows;
    const int64_t B = setup_.max_seqs;
    resize_sampled_rows(rows, out);
    const auto* host = static_cast<const uint8_t*>(sample_out_pinned_) +
                       static_cast<int64_t>(l.slot) * sample_out_bytes(B);
    std::memcpy(out->tokens.data(), host, static_cast<size_t>(rows) * 4);
    std::memcpy(out->errors.data(), host + B * 4, static_cast<size_t>(rows) * 4);
    for (int64_t r = 0; l.tiles && r < rows; ++r) {
      // Every row was chosen because the tile sampler finishes it, and the LM head wrote this
      // step's summaries: a row it still cannot finish is a bug here, not a request's fault, and
      // the step fails rather than returning no token for it (ROOFLINE_TILE_SAMPLER_ROWS=0 turns
      // the tile sampler off).
      if ((out->errors[static_cast<size_t>(r)] & kSamplingNeedsFullRow) != 0)
        return internal_error(
            "cuda: the tile sampler could not finish row " + std::to_string(r) +
            " of a step chosen for it (stale logit tile summaries?); ROOFLINE_TILE_SAMPLER_ROWS=0 "
            "turns it off");
    }
    std::memcpy(out->nonfinite.data(), host + 2 * B * 4, static_cast<size_t>(rows) * 4);
    if (l.any_logprobs) {
      std::memcpy(out->logprobs.data(), host + 3 * B * 4, static_cast<size_t>(rows) * 4);
      const size_t top = static_cast<size_t>(rows) * kMaxTopLogprobs * 4;
      std::memcpy(out->top_ids.data(), host + 4 * B * 4, top);
      std::memcpy(out->top_logprobs.data(), host + 4 * B * 4 + B * kMaxTopLogprobs * 4, top);
    }
    return ok_status();
  }

  int64_t tile_sampled_steps() const override { return tile_sampled_steps_; }

  DecodeGraphReport capture_decode_graphs(
      const std::function<const Plan*(int64_t batch)>& plan_for) override {
    DecodeGraphReport report;
    if (!setup_.cuda_graphs) return report;
    size_t free_before = 0, free_after = 0, total = 0;
    ROOFLINE_CUDA_CHECK(cudaDeviceSynchronize());
    ROOFLINE_CUDA_CHECK(cudaMemGetInfo(&free_before, &total));
    const auto start = std::chrono::steady_clock::now();
    // Largest first; a step of inert rows (padding_decode_step's padding rows: nothing is written
    // to the KV cache) runs once eagerly as warm-up, then is captured.
    std::vector<float> scratch;
    for (auto it = buckets_.rbegin(); it != buckets_.rend(); ++it) {
      const int64_t b = *it;
      const Plan* plan = plan_for(b);
      if (plan == nullptr || b > plan->max_seqs || b > plan->max_tokens) continue;
      StepBuffers dummy;
      dummy.num_tokens = dummy.num_seqs = b;
      dummy.block_table_width = 1;
      dummy.token_ids.assign(static_cast<size_t>(b), 0);
      dummy.positions.assign(static_cast<size_t>(b), 0);
      dummy.slot_mapping.assign(static_cast<size_t>(b), -1);
      dummy.block_tables.assign(static_cast<size_t>(b), 0);
      dummy.seq_lens.assign(static_cast<size_t>(b), 1);
      for (int64_t i = 0; i <= b; ++i) dummy.query_start.push_back(static_cast<int32_t>(i));
      for (int64_t i = 0; i < b; ++i) dummy.last_token_index.push_back(static_cast<int32_t>(i));
      execute(*plan, dummy, &scratch, nullptr);
      if (const auto g = graphs_.find({plan, b, false}); g != graphs_.end()) {
        ++report.graphs;
        report.nodes[b] = g->second.nodes;
      }
      // The bucket's graph with the tile sampler too, where its steps may take it (its padding
      // rows, inert greedy rows, qualify).
      if (b <= tile_max_rows_) {
        stage_step(*plan, dummy);
        upload_sampling(nullptr, b);
        if (set_tile_sampling(*plan, true)) {
          replay(*plan, b, true);
          if (graphs_.count({plan, b, true}) != 0) ++report.tile_graphs;
        }
      }
    }
    report.capture_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    ROOFLINE_CUDA_CHECK(cudaMemGetInfo(&free_after, &total));
    report.device_bytes = static_cast<int64_t>(free_before) - static_cast<int64_t>(free_after);
    return report;
  }

 private:
  CudaBackend() = default;

  // At least this many edit entries (16 bytes each) are kept on the device for sampling.
  static constexpr int64_t kMinEditCapacity = 1 << 16;

  // Sampling outputs for `rows` rows, one array after another: tokens, errors, NaN counts,
  // logprobs (4 bytes each per row), then top ids and top logprobs (kMaxTopLogprobs per row).
  // The sampling kernel splits small batches across vocabulary slices unless
  // ROOFLINE_SAMPLING_SPLIT=0 (read once): one block per row, for A/B runs.
  static bool sampling_split_enabled() {
    static const bool on = [] {
      const char* v = std::getenv("ROOFLINE_SAMPLING_SPLIT");
      return v == nullptr || std::strcmp(v, "0") != 0;
    }();
    return on;
  }
  static int64_t sample_out_bytes(int64_t rows) {
    return 4 * rows * 4 + 2 * rows * kMaxTopLogprobs * 4;
  }

  // A sampled step queued on the stream (execute_sampled, launch_sampled): its fed tokens copied
  // on the device from the step launched before (feed_sampled_tokens), its inputs and sampling
  // rows uploaded, the step (its graph where it has one) and the sampling chain launched, and its
  // outputs' copy to the pinned slot of this launch, with an event after it; nothing waits.
  Status launch(const Plan& plan, const StepBuffers& step, const StepSampling& sampling,
                const std::vector<int32_t>& feed, std::vector<CallTime>* call_times) {
    const auto rows = static_cast<int64_t>(sampling.rows.size());
    ROOFLINE_CHECK_MSG(rows == step.num_seqs && rows > 0,
                       "execute_sampled: one sampling row per step entry");
    if (static_cast<int>(launched_.size()) >= kMaxStepsInFlight)
      return invalid_argument("launch_sampled: " + std::to_string(kMaxStepsInFlight) +
                              " steps are in flight already; collect one first");
    // Validate the feed before anything is queued.
    ROOFLINE_RETURN_IF_ERROR(check_feed(step, feed, last_launch_rows_));
    // Room for the edit lists first: growing it drops the captured graphs (they hold its address).
    if (static_cast<int64_t>(sampling.edits.size()) > edit_capacity_) {
      ROOFLINE_RETURN_IF_ERROR(reserve_edits(static_cast<int64_t>(sampling.edits.size())));
    }
    // The pinned staging of the launch before may still be on its way to the device.
    ROOFLINE_CUDA_CHECK(cudaEventSynchronize(staged_));
    // The feed, the sampling rows and the tile sampler's epoch go into the pinned staging, and
    // the step's inputs up with them in one copy (then the edit lists, where there are any).
    auto* feed_words = reinterpret_cast<int32_t*>(static_cast<uint8_t*>(pinned_) + feed_offset_);
    int32_t fed = 0;
    for (size_t i = 0; i < feed.size(); ++i) {
      if (feed[i] < 0) continue;
      feed_words[1 + 2 * fed] = step.query_start[i];
      feed_words[2 + 2 * fed] = feed[i];
      ++fed;
    }
    feed_words[0] = fed;
    const StagedStep staged = pad_step(plan, step);
    const auto [run, bucket, fixed_shape] = staged;
    const int64_t run_rows = run->num_seqs;  // a padded decode step samples its padding rows too
    upload_sampling(&sampling, run_rows, /*copy_rows=*/false);
    // The tile sampler where every row qualifies and the step is small enough (tile_sampling.h),
    // and the plan's LM head can leave the summaries.
    const bool tiles = set_tile_sampling(
        plan, step_uses_tile_sampler(sampling.rows, run_rows, logits_width(plan), tile_max_rows_),
        /*copy_epoch=*/false);
    tile_sampled_steps_ += tiles ? 1 : 0;
    upload_step(staged, step);
    upload_edits(sampling);
    ROOFLINE_CUDA_CHECK(cudaEventRecord(staged_, stream_));
    nvtxRangePushA(fixed_shape ? "roofline decode step" : "roofline step");
    if (fixed_shape && setup_.cuda_graphs && !call_times) {
      replay(plan, bucket, tiles);  // the feed first, the sampling kernel last
    } else {
      if (fed > 0) launch_feed();
      run_eager(plan, call_times);
      launch_sampling(plan, run_rows, tiles);
    }
    nvtxRangePop();
    // Back: tokens, errors and NaN counts (and logprobs when a row asked), not the logits.
    Launched l;
    l.rows = rows;
    l.tiles = tiles;
    for (const SamplingRowParams& r : sampling.rows) l.any_logprobs |= r.num_top_logprobs >= 0;
    l.slot = static_cast<int>(launches_++ % kMaxStepsInFlight);
    const int64_t B = setup_.max_seqs;
    const int64_t head = l.any_logprobs ? sample_out_bytes(B) : 4 * B * 4;
    ROOFLINE_CUDA_CHECK(cudaMemcpyAsync(static_cast<uint8_t*>(sample_out_pinned_) +
                                            static_cast<int64_t>(l.slot) * sample_out_bytes(B),
                                        sample_out_.ptr, static_cast<size_t>(head),
                                        cudaMemcpyDeviceToHost, stream_));
    ROOFLINE_CUDA_CHECK(cudaEventRecord(done_[l.slot], stream_));
    launched_.push_back(l);
    last_launch_rows_ = rows;
    return ok_status();
  }

  // Device and pinned room for `entries` edits (twice what is asked, so growth is rare). Drops the
  // captured decode graphs: they hold the old buffer's address (the next decode step of each
  // bucket captures its graph again).
  Status reserve_edits(int64_t entries) {
    const int64_t capacity =
        edit_capacity_ == 0 ? entries : std::max<int64_t>(entries, 2 * edit_capacity_);
    ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(stream_));
    for (auto& [key, g] : graphs_) ROOFLINE_CUDA_CHECK(cudaGraphExecDestroy(g.exec));
    if (!graphs_.empty())
      ROOFLINE_LOG(kInfo, "cuda: sampling edit lists grew to "
                              << capacity << " entries; decode graphs are captured again");
    graphs_.clear();
    last_graph_ = nullptr;
    last_graph_nodes_ = {};
    sample_edits_.reset();
    if (sample_in_pinned_) ROOFLINE_CUDA_CHECK(cudaFreeHost(sample_in_pinned_));
    sample_in_pinned_ = nullptr;
    edit_capacity_ = 0;
    const int64_t bytes = capacity * static_cast<int64_t>(sizeof(TokenEdit));
    ROOFLINE_RETURN_IF_ERROR(
        sample_edits_.allocate(bytes, "sampling edit lists (penalties, logit bias)"));
    const int64_t in_bytes = bytes;
    if (cudaMallocHost(&sample_in_pinned_, static_cast<size_t>(in_bytes)) != cudaSuccess) {
      cudaGetLastError();
      sample_in_pinned_ = nullptr;
      sample_edits_.reset();
      return resource_exhausted("cannot pin " + std::to_string(in_bytes >> 20) +
                                " MiB of host memory for the sampling edit lists");
    }
    edit_capacity_ = capacity;
    return ok_status();
  }

  // Stages `rows` rows of sampling parameters (sampling's rows, then inert greedy rows for the
  // padding; all inert without `sampling`) in the pinned step inputs, and with copy_rows uploads
  // them and sampling's edits (without: the step's upload_step takes the rows, upload_edits the
  // edits).
  void upload_sampling(const StepSampling* sampling, int64_t rows, bool copy_rows = true) {
    auto* row_params =
        reinterpret_cast<SamplingRowParams*>(static_cast<uint8_t*>(pinned_) + rows_offset_);
    const int64_t given = sampling ? static_cast<int64_t>(sampling->rows.size()) : 0;
    for (int64_t r = 0; r < rows; ++r)
      row_params[r] = r < given ? sampling->rows[static_cast<size_t>(r)] : SamplingRowParams{};
    if (!copy_rows) return;
    ROOFLINE_CUDA_CHECK(cudaMemcpyAsync(inputs_.as() + rows_offset_, row_params,
                                        static_cast<size_t>(rows) * sizeof(SamplingRowParams),
                                        cudaMemcpyHostToDevice, stream_));
    if (sampling) upload_edits(*sampling);
  }

  // sampling's edit lists up, in one copy (nothing when it has none).
  void upload_edits(const StepSampling& sampling) {
    const size_t edit_bytes = sampling.edits.size() * sizeof(TokenEdit);
    if (edit_bytes == 0) return;
    std::memcpy(sample_in_pinned_, sampling.edits.data(), edit_bytes);
    ROOFLINE_CUDA_CHECK(cudaMemcpyAsync(sample_edits_.ptr, sample_in_pinned_, edit_bytes,
                                        cudaMemcpyHostToDevice, stream_));
  }

  // The logits' row length (the vocabulary) of `plan`.
  static int64_t logits_width(const Plan& plan) {
    return plan.outputs[0].shape[1].eval(plan.max_tokens, plan.max_seqs);
  }

  // Turns the LM head's logit tile summaries on (for the tile sampler) or off in the op context.
  // On: the summary buffers for max_seqs rows of the plan's vocabulary (allocated the first time;
  // a plan of a larger vocabulary than the first keeps them off), the next epoch uploaded (the
  // words zeroed once when the epochs wrap, logit_tiles.h), and only where exactly one call of the
  // plan writes the logits as a plain matmul (plan_writes_logit_summaries). Returns whether they
  // are on.
  bool set_tile_sampling(const Plan& plan, bool on, bool copy_epoch = true) {
    ctx_.summarized_output = nullptr;
    ctx_.logit_summaries = {};
    if (!on) return false;
    const int64_t vocab = logits_width(plan);
    const int64_t tiles = logit_tiles(vocab, kTileSamplerTileTokens);
    if (summary_words_.ptr == nullptr) {
      if (!summary_words_.allocate(setup_.max_seqs * tiles * 8, "logit tile summaries").ok() ||
          !summary_counts_.allocate(setup_.max_seqs * 8, "logit tile summaries").ok()) {
        ROOFLINE_LOG(kWarning, "cuda: no device memory for the logit tile summaries ("
                                   << ((setup_.max_seqs * tiles * 8) >> 10)
                                   << " KiB): the full-row sampler samples every step");
        tile_max_rows_ = 0;
        return false;
      }
      summary_tiles_ = tiles;
      zero_summaries();
    }
    if (tiles > summary_tiles_) return false;
    ctx_.summarized_output = workspace_.as() + plan.outputs[0].offset_bytes;
    ctx_.logit_summaries = {summary_words_.as<uint64_t>(), summary_counts_.as<uint64_t>(),
                            reinterpret_cast<uint32_t*>(inputs_.as() + epoch_offset_),
                            kTileSamplerTileTokens};
    if (!plan_writes_logit_summaries(plan.calls, ctx_)) {
      ctx_.summarized_output = nullptr;
      ctx_.logit_summaries = {};
      return false;
    }
    if (++epoch_ == kLogitTileEpochs) {
      zero_summaries();
      epoch_ = 1;
    }
    auto* pinned_epoch =
        reinterpret_cast<uint32_t*>(static_cast<uint8_t*>(pinned_) + epoch_offset_);
    *pinned_epoch = epoch_;
    if (copy_epoch)
      ROOFLINE_CUDA_CHECK(cudaMemcpyAsync(inputs_.as() + epoch_offset_, pinned_epoch, 4,
                                          cudaMemcpyHostToDevice, stream_));
    return true;
  }

  void zero_summaries() {
    ROOFLINE_CUDA_CHECK(cudaMemsetAsync(
        summary_words_.ptr, 0, static_cast<size_t>(setup_.max_seqs * summary_tiles_ * 8), stream_));
    ROOFLINE_CUDA_CHECK(
        cudaMemsetAsync(summary_counts_.ptr, 0, static_cast<size_t>(setup_.max_seqs * 8), stream_));
  }

  // The sampling chain over the plan's `rows` logits rows (bf16 in the workspace), reading the
  // uploaded rows and edits: from the LM head's tile summaries (`tiles`: set_tile_sampling turned
  // them on for this step) or over the whole rows. The same launch is the last node of every
  // decode graph.
  void launch_sampling(const Plan& plan, int64_t rows, bool tiles) {
    const BufferRef& logits = plan.outputs[0];
    const int64_t B = setup_.max_seqs;
    SampleRowsParams p;
    p.logits = workspace_.as() + logits.offset_bytes;
    p.rows = reinterpret_cast<const SamplingRowParams*>(inputs_.as() + rows_offset_);
    p.edits = sample_edits_.as<TokenEdit>();
    p.num_edits = edit_capacity_;
    p.num_rows = rows;
    p.vocab_size = logits.shape[1].eval(rows, rows);
    p.dtype = DType::kBF16;
    auto* out = sample_out_.as();
    p.tokens = reinterpret_cast<int32_t*>(out);
    p.errors = reinterpret_cast<uint32_t*>(out + B * 4);
    p.nonfinite_counts = reinterpret_cast<int32_t*>(out + 2 * B * 4);
    p.logprobs = reinterpret_cast<float*>(out + 3 * B * 4);
    p.top_ids = reinterpret_cast<int32_t*>(out + 4 * B * 4);
    p.top_logprobs = reinterpret_cast<float*>(out + 4 * B * 4 + B * kMaxTopLogprobs * 4);
    p.max_top_logprobs = kMaxTopLogprobs;
    p.workspace = sampling_split_enabled() ? sample_ws_.ptr : nullptr;
    if (tiles) {
      sample_rows_tiles_cuda(p, ctx_.logit_summaries, stream_);
    } else {
      sample_rows_cuda(p, stream_);
    }
  }

  // The op context's step shape and attention bounds for the step `run` (padded to its bucket when
  // fixed_shape) of `step`.
  void set_shape(const StepBuffers& run, const StepBuffers& step, bool fixed_shape) {
    ctx_.num_tokens = run.num_tokens;
    ctx_.num_seqs = run.num_seqs;
    ctx_.block_table_width = run.block_table_width;
    if (fixed_shape) {
      // Bounds that do not change from step to step: one query, the table's capacity.
      ctx_.max_q_len = 1;
      ctx_.max_seq_len = run.block_table_width * setup_.kv_shape.block_size;
    } else {
      ctx_.max_q_len = 0;
      ctx_.max_seq_len = 0;
      for (int64_t s = 0; s < step.num_seqs; ++s) {
        ctx_.max_q_len =
            std::max<int64_t>(ctx_.max_q_len, step.query_start[s + 1] - step.query_start[s]);
        ctx_.max_seq_len = std::max<int64_t>(ctx_.max_seq_len, step.seq_lens[s]);
      }
    }
  }

  // Each call's start and end from the event pairs run_eager recorded.
  void record_call_times(const Plan& plan, std::vector<CallTime>* call_times) {
    if (!call_times) return;
    call_times->assign(plan.calls.size(), CallTime{});
    for (size_t i = 0; i < plan.calls.size(); ++i) {
      float start = 0, end = 0;
      ROOFLINE_CUDA_CHECK(cudaEventElapsedTime(&start, events_[0], events_[2 * i + 1]));
      ROOFLINE_CUDA_CHECK(cudaEventElapsedTime(&end, events_[0], events_[2 * i + 2]));
      (*call_times)[i] = {start, end};
    }
  }

  // Packs the step's metadata into the pinned region and uploads the prefix it uses in one copy
  // (the block table is last: only its first num_seqs rows at the step's width travel), or, for a
  // padded decode step with wide, mostly unread rows, in two: the rest, then the table's read
  // columns (table_columns_read).
  void upload(const StepBuffers& step) {
    auto* host = static_cast<uint8_t*>(pinned_);
    const size_t counts[kNumStepInputs] = {
        step.token_ids.size() * 4,       step.positions.size() * 4, step.slot_mapping.size() * 8,
        step.block_tables.size() * 4,    step.seq_lens.size() * 4,  step.query_start.size() * 4,
        step.last_token_index.size() * 4};
    const int tables = static_cast<int>(StepInput::kBlockTables);
    const int64_t width = step.block_table_width;
    const int64_t read =
        step.table_columns_read > 0 ? std::min(step.table_columns_read, width) : width;
    for (int i = 0; i < kNumStepInputs; ++i)
      if (counts[i] && (i != tables || read == width))
        std::memcpy(host + input_offsets_[i], step.data(i), counts[i]);
    // A padded decode step: its table rows are `width` wide but only their first `read` columns
    // are ever read, so only those are staged; the other columns of the pinned table keep stale
    // entries that nothing reads.
    auto* table = reinterpret_cast<int32_t*>(host + input_offsets_[tables]);
    if (read < width)
      for (int64_t r = 0; r < step.num_seqs; ++r)
        std::memcpy(table + r * width, step.block_tables.data() + r * width,
                    static_cast<size_t>(read) * 4);
    // One contiguous copy, stale columns and all, unless the rows are wide (>= 1,024 columns, e.g.
    // --max-model-len 16384 and up) and mostly unread: then a pitched copy of the read columns.
    // A pitched copy costs ~0.25 us a row (H200 host, 2026-11-30: 256 rows of 33 columns took
    // 0.06 ms more than one 38 KB copy), so it only pays where rows are long: 256 rows at 2,048
    // columns (2 MB) measured a 0.33 -> 0.06 ms step boundary with it.
    const bool pitched = width >= 1024 && read * 4 <= width;
    if (!pitched) {
      const size_t bytes = static_cast<size_t>(input_offsets_[tables]) + counts[tables];
      ROOFLINE_CUDA_CHECK(
          cudaMemcpyAsync(inputs_.ptr, pinned_, bytes, cudaMemcpyHostToDevice, stream_));
      return;
    }
    ROOFLINE_CUDA_CHECK(cudaMemcpyAsync(inputs_.ptr, pinned_,
                                        static_cast<size_t>(input_offsets_[tables]),
                                        cudaMemcpyHostToDevice, stream_));
    const size_t pitch = static_cast<size_t>(width) * 4;
    ROOFLINE_CUDA_CHECK(
        cudaMemcpy2DAsync(static_cast<uint8_t*>(inputs_.ptr) + input_offsets_[tables], pitch, table,
                          pitch, static_cast<size_t>(read) * 4, static_cast<size_t>(step.num_seqs),
                          cudaMemcpyHostToDevice, stream_));
  }

  // Every call of the plan, launched one by one; with call_times, an event pair around each.
  void run_eager(const Plan& plan, std::vector<CallTime>* call_times) {
    CudaKernels k{stream_, matmul_ctx_.get()};
    // With timing on: event 0 marks the step's start, events 2i+1 and 2i+2 bracket call i. They
    // are recorded with cudaEventRecordWithFlags, which nothing else in a step calls: the
    // profiler's learning step finds them as its markers among the step's other events (the
    // staging's, the outputs' copy: cudaEventRecord), profiler/join.h.
    const auto mark = [this](cudaEvent_t e) {
      ROOFLINE_CUDA_CHECK(cudaEventRecordWithFlags(e, stream_, cudaEventRecordDefault));
    };
    if (call_times) {
      while (events_.size() < 2 * plan.calls.size() + 1) {
        cudaEvent_t e;
        ROOFLINE_CUDA_CHECK(cudaEventCreate(&e));
        events_.push_back(e);
      }
      mark(events_[0]);
    }
    for (size_t i = 0; i < plan.calls.size(); ++i) {
      if (call_times) mark(events_[2 * i + 1]);
      nvtxRangePushA(plan.calls[i].name.c_str());
      run_plan_call(plan.calls[i], ctx_, k);
      nvtxRangePop();
      if (call_times) mark(events_[2 * i + 2]);
    }
  }

  // The decode step of `bucket` through its graph, the plan's calls then the sampling chain over
  // its logits. The first time, the step runs eagerly (which also warms up every kernel's one-time
  // set-up: cuBLASLt algorithms, shared-memory limits), then the same calls are captured; the
  // inputs (metadata, sampling rows and edits) live in fixed buffers, so later replays read each
  // step's freshly uploaded values.
  void replay(const Plan& plan, int64_t bucket, bool tiles) {
    const auto key = std::make_tuple(&plan, bucket, tiles);
    auto it = graphs_.find(key);
    if (it != graphs_.end()) {
      ROOFLINE_CUDA_CHECK(cudaGraphLaunch(it->second.exec, stream_));
      last_graph_ = it->second.exec;
      last_graph_nodes_ = it->second.nodes;
      return;
    }
    launch_feed();
    run_eager(plan, nullptr);
    launch_sampling(plan, bucket, tiles);
    cudaGraph_t graph = nullptr;
    ROOFLINE_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    launch_feed();
    CudaKernels k{stream_, matmul_ctx_.get()};
    for (const PlanCall& call : plan.calls) run_plan_call(call, ctx_, k);
    launch_sampling(plan, bucket, tiles);
    ROOFLINE_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    CapturedGraph captured;
    count_graph_nodes(graph, &captured.nodes);
    ROOFLINE_CUDA_CHECK(cudaGraphInstantiate(&captured.exec, graph, 0));
    ROOFLINE_CUDA_CHECK(cudaGraphDestroy(graph));
    graphs_.emplace(key, captured);
  }

  StatusOr<DecodeGraphNodes> last_decode_graph_nodes() const override {
    if (last_graph_ == nullptr)
      return invalid_argument(
          "no decode step has been replayed from a CUDA graph yet: run a decode step first");
    return last_graph_nodes_;
  }

  StatusOr<double> replay_last_decode_graph(int64_t times) override {
    if (times < 1 || times > 100000)
      return invalid_argument("replay_last_decode_graph: times must be in [1, 100000], got " +
                              std::to_string(times));
    if (last_graph_ == nullptr)
      return invalid_argument(
          "no decode step has been replayed from a CUDA graph yet: run a decode step first");
    const auto n = static_cast<size_t>(times);
    while (events_.size() < n + 1) {
      cudaEvent_t e;
      ROOFLINE_CUDA_CHECK(cudaEventCreate(&e));
      events_.push_back(e);
    }
    // One replay first, so the timed ones start from a step's steady state rather than from idle;
    // then an event after each (recording one does not hold the stream up). The median replay, as
    // the step times it is set beside are medians.
    ROOFLINE_CUDA_CHECK(cudaGraphLaunch(last_graph_, stream_));
    ROOFLINE_CUDA_CHECK(cudaEventRecord(events_[0], stream_));
    for (size_t i = 0; i < n; ++i) {
      ROOFLINE_CUDA_CHECK(cudaGraphLaunch(last_graph_, stream_));
      ROOFLINE_CUDA_CHECK(cudaEventRecord(events_[i + 1], stream_));
    }
    ROOFLINE_CUDA_CHECK(cudaEventSynchronize(events_[n]));
    std::vector<double> ms(n);
    for (size_t i = 0; i < n; ++i) {
      float m = 0;
      ROOFLINE_CUDA_CHECK(cudaEventElapsedTime(&m, events_[i], events_[i + 1]));
      ms[i] = m;
    }
    std::nth_element(ms.begin(), ms.begin() + static_cast<std::ptrdiff_t>(n / 2), ms.end());
    return ms[n / 2];
  }

  int device_ = 0;
  std::string device_name_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<MatmulCudaContext> matmul_ctx_;
  DeviceMemory weights_, workspace_, attention_ws_, kv_, rope_, inputs_;
  int64_t weight_bytes_ = 0;
  std::map<std::string, int64_t> offsets_;
  std::map<std::string, TensorView> views_;
  BackendSetup setup_;
  int64_t input_offsets_[kNumStepInputs] = {};
  int64_t input_bytes_ = 0;
  void* pinned_ = nullptr;
  void* logits_pinned_ = nullptr;
  int64_t pinned_bytes_ = 0;
  DeviceMemory sample_edits_, sample_out_;  // sampling edits, outputs (rows: in inputs_)
  DeviceMemory sample_ws_;                  // sample_rows_cuda_workspace_bytes(), zeroed
  void* sample_in_pinned_ = nullptr;        // [edit_capacity_ edits], host side
  void* sample_out_pinned_ = nullptr;       // kMaxStepsInFlight x sample_out_bytes(max_seqs), host
  int64_t edit_capacity_ = 0;
  std::vector<cudaEvent_t> events_;
  // The tile sampler (tile_sampling.h): the most rows a step may have to take it, the LM head's
  // summary words [max_seqs, summary_tiles_] and row counts, the step's epoch on the device and
  // its pinned host copy.
  int64_t tile_max_rows_ = kTileSamplerDefaultMaxRows;
  DeviceMemory summary_words_, summary_counts_;  // the epoch: in inputs_ (epoch_offset_)
  int64_t summary_tiles_ = 0;
  uint32_t epoch_ = 0;
  int64_t tile_sampled_steps_ = 0;
  // The overlapped loop (launch_sampled): where the feed pairs sit in inputs_ (and pinned_); an
  // event after the last launch's uploads (the pinned staging may be rewritten once it is
  // reached); per step in flight, an event after its outputs' copy to its pinned slot; the
  // launched steps not yet collected, oldest first.
  int64_t feed_offset_ = 0;
  int64_t epoch_offset_ = 0;  // the tile sampler's epoch word in inputs_ (and pinned_)
  int64_t rows_offset_ = 0;   // the sampling rows [max_seqs] in inputs_ (and pinned_)
  cudaEvent_t staged_ = nullptr;
  cudaEvent_t done_[kMaxStepsInFlight] = {};
  struct Launched {
    int64_t rows = 0;
    bool tiles = false;
    bool any_logprobs = false;
    int slot = 0;
  };
  std::deque<Launched> launched_;
  int64_t launches_ = 0;
  int64_t last_launch_rows_ = 0;  // rows the last sampled step sampled (0: a step since wrote none)
  ExecContext ctx_;
  std::vector<int64_t> buckets_;  // decode batch buckets (decode_padding.h)
  StepBuffers padded_;            // the current decode step at its bucket's shape
  // A captured decode-step graph and its nodes (counted before instantiation: an executable graph
  // cannot be walked).
  struct CapturedGraph {
    cudaGraphExec_t exec = nullptr;
    DecodeGraphNodes nodes;
  };
  // By plan, bucket and sampler (true: the tile sampler, the LM head writing the summaries).
  std::map<std::tuple<const Plan*, int64_t, bool>, CapturedGraph> graphs_;
  cudaGraphExec_t last_graph_ = nullptr;  // the decode graph replay() launched last
  DecodeGraphNodes last_graph_nodes_;     // and its nodes
};

}  // namespace

StatusOr<std::unique_ptr<Backend>> create_cuda_backend(const std::string& device) {
  ROOFLINE_ASSIGN_OR_RETURN(const int index, cuda_device_index(device));
  return CudaBackend::create(index);
}

}  // namespace roofline
