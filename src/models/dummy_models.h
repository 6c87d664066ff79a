// Real models' shapes for --dummy-weights: the config of each, so benchmarks and profiles run
// without downloading weights (values come from runtime/dummy_weights.h).
#pragma once

#include <string>
#include <vector>

#include "io/model_config.h"
#include "roofline/status.h"

namespace roofline {

// The names --dummy-weights accepts, e.g. "llama3-8b".
std::vector<std::string> dummy_model_names();
// The config of a named shape; InvalidArgument listing the known names otherwise.
StatusOr<ModelConfig> dummy_model_config(const std::string& name);

}  // namespace roofline
