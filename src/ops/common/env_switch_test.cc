// env_switch: "0" turns a switch off; "1", unset or anything else (with a warning) leaves it on.
#include "ops/common/env_switch.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace roofline {
namespace {

TEST(EnvSwitchTest, ZeroTurnsOffAndEverythingElseLeavesOn) {
  constexpr const char* kName = "ROOFLINE_ENV_SWITCH_TEST";
  unsetenv(kName);
  EXPECT_TRUE(env_switch(kName, "off", "on"));
  setenv(kName, "0", 1);
  EXPECT_FALSE(env_switch(kName, "off", "on"));
  setenv(kName, "1", 1);
  EXPECT_TRUE(env_switch(kName, "off", "on"));
  for (const char* other : {"", "2", "off", "00", " 0"}) {
    setenv(kName, other, 1);
    EXPECT_TRUE(env_switch(kName, "off", "on")) << "'" << other << "'";
  }
  unsetenv(kName);
}

}  // namespace
}  // namespace roofline
