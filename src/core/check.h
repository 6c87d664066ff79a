// Internal invariant checks: a broken invariant is a bug in roofline, never bad user input, so it
// aborts with the expression, file and line instead of returning a Status.
#pragma once

#include <cstdio>
#include <cstdlib>

#define ROOFLINE_CHECK(cond)                                                                  \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::fprintf(stderr, "roofline: internal check failed: %s at %s:%d\n", #cond, __FILE__, \
                   __LINE__);                                                                 \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)

#define ROOFLINE_CHECK_MSG(cond, msg)                                                         \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::fprintf(stderr, "roofline: internal check failed: %s (%s) at %s:%d\n", #cond, msg, \
                   __FILE__, __LINE__);                                                       \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)
