#include "profiler/join.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

namespace roofline {

namespace {

// Host launch time of each correlation id: the earliest API call carrying it (a runtime call and
// the driver call beneath it share the id).
std::unordered_map<uint32_t, int64_t> launch_times(const std::vector<HostApiCall>& api) {
  std::unordered_map<uint32_t, int64_t> t;
  for (const HostApiCall& c : api) {
    auto [it, inserted] = t.emplace(c.correlation, c.start_ns);
    if (!inserted) it->second = std::min(it->second, c.start_ns);
  }
  return t;
}

bool device_order(const DeviceActivity* a, const DeviceActivity* b) {
  return a->start_ns != b->start_ns ? a->start_ns < b->start_ns : a->end_ns < b->end_ns;
}

}  // namespace

TraceEvent::Kind kernel_kind(const std::string& name) {
  return name.rfind("nccl", 0) == 0 ? TraceEvent::Kind::kCommunication : TraceEvent::Kind::kCompute;
}

CallSequence learn_call_sequence(const std::vector<DeviceActivity>& activity,
                                 const std::vector<HostApiCall>& api, const StepWindow& window,
                                 int num_calls) {
  std::vector<int64_t> markers;
  for (const HostApiCall& c : api)
    if (c.is_marker && c.start_ns >= window.start_ns && c.start_ns <= window.end_ns)
      markers.push_back(c.start_ns);
  std::sort(markers.begin(), markers.end());
  CallSequence seq;
  seq.markers = static_cast<int64_t>(markers.size());
  if (num_calls <= 0 || seq.markers != 2 * int64_t{num_calls} + 1) return seq;
  markers.erase(markers.begin());  // the step's own start marker

  const auto launched = launch_times(api);
  std::vector<const DeviceActivity*> in_step;
  std::vector<int64_t> launch;
  for (const DeviceActivity& a : activity) {
    const auto it = launched.find(a.correlation);
    if (it == launched.end() || it->second < window.start_ns || it->second > window.end_ns)
      continue;
    in_step.push_back(&a);
  }
  std::stable_sort(in_step.begin(), in_step.end(), device_order);
  for (const DeviceActivity* a : in_step) {
    const int64_t t = launched.at(a->correlation);
    // The last call marker at or before the launch: index 2i opens call i, 2i + 1 closes it.
    const auto after = std::upper_bound(markers.begin(), markers.end(), t);
    const int64_t k = (after - markers.begin()) - 1;
    seq.call_index.push_back(k >= 0 && k % 2 == 0 ? static_cast<int>(k / 2) : -1);
    seq.names.push_back(a->name);
    seq.kinds.push_back(a->kind);
  }
  return seq;
}

JoinResult join_steps(const std::vector<DeviceActivity>& activity,
                      const std::vector<StepWindow>& steps, const CallSequence& sequence) {
  JoinResult r;
  std::vector<std::vector<const DeviceActivity*>> per_step(steps.size());
  for (const DeviceActivity& a : activity) {
    bool placed = false;
    for (size_t s = 0; s < steps.size() && !placed; ++s) {
      if (a.start_ns >= steps[s].start_ns && a.start_ns <= steps[s].end_ns) {
        per_step[s].push_back(&a);
        placed = true;
      }
    }
    if (!placed) ++r.activities_outside_steps;
  }
  // The learned sequence's indices per name, in order: occurrence k of a name in a step takes
  // the call of that name's occurrence k in the sequence.
  std::unordered_map<std::string, std::vector<size_t>> learned;
  for (size_t i = 0; i < sequence.names.size(); ++i) learned[sequence.names[i]].push_back(i);
  for (size_t s = 0; s < steps.size(); ++s) {
    auto& acts = per_step[s];
    if (acts.empty()) continue;
    std::stable_sort(acts.begin(), acts.end(), device_order);
    std::unordered_map<std::string, std::vector<size_t>> seen;
    for (size_t i = 0; i < acts.size(); ++i) seen[acts[i]->name].push_back(i);
    // Names whose count differs from the learning step's, the smallest first (deterministic).
    std::vector<std::string> differing;
    for (const auto& [name, at] : seen) {
      const auto it = learned.find(name);
      if ((it == learned.end() ? 0 : it->second.size()) != at.size()) differing.push_back(name);
    }
    for (const auto& [name, at] : learned)
      if (seen.count(name) == 0) differing.push_back(name);
    std::sort(differing.begin(), differing.end());
    // Kernels of the learning step decide. A copy or set counted differently (a graph replay
    // uploads its inputs in other pieces than an eager step), or a kernel the learning step did
    // not run at all (a decode graph ends with its sampling kernel, outside the plan's calls),
    // stays outside every call and the step still joins.
    bool match = true;
    std::string kernel_differing;
    for (const std::string& name : differing) {
      const auto it = learned.find(name);
      if (it != learned.end() && sequence.kinds[it->second.front()] != TraceEvent::Kind::kMemcpy) {
        match = false;
        if (kernel_differing.empty()) kernel_differing = name;
      }
    }
    if (match) {
      ++r.steps_joined;
    } else {
      ++r.steps_unmatched;
      if (r.first_mismatch.empty()) {
        const auto in_seq = learned.find(kernel_differing);
        const auto in_step = seen.find(kernel_differing);
        r.first_mismatch = "step " + std::to_string(steps[s].step) + ": " +
                           std::to_string(acts.size()) + " activities, the learning step " +
                           std::to_string(sequence.names.size()) + "; '" + kernel_differing + "' " +
                           std::to_string(in_step == seen.end() ? 0 : in_step->second.size()) +
                           " times, in the learning step " +
                           std::to_string(in_seq == learned.end() ? 0 : in_seq->second.size());
      }
    }
    std::unordered_map<std::string, size_t> occurrence;
    for (size_t i = 0; i < acts.size(); ++i) {
      TraceEvent e;
      e.name = acts[i]->name;
      e.kind = acts[i]->kind;
      e.start_ns = acts[i]->start_ns;
      e.end_ns = acts[i]->end_ns;
      e.stream = acts[i]->stream;
      e.step = steps[s].step;
      e.call_index = -1;
      if (match && !std::binary_search(differing.begin(), differing.end(), e.name)) {
        const size_t k = occurrence[e.name]++;
        e.call_index = sequence.call_index[learned.at(e.name)[k]];
      }
      r.events.push_back(std::move(e));
    }
  }
  return r;
}

std::vector<DeviceActivity> after_graph_launches(std::vector<DeviceActivity> activity,
                                                 int launches) {
  if (launches <= 0) return activity;
  std::vector<uint32_t> ids;
  for (const DeviceActivity& a : activity)
    if (a.kind == TraceEvent::Kind::kCompute) ids.push_back(a.correlation);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  if (ids.size() < static_cast<size_t>(launches)) return {};
  const uint32_t last_warm = ids[static_cast<size_t>(launches) - 1];
  activity.erase(
      std::remove_if(activity.begin(), activity.end(),
                     [&](const DeviceActivity& a) { return a.correlation <= last_warm; }),
      activity.end());
  return activity;
}

}  // namespace roofline
