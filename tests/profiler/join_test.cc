// join.h on synthetic CUPTI records with known answers: the learning step's marker brackets give
// each activity its plan call; measured steps (eager launches or one graph launch per step) get
// the learned calls by device order within their host windows; a step whose activity differs is
// left unattributed.
#include "profiler/join.h"

#include <gtest/gtest.h>

namespace roofline {
namespace {

using Kind = TraceEvent::Kind;

DeviceActivity act(const char* name, int64_t start, uint32_t corr, Kind kind = Kind::kCompute) {
  return {name, kind, start, start + 5, 7, corr};
}

// Learning step in [100, 200]: a step marker, then call 0 = kernel A, call 1 = kernels B and C;
// an upload before the calls and a download after them. Activity listed out of device order.
struct LearningStep {
  std::vector<DeviceActivity> activity = {
      act("B", 1050, 4), act("upload", 1000, 1, Kind::kMemcpy), act("A", 1020, 2),
      act("download", 1080, 6, Kind::kMemcpy), act("C", 1060, 5)};
  std::vector<HostApiCall> api = {
      {10, 101, true},                                                     // step marker
      {1, 102, false},                                                     // upload
      {11, 103, true}, {2, 104, false}, {12, 105, true},                   // call 0: A
      {13, 106, true}, {4, 107, false}, {5, 108, false}, {14, 109, true},  // call 1: B, C
      {6, 110, false},                                                     // download
      {2, 104, false},  // a driver call beneath the runtime launch of A: same id
  };
};

TEST(JoinTest, LearnsEachActivitysCallFromTheMarkers) {
  LearningStep l;
  const CallSequence seq = learn_call_sequence(l.activity, l.api, {0, 100, 200}, 2);
  EXPECT_EQ(seq.call_index, (std::vector<int>{-1, 0, 1, 1, -1}));
  EXPECT_EQ(seq.names, (std::vector<std::string>{"upload", "A", "B", "C", "download"}));
}

TEST(JoinTest, WrongMarkerCountGivesNoSequence) {
  LearningStep l;
  const CallSequence three = learn_call_sequence(l.activity, l.api, {0, 100, 200}, 3);
  EXPECT_TRUE(three.call_index.empty());
  EXPECT_EQ(three.markers, 5);  // what the profile's error reports
  // A window that leaves the step marker out sees 4 markers for 2 calls.
  const CallSequence late = learn_call_sequence(l.activity, l.api, {0, 102, 200}, 2);
  EXPECT_TRUE(late.call_index.empty());
  EXPECT_EQ(late.markers, 4);
}

// A step's own events (the CUDA backend's staging event before the calls, its outputs' event
// after them) are API calls that are not markers (cudaEventRecord, not the brackets'
// cudaEventRecordWithFlags): the brackets still count 2 · calls + 1 and the calls are learned as
// without them.
TEST(JoinTest, EventsThatAreNotMarkersLeaveTheBracketsAlone) {
  LearningStep l;
  l.api.push_back({20, 100, false});  // the staging's event, before the step marker
  l.api.push_back({21, 111, false});  // the outputs' event, after the download
  const CallSequence seq = learn_call_sequence(l.activity, l.api, {0, 100, 200}, 2);
  EXPECT_EQ(seq.markers, 5);
  EXPECT_EQ(seq.call_index, (std::vector<int>{-1, 0, 1, 1, -1}));
}

TEST(JoinTest, GraphAndEagerStepsGetTheLearnedCallsByDeviceOrder) {
  LearningStep l;
  const CallSequence seq = learn_call_sequence(l.activity, l.api, {0, 100, 200}, 2);
  // Device times inside the steps' host windows (the step's synchronous download ends each).
  std::vector<DeviceActivity> a = {
      // step 5 [3000, 4000]: one graph launch (id 30) ran A, B, C; upload and download apart.
      act("C", 3060, 30), act("A", 3020, 30), act("upload", 3000, 31, Kind::kMemcpy),
      act("B", 3040, 30), act("download", 3080, 32, Kind::kMemcpy),
      // step 6 [5000, 6000]: eager, one launch each.
      act("upload", 5000, 41, Kind::kMemcpy), act("A", 5010, 42), act("B", 5020, 43),
      act("C", 5030, 44), act("download", 5040, 45, Kind::kMemcpy),
      // step 7 [7000, 8000]: kernel C is missing: unattributed.
      act("upload", 7000, 51, Kind::kMemcpy), act("A", 7010, 52), act("B", 7020, 53),
      act("download", 7040, 55, Kind::kMemcpy),
      // outside every step.
      act("stray", 9000, 60)};
  const JoinResult r = join_steps(a, {{5, 3000, 4000}, {6, 5000, 6000}, {7, 7000, 8000}}, seq);
  EXPECT_EQ(r.steps_joined, 2);
  EXPECT_EQ(r.steps_unmatched, 1);
  EXPECT_EQ(r.activities_outside_steps, 1);
  ASSERT_EQ(r.events.size(), 14u);
  const std::vector<std::pair<std::string, int>> want5 = {
      {"upload", -1}, {"A", 0}, {"B", 1}, {"C", 1}, {"download", -1}};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(r.events[i].step, 5);
    EXPECT_EQ(r.events[i].name, want5[i].first);
    EXPECT_EQ(r.events[i].call_index, want5[i].second) << i;
  }
  for (size_t i = 5; i < 10; ++i) {
    EXPECT_EQ(r.events[i].step, 6);
    EXPECT_EQ(r.events[i].call_index, want5[i - 5].second) << i;
  }
  EXPECT_EQ(r.events[5].kind, Kind::kMemcpy);
  EXPECT_EQ(r.events[6].start_ns, 5010);
  for (size_t i = 10; i < 14; ++i) {
    EXPECT_EQ(r.events[i].step, 7);
    EXPECT_EQ(r.events[i].call_index, -1) << i;
  }
  EXPECT_EQ(r.first_mismatch,
            "step 7: 4 activities, the learning step 5; 'C' 0 times, in the learning "
            "step 1");
}

// Kernels of a programmatic-dependent-launch chain overlap; two that start within the timer's
// resolution may come in another device order than in the learning step. Each keeps its own call
// (the k-th of a name takes the k-th of that name's calls); a step with one kernel too many of a
// name stays unattributed, and says which. A step with its upload in two copies (a graph replay's
// inputs) and a kernel the learning step never ran (a decode graph's sampling) still joins: those
// stay outside every call.
TEST(JoinTest, ActivitiesOutOfTheLearnedOrderKeepTheirCalls) {
  LearningStep l;
  const CallSequence seq = learn_call_sequence(l.activity, l.api, {0, 100, 200}, 2);
  std::vector<DeviceActivity> a = {
      // step 1 [3000, 4000]: B (call 1) starts before A (call 0), C last.
      act("upload", 3000, 31, Kind::kMemcpy), act("B", 3010, 30), act("A", 3011, 30),
      act("C", 3040, 30), act("download", 3080, 32, Kind::kMemcpy),
      // step 2 [5000, 6000]: A twice, C missing.
      act("upload", 5000, 41, Kind::kMemcpy), act("A", 5010, 42), act("B", 5020, 43),
      act("A", 5030, 44), act("download", 5040, 45, Kind::kMemcpy),
      // step 3 [7000, 8000]: two uploads, and a kernel the learning step did not run.
      act("upload", 7000, 51, Kind::kMemcpy), act("upload", 7001, 52, Kind::kMemcpy),
      act("A", 7010, 50), act("B", 7020, 50), act("C", 7030, 50), act("sample", 7035, 50),
      act("download", 7040, 53, Kind::kMemcpy)};
  const JoinResult r = join_steps(a, {{1, 3000, 4000}, {2, 5000, 6000}, {3, 7000, 8000}}, seq);
  EXPECT_EQ(r.steps_joined, 2);
  EXPECT_EQ(r.steps_unmatched, 1);
  ASSERT_EQ(r.events.size(), 17u);
  const std::vector<int> want3 = {-1, -1, 0, 1, 1, -1, -1};
  for (size_t i = 10; i < 17; ++i) EXPECT_EQ(r.events[i].call_index, want3[i - 10]) << i;
  const std::vector<std::pair<std::string, int>> want1 = {
      {"upload", -1}, {"B", 1}, {"A", 0}, {"C", 1}, {"download", -1}};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(r.events[i].name, want1[i].first) << i;
    EXPECT_EQ(r.events[i].call_index, want1[i].second) << i;
  }
  for (size_t i = 5; i < 10; ++i) EXPECT_EQ(r.events[i].call_index, -1) << i;
  EXPECT_EQ(r.first_mismatch,
            "step 2: 5 activities, the learning step 5; 'A' 2 times, in the learning step 1");
}

TEST(JoinTest, AWarmUpsGraphLaunchesAreLeftOutByCorrelation) {
  // Two warm-up launches (ids 3 and 5, their kernels and the set inside the graph), then the
  // traced step: its upload (id 8), its graph launch (id 9), its download (id 10). CUPTI's
  // times after a re-attach need not order them, so the records come shuffled in time.
  const std::vector<DeviceActivity> recorded = {act("A", 500, 9),
                                                act("A", 10, 3),
                                                act("set", 12, 3, Kind::kMemcpy),
                                                act("B", 15, 3),
                                                act("A", 20, 5),
                                                act("B", 25, 5),
                                                act("set", 22, 5, Kind::kMemcpy),
                                                act("upload", 400, 8, Kind::kMemcpy),
                                                act("B", 520, 9),
                                                act("set", 510, 9, Kind::kMemcpy),
                                                act("download", 600, 10, Kind::kMemcpy)};
  std::vector<std::string> names;
  for (const DeviceActivity& a : after_graph_launches(recorded, 2)) names.push_back(a.name);
  EXPECT_EQ(names, (std::vector<std::string>{"A", "upload", "B", "set", "download"}));
  // One warm-up launch: the second launch's records stay.
  EXPECT_EQ(after_graph_launches(recorded, 1).size(), 8u);
  // None asked: all of it; more launches than recorded: nothing.
  EXPECT_EQ(after_graph_launches(recorded, 0).size(), recorded.size());
  EXPECT_TRUE(after_graph_launches(recorded, 4).empty());
}

TEST(JoinTest, NcclKernelsAreCommunication) {
  EXPECT_EQ(kernel_kind("ncclDevKernel_AllReduce_Sum_bf16_RING_LL"), Kind::kCommunication);
  EXPECT_EQ(kernel_kind("ncclKernel_AllGather_RING_LL_Sum_int8_t"), Kind::kCommunication);
  EXPECT_EQ(kernel_kind("matmul_skinny_kernel<1, true, false, false>"), Kind::kCompute);
  EXPECT_EQ(kernel_kind("my_nccl_like_kernel"), Kind::kCompute);  // a prefix, not a substring
  EXPECT_EQ(kernel_kind(""), Kind::kCompute);
}

}  // namespace
}  // namespace roofline
