// paged_attention_cpu against naive causal softmax attention in double, plus the properties the
// runtime relies on: the page layout does not matter (scattered == contiguous), batching does not
// matter (batch == each sequence alone), and decode of position p equals the last row of a prefill
// of p + 1 tokens; tree masks (the causal triangle as a tree equals causal; a random tree's draft
// token equals a causal decode over its branch). The properties are checked bit for bit: the op
// computes each (token, head) with the same operations in the same order whatever the layout or
// batch.
#include "ops/attention/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "ops/attention/attention_shapes.h"
#include "ops/testing/op_test_util.h"

namespace roofline {
namespace {

using testing::all_close;
using testing::all_equal;
using testing::make_rng;
using testing::poison;
using testing::random_vector;

// Scores are head_dim-term fp32 dots (≤ 128 terms, error ~1e-6 of their size) and the output is a
// convex combination of V rows in [-1, 1], so its error stays at a few 1e-7 even over 733 keys.
constexpr double kAtol = 1e-5;
constexpr double kRtol = 1e-5;

// The logical contents of a batch: each sequence's K/V in position order and every query.
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
  l.q = random_vector(num_tokens(shape) * shape.num_heads * shape.head_dim, rng, -3.0f, 3.0f);
  for (const auto& s : shape.seqs) {
    l.k.push_back(random_vector(s.seq_len * shape.num_kv_heads * shape.head_dim, rng));
    l.v.push_back(random_vector(s.seq_len * shape.num_kv_heads * shape.head_dim, rng));
  }
  return l;
}

std::vector<int32_t> contiguous_order(const AttentionShape& shape) {
  std::vector<int32_t> order(static_cast<size_t>(attention_num_blocks(shape)));
  std::iota(order.begin(), order.end(), 0);
  return order;
}

std::vector<int32_t> shuffled_order(const AttentionShape& shape, std::mt19937_64& rng) {
  auto order = contiguous_order(shape);
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

std::vector<float> run(const AttentionShape& shape, const PagedBatch& batch) {
  std::vector<float> out(batch.q.size());
  poison(out);
  paged_attention_cpu(batch.params(shape, out.data()));
  return out;
}

// Causal (and windowed) softmax attention in double on the logical layout.
std::vector<double> reference_attention(const AttentionShape& shape, const Logical& l) {
  const int64_t d = shape.head_dim;
  const int64_t group = shape.num_heads / shape.num_kv_heads;
  const double scale = 1.0f / std::sqrt(static_cast<float>(d));  // the f32 scale the op is given
  std::vector<double> out(l.q.size());
  int64_t t = 0;
  for (size_t s = 0; s < shape.seqs.size(); ++s) {
    const int64_t seq_len = shape.seqs[s].seq_len;
    const int64_t q_len = shape.seqs[s].q_len;
    for (int64_t j = 0; j < q_len; ++j, ++t) {
      const int64_t pos = seq_len - q_len + j;
      for (int64_t h = 0; h < shape.num_heads; ++h) {
        const int64_t kvh = h / group;
        const float* q = l.q.data() + (t * shape.num_heads + h) * d;
        std::vector<double> w;
        std::vector<int64_t> keys;
        for (int64_t key = 0; key <= pos; ++key) {
          if (shape.sliding_window > 0 && pos - key >= shape.sliding_window) continue;
          const float* k = l.k[s].data() + (key * shape.num_kv_heads + kvh) * d;
          double dot = 0.0;
          for (int64_t c = 0; c < d; ++c) dot += static_cast<double>(q[c]) * k[c];
          w.push_back(dot * scale);
          keys.push_back(key);
        }
        const double max = *std::max_element(w.begin(), w.end());
        double sum = 0.0;
        for (double& x : w) sum += (x = std::exp(x - max));
        double* o = out.data() + (t * shape.num_heads + h) * d;
        for (int64_t c = 0; c < d; ++c) o[c] = 0.0;
        for (size_t i = 0; i < keys.size(); ++i) {
          const float* v = l.v[s].data() + (keys[i] * shape.num_kv_heads + kvh) * d;
          for (int64_t c = 0; c < d; ++c) o[c] += w[i] / sum * v[c];
        }
      }
    }
  }
  return out;
}

class AttentionTest : public ::testing::TestWithParam<size_t> {
 protected:
  AttentionShape shape() const { return attention_test_shapes()[GetParam()]; }
  std::mt19937_64 rng(uint64_t variant) const { return make_rng(GetParam() * 16 + variant); }
};

TEST_P(AttentionTest, MatchesReference) {
  const AttentionShape sh = shape();
  auto r = rng(0);
  const Logical l = make_logical(sh, r);
  const PagedBatch batch = build_paged_batch(sh, l.q, l.k, l.v, shuffled_order(sh, r));
  EXPECT_TRUE(all_close(run(sh, batch), reference_attention(sh, l), kAtol, kRtol));
}

TEST_P(AttentionTest, ScatteredPagesEqualContiguous) {
  const AttentionShape sh = shape();
  auto r = rng(1);
  const Logical l = make_logical(sh, r);
  const auto contiguous = run(sh, build_paged_batch(sh, l.q, l.k, l.v, contiguous_order(sh)));
  const auto scattered = run(sh, build_paged_batch(sh, l.q, l.k, l.v, shuffled_order(sh, r)));
  EXPECT_TRUE(all_equal(scattered, contiguous));
}

TEST_P(AttentionTest, BatchEqualsEachSequenceAlone) {
  const AttentionShape sh = shape();
  auto r = rng(2);
  const Logical l = make_logical(sh, r);
  const auto batched = run(sh, build_paged_batch(sh, l.q, l.k, l.v, shuffled_order(sh, r)));
  const int64_t row = sh.num_heads * sh.head_dim;
  int64_t t0 = 0;
  for (size_t s = 0; s < sh.seqs.size(); ++s) {
    AttentionShape alone = sh;
    alone.seqs = {sh.seqs[s]};
    const int64_t q_len = sh.seqs[s].q_len;
    std::vector<float> q(l.q.begin() + t0 * row, l.q.begin() + (t0 + q_len) * row);
    const auto out =
        run(alone, build_paged_batch(alone, q, {l.k[s]}, {l.v[s]}, shuffled_order(alone, r)));
    std::vector<float> batched_rows(batched.begin() + t0 * row,
                                    batched.begin() + (t0 + q_len) * row);
    EXPECT_TRUE(all_equal(out, batched_rows)) << "sequence " << s;
    t0 += q_len;
  }
}

TEST_P(AttentionTest, DecodeEqualsLastRowOfPrefill) {
  const AttentionShape sh = shape();
  auto r = rng(3);
  const int64_t row = sh.num_heads * sh.head_dim;
  for (size_t s = 0; s < sh.seqs.size(); ++s) {
    const int64_t len = sh.seqs[s].seq_len;
    AttentionShape prefill = sh;
    prefill.seqs = {{len, len}};
    const Logical l = make_logical(prefill, r);
    const auto full =
        run(prefill, build_paged_batch(prefill, l.q, l.k, l.v, shuffled_order(prefill, r)));

    AttentionShape decode = sh;
    decode.seqs = {{len, 1}};
    std::vector<float> last_q(l.q.end() - row, l.q.end());
    const auto one =
        run(decode, build_paged_batch(decode, last_q, l.k, l.v, shuffled_order(decode, r)));
    EXPECT_TRUE(all_equal(one, std::vector<float>(full.end() - row, full.end())))
        << "sequence length " << len;
  }
}

bool fits_tree_mask(const AttentionShape& sh) {
  for (const auto& s : sh.seqs)
    if (s.q_len > kTreeMaxQueries) return false;
  return true;
}

std::vector<float> run_with_tree(const AttentionShape& shape, const PagedBatch& batch,
                                 const std::vector<uint64_t>& masks) {
  std::vector<float> out(batch.q.size());
  poison(out);
  PagedAttentionParams p = batch.params(shape, out.data());
  p.tree_mask = masks.data();
  paged_attention_cpu(p);
  return out;
}

// The causal triangle written as a tree mask gives the causal result bit for bit.
TEST_P(AttentionTest, CausalTreeMaskEqualsCausal) {
  const AttentionShape sh = shape();
  if (!fits_tree_mask(sh)) GTEST_SKIP() << "a sequence brings more than 64 queries";
  auto r = rng(4);
  const Logical l = make_logical(sh, r);
  const PagedBatch batch = build_paged_batch(sh, l.q, l.k, l.v, shuffled_order(sh, r));
  EXPECT_TRUE(all_equal(run_with_tree(sh, batch, causal_tree_masks(sh)), run(sh, batch)));
}

// A random token tree: each draft token gets exactly a causal decode over the cached prefix and
// its own branch (itself and its ancestors), laid out as one contiguous sequence. Attention has
// no notion of position beyond its mask (K already carries RoPE), so the two must agree bit for
// bit.
TEST_P(AttentionTest, TreeMaskEqualsDecodeOfEachBranch) {
  const AttentionShape sh = shape();
  if (!fits_tree_mask(sh)) GTEST_SKIP() << "a sequence brings more than 64 queries";
  if (sh.sliding_window > 0) GTEST_SKIP() << "a branch laid out contiguously moves the window";
  auto r = rng(5);
  const Logical l = make_logical(sh, r);
  const std::vector<uint64_t> masks = random_tree_masks(sh, r);
  const auto tree =
      run_with_tree(sh, build_paged_batch(sh, l.q, l.k, l.v, shuffled_order(sh, r)), masks);
  const int64_t row = sh.num_heads * sh.head_dim;
  const int64_t slot = sh.num_kv_heads * sh.head_dim;
  int64_t t = 0;
  for (size_t s = 0; s < sh.seqs.size(); ++s) {
    const int64_t ctx0 = sh.seqs[s].seq_len - sh.seqs[s].q_len;
    for (int64_t j = 0; j < sh.seqs[s].q_len; ++j, ++t) {
      std::vector<float> k, v;
      auto append = [&](int64_t position) {
        k.insert(k.end(), l.k[s].begin() + position * slot, l.k[s].begin() + (position + 1) * slot);
        v.insert(v.end(), l.v[s].begin() + position * slot, l.v[s].begin() + (position + 1) * slot);
      };
      for (int64_t position = 0; position < ctx0; ++position) append(position);
      for (int64_t i = 0; i < sh.seqs[s].q_len; ++i)
        if ((masks[static_cast<size_t>(t)] >> i) & 1u) append(ctx0 + i);
      AttentionShape branch = sh;
      branch.seqs = {{static_cast<int64_t>(k.size()) / slot, 1}};
      std::vector<float> q(l.q.begin() + t * row, l.q.begin() + (t + 1) * row);
      const auto one =
          run(branch, build_paged_batch(branch, q, {k}, {v}, contiguous_order(branch)));
      EXPECT_TRUE(
          all_equal(one, std::vector<float>(tree.begin() + t * row, tree.begin() + (t + 1) * row)))
          << "sequence " << s << ", draft token " << j;
    }
  }
}

TEST(AttentionDeathTest, TreeMaskBeyondSixtyFourQueriesAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const AttentionShape sh{{{80, 65}}, 2, 1, 16, 16, 0};
  auto r = make_rng(98);
  const Logical l = make_logical(sh, r);
  const PagedBatch batch = build_paged_batch(sh, l.q, l.k, l.v, contiguous_order(sh));
  const std::vector<uint64_t> masks(65, 1);
  EXPECT_DEATH(run_with_tree(sh, batch, masks), "internal check failed");
}

TEST(AttentionDeathTest, TreeQueryThatAttendsNothingAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const AttentionShape sh{{{3, 3}}, 2, 1, 16, 16, 0};  // no prefix: the bits are everything
  auto r = make_rng(97);
  const Logical l = make_logical(sh, r);
  const PagedBatch batch = build_paged_batch(sh, l.q, l.k, l.v, contiguous_order(sh));
  const std::vector<uint64_t> masks = {1, 0, 7};  // query 1 attends no key
  EXPECT_DEATH(run_with_tree(sh, batch, masks), "attends no key");
}

TEST(AttentionDeathTest, BlockIdOutsideTheCacheAborts) {
  // A block table entry >= num_blocks must never be followed into memory past the cache.
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // the op runs on the thread pool
  const AttentionShape sh{{{20, 2}}, 2, 1, 16, 16, 0};
  auto r = make_rng(99);
  const Logical l = make_logical(sh, r);
  PagedBatch batch = build_paged_batch(sh, l.q, l.k, l.v, contiguous_order(sh));
  batch.block_tables[1] = static_cast<int32_t>(batch.num_blocks);  // one past the last block
  std::vector<float> out(batch.q.size());
  EXPECT_DEATH(paged_attention_cpu(batch.params(sh, out.data())), "internal check failed");
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionTest,
                         ::testing::Range(size_t{0}, attention_test_shapes().size()));

}  // namespace
}  // namespace roofline
