// qkv_rope_cuda against qkv_rope_cpu on every element of q_out and of every mapped cache slot,
// and byte for byte on every other slot (the cache is poisoned first and must stay so where the
// slot map does not point). Cases cover: tokens 1..733; GQA ratios 1, 4, 7; head_dim 32, 64, 128,
// 256 (vector kernel, every variant) and 48, 80 (generic kernel); 9001 tokens (the ring
// variant walks many tokens per block); misaligned pointers (generic kernel at
// head_dim 128); a token wider than one block (144 heads x 8 lanes); block sizes 16, 5 and 1 with
// partly filled blocks and slots scattered at random; padding tokens (slot -1); positions up to
// 32768; with and without the q/k norm; bf16 and f32. Skips itself without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <ostream>
#include <sstream>
#include <tuple>

#include "ops/qkv_rope/qkv_rope.h"
#include "ops/qkv_rope/qkv_rope_cuda_variant.h"
#include "ops/testing/gpu_dtype_util.h"
#include "ops/testing/gpu_test_util.h"
#include "ops/testing/op_test_util.h"

namespace roofline {
namespace {

using testing::all_close;
using testing::all_equal;
using testing::DeviceBuffer;
using testing::download_as_f32;
using testing::make_rng;
using testing::random_vector;
using testing::round_to;
using testing::seed_note;
using testing::upload_as;

constexpr float kEps = 1e-6f;

// Tolerance atol + rtol·|ref| against the CPU twin in f32 on the same (rounded) inputs:
// - cos / sin: CUDA's sincosf is within 2 ulp, glibc's within 1, so each differs by <= 3 ulp of a
//   value <= 1 (1.8e-7) and the rotation, which may cancel, carries that into the output as an
//   absolute error <= (|x1| + |x2|)·1.8e-7 ~ 1e-6 for inputs in [-2, 2] (normalised heads with
//   weights <= 1.5 stay below ~3 per element).
// - the q/k norm sums up to 256 squares in another order: <= 256·2^-24 = 1.5e-5 relative on the
//   sum, 7.7e-6 on the scale, again carried through the rotation as an absolute error of up to
//   (|x1| + |x2|)·7.7e-6 ~ 4e-5.
// So atol 5e-5, rtol 3e-5 for what stays relative; bf16 outputs add one rounding, <= 2^-8
// relative. v is copied: exact.
constexpr double kAtol = 5e-5;
double rtol_for(DType dtype) { return (dtype == DType::kBF16 ? std::ldexp(1.0, -8) : 0.0) + 3e-5; }

struct Case {
  int64_t num_tokens;
  int64_t num_heads;
  int64_t num_kv_heads;
  int64_t head_dim;
  int64_t block_size;
  bool qk_norm;
  bool misaligned;  // every pointer one element past 16-byte alignment
};

std::ostream& operator<<(std::ostream& os, const Case& c) {
  return os << "tokens" << c.num_tokens << "_h" << c.num_heads << "_kv" << c.num_kv_heads << "_d"
            << c.head_dim << "_bs" << c.block_size << (c.qk_norm ? "_qknorm" : "")
            << (c.misaligned ? "_misaligned" : "");
}

std::vector<float> make_inv_freq(int64_t head_dim, float theta) {
  std::vector<float> f(static_cast<size_t>(head_dim / 2));
  for (size_t i = 0; i < f.size(); ++i) {
    f[i] = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(head_dim));
  }
  return f;
}

// A device copy of `values` in dtype, starting `offset` elements into its buffer.
struct Placed {
  DeviceBuffer buffer;
  int64_t offset_bytes;
  void* get() const { return buffer.get<uint8_t>() + offset_bytes; }
};
Placed place(const std::vector<float>& values, DType dtype, int64_t offset) {
  std::vector<float> padded(static_cast<size_t>(offset), 0.0f);
  padded.insert(padded.end(), values.begin(), values.end());
  return {upload_as(padded, dtype), offset * dtype_size_bytes(dtype)};
}
Placed place_poisoned(int64_t elems, DType dtype, int64_t offset) {
  Placed p{DeviceBuffer(static_cast<size_t>((elems + offset) * dtype_size_bytes(dtype))),
           offset * dtype_size_bytes(dtype)};
  p.buffer.poison();
  return p;
}
// The tensor's bytes (without the leading pad).
std::vector<uint8_t> bytes_of(const Placed& p) {
  auto all = p.buffer.to_host<uint8_t>();
  return std::vector<uint8_t>(all.begin() + p.offset_bytes, all.end());
}

class QkvRopeCudaTest : public ::testing::TestWithParam<std::tuple<Case, DType, int>> {};

TEST_P(QkvRopeCudaTest, MatchesCpuAndWritesOnlyMappedSlots) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  const auto [c, dtype, variant] = GetParam();
  auto rng = make_rng(static_cast<uint64_t>(c.num_tokens * 1000003 + c.num_heads * 1009 +
                                            c.num_kv_heads * 101 + c.head_dim * 7 + c.block_size) *
                          8 +
                      static_cast<uint64_t>(c.qk_norm) * 4 +
                      static_cast<uint64_t>(c.misaligned) * 2 + (dtype == DType::kBF16 ? 1 : 0));
  const int64_t d = c.head_dim;
  const int64_t row = (c.num_heads + 2 * c.num_kv_heads) * d;
  const int64_t kv_row = c.num_kv_heads * d;
  const int64_t num_blocks = (c.num_tokens + c.block_size - 1) / c.block_size + 2;
  const int64_t num_slots = num_blocks * c.block_size;
  const int64_t esize = dtype_size_bytes(dtype);

  const auto qkv = round_to(random_vector(c.num_tokens * row, rng, -2.0f, 2.0f), dtype);
  const auto q_norm = round_to(random_vector(d, rng, 0.5f, 1.5f), DType::kBF16);
  const auto k_norm = round_to(random_vector(d, rng, 0.5f, 1.5f), DType::kBF16);
  const auto inv_freq = make_inv_freq(d, c.num_tokens % 2 ? 500000.0f : 10000.0f);
  std::vector<int32_t> positions;
  std::uniform_int_distribution<int32_t> pos(0, 32768);
  for (int64_t t = 0; t < c.num_tokens; ++t) positions.push_back(pos(rng));
  positions[0] = 32768;
  if (c.num_tokens > 1) positions[1] = 0;
  if (c.num_tokens > 2) positions[2] = 32767;
  // Slots: a random subset of a cache with spare room, so blocks end up partly filled and tokens
  // land anywhere; every fifth token is padding (-1).
  std::vector<int64_t> all_slots(static_cast<size_t>(num_slots));
  std::iota(all_slots.begin(), all_slots.end(), 0);
  std::shuffle(all_slots.begin(), all_slots.end(), rng);
  // Token 3 gets the last slot of the cache (swapped in, so no two tokens share a slot).
  if (num_slots > 3) {
    std::iter_swap(all_slots.begin() + 3,
                   std::find(all_slots.begin(), all_slots.end(), num_slots - 1));
  }
  std::vector<int64_t> slots;
  for (int64_t t = 0; t < c.num_tokens; ++t) {
    slots.push_back(t % 5 == 4 ? -1 : all_slots[static_cast<size_t>(t)]);
  }
  std::vector<bool> mapped(static_cast<size_t>(num_slots), false);
  for (int64_t s : slots) {
    if (s >= 0) mapped[static_cast<size_t>(s)] = true;
  }

  const int64_t offset = c.misaligned ? 1 : 0;
  Placed d_qkv = place(qkv, dtype, offset);
  Placed d_q_out = place_poisoned(c.num_tokens * c.num_heads * d, dtype, offset);
  Placed d_k_cache = place_poisoned(num_slots * kv_row, dtype, offset);
  Placed d_v_cache = place_poisoned(num_slots * kv_row, dtype, offset);
  DeviceBuffer d_positions = DeviceBuffer::from_host(positions);
  DeviceBuffer d_slots = DeviceBuffer::from_host(slots);
  DeviceBuffer d_inv_freq = DeviceBuffer::from_host(inv_freq);
  DeviceBuffer d_q_norm = upload_as(q_norm, DType::kBF16);
  DeviceBuffer d_k_norm = upload_as(k_norm, DType::kBF16);

  QkvRopeParams p;
  p.qkv = d_qkv.get();
  p.q_out = d_q_out.get();
  p.positions = d_positions.get<int32_t>();
  p.slot_mapping = d_slots.get<int64_t>();
  p.k_cache = d_k_cache.get();
  p.v_cache = d_v_cache.get();
  p.inv_freq = d_inv_freq.get<float>();
  if (c.qk_norm) {
    p.q_norm_weight = d_q_norm.get();
    p.k_norm_weight = d_k_norm.get();
    p.norm_weight_dtype = DType::kBF16;
  }
  p.norm_eps = kEps;
  p.num_tokens = c.num_tokens;
  p.num_heads = c.num_heads;
  p.num_kv_heads = c.num_kv_heads;
  p.head_dim = d;
  p.block_size = c.block_size;
  p.num_blocks = num_blocks;
  p.dtype = dtype;
  p.kv_dtype = dtype;
  qkv_rope_cuda_variant(p, variant, nullptr);

  // The CPU twin on the same values (f32 cache, sentinel where nothing is written).
  std::vector<float> q_expected(static_cast<size_t>(c.num_tokens * c.num_heads * d));
  std::vector<float> k_expected(static_cast<size_t>(num_slots * kv_row), -777.0f);
  std::vector<float> v_expected = k_expected;
  QkvRopeParams cp = p;
  cp.qkv = qkv.data();
  cp.q_out = q_expected.data();
  cp.positions = positions.data();
  cp.slot_mapping = slots.data();
  cp.k_cache = k_expected.data();
  cp.v_cache = v_expected.data();
  cp.inv_freq = inv_freq.data();
  if (c.qk_norm) {
    cp.q_norm_weight = q_norm.data();
    cp.k_norm_weight = k_norm.data();
    cp.norm_weight_dtype = DType::kF32;  // the same values
  }
  cp.dtype = DType::kF32;
  cp.kv_dtype = DType::kF32;
  qkv_rope_cpu(cp);

  const auto q_out = testing::decode(bytes_of(d_q_out), dtype);
  EXPECT_TRUE(all_close(q_out, q_expected, kAtol, rtol_for(dtype))) << "q_out";

  // Mapped slots against the CPU; every byte of the others still poison (0xff).
  const auto k_bytes = bytes_of(d_k_cache);
  const auto v_bytes = bytes_of(d_v_cache);
  const auto k_cache = testing::decode(k_bytes, dtype);
  const auto v_cache = testing::decode(v_bytes, dtype);
  std::vector<float> k_got, k_want, v_got, v_want;
  const size_t slot_bytes = static_cast<size_t>(kv_row * esize);
  for (int64_t s = 0; s < num_slots; ++s) {
    const size_t begin = static_cast<size_t>(s * kv_row);
    if (mapped[static_cast<size_t>(s)]) {
      k_got.insert(k_got.end(), k_cache.begin() + begin, k_cache.begin() + begin + kv_row);
      k_want.insert(k_want.end(), k_expected.begin() + begin, k_expected.begin() + begin + kv_row);
      v_got.insert(v_got.end(), v_cache.begin() + begin, v_cache.begin() + begin + kv_row);
      v_want.insert(v_want.end(), v_expected.begin() + begin, v_expected.begin() + begin + kv_row);
    } else {
      for (size_t b = 0; b < slot_bytes; ++b) {
        ASSERT_EQ(k_bytes[static_cast<size_t>(s) * slot_bytes + b], 0xff)
            << "unmapped k slot " << s << " was written; " << seed_note();
        ASSERT_EQ(v_bytes[static_cast<size_t>(s) * slot_bytes + b], 0xff)
            << "unmapped v slot " << s << " was written; " << seed_note();
      }
    }
  }
  EXPECT_TRUE(all_close(k_got, k_want, kAtol, rtol_for(dtype))) << "k cache";
  EXPECT_TRUE(all_equal(v_got, v_want)) << "v cache";
}

// GQA ratios 1, 4, 7; head_dim 32/64/128/256 (vector) and 48/80 (generic); block sizes 16, 5, 1.
const Case kCases[] = {
    {1, 32, 8, 128, 16, false, false},    // llama3-8b decode
    {1, 32, 8, 128, 16, true, false},     // qwen3-8b-like decode
    {3, 28, 4, 128, 16, true, false},     // ratio 7
    {7, 8, 8, 64, 1, false, false},       // ratio 1, block size 1
    {19, 14, 2, 64, 16, true, false},     // qwen2.5-0.5b, ratio 7
    {19, 8, 2, 32, 5, true, false},       // head_dim 32, ratio 4
    {7, 4, 1, 256, 16, true, false},      // head_dim 256, ratio 4
    {733, 32, 8, 128, 16, false, false},  // llama3-8b prefill
    {733, 32, 8, 128, 16, true, false},   // with q/k norm
    {733, 14, 2, 64, 1, false, false},    // block size 1
    {9001, 32, 8, 128, 16, true, false},  // ring: each resident block walks ~20 tokens
    {3, 128, 8, 128, 16, true, false},    // 144 heads x 8 lanes: more than one round per token
    {19, 7, 1, 80, 16, true, false},      // generic head_dim 80, ratio 7
    {7, 4, 4, 48, 1, false, false},       // generic head_dim 48, ratio 1
    {19, 32, 8, 128, 16, true, true},     // misaligned: generic kernel at head_dim 128
    {3, 8, 2, 64, 5, false, true},        // misaligned, no norm
};

INSTANTIATE_TEST_SUITE_P(Cases, QkvRopeCudaTest,
                         ::testing::Combine(::testing::ValuesIn(kCases),
                                            ::testing::Values(DType::kBF16, DType::kF32),
                                            ::testing::Range(0, kQkvRopeNumVariants)),
                         [](const ::testing::TestParamInfo<QkvRopeCudaTest::ParamType>& info) {
                           std::ostringstream os;
                           os << std::get<0>(info.param) << "_"
                              << dtype_name(std::get<1>(info.param)) << "_"
                              << kQkvRopeVariants[std::get<2>(info.param)].name;
                           return os.str();
                         });

}  // namespace
}  // namespace roofline
