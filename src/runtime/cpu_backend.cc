// The CPU backend: f32 activations and KV cache in host memory, weights used in place from the
// mapped files (or materialised once for dummy weights), every call through its op's CPU function.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "core/thread_pool.h"
#include "ops/sampling/sampling.h"
#include "runtime/backend.h"
#include "runtime/dummy_weights.h"
#include "runtime/plan_executor.h"

namespace roofline {

namespace {

struct CpuKernels {
  void embedding(const EmbeddingParams& p) { embedding_cpu(p); }
  void rms_norm(const RmsNormParams& p) { rms_norm_cpu(p); }
  void rms_norm_residual(const RmsNormResidualParams& p) { rms_norm_residual_cpu(p); }
  void add(const AddParams& p) { add_cpu(p); }
  void matmul(const MatmulParams& p) { matmul_cpu(p); }
  void matmul_bias(const MatmulParams& p) { matmul_bias_cpu(p); }
  void matmul_residual(const MatmulParams& p) { matmul_residual_cpu(p); }
  void qkv_rope(const QkvRopeParams& p) { qkv_rope_cpu(p); }
  void attention(const PagedAttentionParams& p) { paged_attention_cpu(p); }
  void silu_mul(const SiluMulParams& p) { silu_mul_cpu(p); }
  void gather_rows(const GatherRowsParams& p) { gather_rows_cpu(p); }
};

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  DType activation_dtype() const override { return DType::kF32; }
  DType kv_dtype() const override { return DType::kF32; }
  int64_t free_memory_bytes() const override {
    return static_cast<int64_t>(sysconf(_SC_AVPHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  }

  Status load_weights(const WeightStore& store, const std::vector<const Graph*>&) override {
    store_ = &store;
    // Dummy weights have no bytes: materialise them once, in bf16 (half the memory of f32).
    for (const std::string& name : store.names()) {
      ROOFLINE_ASSIGN_OR_RETURN(TensorView v, store.get(name));
      if (v.data) continue;
      const int64_t n = v.numel();
      std::vector<uint16_t> data;
      try {
        data.resize(static_cast<size_t>(n));
      } catch (const std::bad_alloc&) {
        return resource_exhausted("cannot hold dummy weight '" + name + "' (" +
                                  std::to_string(n * 2 >> 20) + " MiB) in host memory");
      }
      const DummyTensor t = dummy_tensor(name, v.shape.rank, v.shape[v.shape.rank - 1]);
      ThreadPool::global().parallel_for(n, 1 << 16, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) data[i] = f32_to_bf16_bits(dummy_value(t, i));
      });
      TensorView owned{data.data(), DType::kBF16, v.shape};
      owned_[name] = {std::move(data), owned};
    }
    return ok_status();
  }

  StatusOr<TensorView> resolve_weight(const std::string& name) const override {
    auto it = owned_.find(name);
    if (it != owned_.end()) return it->second.second;
    return store_->get(name);
  }

  Status allocate(const BackendSetup& s) override {
    setup_ = s;
    try {
      workspace_.assign(static_cast<size_t>(s.workspace_bytes), 0);
    } catch (const std::bad_alloc&) {
      return resource_exhausted("cannot allocate the " + std::to_string(s.workspace_bytes >> 20) +
                                " MiB activation workspace: lower --max-step-tokens");
    }
    const char* poison = std::getenv("ROOFLINE_POISON_KV");
    const bool poison_kv = poison != nullptr && std::string(poison) == "1";
    ROOFLINE_ASSIGN_OR_RETURN(
        kv_, KvCache::allocate(s.kv_shape,
                               poison_kv ? KvCache::Fill::kPoison : KvCache::Fill::kZeroOnDemand));
    ctx_.kv_shape = s.kv_shape;
    ctx_.act_dtype = DType::kF32;
    ctx_.kv_dtype = DType::kF32;
    ctx_.workspace = workspace_.data();
    ctx_.rope_inv_freq = setup_.rope_inv_freq.data();
    ctx_.k_cache.clear();
    ctx_.v_cache.clear();
    for (int64_t l = 0; l < s.kv_shape.num_layers; ++l) {
      ctx_.k_cache.push_back(kv_.k(l));
      ctx_.v_cache.push_back(kv_.v(l));
    }
    return ok_status();
  }

  void execute(const Plan& plan, const StepBuffers& step, std::vector<float>* logits,
               std::vector<CallTime>* call_times) override {
    ctx_.num_tokens = step.num_tokens;
    ctx_.num_seqs = step.num_seqs;
    ctx_.block_table_width = step.block_table_width;
    for (int i = 0; i < kNumStepInputs; ++i)
      ctx_.step_inputs[static_cast<size_t>(i)] = step.data(i);
    CpuKernels k;
    if (call_times) call_times->assign(plan.calls.size(), CallTime{});
    const auto step_start = std::chrono::steady_clock::now();
    auto since_start = [&](std::chrono::steady_clock::time_point t) {
      return std::chrono::duration<double, std::milli>(t - step_start).count();
    };
    for (size_t i = 0; i < plan.calls.size(); ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      run_plan_call(plan.calls[i], ctx_, k);
      if (call_times)
        (*call_times)[i] = {since_start(t0), since_start(std::chrono::steady_clock::now())};
    }
    const BufferRef& out = plan.outputs[0];
    const int64_t n = out.shape[0].eval(step.num_tokens, step.num_seqs) *
                      out.shape[1].eval(step.num_tokens, step.num_seqs);
    const auto* src = reinterpret_cast<const float*>(workspace_.data() + out.offset_bytes);
    logits->assign(src, src + n);
  }

 private:
  const WeightStore* store_ = nullptr;
  std::map<std::string, std::pair<std::vector<uint16_t>, TensorView>> owned_;
  BackendSetup setup_;
  std::vector<uint8_t> workspace_;
  KvCache kv_;
  ExecContext ctx_;
};

}  // namespace

std::unique_ptr<Backend> create_cpu_backend() { return std::make_unique<CpuBackend>(); }

StatusOr<int> cuda_device_index(const std::string& device) {
  if (device == "cuda") return 0;
  const std::string num = device.rfind("cuda:", 0) == 0 ? device.substr(5) : std::string();
  if (num.empty() || num.size() > 3 || num.find_first_not_of("0123456789") != std::string::npos)
    return invalid_argument("--device must be 'cpu', 'cuda' or 'cuda:N', got '" + device + "'");
  return std::stoi(num);
}

Status check_device_name(const std::string& device) {
  if (device == "cpu") return ok_status();
  return cuda_device_index(device).status();
}

StatusOr<std::unique_ptr<Backend>> create_backend(const std::string& device) {
  ROOFLINE_RETURN_IF_ERROR(check_device_name(device));
  if (device == "cpu") return create_cpu_backend();
  return create_cuda_backend(device);
}

}  // namespace roofline
