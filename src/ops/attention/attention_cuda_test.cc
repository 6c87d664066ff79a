// paged_attention_cuda on every element, over attention_cuda_test_shapes() (contexts 1 … 4097,
// mixed decode / prefill / chunked-prefill batches, GQA 1 … 40, block sizes 16, 5 and 1, sliding
// windows, head_dim 32 … 256), with scattered block tables, NaN in every cache slot no sequence
// owns and a poisoned output (with a guard region past its end that must stay untouched):
// - against the CPU twin run on the same bf16 inputs: |cuda - cpu| <= 2^-8·|cpu| + 5e-5 (the
//   kernel's single bf16 rounding of its f32 result, plus f32 order differences);
// - per STYLE.md, against fp64 attention on the same inputs: max|cuda - fp64| must stay within
//   2× max|naive_bf16 - fp64| (+ 1e-5), where naive_bf16 is an unfused bf16 implementation
//   (torch eager's: q·kᵀ and its scaling rounded to bf16, softmax in f32 rounded to bf16,
//   probabilities · v accumulated in f32 and rounded to bf16);
// - with ROOFLINE_ATTENTION_DUMP=DIR, the prefill and tree-mask cases also write their inputs and
//   output for tests/gpu/attention_sdpa_check.py, the same 2× bound against torch SDPA in fp32.
// The decode kernel's shapes (attention_cuda_decode_test_shapes()) run three times on one
// workspace, with loose and exact bounds. Plus: warmed-up launches (prefill; decode with splits)
// capture into a CUDA graph and replay to the same result; and the decode kernel run right after
// a PDL kernel that writes this step's keys reads them only after that write.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "ops/attention/attention.h"
#include "ops/attention/attention_shapes.h"
#include "ops/qkv_rope/qkv_rope.h"
#include "ops/testing/gpu_test_util.h"
#include "ops/testing/op_test_util.h"

namespace roofline {
namespace {

using testing::all_close;
using testing::DeviceBuffer;
using testing::make_rng;
using testing::random_vector;
using testing::round_to_bf16;
using testing::to_bf16;

constexpr double kTwinRtol = 1.0 / 256.0;  // one rounding to bf16 (8 significant bits)
// f32 order differences between the twins: online softmax vs normalise-first, ~sqrt(context)·2^-24
// random walks on outputs of size <= 1: ~4e-6 at 4097 keys; 5e-5 leaves a 12× margin.
constexpr double kTwinAtol = 5e-5;
// The tensor-core prefill kernel rounds each probability to bf16 for its P·V MMA (relative error
// <= 2^-9), which moves an output by at most 2^-9·max|v| = 2^-9 (V in [-1, 1]) beyond the twin's
// f32 result: its twin bound adds that to kTwinAtol. A wrong key, mask or page moves outputs by
// ~0.1 or more.
constexpr double kPrefillTwinAtol = kTwinAtol + 1.0 / 512.0;
constexpr double kNaiveFactor = 2.0;
constexpr double kNaiveFloor = 1e-5;   // where both errors are ~0 (a single attended key)
constexpr int64_t kGuardElems = 1024;  // past the output's end: must stay poisoned
constexpr uint16_t kPoisonBits = 0xffff;

float bf16_round(float v) { return bf16_bits_to_f32(f32_to_bf16_bits(v)); }

// The logical contents of a batch, already rounded to bf16 values.
struct Logical {
  std::vector<float> q;                  // [num_tokens, num_heads, head_dim]
  std::vector<std::vector<float>> k, v;  // per sequence: [seq_len, num_kv_heads, head_dim]
};

int64_t num_tokens(const AttentionShape& shape) {
  int64_t n = 0;
  for (const auto& s : shape.seqs) n += s.q_len;
  return n;
}

// q in [-3, 3] makes the softmax peaked enough that a wrong key shows; K/V in [-1, 1].
Logical make_logical(const AttentionShape& shape, std::mt19937_64& rng) {
  Logical l;
  l.q = round_to_bf16(
      random_vector(num_tokens(shape) * shape.num_heads * shape.head_dim, rng, -3.0f, 3.0f));
  for (const auto& s : shape.seqs) {
    l.k.push_back(
        round_to_bf16(random_vector(s.seq_len * shape.num_kv_heads * shape.head_dim, rng)));
    l.v.push_back(
        round_to_bf16(random_vector(s.seq_len * shape.num_kv_heads * shape.head_dim, rng)));
  }
  return l;
}

std::vector<int32_t> shuffled_order(const AttentionShape& shape, std::mt19937_64& rng) {
  std::vector<int32_t> order(static_cast<size_t>(attention_num_blocks(shape)));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

// fp64 attention and the naive bf16 implementation, on the logical layout.
struct References {
  std::vector<double> exact;
  std::vector<float> naive_bf16;
};

// tree: one mask word per query token (PagedAttentionParams::tree_mask), or null for causal.
References reference_attention(const AttentionShape& shape, const Logical& l,
                               const std::vector<uint64_t>* tree = nullptr) {
  const int64_t d = shape.head_dim;
  const int64_t group = shape.num_heads / shape.num_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));  // the f32 scale the op is given
  References r;
  r.exact.resize(l.q.size());
  r.naive_bf16.resize(l.q.size());
  // Each query token's sequence and position.
  std::vector<int64_t> token_seq, token_pos, token_ctx0;
  for (size_t s = 0; s < shape.seqs.size(); ++s) {
    for (int64_t j = 0; j < shape.seqs[s].q_len; ++j) {
      token_seq.push_back(static_cast<int64_t>(s));
      token_pos.push_back(shape.seqs[s].seq_len - shape.seqs[s].q_len + j);
      token_ctx0.push_back(shape.seqs[s].seq_len - shape.seqs[s].q_len);
    }
  }
  const int64_t items = static_cast<int64_t>(token_seq.size()) * shape.num_heads;
  ThreadPool::global().parallel_for(items, 4, [&](int64_t begin, int64_t end) {
    std::vector<double> w;
    std::vector<float> s_bf16;
    std::vector<int64_t> keys;
    std::vector<double> acc(static_cast<size_t>(d));
    std::vector<float> acc32(static_cast<size_t>(d));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t t = item / shape.num_heads;
      const int64_t h = item % shape.num_heads;
      const size_t s = static_cast<size_t>(token_seq[static_cast<size_t>(t)]);
      const int64_t pos = token_pos[static_cast<size_t>(t)];
      const int64_t kvh = h / group;
      const float* q = l.q.data() + (t * shape.num_heads + h) * d;
      w.clear();
      s_bf16.clear();
      keys.clear();
      const int64_t ctx0 = token_ctx0[static_cast<size_t>(t)];
      const int64_t last = tree == nullptr ? pos : shape.seqs[s].seq_len - 1;
      for (int64_t key = 0; key <= last; ++key) {
        if (shape.sliding_window > 0 && pos - key >= shape.sliding_window) continue;
        if (tree != nullptr && key >= ctx0 &&
            (((*tree)[static_cast<size_t>(t)] >> (key - ctx0)) & 1u) == 0)
          continue;
        const float* k = l.k[s].data() + (key * shape.num_kv_heads + kvh) * d;
        double dot = 0.0;
        float dot32 = 0.0f;
        for (int64_t c = 0; c < d; ++c) {
          dot += static_cast<double>(q[c]) * k[c];
          dot32 += q[c] * k[c];
        }
        w.push_back(dot * scale);
        s_bf16.push_back(bf16_round(bf16_round(dot32) * scale));  // matmul, then scaling, in bf16
        keys.push_back(key);
      }
      // fp64.
      const double max = *std::max_element(w.begin(), w.end());
      double sum = 0.0;
      for (double& x : w) sum += (x = std::exp(x - max));
      std::fill(acc.begin(), acc.end(), 0.0);
      for (size_t i = 0; i < keys.size(); ++i) {
        const float* v = l.v[s].data() + (keys[i] * shape.num_kv_heads + kvh) * d;
        for (int64_t c = 0; c < d; ++c) acc[static_cast<size_t>(c)] += w[i] / sum * v[c];
      }
      // Naive bf16: softmax in f32 on bf16 scores, probabilities rounded to bf16, f32 P·V.
      const float max32 = *std::max_element(s_bf16.begin(), s_bf16.end());
      float sum32 = 0.0f;
      for (float& x : s_bf16) sum32 += (x = std::exp(x - max32));
      std::fill(acc32.begin(), acc32.end(), 0.0f);
      for (size_t i = 0; i < keys.size(); ++i) {
        const float prob = bf16_round(s_bf16[i] / sum32);
        const float* v = l.v[s].data() + (keys[i] * shape.num_kv_heads + kvh) * d;
        for (int64_t c = 0; c < d; ++c) acc32[static_cast<size_t>(c)] += prob * v[c];
      }
      const int64_t o = (t * shape.num_heads + h) * d;
      for (int64_t c = 0; c < d; ++c) {
        r.exact[static_cast<size_t>(o + c)] = acc[static_cast<size_t>(c)];
        r.naive_bf16[static_cast<size_t>(o + c)] = bf16_round(acc32[static_cast<size_t>(c)]);
      }
    }
  });
  return r;
}

// The batch on the device, in bf16, with an output buffer (and guard) poisoned.
struct DeviceBatch {
  DeviceBuffer q, k_cache, v_cache, block_tables, seq_lens, query_start, out, workspace;
  int64_t out_elems = 0;

  explicit DeviceBatch(const PagedBatch& b)
      : q(DeviceBuffer::from_host(to_bf16(b.q))),
        k_cache(DeviceBuffer::from_host(to_bf16(b.k_cache))),  // NaN slots stay NaN
        v_cache(DeviceBuffer::from_host(to_bf16(b.v_cache))),
        block_tables(DeviceBuffer::from_host(b.block_tables)),
        seq_lens(DeviceBuffer::from_host(b.seq_lens)),
        query_start(DeviceBuffer::from_host(b.query_start)),
        out((b.q.size() + kGuardElems) * 2),
        workspace(static_cast<size_t>(paged_attention_cuda_workspace_bytes())),
        out_elems(static_cast<int64_t>(b.q.size())) {
    out.poison();
    workspace.zero();
  }

  PagedAttentionParams params(const AttentionShape& shape, const PagedBatch& b) const {
    PagedAttentionParams p = b.params(shape, nullptr);
    p.q = q.get();
    p.k_cache = k_cache.get();
    p.v_cache = v_cache.get();
    p.block_tables = block_tables.get<int32_t>();
    p.seq_lens = seq_lens.get<int32_t>();
    p.query_start = query_start.get<int32_t>();
    p.out = out.get();
    p.workspace = workspace.get();
    p.dtype = DType::kBF16;
    p.kv_dtype = DType::kBF16;
    return p;
  }

  // The output as f32; fails when the guard past its end was written.
  ::testing::AssertionResult download(std::vector<float>* result) const {
    const auto bits = out.to_host<uint16_t>();
    for (size_t i = static_cast<size_t>(out_elems); i < bits.size(); ++i) {
      if (bits[i] != kPoisonBits) {
        return ::testing::AssertionFailure()
               << "guard element " << i - static_cast<size_t>(out_elems)
               << " past the output was written";
      }
    }
    result->resize(static_cast<size_t>(out_elems));
    for (size_t i = 0; i < result->size(); ++i) (*result)[i] = bf16_bits_to_f32(bits[i]);
    return ::testing::AssertionSuccess();
  }
};

std::vector<float> run_cpu_twin(const AttentionShape& shape, const PagedBatch& batch) {
  std::vector<float> out(batch.q.size());
  testing::poison(out);
  paged_attention_cpu(batch.params(shape, out.data()));
  return out;
}

template <typename T>
double max_abs_error(const std::vector<T>& got, const std::vector<double>& exact) {
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = std::fabs(static_cast<double>(got[i]) - exact[i]);
    if (!(e <= worst)) worst = e;  // NaN propagates as the worst error
  }
  return worst;
}

std::string describe(const AttentionShape& shape) {
  std::string s = "seqs";
  for (const auto& q : shape.seqs)
    s += " (" + std::to_string(q.seq_len) + ", " + std::to_string(q.q_len) + ")";
  return s + ", heads " + std::to_string(shape.num_heads) + "/" +
         std::to_string(shape.num_kv_heads) + ", head_dim " + std::to_string(shape.head_dim) +
         ", block " + std::to_string(shape.block_size) + ", window " +
         std::to_string(shape.sliding_window);
}

// With ROOFLINE_ATTENTION_DUMP=DIR, each prefill case also writes its inputs and the kernel's
// output to DIR/NAME.json (the shape, the tree masks) and DIR/NAME.bin (bf16: q, then each
// sequence's k and v in the logical layout, then out) for tests/gpu/attention_sdpa_check.py,
// which checks the output against torch SDPA in fp32 on the GPU host (issue 5's second oracle).
void dump_case(const std::string& name, const AttentionShape& shape, const Logical& l,
               const std::vector<float>& got, const std::vector<uint64_t>* tree = nullptr) {
  const char* dir = std::getenv("ROOFLINE_ATTENTION_DUMP");
  if (dir == nullptr || *dir == '\0') return;
  const std::string base = std::string(dir) + "/" + name;
  std::ofstream json(base + ".json");
  json << "{\"num_heads\": " << shape.num_heads << ", \"num_kv_heads\": " << shape.num_kv_heads
       << ", \"head_dim\": " << shape.head_dim << ", \"sliding_window\": " << shape.sliding_window
       << ", \"seqs\": [";
  for (size_t s = 0; s < shape.seqs.size(); ++s)
    json << (s ? ", " : "") << "[" << shape.seqs[s].seq_len << ", " << shape.seqs[s].q_len << "]";
  json << "], \"tree_mask\": ";
  if (tree == nullptr) {
    json << "null";
  } else {
    json << "[";
    for (size_t t = 0; t < tree->size(); ++t) json << (t ? ", " : "") << (*tree)[t];
    json << "]";
  }
  json << "}\n";
  std::ofstream bin(base + ".bin", std::ios::binary);
  auto write = [&bin](const std::vector<float>& values) {
    std::vector<uint16_t> bits(values.size());
    for (size_t i = 0; i < values.size(); ++i) bits[i] = f32_to_bf16_bits(values[i]);
    bin.write(reinterpret_cast<const char*>(bits.data()),
              static_cast<std::streamsize>(bits.size() * sizeof(uint16_t)));
  };
  write(l.q);
  for (size_t s = 0; s < shape.seqs.size(); ++s) {
    write(l.k[s]);
    write(l.v[s]);
  }
  write(got);
  ASSERT_TRUE(json.good() && bin.good()) << "ROOFLINE_ATTENTION_DUMP: cannot write " << base;
}

class AttentionCudaTest : public ::testing::TestWithParam<size_t> {};

TEST_P(AttentionCudaTest, MatchesCpuTwinAndStaysWithinTwiceNaiveBf16Error) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  const AttentionShape shape = attention_cuda_test_shapes()[GetParam()];
  SCOPED_TRACE(describe(shape));
  auto rng = make_rng(GetParam());
  const Logical l = make_logical(shape, rng);
  const PagedBatch batch = build_paged_batch(shape, l.q, l.k, l.v, shuffled_order(shape, rng));

  const DeviceBatch dev(batch);
  paged_attention_cuda(dev.params(shape, batch), nullptr);
  std::vector<float> got;
  ASSERT_TRUE(dev.download(&got));

  EXPECT_TRUE(all_close(got, run_cpu_twin(shape, batch), kPrefillTwinAtol, kTwinRtol));
  dump_case("case" + std::to_string(GetParam()), shape, l, got);

  const References ref = reference_attention(shape, l);
  const double cuda_error = max_abs_error(got, ref.exact);
  const double naive_error = max_abs_error(ref.naive_bf16, ref.exact);
  EXPECT_LE(cuda_error, kNaiveFactor * naive_error + kNaiveFloor)
      << "max |cuda - fp64| " << cuda_error << " vs max |naive bf16 - fp64| " << naive_error << "; "
      << testing::seed_note();
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionCudaTest,
                         ::testing::Range(size_t{0}, attention_cuda_test_shapes().size()));

// Tree-masked verification batches (the prefill kernel whatever q_len): random token trees of up
// to 64 draft tokens over cached prefixes, against the CPU twin and fp64 with the same masks.
inline std::vector<AttentionShape> attention_cuda_tree_test_shapes() {
  return {
      {{{1000, 17}, {64, 64}, {300, 5}, {20, 1}}, 32, 8, 128, 16, 0},
      {{{255, 64}, {70, 3}}, 14, 2, 64, 5, 100},
      {{{17, 17}, {4097, 9}}, 8, 8, 256, 16, 0},
      {{{33, 2}}, 40, 1, 32, 32, 0},
  };
}

class AttentionCudaTreeTest : public ::testing::TestWithParam<size_t> {};

TEST_P(AttentionCudaTreeTest, MatchesCpuTwinAndStaysWithinTwiceNaiveBf16Error) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  const AttentionShape shape = attention_cuda_tree_test_shapes()[GetParam()];
  SCOPED_TRACE(describe(shape));
  auto rng = make_rng(2000 + GetParam());
  const Logical l = make_logical(shape, rng);
  const PagedBatch batch = build_paged_batch(shape, l.q, l.k, l.v, shuffled_order(shape, rng));
  const std::vector<uint64_t> masks = random_tree_masks(shape, rng);

  const DeviceBatch dev(batch);
  const DeviceBuffer masks_d = DeviceBuffer::from_host(masks);
  PagedAttentionParams p = dev.params(shape, batch);
  p.tree_mask = masks_d.get<uint64_t>();
  paged_attention_cuda(p, nullptr);
  std::vector<float> got;
  ASSERT_TRUE(dev.download(&got));

  std::vector<float> twin(batch.q.size());
  testing::poison(twin);
  PagedAttentionParams cp = batch.params(shape, twin.data());
  cp.tree_mask = masks.data();
  paged_attention_cpu(cp);
  EXPECT_TRUE(all_close(got, twin, kPrefillTwinAtol, kTwinRtol));
  dump_case("tree" + std::to_string(GetParam()), shape, l, got, &masks);

  const References ref = reference_attention(shape, l, &masks);
  const double cuda_error = max_abs_error(got, ref.exact);
  const double naive_error = max_abs_error(ref.naive_bf16, ref.exact);
  EXPECT_LE(cuda_error, kNaiveFactor * naive_error + kNaiveFloor)
      << "max |cuda - fp64| " << cuda_error << " vs max |naive bf16 - fp64| " << naive_error << "; "
      << testing::seed_note();
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionCudaTreeTest,
                         ::testing::Range(size_t{0}, attention_cuda_tree_test_shapes().size()));

// The split-K decode kernel, called four times on one workspace (the split counters must be back
// at 0 after each call): first with the loosest bounds (max_q_len, max_seq_len unknown), then with
// the exact ones, which changes the split count, then through a block table 32k tokens wide with
// its capacity as the context bound, as a CUDA graph planned for --max-model-len 32768 launches
// it: the launch's splits outnumber what the shorter sequences use.
class AttentionCudaDecodeTest : public ::testing::TestWithParam<size_t> {};

TEST_P(AttentionCudaDecodeTest, MatchesCpuTwinOnRepeatedCallsWithAnyBounds) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  const AttentionShape shape = attention_cuda_decode_test_shapes()[GetParam()];
  SCOPED_TRACE(describe(shape));
  auto rng = make_rng(1000 + GetParam());
  const Logical l = make_logical(shape, rng);
  const PagedBatch batch = build_paged_batch(shape, l.q, l.k, l.v, shuffled_order(shape, rng));
  const std::vector<float> twin = run_cpu_twin(shape, batch);
  const References ref = reference_attention(shape, l);
  const double naive_error = max_abs_error(ref.naive_bf16, ref.exact);

  DeviceBatch dev(batch);
  PagedAttentionParams p = dev.params(shape, batch);
  const int64_t wide =
      std::max<int64_t>(batch.max_blocks_per_seq, (int64_t{1} << 15) / shape.block_size);
  std::vector<int32_t> wide_tables(shape.seqs.size() * static_cast<size_t>(wide), -1);
  for (size_t s = 0; s < shape.seqs.size(); ++s)
    std::copy_n(batch.block_tables.begin() + static_cast<int64_t>(s) * batch.max_blocks_per_seq,
                batch.max_blocks_per_seq, wide_tables.begin() + static_cast<int64_t>(s) * wide);
  const DeviceBuffer wide_tables_d = DeviceBuffer::from_host(wide_tables);
  for (int call = 0; call < 4; ++call) {
    SCOPED_TRACE(call == 0  ? "loose bounds"
                 : call < 3 ? "exact bounds"
                            : "a 32k-token table's bound");
    if (call > 0) {
      p.max_q_len = 0;
      p.max_seq_len = 0;
      for (const auto& s : shape.seqs) {
        p.max_q_len = std::max(p.max_q_len, s.q_len);
        p.max_seq_len = std::max(p.max_seq_len, s.seq_len);
      }
    }
    if (call == 3) {
      p.block_tables = wide_tables_d.get<int32_t>();
      p.max_blocks_per_seq = wide;
      p.max_seq_len = wide * shape.block_size;
    }
    dev.out.poison();
    paged_attention_cuda(p, nullptr);
    std::vector<float> got;
    ASSERT_TRUE(dev.download(&got));
    // Both the decode kernel and (loose bounds over 8 queries) the prefill kernel round
    // probabilities to bf16 for their P·V MMAs.
    EXPECT_TRUE(all_close(got, twin, kPrefillTwinAtol, kTwinRtol));
    const double cuda_error = max_abs_error(got, ref.exact);
    EXPECT_LE(cuda_error, kNaiveFactor * naive_error + kNaiveFloor)
        << "max |cuda - fp64| " << cuda_error << " vs max |naive bf16 - fp64| " << naive_error
        << "; " << testing::seed_note();
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionCudaDecodeTest,
                         ::testing::Range(size_t{0}, attention_cuda_decode_test_shapes().size()));

// One warmed-up launch of `shape` captured into a CUDA graph and replayed `replays` times; every
// replay's output (poisoned before it) must match the CPU twin within atol.
void expect_graph_replays_match_twin(const AttentionShape& shape, uint64_t seed, int replays,
                                     double atol) {
  auto rng = make_rng(seed);
  const Logical l = make_logical(shape, rng);
  const PagedBatch batch = build_paged_batch(shape, l.q, l.k, l.v, shuffled_order(shape, rng));
  DeviceBatch dev(batch);
  const std::vector<float> twin = run_cpu_twin(shape, batch);
  cudaStream_t stream;
  ROOFLINE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  paged_attention_cuda(dev.params(shape, batch), stream);  // warm-up: per-kernel attributes
  ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaGraph_t graph;
  ROOFLINE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  paged_attention_cuda(dev.params(shape, batch), stream);
  ROOFLINE_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  ROOFLINE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < replays; ++replay) {
    dev.out.poison();
    ROOFLINE_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<float> got;
    ASSERT_TRUE(dev.download(&got));
    EXPECT_TRUE(all_close(got, twin, atol, kTwinRtol)) << "replay " << replay;
  }
  ROOFLINE_CUDA_CHECK(cudaGraphExecDestroy(exec));
  ROOFLINE_CUDA_CHECK(cudaGraphDestroy(graph));
  ROOFLINE_CUDA_CHECK(cudaStreamDestroy(stream));
}

// The split-K decode kernel: three replays on one workspace (its split counters must be back at 0
// after each).
TEST(AttentionCudaGraphTest, DecodeWithSplitsCapturesAndReplays) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  expect_graph_replays_match_twin({{{4097, 1}, {17, 1}}, 32, 8, 128, 16, 0}, 4321, 3,
                                  kPrefillTwinAtol);
}

// A mixed batch: the prefill kernel.
TEST(AttentionCudaGraphTest, WarmedUpLaunchCapturesAndReplays) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  expect_graph_replays_match_twin({{{17, 1}, {255, 40}, {1000, 1}}, 28, 4, 128, 16, 0}, 1234, 1,
                                  kPrefillTwinAtol);
}

// The decode kernel gathers every key's K/V but this step's before its programmatic-dependent-
// launch wait. Here the kernel before it in the stream (qkv_rope, launched with PDL as in the
// engine) writes this step's keys into slots that hold NaN until then; any of them read before
// that write turns its rows' outputs into NaN. Positions are 0, where rotation is the identity,
// so the written K/V are the logical ones and the CPU twin of the whole batch is the reference.
// Repeated, because a read that races the write loses only some of the time.
void expect_decode_waits_for_this_steps_keys(const AttentionShape& shape, uint64_t seed) {
  SCOPED_TRACE(describe(shape));
  auto rng = make_rng(seed);
  const Logical l = make_logical(shape, rng);
  const PagedBatch batch = build_paged_batch(shape, l.q, l.k, l.v, shuffled_order(shape, rng));
  const std::vector<float> twin = run_cpu_twin(shape, batch);
  const int64_t d = shape.head_dim, kvh = shape.num_kv_heads, bs = shape.block_size;
  const int64_t tokens = num_tokens(shape), width = (shape.num_heads + 2 * kvh) * d;

  // This step's keys: NaN in the cache; their K/V (and the queries) in qkv rows instead.
  PagedBatch stale = batch;
  std::vector<float> qkv(static_cast<size_t>(tokens * width));
  std::vector<int64_t> slots;
  int64_t t = 0;
  for (size_t s = 0; s < shape.seqs.size(); ++s) {
    const int64_t seq_len = shape.seqs[s].seq_len, q_len = shape.seqs[s].q_len;
    for (int64_t j = 0; j < q_len; ++j, ++t) {
      const int64_t pos = seq_len - q_len + j;
      const int64_t slot =
          batch.block_tables[s * batch.max_blocks_per_seq + pos / bs] * bs + pos % bs;
      slots.push_back(slot);
      float* row = qkv.data() + t * width;
      std::copy_n(l.q.data() + t * shape.num_heads * d, shape.num_heads * d, row);
      std::copy_n(l.k[s].data() + pos * kvh * d, kvh * d, row + shape.num_heads * d);
      std::copy_n(l.v[s].data() + pos * kvh * d, kvh * d, row + (shape.num_heads + kvh) * d);
      std::fill_n(stale.k_cache.begin() + slot * kvh * d, kvh * d, std::nanf(""));
      std::fill_n(stale.v_cache.begin() + slot * kvh * d, kvh * d, std::nanf(""));
    }
  }
  const std::vector<uint16_t> stale_k = to_bf16(stale.k_cache), stale_v = to_bf16(stale.v_cache);
  DeviceBatch dev(stale);
  const DeviceBuffer qkv_d = DeviceBuffer::from_host(to_bf16(qkv));
  const DeviceBuffer positions_d =
      DeviceBuffer::from_host(std::vector<int32_t>(static_cast<size_t>(tokens), 0));
  const DeviceBuffer slots_d = DeviceBuffer::from_host(slots);
  const DeviceBuffer inv_freq_d =
      DeviceBuffer::from_host(std::vector<float>(static_cast<size_t>(d / 2), 1.0f));

  QkvRopeParams rope;
  rope.qkv = qkv_d.get();
  rope.q_out = dev.q.get();
  rope.positions = positions_d.get<int32_t>();
  rope.slot_mapping = slots_d.get<int64_t>();
  rope.k_cache = dev.k_cache.get();
  rope.v_cache = dev.v_cache.get();
  rope.inv_freq = inv_freq_d.get<float>();
  rope.num_tokens = tokens;
  rope.num_heads = shape.num_heads;
  rope.num_kv_heads = kvh;
  rope.head_dim = d;
  rope.block_size = bs;
  rope.num_blocks = batch.num_blocks;
  rope.dtype = DType::kBF16;
  rope.kv_dtype = DType::kBF16;
  PagedAttentionParams p = dev.params(shape, batch);
  for (const auto& q : shape.seqs) {
    p.max_q_len = std::max(p.max_q_len, q.q_len);
    p.max_seq_len = std::max(p.max_seq_len, q.seq_len);
  }
  cudaStream_t stream;
  ROOFLINE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (int round = 0; round < 10; ++round) {
    ROOFLINE_CUDA_CHECK(cudaMemcpyAsync(dev.k_cache.get(), stale_k.data(), stale_k.size() * 2,
                                        cudaMemcpyHostToDevice, stream));
    ROOFLINE_CUDA_CHECK(cudaMemcpyAsync(dev.v_cache.get(), stale_v.data(), stale_v.size() * 2,
                                        cudaMemcpyHostToDevice, stream));
    ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(stream));
    dev.out.poison();
    qkv_rope_cuda(rope, stream);
    paged_attention_cuda(p, stream);
    ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<float> got;
    ASSERT_TRUE(dev.download(&got));
    ASSERT_TRUE(all_close(got, twin, kPrefillTwinAtol, kTwinRtol)) << "round " << round;
  }
  ROOFLINE_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST(AttentionCudaDecodeTest, ReadsThisStepsKeysOnlyAfterTheKernelBeforeWroteThem) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  // One query (splits of 16 keys and of several stages), four queries, a key at a block's start.
  expect_decode_waits_for_this_steps_keys(
      {{{1000, 1}, {17, 1}, {300, 4}, {16, 1}}, 32, 8, 128, 16, 0}, 5151);
  expect_decode_waits_for_this_steps_keys({{{4097, 1}, {33, 2}}, 14, 2, 64, 16, 0}, 5152);
  expect_decode_waits_for_this_steps_keys({{{1, 1}, {520, 8}}, 16, 16, 256, 32, 0}, 5153);
}

}  // namespace
}  // namespace roofline
