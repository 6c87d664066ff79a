// paged_attention benchmarks over attention_bench_shapes(). Bytes processed count the compulsory
// traffic: each sequence's K and V over its context once per KV head (GQA heads share them), the
// queries read and the output written; for decode this is the memory-bound ceiling.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>

#include "ops/attention/attention.h"
#include "ops/attention/attention_shapes.h"

namespace roofline {
namespace {

std::vector<float> random_floats(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

void bm_paged_attention(benchmark::State& state) {
  const AttentionShape shape = attention_bench_shapes()[static_cast<size_t>(state.range(0))];
  std::mt19937 rng(1);
  const int64_t slot_elems = shape.num_kv_heads * shape.head_dim;
  int64_t num_tokens = 0;
  int64_t kv_bytes = 0;
  std::vector<std::vector<float>> k, v;
  for (const auto& s : shape.seqs) {
    num_tokens += s.q_len;
    // Window ignored: the bench shapes have none.
    kv_bytes += 2 * s.seq_len * slot_elems * 4;
    k.push_back(random_floats(s.seq_len * slot_elems, rng));
    v.push_back(random_floats(s.seq_len * slot_elems, rng));
  }
  std::vector<int32_t> order(static_cast<size_t>(attention_num_blocks(shape)));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);  // pages scattered, as a running server's are
  const PagedBatch batch = build_paged_batch(
      shape, random_floats(num_tokens * shape.num_heads * shape.head_dim, rng), k, v, order);
  std::vector<float> out(batch.q.size());
  const PagedAttentionParams p = batch.params(shape, out.data());
  for (auto _ : state) {
    paged_attention_cpu(p);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const int64_t q_bytes = 2 * num_tokens * shape.num_heads * shape.head_dim * 4;  // q in, out
  state.SetBytesProcessed(state.iterations() * (kv_bytes + q_bytes));
  state.SetLabel(std::to_string(shape.seqs.size()) + " seqs, seq_len " +
                 std::to_string(shape.seqs[0].seq_len) + ", q_len " +
                 std::to_string(shape.seqs[0].q_len));
}

BENCHMARK(bm_paged_attention)
    ->DenseRange(0, static_cast<int64_t>(attention_bench_shapes().size()) - 1)
    ->UseRealTime();

}  // namespace
}  // namespace roofline
