// .npy round trip, and hostile .npy files rejected with a reason.
#include "core/npy.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace roofline {
namespace {

std::string tmp_path(const std::string& name) {
  return ::testing::TempDir() + "/roofline_npy_" + name;
}

TEST(Npy, RoundTrip) {
  std::vector<float> data(3 * 5);
  for (size_t i = 0; i < data.size(); ++i) data[i] = 0.5f * static_cast<float>(i) - 3.0f;
  const std::string p = tmp_path("rt.npy");
  ASSERT_TRUE(write_npy_f32(p, {3, 5}, data.data()).ok());
  auto a = read_npy(p);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(a->shape, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(a->data, data);
  // 1-d shapes are written as "(n,)".
  ASSERT_TRUE(write_npy_f32(p, {4}, data.data()).ok());
  a = read_npy(p);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->shape, (std::vector<int64_t>{4}));
}

TEST(Npy, RejectsTruncatedAndForeignFiles) {
  std::vector<float> data(100, 1.0f);
  const std::string p = tmp_path("trunc.npy");
  ASSERT_TRUE(write_npy_f32(p, {10, 10}, data.data()).ok());
  std::ifstream in(p, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  std::ofstream(p, std::ios::binary) << bytes.substr(0, bytes.size() - 8);
  auto a = read_npy(p);
  EXPECT_EQ(a.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(a.status().message().find("truncated"), std::string::npos);

  std::ofstream(p, std::ios::binary) << "not a numpy file at all";
  EXPECT_EQ(read_npy(p).status().code(), StatusCode::kDataLoss);

  std::string header = "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }";
  std::string f =
      std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0' + header;
  std::ofstream(p, std::ios::binary) << f;
  EXPECT_EQ(read_npy(p).status().code(), StatusCode::kUnimplemented);

  header = "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999), }";
  f = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0' + header;
  std::ofstream(p, std::ios::binary) << f;
  EXPECT_FALSE(read_npy(p).ok());
  EXPECT_EQ(read_npy("/nonexistent.npy").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace roofline
