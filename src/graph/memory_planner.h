// Memory planner: places every activation of a plan in one workspace so that buffers whose
// lifetimes overlap never overlap in memory, and buffers whose lifetimes don't can share bytes.
//
// Algorithm: greedy by size (largest first), each buffer at the lowest aligned offset that does not
// collide with an already placed buffer whose [first_use, last_use] interval intersects its own.
// For a decoder's chain of activations this reaches the peak live size or close to it.
#pragma once

#include <cstdint>
#include <vector>

namespace roofline {

struct BufferRequest {
  int64_t size_bytes = 0;
  int first_use = 0;  // index of the node that writes it
  int last_use = 0;   // index of the last node that reads it (inclusive)
};

struct MemoryPlan {
  std::vector<int64_t> offsets;  // one per request
  int64_t total_bytes = 0;
};

MemoryPlan plan_memory(const std::vector<BufferRequest>& requests, int64_t alignment);

// The largest sum of sizes of buffers live at one node: the lower bound of total_bytes.
int64_t peak_live_bytes(const std::vector<BufferRequest>& requests);

// True when no two buffers with intersecting lifetimes overlap in memory and all fit in
// total_bytes; used by tests and debug checks.
bool memory_plan_is_valid(const std::vector<BufferRequest>& requests, const MemoryPlan& plan);

}  // namespace roofline
