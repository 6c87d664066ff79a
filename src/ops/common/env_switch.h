// A/B switches from the environment, for the CUDA launchers' variants that a device run compares
// in one binary (ROOFLINE_SKINNY_ROPE, ROOFLINE_SKINNY_RING_FIT, ROOFLINE_SKINNY_NORM, ...): read
// once by the caller.
#pragma once

#include <cstdlib>
#include <initializer_list>
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

// The position of `name`'s value among `values`, the first of which is the default: 0 when unset;
// any other value is ignored (0) with a warning that lists the values and what they mean
// (`meanings`, e.g. "auto (measured, the default), fused or apart").
inline int env_choice(const char* name, std::initializer_list<const char*> values,
                      const char* meanings) {
  const char* env = std::getenv(name);
  if (env == nullptr) return 0;
  const std::string value = env;
  int index = 0;
  for (const char* v : values) {
    if (value == v) return index;
    ++index;
  }
  ROOFLINE_LOG(kWarning, name << "='" << value << "' is not one of " << meanings << ": ignored ("
                              << *values.begin() << ")");
  return 0;
}

}  // namespace roofline
