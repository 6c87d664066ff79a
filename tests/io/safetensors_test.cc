// Tests for the safetensors header parser and SafetensorsFile: a valid file round trips, and every
// way a hostile or damaged header can be wrong yields the right status code and a message that
// names the file and the problem.
#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "safetensors_test_util.h"

namespace roofline {
namespace {

using testing::f32_bytes;
using testing::make_safetensors;
using testing::make_safetensors_raw;
using testing::TempDir;
using testing::TestTensor;

constexpr const char* kSource = "bad.safetensors";

StatusOr<SafetensorsHeader> parse(const std::string& bytes) {
  return parse_safetensors_header(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                                  kSource);
}

// Parses a file whose header is `header_json` and whose data section has `data_bytes` bytes.
StatusOr<SafetensorsHeader> parse_header(const std::string& header_json, size_t data_bytes = 64) {
  return parse(make_safetensors_raw(header_json, std::string(data_bytes, '\x11')));
}

// Asserts `result_` failed with `code_` and a message containing `phrase_` and the file name.
#define EXPECT_ERROR(result_, code_, phrase_)                                             \
  do {                                                                                    \
    auto status_ = (result_).status();                                                    \
    EXPECT_EQ(status_.code(), (code_)) << status_.to_string();                            \
    EXPECT_NE(status_.message().find(phrase_), std::string::npos) << status_.to_string(); \
    EXPECT_NE(status_.message().find(kSource), std::string::npos) << status_.to_string(); \
  } while (0)

TEST(SafetensorsHeader, ValidFileRoundTrips) {
  std::vector<float> a = {1.5f, -2.0f, 3.25f, 4.0f, 5.0f, 6.0f};
  std::string b_bytes = {'\x01', '\x00', '\x02', '\x00'};  // two bf16 values
  std::string file = make_safetensors(
      {{"zeta.weight", "F32", {2, 3}, f32_bytes(a)}, {"alpha.bias", "BF16", {2}, b_bytes}},
      {{"format", "pt"}});
  auto header = parse(file);
  ASSERT_TRUE(header.ok()) << header.status().to_string();
  ASSERT_EQ(header->tensors.size(), 2u);
  // File order is data-section order, not name order.
  EXPECT_EQ(header->tensors[0].name, "zeta.weight");
  EXPECT_EQ(header->tensors[0].dtype, DType::kF32);
  EXPECT_EQ(header->tensors[0].shape, Shape({2, 3}));
  EXPECT_EQ(header->tensors[0].begin, 0u);
  EXPECT_EQ(header->tensors[0].end, 24u);
  EXPECT_EQ(header->tensors[1].name, "alpha.bias");
  EXPECT_EQ(header->tensors[1].dtype, DType::kBF16);
  EXPECT_EQ(header->tensors[1].begin, 24u);
  EXPECT_EQ(header->metadata.at("format"), "pt");
  EXPECT_EQ(header->data_offset % 8, 0u);
  EXPECT_EQ(header->data_offset + 28, file.size());

  TempDir dir;
  dir.write("model.safetensors", file);
  auto opened = SafetensorsFile::open(dir.file("model.safetensors"));
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  auto view = (*opened)->tensor("zeta.weight");
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->dtype, DType::kF32);
  EXPECT_EQ(view->shape, Shape({2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(view->as<const float>()[i], a[i]);
  auto bias = (*opened)->tensor("alpha.bias");
  ASSERT_TRUE(bias.ok());
  EXPECT_EQ(bias->as<const uint16_t>()[1], 2);
  EXPECT_EQ((*opened)->path(), dir.file("model.safetensors"));
}

TEST(SafetensorsHeader, AcceptsScalarsEmptyTensorsAndEmptyHeader) {
  std::string file = make_safetensors({{"scalar", "I64", {}, std::string(8, '\0')},
                                       {"empty", "F32", {0, 4}, ""},
                                       {"bytes", "U8", {3}, "abc"}});
  auto header = parse(file);
  ASSERT_TRUE(header.ok()) << header.status().to_string();
  EXPECT_EQ(header->tensors.size(), 3u);

  auto none = parse(make_safetensors_raw("{}", ""));
  ASSERT_TRUE(none.ok()) << none.status().to_string();
  EXPECT_TRUE(none->tensors.empty());
}

TEST(SafetensorsHeader, RejectsFileSmallerThanLengthPrefix) {
  EXPECT_ERROR(parse(""), StatusCode::kDataLoss, "too small");
  EXPECT_ERROR(parse("1234567"), StatusCode::kDataLoss, "too small");
}

TEST(SafetensorsHeader, RejectsAbsurdHeaderLength) {
  std::string file = make_safetensors_raw("{}", "");
  // Length larger than the whole file.
  std::string longer = file;
  longer[0] = static_cast<char>(0xff);
  EXPECT_ERROR(parse(longer), StatusCode::kDataLoss, "absurd header length");
  // Length above the cap (and near 2^64, where 8 + length would wrap).
  std::string huge = file;
  for (int i = 0; i < 8; ++i) huge[i] = static_cast<char>(0xff);
  EXPECT_ERROR(parse(huge), StatusCode::kDataLoss, "absurd header length");
  std::string over_cap = file;
  uint64_t n = kMaxSafetensorsHeaderBytes + 1;
  for (int i = 0; i < 8; ++i) over_cap[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  EXPECT_ERROR(parse(over_cap), StatusCode::kDataLoss, "absurd header length");
}

TEST(SafetensorsHeader, RejectsHeaderThatIsNotJsonOrNotAnObject) {
  EXPECT_ERROR(parse_header("{\"a\": "), StatusCode::kDataLoss, "not valid JSON");
  EXPECT_ERROR(parse_header("\x01\x02garbage"), StatusCode::kDataLoss, "not valid JSON");
  EXPECT_ERROR(parse_header("[1, 2, 3]"), StatusCode::kDataLoss, "not a JSON object");
  EXPECT_ERROR(parse_header("\"text\""), StatusCode::kDataLoss, "not a JSON object");
}

TEST(SafetensorsHeader, RejectsDuplicateTensorNames) {
  EXPECT_ERROR(parse_header(R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                                "w": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})"),
               StatusCode::kDataLoss, "'w' twice");
}

TEST(SafetensorsHeader, RejectsEntryThatIsNotAnObject) {
  EXPECT_ERROR(parse_header(R"({"w": [1, 2]})"), StatusCode::kDataLoss, "tensor 'w' is an array");
}

TEST(SafetensorsHeader, RejectsEntryWithoutDtypeShapeOrOffsets) {
  EXPECT_ERROR(parse_header(R"({"w": {"shape": [1], "data_offsets": [0, 4]}})"),
               StatusCode::kDataLoss, "tensor 'w' lacks");
  EXPECT_ERROR(parse_header(R"({"w": {"dtype": "F32", "data_offsets": [0, 4]}})"),
               StatusCode::kDataLoss, "tensor 'w' lacks");
  EXPECT_ERROR(parse_header(R"({"w": {"dtype": "F32", "shape": [1]}})"), StatusCode::kDataLoss,
               "tensor 'w' lacks");
}

TEST(SafetensorsHeader, RejectsFieldsOfWrongJsonType) {
  EXPECT_ERROR(parse_header(R"({"w": {"dtype": 7, "shape": [1], "data_offsets": [0, 4]}})"),
               StatusCode::kDataLoss, "'dtype' that is an integer");
  EXPECT_ERROR(parse_header(R"({"w": {"dtype": "F32", "shape": "1", "data_offsets": [0, 4]}})"),
               StatusCode::kDataLoss, "'shape' that is a string");
  EXPECT_ERROR(parse_header(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})"),
               StatusCode::kDataLoss, "not a [begin, end] pair");
  EXPECT_ERROR(parse_header(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": 4}})"),
               StatusCode::kDataLoss, "not a [begin, end] pair");
  EXPECT_ERROR(parse_header(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": ["0", "4"]}})"),
               StatusCode::kDataLoss, "not non-negative integers");
  EXPECT_ERROR(parse_header(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})"),
               StatusCode::kDataLoss, "not non-negative integers");
  EXPECT_ERROR(parse_header(R"({"w": {"dtype": "F32", "shape": [1],
                                      "data_offsets": [0, 18446744073709551615]}})"),
               StatusCode::kDataLoss, "not non-negative integers");
}

TEST(SafetensorsHeader, RejectsUnknownDtypeNamingItAndTheSupportedOnes) {
  auto s = parse_header(R"({"w": {"dtype": "F8_E4M3", "shape": [1], "data_offsets": [0, 1]}})");
  EXPECT_ERROR(s, StatusCode::kUnimplemented, "dtype 'F8_E4M3'");
  EXPECT_ERROR(s, StatusCode::kUnimplemented, "F32, F16, BF16, I32, I64, U8");
}

TEST(SafetensorsHeader, RejectsNegativeOrNonIntegerDims) {
  EXPECT_ERROR(parse_header(R"({"w": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 0]}})"),
               StatusCode::kDataLoss, "shape dimension -1");
  EXPECT_ERROR(parse_header(R"({"w": {"dtype": "U8", "shape": [2.5], "data_offsets": [0, 2]}})"),
               StatusCode::kDataLoss, "shape dimension 2.5");
  EXPECT_ERROR(parse_header(R"({"w": {"dtype": "U8", "shape": ["2"], "data_offsets": [0, 2]}})"),
               StatusCode::kDataLoss, "not a non-negative integer");
}

TEST(SafetensorsHeader, RejectsRankAboveFourAsUnimplemented) {
  EXPECT_ERROR(
      parse_header(R"({"w": {"dtype": "U8", "shape": [1, 1, 1, 1, 1], "data_offsets": [0, 1]}})"),
      StatusCode::kUnimplemented, "rank 5");
}

TEST(SafetensorsHeader, RejectsShapeProductOverflow) {
  // 2^32 * 2^32 = 2^64 elements.
  EXPECT_ERROR(parse_header(R"({"w": {"dtype": "U8", "shape": [4294967296, 4294967296],
                                      "data_offsets": [0, 8]}})"),
               StatusCode::kDataLoss, "overflows");
  // 2^62 elements fit, but 2^62 * 4 bytes does not.
  EXPECT_ERROR(parse_header(R"({"w": {"dtype": "F32", "shape": [4611686018427387904],
                                      "data_offsets": [0, 8]}})"),
               StatusCode::kDataLoss, "overflows");
}

TEST(SafetensorsHeader, RejectsOffsetsWithBeginAfterEnd) {
  EXPECT_ERROR(parse_header(R"({"w": {"dtype": "U8", "shape": [0], "data_offsets": [8, 4]}})"),
               StatusCode::kDataLoss, "begin is after its end");
}

TEST(SafetensorsHeader, RejectsTensorEndingBeyondTheDataSection) {
  EXPECT_ERROR(
      parse_header(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 8),
      StatusCode::kDataLoss,
      "tensor 'w' ends at byte 16 but the file's data section has 8 bytes: the file is truncated");
}

TEST(SafetensorsHeader, RejectsByteCountThatDisagreesWithShapeAndDtype) {
  EXPECT_ERROR(parse_header(R"({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}})"),
               StatusCode::kDataLoss, "needs 24");
}

TEST(SafetensorsHeader, RejectsOverlappingTensors) {
  EXPECT_ERROR(parse_header(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                                "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})"),
               StatusCode::kDataLoss, "overlap");
  // Fully contained, listed in the other order.
  EXPECT_ERROR(parse_header(R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [4, 6]},
                                "b": {"dtype": "U8", "shape": [16], "data_offsets": [0, 16]}})"),
               StatusCode::kDataLoss, "overlap");
}

TEST(SafetensorsHeader, RejectsMisalignedTensor) {
  EXPECT_ERROR(parse_header(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [2, 6]}})"),
               StatusCode::kDataLoss, "element size");
}

TEST(SafetensorsHeader, RequiresMetadataToBeAnObjectOfStrings) {
  EXPECT_ERROR(parse_header(R"({"__metadata__": ["pt"]})"), StatusCode::kDataLoss,
               "'__metadata__' is an array");
  EXPECT_ERROR(parse_header(R"({"__metadata__": {"format": 1}})"), StatusCode::kDataLoss,
               "'__metadata__' entry 'format' is an integer");
}

TEST(SafetensorsFile, MissingFileIsNotFound) {
  TempDir dir;
  auto f = SafetensorsFile::open(dir.file("absent.safetensors"));
  EXPECT_EQ(f.status().code(), StatusCode::kNotFound) << f.status().to_string();
}

TEST(SafetensorsFile, TruncatedFileOnDiskNamesThePath) {
  std::string file = make_safetensors({{"w", "F32", {4}, f32_bytes({1, 2, 3, 4})}});
  TempDir dir;
  dir.write("cut.safetensors", file.substr(0, file.size() - 4));
  auto f = SafetensorsFile::open(dir.file("cut.safetensors"));
  EXPECT_EQ(f.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(f.status().message().find(dir.file("cut.safetensors")), std::string::npos);
  EXPECT_NE(f.status().message().find("truncated"), std::string::npos);
}

TEST(SafetensorsFile, UnknownTensorIsNotFound) {
  TempDir dir;
  dir.write("m.safetensors", make_safetensors({{"w", "U8", {1}, "x"}}));
  auto f = SafetensorsFile::open(dir.file("m.safetensors"));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  auto t = (*f)->tensor("nope");
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
  EXPECT_NE(t.status().message().find("'nope'"), std::string::npos);
}

}  // namespace
}  // namespace roofline
