// GGUF parser and dequantisers: bit-exact dequantisation against gguf-py's goldens
// (tests/fixtures/make_gguf_fixtures.py), typed metadata access, and every kind of hostile file
// (truncation at every byte, lying counts and lengths, bad dims, offsets and types), each of which
// must come back as a Status that names the problem.
#include "io/gguf.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>

#include "core/npy.h"
#include "gguf_test_util.h"

namespace roofline {
namespace {

using testing::GgufBuilder;

const std::string kFixtures = std::string(ROOFLINE_SOURCE_DIR) + "/tests/fixtures/gguf/";

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

StatusOr<std::unique_ptr<GgufFile>> parse(const std::vector<uint8_t>& bytes) {
  return GgufFile::parse(bytes.data(), bytes.size(), "test.gguf");
}

// ---------------------------------------------------------------- dequantisation

class DequantGolden : public ::testing::TestWithParam<std::pair<const char*, GgmlType>> {};

TEST_P(DequantGolden, MatchesGgufPyBitForBit) {
  const auto [name, type] = GetParam();
  const std::vector<uint8_t> raw = read_bytes(kFixtures + "dequant/" + name + ".bin");
  auto golden = read_npy(kFixtures + "dequant/" + name + ".npy");
  ASSERT_TRUE(golden.ok()) << golden.status().to_string();
  int64_t be = 0, bb = 0;
  ASSERT_TRUE(ggml_block_layout(static_cast<uint32_t>(type), &be, &bb));
  const int64_t n = static_cast<int64_t>(golden->data.size());
  ASSERT_EQ(static_cast<int64_t>(raw.size()), n / be * bb);
  std::vector<float> out(static_cast<size_t>(n), std::nanf(""));  // poisoned
  ASSERT_TRUE(dequantize_to_f32(static_cast<uint32_t>(type), raw.data(), n, out.data()).ok());
  for (int64_t i = 0; i < n; ++i) {
    uint32_t got, want;
    std::memcpy(&got, &out[i], 4);
    std::memcpy(&want, &golden->data[i], 4);
    ASSERT_EQ(got, want) << name << " element " << i << " (block " << i / be << "): got " << out[i]
                         << " want " << golden->data[i];
  }
}

INSTANTIATE_TEST_SUITE_P(Types, DequantGolden,
                         ::testing::Values(std::make_pair("F16", GgmlType::kF16),
                                           std::make_pair("BF16", GgmlType::kBF16),
                                           std::make_pair("Q4_0", GgmlType::kQ4_0),
                                           std::make_pair("Q4_1", GgmlType::kQ4_1),
                                           std::make_pair("Q8_0", GgmlType::kQ8_0),
                                           std::make_pair("Q4_K", GgmlType::kQ4_K),
                                           std::make_pair("Q6_K", GgmlType::kQ6_K)),
                         [](const auto& info) { return std::string(info.param.first); });

TEST(Dequant, F32IsACopy) {
  const float in[3] = {1.5f, -0.0f, 3e-40f};
  float out[3] = {};
  ASSERT_TRUE(dequantize_to_f32(0, reinterpret_cast<const uint8_t*>(in), 3, out).ok());
  EXPECT_EQ(std::memcmp(in, out, sizeof(in)), 0);
}

TEST(Dequant, RejectsPartialBlocksAndUnsupportedTypes) {
  std::vector<uint8_t> raw(34 * 2);
  std::vector<float> out(64);
  EXPECT_ERROR(dequantize_to_f32(8, raw.data(), 33, out.data()), kInvalidArgument, "block of 32");
  EXPECT_ERROR(dequantize_to_f32(8, raw.data(), -32, out.data()), kInvalidArgument, "block");
  EXPECT_ERROR(dequantize_to_f32(16, raw.data(), 256, out.data()), kUnimplemented, "IQ2_XXS");
  EXPECT_ERROR(dequantize_to_f32(99, raw.data(), 1, out.data()), kUnimplemented, "type 99");
}

TEST(Dequant, TypeNamesAndLayouts) {
  EXPECT_STREQ(ggml_type_name(12), "Q4_K");
  EXPECT_STREQ(ggml_type_name(30), "BF16");
  EXPECT_STREQ(ggml_type_name(4), "type 4");  // a removed type number
  int64_t be = 0, bb = 0;
  EXPECT_TRUE(ggml_block_layout(14, &be, &bb));
  EXPECT_EQ(be, 256);
  EXPECT_EQ(bb, 210);
  EXPECT_FALSE(ggml_block_layout(13, &be, &bb));  // Q5_K: known size, no dequantiser
  EXPECT_TRUE(ggml_storage_layout(13, &be, &bb));
  EXPECT_EQ(bb, 176);
  EXPECT_FALSE(ggml_storage_layout(4, &be, &bb));
}

// ---------------------------------------------------------------- well-formed files

GgufBuilder two_tensor_file() {
  GgufBuilder b;
  b.kv_str("general.architecture", "llama");
  b.kv_u32("a.u32", 7);
  b.kv_i32("a.i32", -3);
  b.kv_u64("a.u64", uint64_t{1} << 40);
  b.kv_f32("a.f32", 0.5f);
  b.kv_f64("a.f64", -2.25);
  b.kv_bool("a.bool", true);
  b.kv_raw("a.u8", GgufBuilder::kU8, {200});
  b.kv_raw("a.i8", GgufBuilder::kI8, {0xff});
  b.kv_str_array("a.strs", {"x", "", "yz"});
  b.kv_i32_array("a.ints", {1, -2, 3});
  b.tensor_f32("w", {3, 2}, {1, 2, 3, 4, 5, 6});
  std::vector<uint8_t> q8(34, 0);
  q8[1] = 0x3c;  // f16 1.0
  q8[2] = 5;
  b.tensor("q", {32}, 8, q8);
  return b;
}

TEST(GgufParse, ReadsMetadataAndTensors) {
  for (uint32_t version : {2u, 3u}) {
    GgufBuilder b = two_tensor_file();
    b.version = version;
    const std::vector<uint8_t> bytes = b.build();
    auto f = parse(bytes);
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    EXPECT_EQ((*f)->version(), version);
    EXPECT_EQ(*(*f)->get_string("general.architecture"), "llama");
    EXPECT_EQ(*(*f)->get_int("a.u32"), 7);
    EXPECT_EQ(*(*f)->get_int("a.i32"), -3);
    EXPECT_EQ(*(*f)->get_int("a.u64"), int64_t{1} << 40);
    EXPECT_EQ(*(*f)->get_int("a.u8"), 200);
    EXPECT_EQ(*(*f)->get_int("a.i8"), -1);
    EXPECT_EQ(*(*f)->get_float("a.f32"), 0.5);
    EXPECT_EQ(*(*f)->get_float("a.f64"), -2.25);
    EXPECT_EQ(*(*f)->get_float("a.u32"), 7.0);  // integers read as numbers too
    EXPECT_TRUE(*(*f)->get_bool("a.bool"));
    EXPECT_EQ(*(*f)->get_string_array("a.strs"), (std::vector<std::string>{"x", "", "yz"}));
    EXPECT_EQ(*(*f)->get_int_array("a.ints"), (std::vector<int64_t>{1, -2, 3}));
    EXPECT_EQ(*(*f)->get_float_array("a.ints"), (std::vector<double>{1, -2, 3}));
    EXPECT_EQ((*f)->array_length("a.strs"), 3);
    EXPECT_EQ((*f)->array_length("a.u32"), -1);
    EXPECT_FALSE((*f)->has("nope"));
    EXPECT_ERROR((*f)->get_int("nope"), kNotFound, "'nope'");
    EXPECT_ERROR((*f)->get_int("a.f32"), kInvalidArgument, "a.f32' is f32");
    EXPECT_ERROR((*f)->get_string("a.u32"), kInvalidArgument, "u32");
    EXPECT_ERROR((*f)->get_string_array("a.ints"), kInvalidArgument, "array of i32");

    ASSERT_EQ((*f)->tensors().size(), 2u);
    const GgufTensorInfo* w = (*f)->find_tensor("w");
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->dims, (std::vector<int64_t>{3, 2}));
    EXPECT_EQ(w->size_bytes, 24u);
    EXPECT_EQ(w->numel(), 6);
    float first[6];
    std::memcpy(first, (*f)->tensor_data(*w), 24);
    EXPECT_EQ(first[5], 6.0f);
    const GgufTensorInfo* q = (*f)->find_tensor("q");
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->size_bytes, 34u);
    EXPECT_EQ(q->offset % 32, 0u);
    std::vector<float> v(32);
    ASSERT_TRUE(dequantize_to_f32(q->type, (*f)->tensor_data(*q), 32, v.data()).ok());
    EXPECT_EQ(v[0], 5.0f);
    EXPECT_EQ((*f)->find_tensor("x"), nullptr);
  }
}

TEST(GgufParse, HonoursCustomAlignment) {
  GgufBuilder b = two_tensor_file();
  b.alignment = 64;
  b.kv_u32("general.alignment", 64);
  const std::vector<uint8_t> bytes = b.build();
  auto f = parse(bytes);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ((*f)->find_tensor("q")->offset, 64u);
  float x;
  std::memcpy(&x, (*f)->tensor_data(*(*f)->find_tensor("w")), 4);
  EXPECT_EQ(x, 1.0f);
}

TEST(GgufParse, UnknownTypeIsListedButHasNoSize) {
  GgufBuilder b;
  b.tensor("odd", {4}, 99, std::vector<uint8_t>(16));
  const std::vector<uint8_t> bytes = b.build();
  auto f = parse(bytes);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ((*f)->tensors()[0].size_bytes, 0u);
}

TEST(GgufParse, MetadataOnlyFileNeedsNoDataSection) {
  GgufBuilder b;
  b.kv_u32("x", 1);
  const std::vector<uint8_t> bytes = b.build();
  auto f = parse(bytes);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_TRUE((*f)->tensors().empty());
}

TEST(GgufOpen, OpensFixtureAndReportsMissingFile) {
  auto f = GgufFile::open(kFixtures + "llama_mha.f32.gguf");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ((*f)->version(), 3u);
  EXPECT_EQ((*f)->array_length("tokenizer.ggml.tokens"), 512);
  EXPECT_NE((*f)->find_tensor("blk.1.ffn_down.weight"), nullptr);
  EXPECT_ERROR(GgufFile::open(kFixtures + "nope.gguf"), kNotFound, "does not exist");
}

// ---------------------------------------------------------------- hostile files

TEST(GgufHostile, EveryTruncationIsAnError) {
  const std::vector<uint8_t> full = two_tensor_file().build();
  ASSERT_TRUE(parse(full).ok());
  for (size_t n = 0; n < full.size(); ++n) {
    // A fresh exact-size copy so AddressSanitizer sees any read past the end.
    std::vector<uint8_t> prefix(full.begin(), full.begin() + static_cast<long>(n));
    auto f = GgufFile::parse(prefix.data(), prefix.size(), "cut.gguf");
    EXPECT_FALSE(f.ok()) << "a prefix of " << n << " of " << full.size() << " bytes parsed";
  }
  std::vector<uint8_t> cut(full.begin(), full.end() - 1);
  EXPECT_ERROR(GgufFile::parse(cut.data(), cut.size(), "cut.gguf"), kDataLoss, "truncated");
}

TEST(GgufHostile, BadMagicAndVersions) {
  std::vector<uint8_t> bytes = two_tensor_file().build();
  bytes[0] = 'X';
  EXPECT_ERROR(parse(bytes), kInvalidArgument, "not a GGUF file");
  EXPECT_ERROR(parse({}), kInvalidArgument, "not a GGUF file");
  for (auto [version, code, needle] :
       {std::tuple{1u, StatusCode::kUnimplemented, "version 1"},
        std::tuple{4u, StatusCode::kInvalidArgument, "version 4"},
        std::tuple{0x03000000u, StatusCode::kUnimplemented, "big-endian"}}) {
    GgufBuilder b = two_tensor_file();
    b.version = version;
    auto f = parse(b.build());
    ASSERT_FALSE(f.ok());
    EXPECT_EQ(f.status().code(), code);
    EXPECT_NE(f.status().message().find(needle), std::string::npos) << f.status().to_string();
  }
}

TEST(GgufHostile, AbsurdCounts) {
  GgufBuilder b = two_tensor_file();
  b.tensor_count_override = uint64_t{1} << 40;
  EXPECT_ERROR(parse(b.build()), kInvalidArgument, "tensors, more than the limit");
  b = two_tensor_file();
  b.kv_count_override = ~uint64_t{0};
  EXPECT_ERROR(parse(b.build()), kInvalidArgument, "metadata entries, more than the limit");
  b = two_tensor_file();
  b.tensor_count_override = 1000;  // plausible, but the file holds 2
  EXPECT_FALSE(parse(b.build()).ok());
}

TEST(GgufHostile, AbsurdLengths) {
  // A string claiming more bytes than the file has.
  GgufBuilder b;
  std::vector<uint8_t> v = GgufBuilder::pod(uint64_t{1} << 20);
  v.push_back('a');
  v.push_back('b');
  b.kv_raw("s", GgufBuilder::kString, v);
  EXPECT_ERROR(parse(b.build()), kDataLoss, "truncated");
  // A string longer than any real one.
  b = GgufBuilder();
  b.kv_raw("s", GgufBuilder::kString, GgufBuilder::pod(uint64_t{1} << 62));
  EXPECT_ERROR(parse(b.build()), kInvalidArgument, "more than the limit");
  // An array claiming 2^61 elements.
  b = GgufBuilder();
  std::vector<uint8_t> arr = GgufBuilder::pod(uint32_t{GgufBuilder::kU32});
  GgufBuilder::append(arr, GgufBuilder::pod(uint64_t{1} << 61));
  b.kv_raw("a", GgufBuilder::kArray, arr);
  EXPECT_ERROR(parse(b.build()), kDataLoss, "truncated");
  // An array of strings whose count the file cannot hold.
  b = GgufBuilder();
  arr = GgufBuilder::pod(uint32_t{GgufBuilder::kString});
  GgufBuilder::append(arr, GgufBuilder::pod(uint64_t{1000}));
  b.kv_raw("a", GgufBuilder::kArray, arr);
  EXPECT_ERROR(parse(b.build()), kDataLoss, "truncated");
  // A key longer than the spec allows.
  b = GgufBuilder();
  b.kv_u32(std::string(70000, 'k'), 1);
  EXPECT_ERROR(parse(b.build()), kInvalidArgument, "the key of metadata entry 0");
  // A tensor name longer than the limit.
  b = GgufBuilder();
  b.tensor_f32(std::string(5000, 't'), {1}, {1});
  EXPECT_ERROR(parse(b.build()), kInvalidArgument, "the name of tensor 0");
}

TEST(GgufHostile, BadValues) {
  GgufBuilder b;
  std::vector<uint8_t> nested = GgufBuilder::pod(uint32_t{GgufBuilder::kArray});
  GgufBuilder::append(nested, GgufBuilder::pod(uint64_t{0}));
  b.kv_raw("n", GgufBuilder::kArray, nested);
  EXPECT_ERROR(parse(b.build()), kInvalidArgument, "nested arrays");
  b = GgufBuilder();
  b.kv_raw("t", 13, {0, 0, 0, 0});
  EXPECT_ERROR(parse(b.build()), kInvalidArgument, "type 13");
  b = GgufBuilder();
  b.kv_raw("b", GgufBuilder::kBool, {2});
  EXPECT_ERROR(parse(b.build()), kInvalidArgument, "not 0 or 1");
  b = GgufBuilder();
  b.kv_raw("u", GgufBuilder::kU64, GgufBuilder::pod(~uint64_t{0}));
  EXPECT_ERROR(parse(b.build()), kInvalidArgument, "too large");
  b = GgufBuilder();
  b.kv_u32("k", 1);
  b.kv_u32("k", 2);
  EXPECT_ERROR(parse(b.build()), kInvalidArgument, "'k' appears twice");
  for (uint32_t a : {0u, 3u, 48u}) {
    b = two_tensor_file();
    b.kv_u32("general.alignment", a);
    EXPECT_ERROR(parse(b.build()), kInvalidArgument, "power of two");
  }
  b = two_tensor_file();
  b.kv_str("general.alignment", "32");
  EXPECT_ERROR(parse(b.build()), kInvalidArgument, "general.alignment");
}

TEST(GgufHostile, BadTensorInfos) {
  GgufBuilder b;
  b.tensor("t", {}, 0, {});
  EXPECT_ERROR(parse(b.build()), kInvalidArgument, "0 dimensions");
  b = GgufBuilder();
  b.tensor("t", {1, 1, 1, 1, 1}, 0, std::vector<uint8_t>(4));
  EXPECT_ERROR(parse(b.build()), kInvalidArgument, "5 dimensions");
  b = GgufBuilder();
  b.tensor("t", {4, 0}, 0, {});
  EXPECT_ERROR(parse(b.build()), kInvalidArgument, "positive");
  b = GgufBuilder();
  b.tensor("t", {uint64_t{1} << 32, uint64_t{1} << 32}, 0, std::vector<uint8_t>(4));
  EXPECT_ERROR(parse(b.build()), kInvalidArgument, "63 bits");
  b = GgufBuilder();
  b.tensor("t", {~uint64_t{0}}, 0, std::vector<uint8_t>(4));
  EXPECT_ERROR(parse(b.build()), kInvalidArgument, "positive");
  b = GgufBuilder();
  b.tensor("t", {uint64_t{1} << 61}, 0, std::vector<uint8_t>(4));  // 2^63 bytes
  EXPECT_ERROR(parse(b.build()), kInvalidArgument, "too large");
  b = GgufBuilder();
  b.tensor("t", {16}, 8, std::vector<uint8_t>(34));  // Q8_0 rows must be multiples of 32
  EXPECT_ERROR(parse(b.build()), kInvalidArgument, "multiple of the 32-element blocks");
  b = GgufBuilder();
  b.tensor_f32("t", {1}, {1});
  b.tensor_f32("t", {1}, {2});
  EXPECT_ERROR(parse(b.build()), kInvalidArgument, "'t' appears twice");
}

TEST(GgufHostile, BadOffsets) {
  GgufBuilder b = two_tensor_file();
  b.find("q")->offset_override = 1u << 20;
  EXPECT_ERROR(parse(b.build()), kDataLoss, "truncated");
  b = two_tensor_file();
  b.find("q")->offset_override = ~uint64_t{0} - 31;  // aligned, and offset + size wraps
  EXPECT_ERROR(parse(b.build()), kDataLoss, "truncated");
  b = two_tensor_file();
  b.find("q")->offset_override = 4;
  EXPECT_ERROR(parse(b.build()), kInvalidArgument, "not a multiple of the alignment");
  b = two_tensor_file();
  b.find("w")->offset_override = 32;  // on top of "q" (bytes 32..66)
  EXPECT_ERROR(parse(b.build()), kInvalidArgument, "overlap");
}

}  // namespace
}  // namespace roofline
