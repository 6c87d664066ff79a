// Greedy-by-size offset assignment (see memory_planner.h).
#include "graph/memory_planner.h"

#include <algorithm>
#include <numeric>

namespace roofline {

namespace {
int64_t align_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }
bool lifetimes_overlap(const BufferRequest& a, const BufferRequest& b) {
  return a.first_use <= b.last_use && b.first_use <= a.last_use;
}
}  // namespace

MemoryPlan plan_memory(const std::vector<BufferRequest>& requests, int64_t alignment) {
  MemoryPlan plan;
  plan.offsets.assign(requests.size(), -1);
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return requests[a].size_bytes > requests[b].size_bytes;
  });
  std::vector<size_t> placed;
  for (size_t idx : order) {
    const BufferRequest& r = requests[idx];
    // Collect the placed buffers that are live at the same time, sorted by offset, and take the
    // first gap large enough.
    std::vector<std::pair<int64_t, int64_t>> busy;  // [begin, end)
    for (size_t p : placed)
      if (lifetimes_overlap(r, requests[p]))
        busy.emplace_back(plan.offsets[p], plan.offsets[p] + requests[p].size_bytes);
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (const auto& [begin, end] : busy) {
      if (offset + r.size_bytes <= begin) break;
      offset = std::max(offset, align_up(end, alignment));
    }
    plan.offsets[idx] = offset;
    plan.total_bytes = std::max(plan.total_bytes, align_up(offset + r.size_bytes, alignment));
    placed.push_back(idx);
  }
  return plan;
}

int64_t peak_live_bytes(const std::vector<BufferRequest>& requests) {
  int last = 0;
  for (const auto& r : requests) last = std::max(last, r.last_use);
  int64_t peak = 0;
  for (int t = 0; t <= last; ++t) {
    int64_t live = 0;
    for (const auto& r : requests)
      if (r.first_use <= t && t <= r.last_use) live += r.size_bytes;
    peak = std::max(peak, live);
  }
  return peak;
}

bool memory_plan_is_valid(const std::vector<BufferRequest>& requests, const MemoryPlan& plan) {
  if (plan.offsets.size() != requests.size()) return false;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (plan.offsets[i] < 0 || plan.offsets[i] + requests[i].size_bytes > plan.total_bytes)
      return false;
    for (size_t j = i + 1; j < requests.size(); ++j) {
      if (!lifetimes_overlap(requests[i], requests[j])) continue;
      const int64_t a0 = plan.offsets[i], a1 = a0 + requests[i].size_bytes;
      const int64_t b0 = plan.offsets[j], b1 = b0 + requests[j].size_bytes;
      if (a0 < b1 && b0 < a1 && requests[i].size_bytes > 0 && requests[j].size_bytes > 0)
        return false;
    }
  }
  return true;
}

}  // namespace roofline
