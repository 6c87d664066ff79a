#include "runtime/calibration.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "core/thread_pool.h"
#include "ops/matmul/matmul.h"

namespace roofline {

// The CUDA half (calibration_cuda.cu, or calibration_cuda_none.cc in a CPU-only build).
StatusOr<CalibratedCeilings> calibrate_cuda_ceilings(int device);
StatusOr<std::string> cuda_device_name(int device);

namespace {

constexpr int64_t kCpuCopyBytes = int64_t{256} << 20;
constexpr int64_t kCpuGemmN = 1024;
constexpr int kRepeats = 5;

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
}

template <typename F>
double best_seconds(int repeats, F&& run) {
  double best = 1e30;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

std::string cpu_key() {
  return "cpu (" + std::to_string(ThreadPool::global().num_threads()) + " threads)";
}

// "cuda" -> 0, "cuda:N" -> N.
StatusOr<int> cuda_index(const std::string& device) {
  if (device == "cuda") return 0;
  const std::string prefix = "cuda:";
  if (device.rfind(prefix, 0) != 0 || device.size() == prefix.size())
    return invalid_argument("unknown device '" + device + "': cpu, cuda or cuda:N");
  int n = 0;
  for (size_t i = prefix.size(); i < device.size(); ++i) {
    if (device[i] < '0' || device[i] > '9' || n > 1000)
      return invalid_argument("unknown device '" + device + "': cpu, cuda or cuda:N");
    n = n * 10 + (device[i] - '0');
  }
  return n;
}

StatusOr<CalibratedCeilings> calibrate_cpu() {
  CalibratedCeilings c;
  c.device = cpu_key();
  c.measured = utc_now();
  // Copy bandwidth: every thread copies its own slice (one thread alone cannot saturate memory).
  std::vector<char> src(static_cast<size_t>(kCpuCopyBytes), 1),
      dst(static_cast<size_t>(kCpuCopyBytes));
  constexpr int64_t kSlice = int64_t{1} << 20;
  const double copy_s = best_seconds(kRepeats, [&] {
    ThreadPool::global().parallel_for(kCpuCopyBytes / kSlice, 4, [&](int64_t b, int64_t e) {
      std::memcpy(dst.data() + b * kSlice, src.data() + b * kSlice,
                  static_cast<size_t>((e - b) * kSlice));
    });
  });
  if (dst[static_cast<size_t>(kCpuCopyBytes - 1)] != 1)
    return internal_error("calibration copy did not copy");
  c.ceilings.bytes_per_s = 2.0 * static_cast<double>(kCpuCopyBytes) / copy_s;
  // GEMM peak: the CPU backend's own f32 GEMM.
  const int64_t n = kCpuGemmN;
  std::vector<float> x(static_cast<size_t>(n * n), 0.5f), w(static_cast<size_t>(n * n), 0.25f),
      y(static_cast<size_t>(n * n));
  MatmulParams p;
  p.x = x.data();
  p.w = w.data();
  p.w_dtype = DType::kF32;
  p.y = y.data();
  p.dtype = DType::kF32;
  p.m = p.n = p.k = n;
  p.y_row_stride = n;
  const double gemm_s = best_seconds(3, [&] { matmul_cpu(p); });
  if (std::fabs(y[0] - 0.125f * static_cast<float>(n)) > 1e-3f * static_cast<float>(n))
    return internal_error("calibration GEMM gave a wrong result");
  c.ceilings.flops_per_s = 2.0 * static_cast<double>(n) * n * n / gemm_s;
  return c;
}

bool plausible_handover(double handover_ns) {
  return handover_ns >= kMinPlausibleHandoverNs && handover_ns <= kMaxPlausibleHandoverNs;
}

}  // namespace

Status check_handover_ns(double handover_ns, const std::string& what) {
  if (plausible_handover(handover_ns)) return ok_status();
  char figures[160];
  std::snprintf(figures, sizeof figures,
                "a dependent-kernel handover of %.3g us, outside the plausible %g-%g us (the "
                "H200's: %.2f us)",
                handover_ns / 1e3, kMinPlausibleHandoverNs / 1e3, kMaxPlausibleHandoverNs / 1e3,
                kH200HandoverNs / 1e3);
  return out_of_range("calibration " + what + ": " + figures +
                      "; something else ran on the GPU meanwhile or the timing broke: rerun "
                      "--calibrate on an idle GPU");
}

StatusOr<std::string> ceilings_device_key(const std::string& device) {
  if (device == "cpu") return cpu_key();
  ROOFLINE_ASSIGN_OR_RETURN(int index, cuda_index(device));
  return cuda_device_name(index);
}

StatusOr<CalibratedCeilings> calibrate_ceilings(const std::string& device) {
  if (device == "cpu") return calibrate_cpu();
  ROOFLINE_ASSIGN_OR_RETURN(int index, cuda_index(device));
  ROOFLINE_ASSIGN_OR_RETURN(CalibratedCeilings c, calibrate_cuda_ceilings(index));
  ROOFLINE_RETURN_IF_ERROR(check_handover_ns(c.ceilings.handover_ns, "measured on " + c.device));
  c.ceilings.handover_calibrated = true;
  c.measured = utc_now();
  return c;
}

std::string default_ceilings_cache_path() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0')
    return std::string(xdg) + "/roofline/ceilings.json";
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0')
    return std::string(home) + "/.cache/roofline/ceilings.json";
  return "";
}

namespace {

StatusOr<nlohmann::json> read_cache(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nlohmann::json::object();  // no cache yet
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return data_loss("the ceilings cache '" + path +
                     "' is not a JSON object; delete it to recalibrate");
  return j;
}

}  // namespace

StatusOr<std::optional<CalibratedCeilings>> load_cached_ceilings(const std::string& path,
                                                                 const std::string& device_key) {
  ROOFLINE_ASSIGN_OR_RETURN(nlohmann::json j, read_cache(path));
  const auto it = j.find(device_key);
  if (it == j.end()) return std::optional<CalibratedCeilings>();
  const nlohmann::json& e = *it;
  const auto number = [&](const char* k) -> double {
    const auto f = e.is_object() ? e.find(k) : e.end();
    return f != e.end() && f->is_number() ? f->get<double>() : -1.0;
  };
  CalibratedCeilings c;
  c.device = device_key;
  c.ceilings.bytes_per_s = number("bytes_per_s");
  c.ceilings.flops_per_s = number("flops_per_s");
  if (!(c.ceilings.bytes_per_s > 0) || !(c.ceilings.flops_per_s > 0) ||
      !std::isfinite(c.ceilings.bytes_per_s) || !std::isfinite(c.ceilings.flops_per_s))
    return data_loss("the ceilings cache '" + path + "' has a bad entry for '" + device_key +
                     "' (positive bytes_per_s and flops_per_s expected); delete it to recalibrate");
  if (e.contains("handover_ns")) {
    c.ceilings.handover_ns = number("handover_ns");
    if (!plausible_handover(c.ceilings.handover_ns)) {
      char range[64];
      std::snprintf(range, sizeof range, "handover_ns in [%g, %g] expected",
                    kMinPlausibleHandoverNs, kMaxPlausibleHandoverNs);
      return data_loss("the ceilings cache '" + path + "' has a bad entry for '" + device_key +
                       "' (" + range + "); delete it to recalibrate");
    }
    c.ceilings.handover_calibrated = true;
  }
  if (const auto m = e.find("measured"); m != e.end() && m->is_string())
    c.measured = m->get<std::string>();
  return std::optional<CalibratedCeilings>(c);
}

StatusOr<std::pair<Ceilings, std::string>> cached_or_default_ceilings(
    const std::string& cache_path, const std::string& device_key) {
  // Ceilings{}: the H200's measured ones (shared/docs/HARDWARE.md).
  std::pair<Ceilings, std::string> result{
      Ceilings{}, "H200 measured defaults; --calibrate measures this machine"};
  if (cache_path.empty()) return result;
  ROOFLINE_ASSIGN_OR_RETURN(std::optional<CalibratedCeilings> cached,
                            load_cached_ceilings(cache_path, device_key));
  if (cached) {
    result.first = cached->ceilings;
    result.second = "calibrated " + cached->measured + " on " + device_key + " (" + cache_path +
                    "; --calibrate to redo)";
  }
  return result;
}

Status save_cached_ceilings(const std::string& path, const CalibratedCeilings& c) {
  if (path.empty()) return invalid_argument("no ceilings cache path (set HOME or XDG_CACHE_HOME)");
  ROOFLINE_ASSIGN_OR_RETURN(nlohmann::json j, read_cache(path));
  j[c.device] = {{"bytes_per_s", c.ceilings.bytes_per_s},
                 {"flops_per_s", c.ceilings.flops_per_s},
                 {"measured", c.measured}};
  if (c.ceilings.handover_calibrated) j[c.device]["handover_ns"] = c.ceilings.handover_ns;
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  if (ec) return io_error("cannot create '" + dir.string() + "': " + ec.message());
  // Write beside, then rename: a crash mid-write never leaves a torn cache.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << j.dump(2) << "\n";
    if (!out) return io_error("cannot write the ceilings cache '" + tmp + "'");
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) return io_error("cannot replace '" + path + "': " + ec.message());
  return ok_status();
}

}  // namespace roofline
