// argmax_cuda against argmax_rows_cpu (argmax_cpu per row), exactly: f32 and bf16 logits, batches
// of 1 to 64 rows, vocabularies from 1 to 151936 (on the 16-byte path and not), planted ties
// between positions that different threads and warps scan, NaNs (never chosen), all-NaN rows (-1),
// all -inf rows (0), +inf, and a misaligned pointer. Output poisoned first. Then sample_rows_cuda
// against sample_rows_cpu token for token, inside a CUDA graph too, and a chi-square test of its
// draws (further down). Skips itself without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <tuple>

#include "ops/sampling/sampling.h"
#include "ops/sampling/sampling_test_util.h"
#include "ops/testing/gpu_dtype_util.h"
#include "ops/testing/gpu_test_util.h"
#include "ops/testing/op_test_util.h"

namespace roofline {
namespace {

using testing::DeviceBuffer;
using testing::make_rng;
using testing::random_vector;
using testing::round_to;
using testing::seed_note;
using testing::upload_as;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Runs argmax_cuda on rows x vocab logits placed `offset` elements into their buffer and checks
// every row against the CPU.
void expect_matches_cpu(const std::vector<float>& logits, int64_t rows, int64_t vocab, DType dtype,
                        int64_t offset = 0) {
  // Sized once and copied into (GCC 12 at -O2 warns -Warray-bounds on an insert at offset 0).
  std::vector<float> padded(static_cast<size_t>(offset) + logits.size(), 0.0f);
  std::copy(logits.begin(), logits.end(), padded.begin() + offset);
  DeviceBuffer d_logits = upload_as(padded, dtype);
  DeviceBuffer d_out(static_cast<size_t>(rows) * sizeof(int32_t));
  d_out.poison();
  ArgmaxParams p;
  p.logits = d_logits.get<uint8_t>() + offset * dtype_size_bytes(dtype);
  p.out = d_out.get<int32_t>();
  p.num_rows = rows;
  p.vocab_size = vocab;
  p.dtype = dtype;
  argmax_cuda(p, nullptr);
  const auto got = d_out.to_host<int32_t>();

  std::vector<int32_t> expected(static_cast<size_t>(rows), -2);
  p.logits = logits.data();
  p.out = expected.data();
  p.dtype = DType::kF32;  // logits already hold the dtype-rounded values
  argmax_rows_cpu(p);
  for (int64_t r = 0; r < rows; ++r) {
    ASSERT_EQ(got[static_cast<size_t>(r)], expected[static_cast<size_t>(r)])
        << "row " << r << " of " << rows << ", vocab " << vocab << ", " << dtype_name(dtype)
        << ", offset " << offset << "; " << seed_note();
  }
}

class ArgmaxCudaTest : public ::testing::TestWithParam<std::tuple<DType, int64_t, int64_t>> {};

TEST_P(ArgmaxCudaTest, MatchesCpuWithTiesAndNaNs) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  const auto [dtype, rows, vocab] = GetParam();
  auto rng = make_rng(static_cast<uint64_t>(rows * 1000003 + vocab) * 4 + static_cast<int>(dtype));
  // Rounded to dtype: bf16's 8 significant bits make natural ties common too.
  auto logits = round_to(random_vector(rows * vocab, rng, -20.0f, 20.0f), dtype);
  std::uniform_int_distribution<int64_t> pos(0, vocab - 1);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = logits.data() + r * vocab;
    switch (r % 6) {
      case 0:  // a tie for the maximum at two random positions (often in different warps)
        row[pos(rng)] = 30.0f;
        row[pos(rng)] = 30.0f;
        break;
      case 1:  // a tie at the last element and a random one
        row[vocab - 1] = 25.0f;
        row[pos(rng)] = 25.0f;
        break;
      case 2:  // NaNs sprinkled, one where the maximum would be
        for (int k = 0; k < 5; ++k) row[pos(rng)] = kNaN;
        row[0] = kNaN;
        break;
      case 3:  // every logit NaN: -1
        for (int64_t i = 0; i < vocab; ++i) row[i] = kNaN;
        break;
      case 4:  // every logit -inf: the first index
        for (int64_t i = 0; i < vocab; ++i) row[i] = -kInf;
        break;
      default:  // +inf twice, NaN in between
        row[pos(rng)] = kInf;
        row[pos(rng)] = kNaN;
        row[pos(rng)] = kInf;
        break;
    }
  }
  expect_matches_cpu(logits, rows, vocab, dtype);
  // Misaligned by one element: the one-element path.
  expect_matches_cpu(logits, rows, vocab, dtype, 1);
}

INSTANTIATE_TEST_SUITE_P(Shapes, ArgmaxCudaTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16),
                                            ::testing::Values(1, 3, 7, 19, 64),
                                            ::testing::Values(1, 7, 67, 1000, 32000, 128256,
                                                              151936)),
                         [](const ::testing::TestParamInfo<ArgmaxCudaTest::ParamType>& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) + "_rows" +
                                  std::to_string(std::get<1>(info.param)) + "_vocab" +
                                  std::to_string(std::get<2>(info.param));
                         });

// Every row's maximum planted at each position of a pack and of a warp's span in turn, with an
// equal value later in the row: the lower index must win wherever the two fall.
TEST(ArgmaxCudaTest, LowestIndexWinsTiesAtEveryPosition) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  constexpr int64_t kVocab = 4096 + 8;
  constexpr int64_t kRows = 300;
  auto rng = make_rng(11);
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    auto logits = round_to(random_vector(kRows * kVocab, rng, -1.0f, 1.0f), dtype);
    for (int64_t r = 0; r < kRows; ++r) {
      const int64_t first = r * 13 % kVocab;
      const int64_t second = (first + 1 + r * 7919) % kVocab;
      logits[static_cast<size_t>(r * kVocab + first)] = 2.0f;
      logits[static_cast<size_t>(r * kVocab + second)] = 2.0f;
    }
    expect_matches_cpu(logits, kRows, kVocab, dtype);
  }
}

TEST(ArgmaxCudaTest, ZeroRowsLaunchesNothing) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  ArgmaxParams p;
  p.vocab_size = 10;
  argmax_cuda(p, nullptr);
  ROOFLINE_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace roofline

// ---------------------------------------------------------------------------------------------
// sample_rows_cuda against sample_rows_cpu, token for token: f32 and bf16 logits, vocabularies
// from 1 to 2^18, batches of 1 to 256 rows whose parameters all differ (greedy, fast and large
// top-k, top-p alone, min-p, plain temperature, penalties with edit lists, logprobs), rows made
// to hit every path of the kernel (a flat row, coarse ties, NaN rows, bad parameters), many steps
// (so many uniforms), and once inside a CUDA graph whose row parameters change between replays.
// Then a chi-square test per (parameter set, vocabulary) that >= 10^5 GPU draws follow the
// filtered distribution computed here in double.

namespace roofline {
namespace {

using sampling::TokenEdit;

using GpuRows = testing::SampleRowsResult;

constexpr int32_t kTop = 5;

// Device copies of one batch, reusable for several launches (the graph test rewrites rows).
// The batch on the device; p.workspace lets small batches split their rows across vocabulary
// slices (sample_rows_split), as the engine's launches do; clear it for one block per row.
struct DeviceBatch {
  DeviceBuffer logits, rows, edits, tokens, errors, nonfinite, logprobs, top_ids, top_logprobs,
      workspace;
  SampleRowsParams p;
  DeviceBatch(const std::vector<float>& logits_f32, int64_t vocab, DType dtype,
              const std::vector<SamplingRowParams>& row_params,
              const std::vector<TokenEdit>& edit_list)
      : logits(upload_as(logits_f32, dtype)),
        rows(DeviceBuffer::from_host(row_params)),
        edits(DeviceBuffer::from_host(edit_list)),
        tokens(row_params.size() * 4),
        errors(row_params.size() * 4),
        nonfinite(row_params.size() * 4),
        logprobs(row_params.size() * 4),
        top_ids(row_params.size() * kTop * 4),
        top_logprobs(row_params.size() * kTop * 4),
        workspace(static_cast<size_t>(sample_rows_cuda_workspace_bytes())) {
    for (DeviceBuffer* b : {&tokens, &errors, &nonfinite, &logprobs, &top_ids, &top_logprobs})
      b->poison();
    workspace.zero();
    p.workspace = workspace.get();
    p.logits = logits.get();
    p.rows = rows.get<SamplingRowParams>();
    p.edits = edit_list.empty() ? nullptr : edits.get<TokenEdit>();
    p.num_edits = static_cast<int64_t>(edit_list.size());
    p.num_rows = static_cast<int64_t>(row_params.size());
    p.vocab_size = vocab;
    p.dtype = dtype;
    p.tokens = tokens.get<int32_t>();
    p.errors = errors.get<uint32_t>();
    p.nonfinite_counts = nonfinite.get<int32_t>();
    p.logprobs = logprobs.get<float>();
    p.top_ids = top_ids.get<int32_t>();
    p.top_logprobs = top_logprobs.get<float>();
    p.max_top_logprobs = kTop;
  }
  GpuRows results() const {
    return {tokens.to_host<int32_t>(), errors.to_host<uint32_t>(), nonfinite.to_host<int32_t>(),
            logprobs.to_host<float>(), top_ids.to_host<int32_t>(), top_logprobs.to_host<float>()};
  }
};

// The CPU twin over the batch, rows split across host threads (they are independent; at a 128k
// vocabulary the twin takes milliseconds per row).
GpuRows run_cpu(const std::vector<float>& logits, int64_t vocab,
                const std::vector<SamplingRowParams>& rows, const std::vector<TokenEdit>& edits) {
  const size_t n = rows.size();
  GpuRows r = GpuRows::poisoned(n, kTop);
  const size_t workers =
      std::max<size_t>(1, std::min<size_t>(n, std::thread::hardware_concurrency()));
  std::vector<std::thread> threads;
  for (size_t w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      const size_t begin = n * w / workers, end = n * (w + 1) / workers;
      if (begin == end) return;
      SampleRowsParams p;
      p.logits = logits.data() + begin * static_cast<size_t>(vocab);
      p.rows = rows.data() + begin;
      p.edits = edits.data();
      p.num_edits = static_cast<int64_t>(edits.size());
      p.num_rows = static_cast<int64_t>(end - begin);
      p.vocab_size = vocab;
      r.bind(p, begin, kTop);
      sample_rows_cpu(p);
    });
  }
  for (auto& t : threads) t.join();
  return r;
}

void expect_same(const GpuRows& gpu, const GpuRows& cpu, const std::vector<SamplingRowParams>& rows,
                 const std::string& what) {
  for (size_t r = 0; r < rows.size(); ++r) {
    const std::string where =
        what + ", row " + std::to_string(r) + " (temperature " +
        std::to_string(rows[r].temperature) + ", top_k " + std::to_string(rows[r].top_k) +
        ", top_p " + std::to_string(rows[r].top_p) + ", min_p " + std::to_string(rows[r].min_p) +
        ", edits " + std::to_string(rows[r].edit_count) + "); " + seed_note();
    ASSERT_EQ(gpu.errors[r], cpu.errors[r]) << where;
    ASSERT_EQ(gpu.tokens[r], cpu.tokens[r]) << where;
    ASSERT_EQ(gpu.nonfinite[r], cpu.nonfinite[r]) << where;
    if (cpu.errors[r] != 0 || rows[r].num_top_logprobs < 0) continue;
    EXPECT_NEAR(gpu.logprobs[r], cpu.logprobs[r], 1e-4 + 1e-5 * std::fabs(cpu.logprobs[r]))
        << where;
    for (int j = 0; j < kTop; ++j) {
      const size_t s = r * kTop + static_cast<size_t>(j);
      ASSERT_EQ(gpu.top_ids[s], cpu.top_ids[s]) << where << " alternative " << j;
      if (cpu.top_ids[s] >= 0)
        EXPECT_NEAR(gpu.top_logprobs[s], cpu.top_logprobs[s],
                    1e-4 + 1e-5 * std::fabs(cpu.top_logprobs[s]))
            << where;
      else
        EXPECT_EQ(gpu.top_logprobs[s], -kInf) << where;
    }
  }
}

// Launches the batch split across vocabulary slices (with its workspace), then one block per
// row (without), every output poisoned before each launch, and checks both against the twin.
void expect_split_and_unsplit_same(DeviceBatch& batch, const GpuRows& cpu,
                                   const std::vector<SamplingRowParams>& rows,
                                   const std::string& what) {
  for (void* workspace : {batch.workspace.get(), static_cast<void*>(nullptr)}) {
    for (DeviceBuffer* b : {&batch.tokens, &batch.errors, &batch.nonfinite, &batch.logprobs,
                            &batch.top_ids, &batch.top_logprobs})
      b->poison();
    batch.p.workspace = workspace;
    sample_rows_cuda(batch.p, nullptr);
    expect_same(batch.results(), cpu, rows,
                what + (workspace != nullptr ? ", split" : ", one block per row"));
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// Steps 0 .. steps - 1 of the batch (new uniforms each), uploaded into its row buffer, each
// split and one block per row against the twin.
void expect_steps_same(DeviceBatch& batch, const std::vector<float>& logits, int64_t vocab,
                       std::vector<SamplingRowParams>& rows, const std::vector<TokenEdit>& edits,
                       int steps, const std::string& what) {
  for (int step = 0; step < steps; ++step) {
    for (auto& r : rows) r.step = step;
    ROOFLINE_CUDA_CHECK(cudaMemcpy(batch.rows.get(), rows.data(),
                                   rows.size() * sizeof(SamplingRowParams),
                                   cudaMemcpyHostToDevice));
    expect_split_and_unsplit_same(batch, run_cpu(logits, vocab, rows, edits), rows,
                                  what + " step " + std::to_string(step));
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// A row's parameters from a list that reaches every path of the kernel.
SamplingRowParams row_config(int which, std::mt19937_64& rng, int64_t vocab) {
  SamplingRowParams r;
  std::uniform_real_distribution<float> t(0.3f, 1.8f);
  r.temperature = t(rng);
  r.seed = rng();
  r.step = static_cast<int64_t>(rng() % 1000);
  r.num_top_logprobs = static_cast<int32_t>(which % 7) - 1;  // -1 .. 5
  switch (which % 14) {
    case 0:
      r.temperature = 0.0f;
      break;  // greedy
    case 1:
      r.top_k = 1;
      break;  // argmax of s
    case 2:
      r.top_k = 50;
      r.top_p = 0.9f;
      break;  // the serving default
    case 3:
      r.top_k = 512;
      break;  // the largest fast top-k
    case 4:
      r.top_k = 513;
      r.top_p = 0.95f;
      break;  // radix top-k, gathered
    case 5:
      r.top_k = 3000;
      r.min_p = 0.01f;
      break;  // radix top-k past kCap
    case 6:
      r.top_p = 0.9f;
      break;  // nucleus alone
    case 7:
      r.top_p = 0.5f;
      r.min_p = 0.2f;
      break;
    case 8:
      r.min_p = 0.05f;
      break;  // min-p alone: radix draw
    case 9:
      break;  // plain temperature
    case 10:
      r.top_k = 40;
      r.min_p = 0.1f;
      r.temperature = 0.05f;
      break;  // cold
    case 11:
      r.top_k = 20;
      r.top_p = 0.999f;
      r.temperature = 8.0f;
      break;  // hot
    case 12:
      r.top_p = 0.2f;
      r.temperature = 3.0f;
      break;
    default:
      r.top_k = static_cast<int32_t>(vocab);
      r.top_p = 0.8f;
      break;  // k = vocab: off
  }
  if (which % 3 == 1) {
    r.repetition_penalty = 1.1f + 0.1f * static_cast<float>(which % 5);
    r.frequency_penalty = 0.3f;
    r.presence_penalty = -0.2f;
  }
  return r;
}

// Random logits with planted ties; every 11th row flat (all equal) and every 13th coarse (values
// from a handful), so pivots overflow and the radix selection resolves ties by id.
std::vector<float> make_logits(int64_t rows, int64_t vocab, DType dtype, std::mt19937_64& rng) {
  std::vector<float> logits = random_vector(rows * vocab, rng, -8.0f, 8.0f);
  std::uniform_int_distribution<int64_t> pos(0, vocab - 1);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = logits.data() + r * vocab;
    if (r % 11 == 5) {
      for (int64_t i = 0; i < vocab; ++i) row[i] = 1.5f;
    } else if (r % 13 == 6) {
      for (int64_t i = 0; i < vocab; ++i) row[i] = static_cast<float>(static_cast<int>(row[i]) / 3);
    } else {
      for (int k = 0; k < 8; ++k) row[pos(rng)] = 9.0f;  // a tie for the top
    }
  }
  return round_to(logits, dtype);
}

// Edit lists: a few distinct tokens per penalised row, some biased, some prompt-only.
std::vector<TokenEdit> make_edits(std::vector<SamplingRowParams>& rows, int64_t vocab,
                                  std::mt19937_64& rng) {
  std::vector<TokenEdit> edits;
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(vocab - 1));
  for (size_t r = 0; r < rows.size(); ++r) {
    const int want = static_cast<int>(
        std::min<int64_t>(vocab, r % 4 == 0 ? 0 : 1 + static_cast<int64_t>(rng() % 60)));
    std::set<int32_t> used;
    rows[r].edit_begin = static_cast<int64_t>(edits.size());
    while (static_cast<int>(used.size()) < want) {
      const int32_t t = tok(rng);
      if (!used.insert(t).second) continue;
      const int kind = static_cast<int>(rng() % 4);
      edits.push_back(TokenEdit{t,
                                kind == 0   ? 5.0f
                                : kind == 1 ? -100.0f
                                            : 0.0f,
                                kind >= 2 ? static_cast<int32_t>(rng() % 4) : 0,
                                kind == 3 ? 1 : 0});
    }
    rows[r].edit_count = want;
  }
  return edits;
}

class SampleRowsCudaTest : public ::testing::TestWithParam<std::tuple<DType, int64_t, int64_t>> {};

TEST_P(SampleRowsCudaTest, SameTokensAsTheCpuTwin) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  const auto [dtype, num_rows, vocab] = GetParam();
  auto rng = make_rng(static_cast<uint64_t>(num_rows * 1000003 + vocab) * 4 +
                      static_cast<int>(dtype) + 99);
  std::vector<float> logits = make_logits(num_rows, vocab, dtype, rng);
  std::vector<SamplingRowParams> rows;
  for (int64_t r = 0; r < num_rows; ++r)
    rows.push_back(row_config(static_cast<int>(r + rng() % 14), rng, vocab));
  std::vector<TokenEdit> edits = make_edits(rows, vocab, rng);
  // A NaN row, an inf row and a row with bad parameters, when there is room.
  if (num_rows >= 3) {
    logits[static_cast<size_t>(vocab / 2)] = kNaN;
    logits[static_cast<size_t>(vocab + vocab - 1)] = -kInf;
    rows[2].top_p = 0.0f;
  }
  // Bad edit lists, when there is room: a token past the vocabulary, a token listed twice, a
  // range past the edit array (each row's own error, the others unaffected).
  if (num_rows >= 8 && vocab >= 2) {
    if (rows[5].edit_count > 0)
      edits[static_cast<size_t>(rows[5].edit_begin)].token = static_cast<int32_t>(vocab + 5);
    if (rows[6].edit_count > 1) {
      const size_t b = static_cast<size_t>(rows[6].edit_begin);
      edits[b + 1].token = edits[b].token;
    }
    rows[7].edit_begin = static_cast<int64_t>(edits.size()) + 10;
  }
  // Entries with an invalid field: a negative count, in_prompt 2, a NaN bias.
  if (num_rows >= 12) {
    auto first_edit = [&](size_t r) -> TokenEdit* {
      return rows[r].edit_count > 0 ? &edits[static_cast<size_t>(rows[r].edit_begin)] : nullptr;
    };
    if (TokenEdit* e = first_edit(9)) e->generated_count = -1;
    if (TokenEdit* e = first_edit(10)) e->in_prompt = 2;
    if (TokenEdit* e = first_edit(11)) e->bias = kNaN;
  }
  DeviceBatch batch(logits, vocab, dtype, rows, edits);
  const GpuRows cpu = run_cpu(logits, vocab, rows, edits);
  // Rows split across vocabulary slices where the shape allows (every batch here is small enough
  // at a vocabulary of 8192 and up), then one block per row, each against the twin.
  ASSERT_EQ(sample_rows_split(num_rows, vocab, 132, true).slices > 1, vocab >= 8192);
  expect_split_and_unsplit_same(batch, cpu, rows, dtype_name(dtype));
}

INSTANTIATE_TEST_SUITE_P(Shapes, SampleRowsCudaTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16),
                                            ::testing::Values(1, 3, 29, 64),
                                            ::testing::Values(1, 7, 1000, 32000, 128256, 151936,
                                                              262144)),
                         [](const ::testing::TestParamInfo<SampleRowsCudaTest::ParamType>& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) + "_rows" +
                                  std::to_string(std::get<1>(info.param)) + "_vocab" +
                                  std::to_string(std::get<2>(info.param));
                         });

// Decode batches at a 128k vocabulary over several steps (new uniforms each step, the same
// logits), and the misaligned one-element path.
TEST(SampleRowsCudaTest, ManyStepsAtLargeBatches) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  constexpr int64_t kVocab = 128256;
  auto rng = make_rng(5);
  const std::tuple<DType, int64_t, int> cases[] = {
      {DType::kBF16, 256, 3}, {DType::kF32, 64, 3}, {DType::kBF16, 16, 25}};
  for (const auto& [dtype, num_rows, steps] : cases) {
    std::vector<float> logits = make_logits(num_rows, kVocab, dtype, rng);
    std::vector<SamplingRowParams> rows;
    for (int64_t r = 0; r < num_rows; ++r)
      rows.push_back(row_config(static_cast<int>(r), rng, kVocab));
    std::vector<TokenEdit> edits = make_edits(rows, kVocab, rng);
    DeviceBatch batch(logits, kVocab, dtype, rows, edits);
    for (int step = 0; step < steps; ++step) {
      for (auto& r : rows) r.step += 1;
      ROOFLINE_CUDA_CHECK(cudaMemcpy(batch.rows.get(), rows.data(),
                                     rows.size() * sizeof(SamplingRowParams),
                                     cudaMemcpyHostToDevice));
      batch.tokens.poison();
      sample_rows_cuda(batch.p, nullptr);
      expect_same(batch.results(), run_cpu(logits, kVocab, rows, edits), rows,
                  std::string(dtype_name(dtype)) + " batch " + std::to_string(num_rows) + " step " +
                      std::to_string(step));
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  // vocab - 1 per row, starting one element into the buffer: neither the row length nor the
  // pointer allows 16-byte loads.
  const int64_t odd = kVocab - 1;
  for (const DType dtype : {DType::kBF16, DType::kF32}) {
    std::vector<float> logits = make_logits(9, odd, dtype, rng);
    std::vector<SamplingRowParams> rows;
    for (int64_t r = 0; r < 9; ++r) rows.push_back(row_config(static_cast<int>(r + 1), rng, odd));
    std::vector<TokenEdit> edits = make_edits(rows, odd, rng);
    std::vector<float> padded = logits;
    padded.insert(padded.begin(), 0.0f);
    DeviceBuffer d_padded = upload_as(padded, dtype);
    DeviceBatch batch(logits, odd, dtype, rows, edits);
    batch.p.logits = d_padded.get<uint8_t>() + dtype_size_bytes(dtype);
    sample_rows_cuda(batch.p, nullptr);
    expect_same(batch.results(), run_cpu(logits, odd, rows, edits), rows, "misaligned");
  }
}

// Edit lists longer than the block's 512 threads (a long generation's penalty history): the
// kernel takes each thread's first entry ahead of the candidate gather and the rest in a loop,
// so both must be seen. Rows of the fast top-k path (50, 512), the radix path (513) and greedy,
// split across slices and one block per row, each against the twin.
TEST(SampleRowsCudaTest, EditListsLongerThanABlock) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  constexpr int64_t kVocab = 128256;
  auto rng = make_rng(8);
  for (const DType dtype : {DType::kBF16, DType::kF32}) {
    constexpr int64_t kRows = 6;
    std::vector<float> logits = make_logits(kRows, kVocab, dtype, rng);
    std::vector<SamplingRowParams> rows;
    std::vector<TokenEdit> edits;
    std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(kVocab - 1));
    const int32_t top_ks[kRows] = {50, 512, 50, 513, 0, 50};
    for (int64_t r = 0; r < kRows; ++r) {
      SamplingRowParams row = row_config(2, rng, kVocab);  // top-k 50, top-p 0.9
      row.top_k = top_ks[r];
      if (r == 4) row.temperature = 0.0f;
      row.num_top_logprobs = r % 2 == 0 ? -1 : 2;  // the lean pass 1, and the one with logprobs
      row.repetition_penalty = 1.3f;
      row.frequency_penalty = 0.4f;
      row.presence_penalty = 0.2f;
      row.edit_begin = static_cast<int64_t>(edits.size());
      const int want = 513 + static_cast<int>(r) * 300;
      std::set<int32_t> used;
      while (static_cast<int>(used.size()) < want) {
        const int32_t t = tok(rng);
        if (!used.insert(t).second) continue;
        const int kind = static_cast<int>(rng() % 4);
        // +8 lifts an edited token into the top of its row, so edited entries from both the
        // prefetched first entry and the loop become candidates.
        edits.push_back(TokenEdit{t, kind == 0 ? 8.0f : 0.0f, static_cast<int32_t>(rng() % 3),
                                  kind == 3 ? 1 : 0});
      }
      row.edit_count = want;
      rows.push_back(row);
    }
    DeviceBatch batch(logits, kVocab, dtype, rows, edits);
    expect_split_and_unsplit_same(batch, run_cpu(logits, kVocab, rows, edits), rows,
                                  std::string(dtype_name(dtype)) + " long edits");
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// The fast top-k path's pivot resolves only a key's top 16 bits for bf16 logits (all of a bf16
// value's bits), so edited values within the k-th value's bf16 step, above and below it, reach
// the candidates and must be ranked exactly. Rows of positive and of negative logits (whose order
// keys are inverted), top-k 50 and 200, edits biased to land a fraction of a step around the k-th
// largest raw value, and a few tied with it; many steps (new uniforms each), split across slices
// and one block per row, each against the twin. f32 rows run the same edits through three rounds.
TEST(SampleRowsCudaTest, EditedValuesWithinTheKthValuesBf16Step) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  constexpr int64_t kVocab = 32000, kRows = 12;
  constexpr int kSteps = 24;
  auto rng = make_rng(12);
  for (const DType dtype : {DType::kBF16, DType::kF32}) {
    std::vector<float> logits;
    std::vector<SamplingRowParams> rows;
    std::vector<TokenEdit> edits;
    for (int64_t r = 0; r < kRows; ++r) {
      const bool negative = r % 2 == 1;
      std::vector<float> row = round_to(
          random_vector(kVocab, rng, negative ? -14.0f : 1.0f, negative ? -1.0f : 14.0f), dtype);
      SamplingRowParams p;
      p.temperature = 0.7f + 0.1f * static_cast<float>(r % 3);
      p.top_k = r % 3 == 2 ? 200 : 50;
      p.seed = rng();
      p.edit_begin = static_cast<int64_t>(edits.size());
      // The k-th largest raw value and its bf16 step (ulp).
      std::vector<float> sorted = row;
      std::nth_element(sorted.begin(), sorted.begin() + (p.top_k - 1), sorted.end(),
                       std::greater<float>());
      const float v_k = sorted[static_cast<size_t>(p.top_k - 1)];
      int exp = 0;
      std::frexp(v_k, &exp);
      const float step = std::ldexp(1.0f, exp - 8);  // 8 significant bits in bf16
      // Edited tokens from below the k-th value: biased to v_k + f * step, f in (-1, 1), and
      // two to v_k exactly (ties with the k-th, ranked by id).
      const float fractions[] = {-0.9f, -0.6f, -0.3f, -0.05f, 0.0f, 0.0f, 0.05f, 0.3f, 0.6f, 0.9f};
      std::set<int32_t> used;
      std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(kVocab - 1));
      for (const float f : fractions) {
        int32_t t = tok(rng);
        while (row[static_cast<size_t>(t)] >= v_k || !used.insert(t).second) t = tok(rng);
        const float target = v_k + f * step;
        edits.push_back(TokenEdit{t, target - row[static_cast<size_t>(t)], 0, 0});
      }
      p.edit_count = static_cast<int32_t>(std::size(fractions));
      rows.push_back(p);
      logits.insert(logits.end(), row.begin(), row.end());
    }
    DeviceBatch batch(logits, kVocab, dtype, rows, edits);
    expect_steps_same(batch, logits, kVocab, rows, edits, kSteps, dtype_name(dtype));
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// Pass 1 leaves each stripe (the packs one thread streams) its best pack and the largest maximum
// of its other packs, and the fast top-k gather reads only that one pack of a stripe whose other
// packs stay below the pivot's floor. Here the top tokens come in pairs two packs of one stripe
// apart (packs t and t + 512 lie in the first slice of every split used here, in one thread's
// stripe), some tied with their pair and some with an edit in the first pack (which pass 1 then
// reads token by token): a gather that read one pack of such a stripe would miss half of the top
// tokens. Batches of 1 (16 slices), 64 (2) and 256 (unsplit), top-k 50 below the 80 planted
// tokens, several steps (new uniforms each), split and one block per row, against the twin.
TEST(SampleRowsCudaTest, TopTokensInSeveralPacksOfAStripe) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  constexpr int64_t kVocab = 128256;
  constexpr int kPairs = 40, kSteps = 4;
  auto rng = make_rng(13);
  for (const DType dtype : {DType::kBF16, DType::kF32}) {
    const int64_t n = 16 / dtype_size_bytes(dtype);  // tokens of a 16-byte pack
    for (const int64_t num_rows : {int64_t{1}, int64_t{64}, int64_t{256}}) {
      std::vector<float> logits;
      std::vector<SamplingRowParams> rows;
      std::vector<TokenEdit> edits;
      std::uniform_real_distribution<float> high(2.0f, 3.0f);
      for (int64_t r = 0; r < num_rows; ++r) {
        std::vector<float> row = random_vector(kVocab, rng, -12.0f, -10.0f);
        SamplingRowParams p;
        p.temperature = 0.8f;
        p.top_k = 50;
        p.repetition_penalty = 1.2f;
        p.seed = rng();
        p.edit_begin = static_cast<int64_t>(edits.size());
        // Stripes shift + j: below 472, so packs t and t + 512 share the first slice of 16 (1004
        // bf16 packs, 2008 f32) and of 2.
        const int64_t shift = r % 400;
        for (int j = 0; j < kPairs; ++j) {
          const int64_t t = shift + j;
          const int64_t a = t * n + j % n, b = (t + 512) * n + (3 * j) % n;
          row[static_cast<size_t>(a)] = high(rng);
          row[static_cast<size_t>(b)] = j % 7 == 3 ? row[static_cast<size_t>(a)] : high(rng);
          if (j % 5 == 0) edits.push_back(TokenEdit{static_cast<int32_t>(a), 0.5f, 1, 0});
        }
        p.edit_count = static_cast<int32_t>(static_cast<int64_t>(edits.size()) - p.edit_begin);
        rows.push_back(p);
        row = round_to(row, dtype);
        logits.insert(logits.end(), row.begin(), row.end());
      }
      DeviceBatch batch(logits, kVocab, dtype, rows, edits);
      expect_steps_same(batch, logits, kVocab, rows, edits, kSteps,
                        std::string(dtype_name(dtype)) + " batch " + std::to_string(num_rows));
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// Captured once, replayed with new row parameters (a memcpy into the same device buffer before
// each replay, as a runtime updates its fixed buffers): the graph reads them at replay time.
TEST(SampleRowsCudaTest, InsideACudaGraph) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  constexpr int64_t kRows = 64, kVocab = 32000;
  auto rng = make_rng(6);
  std::vector<float> logits = make_logits(kRows, kVocab, DType::kBF16, rng);
  std::vector<SamplingRowParams> rows;
  for (int64_t r = 0; r < kRows; ++r) rows.push_back(row_config(static_cast<int>(r), rng, kVocab));
  std::vector<TokenEdit> edits = make_edits(rows, kVocab, rng);
  DeviceBatch batch(logits, kVocab, DType::kBF16, rows, edits);
  cudaStream_t stream;
  ROOFLINE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  sample_rows_cuda(batch.p, stream);  // first launch outside the capture (attribute set-up)
  ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaGraph_t graph;
  ROOFLINE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  sample_rows_cuda(batch.p, stream);
  ROOFLINE_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  ROOFLINE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 5; ++replay) {
    for (auto& r : rows) {
      r.step += 1;
      r.seed ^= static_cast<uint64_t>(replay) * 0x9E3779B97F4A7C15ull;
    }
    ROOFLINE_CUDA_CHECK(cudaMemcpyAsync(batch.rows.get(), rows.data(),
                                        rows.size() * sizeof(SamplingRowParams),
                                        cudaMemcpyHostToDevice, stream));
    batch.tokens.poison();
    ROOFLINE_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(stream));
    expect_same(batch.results(), run_cpu(logits, kVocab, rows, edits), rows,
                "replay " + std::to_string(replay));
  }
  ROOFLINE_CUDA_CHECK(cudaGraphExecDestroy(exec));
  ROOFLINE_CUDA_CHECK(cudaGraphDestroy(graph));
  ROOFLINE_CUDA_CHECK(cudaStreamDestroy(stream));
}

// p-value of a chi-square statistic with df degrees of freedom (Wilson-Hilferty: accurate to a
// few percent of p down to 1e-4 for df >= 3, far finer than the 0.001 threshold needs).
double chi_square_p_value(double statistic, double df) {
  const double z =
      (std::cbrt(statistic / df) - (1.0 - 2.0 / (9.0 * df))) / std::sqrt(2.0 / (9.0 * df));
  return 0.5 * std::erfc(z / std::sqrt(2.0));
}

// The filtered distribution in double, from the definition (stable ranking by s, top-k, top-p as
// "mass before < top_p", min-p relative to the best); token -> probability.
std::map<int32_t, double> filtered_distribution(const std::vector<float>& x,
                                                const SamplingRowParams& r) {
  const size_t v = x.size();
  std::vector<double> s(v);
  for (size_t i = 0; i < v; ++i) s[i] = static_cast<double>(x[i] / r.temperature);
  std::vector<int32_t> ids(v);
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return s[a] > s[b]; });
  size_t n = r.top_k > 0 ? std::min<size_t>(v, static_cast<size_t>(r.top_k)) : v;
  std::vector<double> p(n);
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) total += (p[i] = std::exp(s[ids[i]] - s[ids[0]]));
  if (r.top_p < 1.0f) {
    double before = 0.0;
    size_t keep = 0;
    while (keep < n && (keep == 0 || before < r.top_p)) before += p[keep++] / total;
    n = keep;
  }
  std::map<int32_t, double> dist;
  double kept = 0.0;
  for (size_t i = 0; i < n; ++i)
    if (p[i] >= r.min_p) kept += p[i];
  for (size_t i = 0; i < n; ++i)
    if (p[i] >= r.min_p) dist[ids[i]] = p[i] / kept;
  return dist;
}

class SampleRowsChiSquareTest : public ::testing::TestWithParam<std::tuple<int, int64_t>> {};

TEST_P(SampleRowsChiSquareTest, DrawsFollowTheFilteredDistribution) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  const auto [config, vocab] = GetParam();
  SamplingRowParams base;
  switch (config) {
    case 0:
      base.temperature = 1.0f;
      base.top_k = 50;
      base.top_p = 0.9f;
      break;
    case 1:
      base.temperature = 0.8f;
      base.top_p = 0.95f;
      break;
    case 2:
      base.temperature = 1.3f;
      base.min_p = 0.05f;
      break;
    default:
      base.temperature = 1.0f;
      base.top_k = 1000;
      base.min_p = 0.02f;
      break;
  }
  // A fixed logits seed: the test is statistical, and fixed inputs make its verdict the same on
  // every run (a fresh seed would fail 0.1% of runs by design). Logits ~ 3.5 * normal, spread like
  // an LM's (the best token near 10%, a few hundred tokens carry most of the mass), with the two
  // best tokens tied so the tie rule is in the test too.
  std::mt19937_64 rng(1234 + static_cast<uint64_t>(config) * 7 + static_cast<uint64_t>(vocab));
  std::normal_distribution<float> normal(0.0f, 3.5f);
  std::vector<float> row(static_cast<size_t>(vocab));
  for (float& v : row) v = normal(rng);
  const float best = *std::max_element(row.begin(), row.end());
  row[7] = row[static_cast<size_t>(vocab / 2)] = best + 0.5f;
  row = round_to(row, DType::kBF16);
  const auto expected = filtered_distribution(row, base);

  constexpr int64_t kRows = 256;
  constexpr int kLaunches = 400;  // 102400 draws
  std::vector<float> logits;
  for (int64_t r = 0; r < kRows; ++r) logits.insert(logits.end(), row.begin(), row.end());
  std::vector<SamplingRowParams> rows(kRows, base);
  for (int64_t r = 0; r < kRows; ++r)
    rows[static_cast<size_t>(r)].seed = 0x5eed0000ull + static_cast<uint64_t>(r);
  DeviceBatch batch(logits, vocab, DType::kBF16, rows, {});
  std::map<int32_t, int64_t> counts;
  for (int launch = 0; launch < kLaunches; ++launch) {
    for (auto& r : rows) r.step = launch;
    ROOFLINE_CUDA_CHECK(cudaMemcpy(batch.rows.get(), rows.data(),
                                   rows.size() * sizeof(SamplingRowParams),
                                   cudaMemcpyHostToDevice));
    sample_rows_cuda(batch.p, nullptr);
    for (int32_t t : batch.tokens.to_host<int32_t>()) ++counts[t];
  }
  const double draws = static_cast<double>(kRows) * kLaunches;
  // Bins: every token expected >= 5 times on its own, the rest pooled; a draw outside the
  // filtered set fails at once.
  double statistic = 0.0, pooled_expected = 0.0, pooled_observed = 0.0;
  int bins = 0;
  for (const auto& [token, count] : counts)
    ASSERT_TRUE(expected.count(token))
        << "token " << token << " drawn " << count << " times is outside the filtered set";
  for (const auto& [token, prob] : expected) {
    const double e = prob * draws;
    const auto it = counts.find(token);
    const double o = it == counts.end() ? 0.0 : static_cast<double>(it->second);
    if (e >= 5.0) {
      statistic += (o - e) * (o - e) / e;
      ++bins;
    } else {
      pooled_expected += e;
      pooled_observed += o;
    }
  }
  if (pooled_expected >= 5.0) {
    statistic +=
        (pooled_observed - pooled_expected) * (pooled_observed - pooled_expected) / pooled_expected;
    ++bins;
  }
  ASSERT_GE(bins, 3) << "too few bins for a chi-square test";
  const double p = chi_square_p_value(statistic, bins - 1);
  std::printf("config %d vocab %lld: %zu tokens in the filtered set, %d bins, chi2 %.1f, p %.4f\n",
              config, static_cast<long long>(vocab), expected.size(), bins, statistic, p);
  EXPECT_GT(p, 0.001) << "chi2 " << statistic << " over " << bins << " bins";
}

INSTANTIATE_TEST_SUITE_P(
    Configs, SampleRowsChiSquareTest,
    ::testing::Combine(::testing::Values(0, 1, 2, 3), ::testing::Values(32000, 128256, 151936)),
    [](const ::testing::TestParamInfo<SampleRowsChiSquareTest::ParamType>& info) {
      return "config" + std::to_string(std::get<0>(info.param)) + "_vocab" +
             std::to_string(std::get<1>(info.param));
    });

// ---------------------------------------------------------------------------------------------
// sample_rows_tiles_cuda against sample_rows_cpu: the rows it can finish from tile summaries
// (greedy, or a top-k of at most 512, without logprobs) get the twin's token, error bits and
// non-finite count; the others the twin's error bits, or kSamplingNeedsFullRow when the twin has
// none. The summaries come from summarize_logit_tiles_cpu (what an LM-head epilogue must write).

constexpr uint32_t kTestEpoch = 5;

// The batch's summaries (written in `written_epoch`, read in kTestEpoch; `edit` may change the
// words first) on the device, and the tile path's results.
GpuRows run_tiles(DeviceBatch& batch, const std::vector<float>& logits, int64_t vocab,
                  int64_t tile_tokens, uint32_t written_epoch = kTestEpoch,
                  const std::function<void(std::vector<uint64_t>&)>& edit = {}) {
  const int64_t rows = batch.p.num_rows;
  std::vector<uint64_t> words(static_cast<size_t>(rows * logit_tiles(vocab, tile_tokens)));
  std::vector<uint64_t> counts(static_cast<size_t>(rows));
  LogitTileSummaries host;
  host.words = words.data();
  host.nonfinite = counts.data();
  host.epoch = &written_epoch;
  host.tile_tokens = tile_tokens;
  // logits hold the dtype-rounded values: their f32 summaries are the stored dtype's.
  summarize_logit_tiles_cpu(logits.data(), DType::kF32, rows, vocab, vocab, host);
  if (edit) edit(words);
  DeviceBuffer d_words = DeviceBuffer::from_host(words);
  DeviceBuffer d_counts = DeviceBuffer::from_host(counts);
  DeviceBuffer d_epoch = DeviceBuffer::from_host(std::vector<uint32_t>{kTestEpoch});
  LogitTileSummaries dev;
  dev.words = d_words.get<uint64_t>();
  dev.nonfinite = d_counts.get<uint64_t>();
  dev.epoch = d_epoch.get<uint32_t>();
  dev.tile_tokens = tile_tokens;
  for (DeviceBuffer* b : {&batch.tokens, &batch.errors, &batch.nonfinite}) b->poison();
  sample_rows_tiles_cuda(batch.p, dev, nullptr);
  ROOFLINE_CUDA_CHECK(cudaDeviceSynchronize());
  return batch.results();
}

// Returns how many rows the tile path finished (from the CPU twin's results and the rows'
// parameters; the GPU's are checked against them row by row).
int expect_tiles_match(const GpuRows& gpu, const GpuRows& cpu,
                       const std::vector<SamplingRowParams>& rows, int64_t vocab,
                       const std::string& what) {
  int finished = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    uint32_t error = cpu.errors[r];
    int32_t token = cpu.tokens[r];
    if (error == 0 && !sample_row_uses_tiles(rows[r], vocab)) {
      error = kSamplingNeedsFullRow;
      token = -1;
    }
    finished += error == 0 ? 1 : 0;
    const std::string where =
        what + ", row " + std::to_string(r) + " (temperature " +
        std::to_string(rows[r].temperature) + ", top_k " + std::to_string(rows[r].top_k) +
        ", top_p " + std::to_string(rows[r].top_p) + ", min_p " + std::to_string(rows[r].min_p) +
        ", edits " + std::to_string(rows[r].edit_count) + "); " + seed_note();
    EXPECT_EQ(gpu.errors[r], error) << where;
    EXPECT_EQ(gpu.tokens[r], token) << where;
    EXPECT_EQ(gpu.nonfinite[r], cpu.nonfinite[r]) << where;
    if (::testing::Test::HasFailure()) return finished;
  }
  return finished;
}

class SampleRowsTilesCudaTest
    : public ::testing::TestWithParam<std::tuple<DType, int64_t, int64_t, int64_t>> {};

TEST_P(SampleRowsTilesCudaTest, SameTokensAsTheCpuTwin) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  const auto [dtype, num_rows, vocab, tile_tokens] = GetParam();
  if (logit_tiles(vocab, tile_tokens) > kLogitTileMaxTiles) GTEST_SKIP() << "too many tiles";
  auto rng = make_rng(static_cast<uint64_t>(num_rows * 1000003 + vocab) * 8 +
                      static_cast<uint64_t>(tile_tokens) * 2 + static_cast<int>(dtype));
  std::vector<float> logits = make_logits(num_rows, vocab, dtype, rng);
  // Every third row takes one of row_config's cases that the tile sampler finishes (greedy or a
  // fast top-k, no logprobs), the others any case, so the tile path is covered by construction,
  // not by a draw (the earlier bound on a random count, more than num_rows / 5, failed once with
  // 12 of 64 rows: bench/results/2026-12-06-sampler-prewait.md). Whether each row finishes there
  // is expect_tiles_match's row-by-row check.
  static constexpr int kTileCases[] = {0, 1, 2, 3, 10, 11};
  std::vector<SamplingRowParams> rows;
  for (int64_t r = 0; r < num_rows; ++r) {
    const bool tile_case = r % 3 == 0;
    const int which =
        tile_case ? kTileCases[rng() % std::size(kTileCases)] : static_cast<int>(r + rng() % 14);
    rows.push_back(row_config(which, rng, vocab));
    if (r % 7 != 3 || tile_case) rows.back().num_top_logprobs = -1;  // most rows without logprobs
    if (tile_case && vocab > kSamplingFastTopK) {
      ASSERT_TRUE(sample_row_uses_tiles(rows.back(), vocab))
          << "row_config case " << which << " is no longer one the tile path takes";
    }
  }
  std::vector<TokenEdit> edits = make_edits(rows, vocab, rng);
  // A NaN row, an inf row, a row with bad parameters and a bad edit list, when there is room.
  if (num_rows >= 3) {
    logits[static_cast<size_t>(vocab / 2)] = kNaN;
    logits[static_cast<size_t>(vocab + vocab - 1)] = -kInf;
    rows[2].top_p = 0.0f;
  }
  if (num_rows >= 8 && vocab >= 2 && rows[6].edit_count > 1) {
    const size_t b = static_cast<size_t>(rows[6].edit_begin);
    edits[b + 1].token = edits[b].token;
  }
  DeviceBatch batch(logits, vocab, dtype, rows, edits);
  const GpuRows cpu = run_cpu(logits, vocab, rows, edits);
  expect_tiles_match(run_tiles(batch, logits, vocab, tile_tokens), cpu, rows, vocab,
                     std::string(dtype_name(dtype)) + " tiles of " + std::to_string(tile_tokens));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SampleRowsTilesCudaTest,
    ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16), ::testing::Values(1, 3, 64),
                       ::testing::Values(1, 7, 1000, 32000, 128256, 262144),
                       ::testing::Values(16, 37, 128)),
    [](const ::testing::TestParamInfo<SampleRowsTilesCudaTest::ParamType>& info) {
      return std::string(dtype_name(std::get<0>(info.param))) + "_rows" +
             std::to_string(std::get<1>(info.param)) + "_vocab" +
             std::to_string(std::get<2>(info.param)) + "_tile" +
             std::to_string(std::get<3>(info.param));
    });

// The engine's case over several steps (new uniforms each step): batch 64 at a 128k vocabulary,
// top-k 50 + top-p 0.9 + penalties, greedy rows among them, edit lists longer than the chip keeps
// (2048 entries: the rest are recomputed where visited) with biased tokens lifted into the top.
TEST(SampleRowsTilesCudaTest, ManyStepsLongEditListsAndGreedyRows) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  constexpr int64_t kVocab = 128256;
  auto rng = make_rng(21);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(kVocab - 1));
  for (const DType dtype : {DType::kBF16, DType::kF32}) {
    constexpr int64_t kRows = 64;
    std::vector<float> logits = make_logits(kRows, kVocab, dtype, rng);
    std::vector<SamplingRowParams> rows;
    std::vector<TokenEdit> edits;
    for (int64_t r = 0; r < kRows; ++r) {
      SamplingRowParams row = row_config(2, rng, kVocab);  // top-k 50, top-p 0.9
      row.num_top_logprobs = -1;
      if (r % 5 == 0) row.temperature = 0.0f;
      if (r % 3 == 0) row.top_k = 512;
      row.min_p = r % 4 == 1 ? 0.05f : 0.0f;
      row.repetition_penalty = 1.3f;
      row.frequency_penalty = 0.4f;
      row.presence_penalty = 0.2f;
      row.edit_begin = static_cast<int64_t>(edits.size());
      const int want = r < 4 ? 2049 + static_cast<int>(r) * 700 : 256;
      std::set<int32_t> used;
      while (static_cast<int>(used.size()) < want) {
        const int32_t t = tok(rng);
        if (!used.insert(t).second) continue;
        const int kind = static_cast<int>(rng() % 5);
        edits.push_back(TokenEdit{t, kind == 0 ? 8.0f : 0.0f, static_cast<int32_t>(rng() % 3),
                                  kind == 3 ? 1 : 0});
      }
      row.edit_count = want;
      rows.push_back(row);
    }
    DeviceBatch batch(logits, kVocab, dtype, rows, edits);
    for (const int64_t tile : {16, 128}) {
      for (int step = 0; step < 4; ++step) {
        for (auto& r : rows) r.step += 1;
        ROOFLINE_CUDA_CHECK(cudaMemcpy(batch.rows.get(), rows.data(),
                                       rows.size() * sizeof(SamplingRowParams),
                                       cudaMemcpyHostToDevice));
        const std::string what = std::string(dtype_name(dtype)) + " tiles of " +
                                 std::to_string(tile) + " step " + std::to_string(step);
        const int finished =
            expect_tiles_match(run_tiles(batch, logits, kVocab, tile),
                               run_cpu(logits, kVocab, rows, edits), rows, kVocab, what);
        if (::testing::Test::HasFailure()) return;
        EXPECT_EQ(finished, kRows) << what;  // every row is greedy or a fast top-k
      }
    }
  }
}

// Summaries of another epoch (the writer did not run this step), whole or one tile of one row:
// the rows they touch get kSamplingNeedsFullRow (or their own parameter errors), never a token
// from stale maxima; the other rows are sampled as before.
TEST(SampleRowsTilesCudaTest, StaleSummariesSendTheRowToTheFullPath) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  constexpr int64_t kVocab = 32000, kRows = 16, kTile = 128;
  auto rng = make_rng(77);
  const std::vector<float> logits = make_logits(kRows, kVocab, DType::kBF16, rng);
  std::vector<SamplingRowParams> rows;
  for (int64_t r = 0; r < kRows; ++r) {
    SamplingRowParams row = row_config(2, rng, kVocab);  // top-k 50, top-p 0.9
    row.num_top_logprobs = -1;
    if (r % 4 == 0) row.temperature = 0.0f;
    rows.push_back(row);
  }
  rows[5].top_p = 0.0f;  // bad parameters stay bad parameters
  const std::vector<TokenEdit> edits = make_edits(rows, kVocab, rng);
  DeviceBatch batch(logits, kVocab, DType::kBF16, rows, edits);
  const GpuRows cpu = run_cpu(logits, kVocab, rows, edits);
  const GpuRows stale = run_tiles(batch, logits, kVocab, kTile, kTestEpoch - 1);
  for (int64_t r = 0; r < kRows; ++r) {
    const size_t i = static_cast<size_t>(r);
    EXPECT_EQ(stale.errors[i], r == 5 ? kSamplingBadParams : kSamplingNeedsFullRow) << r;
    EXPECT_EQ(stale.tokens[i], -1) << r;
  }
  // One stale tile in row 9: that row alone goes to the full path.
  const int64_t tiles = logit_tiles(kVocab, kTile);
  const GpuRows one = run_tiles(batch, logits, kVocab, kTile, kTestEpoch, [&](auto& words) {
    uint64_t& w = words[static_cast<size_t>(9 * tiles + 17)];
    w = (w & ((uint64_t{1} << logit_tile::kEpochShift) - 1)) |
        (uint64_t{kTestEpoch + 1} << logit_tile::kEpochShift);
  });
  for (int64_t r = 0; r < kRows; ++r) {
    const size_t i = static_cast<size_t>(r);
    const uint32_t want = r == 9 ? kSamplingNeedsFullRow : cpu.errors[i];
    EXPECT_EQ(one.errors[i], want) << r;
    EXPECT_EQ(one.tokens[i], want == 0 ? cpu.tokens[i] : -1) << r;
  }
}

TEST(SampleRowsTilesCudaTest, SizesOutsideTheLimitsAbortWithAMessage) {
  SampleRowsParams p;
  p.vocab_size = 1000;
  p.num_rows = 1;
  p.dtype = DType::kF32;
  // Made-up device addresses: every check below fires before anything is read.
  uint64_t fake[2];
  uint32_t epoch = 1;
  LogitTileSummaries s;
  s.words = fake;
  s.nonfinite = fake;
  s.epoch = &epoch;
  s.tile_tokens = 0;
  EXPECT_DEATH(sample_rows_tiles_cuda(p, s, nullptr), "tile_tokens");
  s.tile_tokens = 4097;
  EXPECT_DEATH(sample_rows_tiles_cuda(p, s, nullptr), "tile_tokens");
  p.vocab_size = 262144;
  s.tile_tokens = 8;
  EXPECT_DEATH(sample_rows_tiles_cuda(p, s, nullptr), "16384 tiles");
  p.vocab_size = 1000;
  p.dtype = DType::kF16;
  s.tile_tokens = 16;
  EXPECT_DEATH(sample_rows_tiles_cuda(p, s, nullptr), "f32 or bf16");
  p.dtype = DType::kF32;
  s.epoch = nullptr;
  int32_t out[4];
  uint32_t errors[4];
  SamplingRowParams rp;
  p.logits = fake;
  p.rows = &rp;
  p.tokens = out;
  p.errors = errors;
  EXPECT_DEATH(sample_rows_tiles_cuda(p, s, nullptr), "epoch");
}

}  // namespace
}  // namespace roofline
