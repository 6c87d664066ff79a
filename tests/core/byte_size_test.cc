// parse_byte_size: units, decimals, and clear errors for anything else.
#include "core/byte_size.h"

#include <gtest/gtest.h>

namespace roofline {
namespace {

TEST(ByteSizeTest, ParsesNumbersWithDecimalAndBinaryUnits) {
  EXPECT_EQ(*parse_byte_size("4096"), 4096);
  EXPECT_EQ(*parse_byte_size("0"), 0);
  EXPECT_EQ(*parse_byte_size("12B"), 12);
  EXPECT_EQ(*parse_byte_size("8GiB"), int64_t{8} << 30);
  EXPECT_EQ(*parse_byte_size("512mib"), int64_t{512} << 20);
  EXPECT_EQ(*parse_byte_size(" 1.5 GB "), 1500000000);
  EXPECT_EQ(*parse_byte_size("2KB"), 2000);
  EXPECT_EQ(*parse_byte_size("1KiB"), 1024);
  EXPECT_EQ(*parse_byte_size("1TiB"), int64_t{1} << 40);
  EXPECT_EQ(*parse_byte_size("0.5KiB"), 512);
}

TEST(ByteSizeTest, RejectsWhatIsNotASizeWithAnExample) {
  for (const char* text : {"", "GiB", "-1GiB", "8 GiB x", "8XB", "1..5GB", "abc", "8GiBs"}) {
    auto r = parse_byte_size(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_NE(r.status().message().find("8GiB"), std::string::npos) << r.status().to_string();
  }
  auto huge = parse_byte_size("9000000TiB");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace roofline
