// The CPU executor: runs a Plan's calls in order, each through its op's CPU function. This is the
// reference backend and the one dispatch point from plan calls to CPU kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/plan.h"
#include "runtime/kv_cache.h"
#include "runtime/step_buffers.h"

namespace roofline {

struct CpuExecContext {
  uint8_t* workspace = nullptr;       // plan.workspace_bytes
  const StepBuffers* step = nullptr;
  KvCache* kv = nullptr;
  const float* rope_inv_freq = nullptr;  // [head_dim / 2]
};

// Runs every call of `plan` for the step in ctx. When call_ms is given it receives each call's
// wall time in milliseconds (the CPU side of the profiler).
void execute_plan_cpu(const Plan& plan, const CpuExecContext& ctx, std::vector<double>* call_ms);

}  // namespace roofline
