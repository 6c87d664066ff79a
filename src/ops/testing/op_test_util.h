// Shared helpers for the op tests: seeded random inputs, NaN poisoning and an element-wise
// tolerance check against a double-precision reference.
//
// Every run draws a fresh seed (std::random_device) so the tests see new inputs each time; the seed
// is printed in every failure message and ROOFLINE_TEST_SEED=<n> replays a failing run exactly.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace roofline::testing {

// An address with exactly the given alignment (no larger power of two up to 256) that nothing may
// dereference: for the CPU tests of host-side domain checks, which only inspect addresses.
inline const void* made_up_address(uintptr_t alignment) {
  return reinterpret_cast<const void*>(uintptr_t{0x100000} + (alignment < 256 ? alignment : 0));
}

// The seed of this test process: from ROOFLINE_TEST_SEED when set, else random.
inline uint32_t run_seed() {
  static const uint32_t seed = [] {
    if (const char* env = std::getenv("ROOFLINE_TEST_SEED")) {
      return static_cast<uint32_t>(std::strtoul(env, nullptr, 10));
    }
    return static_cast<uint32_t>(std::random_device{}());
  }();
  return seed;
}

inline std::string seed_note() {
  return "seed " + std::to_string(run_seed()) +
         " (replay with ROOFLINE_TEST_SEED=" + std::to_string(run_seed()) + ")";
}

// A generator per test case: the salt keeps cases independent of each other's draw counts, so
// one case's failure replays alone.
inline std::mt19937_64 make_rng(uint64_t salt) {
  std::seed_seq seq{run_seed(), static_cast<uint32_t>(salt), static_cast<uint32_t>(salt >> 32)};
  return std::mt19937_64(seq);
}

inline void fill_uniform(std::vector<float>& v, std::mt19937_64& rng, float lo = -1.0f,
                         float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  for (float& x : v) x = dist(rng);
}

inline std::vector<float> random_vector(int64_t n, std::mt19937_64& rng, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::vector<float> v(static_cast<size_t>(n));
  fill_uniform(v, rng, lo, hi);
  return v;
}

// NaN in every element, so an element the op forgot to write cannot pass for a right answer.
inline void poison(std::vector<float>& v) {
  for (float& x : v) x = std::numeric_limits<float>::quiet_NaN();
}

// Checks |actual - expected| <= atol + rtol * |expected| on every element (NaN never passes) and
// reports the number of failures and the worst element with its index.
template <typename Expected>
::testing::AssertionResult all_close(const float* actual, const Expected* expected, int64_t n,
                                     double atol, double rtol) {
  int64_t failures = 0;
  int64_t worst = -1;
  double worst_excess = -1.0;
  for (int64_t i = 0; i < n; ++i) {
    double a = actual[i];
    double e = static_cast<double>(expected[i]);
    double err = std::fabs(a - e);
    double tol = atol + rtol * std::fabs(e);
    bool ok = err <= tol;  // false for NaN
    if (!ok) {
      ++failures;
      double excess = std::isnan(err) ? std::numeric_limits<double>::infinity() : err - tol;
      if (excess > worst_excess || worst < 0) {
        worst_excess = excess;
        worst = i;
      }
    }
  }
  if (failures == 0) return ::testing::AssertionSuccess();
  std::ostringstream msg;
  msg.precision(9);
  msg << failures << " of " << n << " elements outside atol " << atol << " + rtol " << rtol
      << "·|ref|; worst at index " << worst << ": got " << actual[worst] << ", expected "
      << static_cast<double>(expected[worst]) << "; " << seed_note();
  return ::testing::AssertionFailure() << msg.str();
}

template <typename Expected>
::testing::AssertionResult all_close(const std::vector<float>& actual,
                                     const std::vector<Expected>& expected, double atol,
                                     double rtol) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure() << "size " << actual.size() << " != " << expected.size();
  }
  return all_close(actual.data(), expected.data(), static_cast<int64_t>(actual.size()), atol, rtol);
}

// Bitwise equality (NaN == NaN when the bits match), for results that must be identical.
inline ::testing::AssertionResult all_equal(const std::vector<float>& actual,
                                            const std::vector<float>& expected) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure() << "size " << actual.size() << " != " << expected.size();
  }
  for (size_t i = 0; i < actual.size(); ++i) {
    if (std::memcmp(&actual[i], &expected[i], sizeof(float)) != 0) {
      return ::testing::AssertionFailure() << "first difference at index " << i << ": " << actual[i]
                                           << " vs " << expected[i] << "; " << seed_note();
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace roofline::testing
