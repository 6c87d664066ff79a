// env_switch: "0" turns a switch off; "1", unset or anything else (with a warning) leaves it on.
// env_choice: a value's position among the listed ones; unset or anything else (with a warning)
// the first.
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

TEST(EnvSwitchTest, ChoiceIsTheValuesPositionAndTheFirstOtherwise) {
  constexpr const char* kName = "ROOFLINE_ENV_CHOICE_TEST";
  const auto choice = [&] { return env_choice(kName, {"auto", "fused", "apart"}, "a, b or c"); };
  unsetenv(kName);
  EXPECT_EQ(choice(), 0);
  setenv(kName, "auto", 1);
  EXPECT_EQ(choice(), 0);
  setenv(kName, "fused", 1);
  EXPECT_EQ(choice(), 1);
  setenv(kName, "apart", 1);
  EXPECT_EQ(choice(), 2);
  for (const char* other : {"", "Apart", "apart ", "2", "fusedapart"}) {
    setenv(kName, other, 1);
    EXPECT_EQ(choice(), 0) << "'" << other << "'";
  }
  unsetenv(kName);
}

}  // namespace
}  // namespace roofline
