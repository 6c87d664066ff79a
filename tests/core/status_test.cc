// Status and StatusOr: messages, context and the propagation macros.
#include "roofline/status.h"

#include <gtest/gtest.h>

namespace roofline {
namespace {

StatusOr<int> parse_positive(int v) {
  if (v <= 0) return invalid_argument("value must be positive, got " + std::to_string(v));
  return v;
}

StatusOr<int> doubled(int v) {
  ROOFLINE_ASSIGN_OR_RETURN(int x, parse_positive(v));
  return 2 * x;
}

Status check(int v) {
  ROOFLINE_RETURN_IF_ERROR(parse_positive(v).status());
  return ok_status();
}

TEST(Status, PropagatesAndFormats) {
  EXPECT_EQ(*doubled(4), 8);
  auto bad = doubled(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().to_string(), "invalid argument: value must be positive, got -1");
  EXPECT_EQ(bad.status().with_context("reading x").message(),
            "reading x: value must be positive, got -1");
  EXPECT_TRUE(check(1).ok());
  EXPECT_EQ(check(0).code(), StatusCode::kInvalidArgument);
  // An ok Status cannot masquerade as a value-less StatusOr.
  StatusOr<int> weird(ok_status());
  EXPECT_FALSE(weird.ok());
  EXPECT_EQ(weird.status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace roofline
