// Shared helpers of the end-to-end tests: the Hugging Face goldens of a fixture model
// (tests/fixtures/make_fixtures.py) and an element-wise logits comparison that reports the worst
// element and prints the largest difference (the figure the tolerances are set from).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/npy.h"

namespace roofline::testing {

inline std::string fixture_dir(const std::string& name) {
  return std::string(ROOFLINE_SOURCE_DIR) + "/tests/fixtures/models/" + name;
}

struct Golden {
  std::vector<int32_t> prompt;
  std::vector<int32_t> generated;
  NpyArray logits;  // [prompt + generated, vocab]: row i = logits after token i
};

inline Golden load_golden(const std::string& name) {
  Golden g;
  std::ifstream in(fixture_dir(name) + "/golden.json");
  nlohmann::json j = nlohmann::json::parse(in);
  g.prompt = j["prompt_ids"].get<std::vector<int32_t>>();
  g.generated = j["generated_ids"].get<std::vector<int32_t>>();
  auto logits = read_npy(fixture_dir(name) + "/golden_logits.npy");
  EXPECT_TRUE(logits.ok()) << logits.status().to_string();
  if (logits.ok()) g.logits = std::move(logits).value();
  return g;
}

// Every element within atol + rtol * |want|; NaN never passes.
inline void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                         int64_t vocab, float atol, float rtol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst_excess = -1, worst_diff = 0, max_diff = 0;
  size_t worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i]))
        << what << ": NaN at row " << i / vocab << " col " << i % vocab;
    const double diff = std::fabs(static_cast<double>(got[i]) - want[i]);
    max_diff = std::max(max_diff, diff);
    const double excess = diff - (atol + rtol * std::fabs(want[i]));
    if (excess > worst_excess) {
      worst_excess = excess;
      worst = i;
      worst_diff = diff;
    }
  }
  EXPECT_LE(worst_excess, 0.0) << what << ": row " << worst / vocab << " col " << worst % vocab
                               << " got " << got[worst] << " want " << want[worst] << " (|diff| "
                               << worst_diff << ")";
  std::printf("%s: max |diff| %.3g\n", what.c_str(), max_diff);
}

}  // namespace roofline::testing
