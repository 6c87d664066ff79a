// An A/B switch from the environment, for the CUDA launchers' variants that a device run compares
// in one binary (ROOFLINE_SKINNY_ROPE, ROOFLINE_SKINNY_RING_FIT, ...): read once by the caller.
#pragma once

#include <cstdlib>
#include <string>

#include "core/log.h"

namespace roofline {

// False for "0", true for "1" or when `name` is unset; any other value is ignored (true) with a
// warning that says what 0 (`off`) and 1 (`on`) mean.
inline bool env_switch(const char* name, const char* off, const char* on) {
  const char* env = std::getenv(name);
  if (env == nullptr) return true;
  const std::string value = env;
  if (value == "0") return false;
  if (value != "1") {
    ROOFLINE_LOG(kWarning, name << "='" << value << "' is not 0 (" << off << ") or 1 (" << on
                                << "): ignored (1)");
  }
  return true;
}

}  // namespace roofline
