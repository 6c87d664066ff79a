// CuptiTracer on CUPTI's activity API: kernels as CONCURRENT_KERNEL records (graph replays
// included; the concurrent kind does not serialise kernels; measured on the H200, the KERNEL kind
// records almost none of a graph's kernels, and host-pinned buffers or starting after capture do
// not lower the concurrent kind's ~1 us a graph-launched kernel:
// bench/results/2026-12-01-cupti-graph-overhead.md), memcpy, memset, and, when asked,
// RUNTIME + DRIVER API records for the launch times, correlation ids and markers join.h's learning
// step needs. CUPTI hands out full
// buffers from its own threads, so the parsed records go to one mutex-guarded store, which also
// keeps them across a detach (cuptiFinalize) and a later attach.
#include "profiler/cupti_tracer.h"

#include <cupti.h>
#include <cxxabi.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace roofline {

namespace {

constexpr size_t kBufferBytes = size_t{8} << 20;
constexpr size_t kBufferAlign = 8;

struct Store {
  std::mutex mu;
  CuptiTracer::Records records;
};
Store& store() {
  static Store s;
  return s;
}
bool g_active = false;  // one tracer per process

uint64_t CUPTIAPI steady_timestamp() { return static_cast<uint64_t>(CuptiTracer::now_ns()); }

// The kernel's demangled name without what makes it long and adds nothing in a report: the
// return type, the parameter list and our own namespaces (template arguments stay: they tell
// the variants apart).
std::string kernel_name(const char* mangled) {
  if (mangled == nullptr) return "(unnamed kernel)";
  int status = 0;
  char* out = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string s = status == 0 && out != nullptr ? out : mangled;
  std::free(out);
  if (s.rfind("void ", 0) == 0) s.erase(0, 5);
  // The parameter list: the last top-level "(...)".
  if (!s.empty() && s.back() == ')') {
    int depth = 0;
    for (size_t i = s.size(); i-- > 0;) {
      if (s[i] == ')') ++depth;
      if (s[i] == '(' && --depth == 0) {
        s.erase(i);
        break;
      }
    }
  }
  for (const char* prefix :
       {"roofline::(anonymous namespace)::", "roofline::cuda::", "roofline::"}) {
    for (size_t at; (at = s.find(prefix)) != std::string::npos;) s.erase(at, std::strlen(prefix));
  }
  return s;
}

const char* memcpy_name(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return "memcpy HtoH";
    default:
      return "memcpy";
  }
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_size) {
  CuptiTracer::Records parsed;
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        std::string name = kernel_name(k->name);
        const TraceEvent::Kind kind = kernel_kind(name);
        parsed.activity.push_back({std::move(name), kind, static_cast<int64_t>(k->start),
                                   static_cast<int64_t>(k->end), static_cast<int>(k->streamId),
                                   k->correlationId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        parsed.activity.push_back({memcpy_name(m->copyKind), TraceEvent::Kind::kMemcpy,
                                   static_cast<int64_t>(m->start), static_cast<int64_t>(m->end),
                                   static_cast<int>(m->streamId), m->correlationId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        parsed.activity.push_back({"memset", TraceEvent::Kind::kMemcpy,
                                   static_cast<int64_t>(m->start), static_cast<int64_t>(m->end),
                                   static_cast<int>(m->streamId), m->correlationId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER: {
        const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
        const bool marker =
            record->kind == CUPTI_ACTIVITY_KIND_RUNTIME &&
            (a->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaEventRecordWithFlags_v11010 ||
             a->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaEventRecordWithFlags_ptsz_v11010);
        parsed.api.push_back({a->correlationId, static_cast<int64_t>(a->start), marker});
        break;
      }
      default:
        break;
    }
  }
  size_t dropped = 0;
  cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped);
  std::free(buffer);
  Store& s = store();
  std::lock_guard<std::mutex> lock(s.mu);
  for (auto& a : parsed.activity) s.records.activity.push_back(std::move(a));
  for (auto& a : parsed.api) s.records.api.push_back(a);
  s.records.dropped += static_cast<int64_t>(dropped);
}

constexpr CUpti_ActivityKind kDeviceKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET};
// API records cost host time on every launch (measured: +37 % on an eager 0.5B-model step with
// them, against the device kinds' few %): on only while join.h's learning step runs.
constexpr CUpti_ActivityKind kApiKinds[] = {CUPTI_ACTIVITY_KIND_RUNTIME,
                                            CUPTI_ACTIVITY_KIND_DRIVER};

// Enables or disables every kind of `kinds`; true when all calls succeeded.
template <size_t N>
bool set_kinds(const CUpti_ActivityKind (&kinds)[N], bool on) {
  bool all = true;
  for (CUpti_ActivityKind k : kinds)
    all = (on ? cuptiActivityEnable(k) : cuptiActivityDisable(k)) == CUPTI_SUCCESS && all;
  return all;
}

Status cupti_status(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return ok_status();
  const char* text = nullptr;
  cuptiGetResultString(r, &text);
  return internal_error(std::string("CUPTI ") + what +
                        " failed: " + (text ? text : "unknown error") +
                        " (is another profiler, e.g. nsys or ncu, attached to this process?)");
}

// CUPTI forgets both registrations when it detaches (cuptiFinalize), so attaching registers them
// again.
Status register_callbacks() {
  ROOFLINE_RETURN_IF_ERROR(
      cupti_status(cuptiActivityRegisterTimestampCallback(steady_timestamp), "timestamp callback"));
  return cupti_status(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed),
                      "buffer callbacks");
}

}  // namespace

int64_t CuptiTracer::now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

StatusOr<std::unique_ptr<CuptiTracer>> CuptiTracer::start() {
  if (g_active) return internal_error("a CUPTI tracer is already running in this process");
  if (Status s = register_callbacks(); !s.ok()) return s;
  std::unique_ptr<CuptiTracer> t(new CuptiTracer());
  g_active = true;
  t->attached_ = true;
  t->set_recording(true);
  if (!t->recording_) {
    t->attached_ = false;  // the destructor then leaves CUPTI as it is
    g_active = false;
    return internal_error("CUPTI refused to record kernel activity (another profiler attached?)");
  }
  return t;
}

void CuptiTracer::set_recording(bool on) {
  if (on == recording_ || !attached_) return;
  if (!on && api_recording_) {
    set_kinds(kApiKinds, false);  // turning kinds off cannot leave anything half-recorded
    api_recording_ = false;
  }
  recording_ = set_kinds(kDeviceKinds, on) && on;
}

Status CuptiTracer::set_api_recording(bool on) {
  if (on == api_recording_) return ok_status();
  if (on && !recording_)
    return internal_error("CuptiTracer: API records without device records (detached?)");
  if (!set_kinds(kApiKinds, on) && on) {
    set_kinds(kApiKinds, false);
    return internal_error("CUPTI refused to record runtime / driver API calls");
  }
  api_recording_ = on;
  return ok_status();
}

Status CuptiTracer::detach() {
  if (!attached_) return ok_status();
  set_recording(false);
  // Everything completed goes to the store first: after cuptiFinalize CUPTI's buffers are gone.
  ROOFLINE_RETURN_IF_ERROR(
      cupti_status(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "flush"));
  ROOFLINE_RETURN_IF_ERROR(cupti_status(cuptiFinalize(), "detach (cuptiFinalize)"));
  attached_ = false;
  return ok_status();
}

Status CuptiTracer::attach() {
  if (attached_) return ok_status();
  ROOFLINE_RETURN_IF_ERROR(register_callbacks());
  attached_ = true;
  set_recording(true);
  if (!recording_) return internal_error("CUPTI refused to record kernel activity on re-attach");
  return ok_status();
}

CuptiTracer::Records CuptiTracer::take() {
  // Detached, the store holds everything (and any CUPTI call would attach it again).
  if (attached_) cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  Store& s = store();
  std::lock_guard<std::mutex> lock(s.mu);
  Records out = std::move(s.records);
  s.records = Records{};
  return out;
}

// Detaches, so that the process runs clean after a profile.
CuptiTracer::~CuptiTracer() {
  if (attached_) {
    set_recording(false);
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    cuptiFinalize();
  }
  Store& s = store();
  std::lock_guard<std::mutex> lock(s.mu);
  s.records = Records{};
  g_active = false;
}

}  // namespace roofline
