// calibration.h: the CPU calibration measures something plausible (the copy moved the bytes, the
// GEMM computed the product: both are checked inside) and no handover, a GPU's handover lies in
// the plausible range (skipped without a GPU), an implausible handover is an error, device names
// are validated, and the cache keeps one entry per device (a GPU's handover with it), survives
// other devices' writes and rejects what is not its JSON; without calibrating, the ceilings are
// this device's cached entry, else the H200's, and a corrupt cache is an error, not the defaults.
#include "runtime/calibration.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace roofline {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("roofline_calibration_test_" + name);
  fs::remove_all(d);
  return d;
}

TEST(CalibrationTest, CpuCalibrationMeasuresPositiveFiniteCeilings) {
  auto c = calibrate_ceilings("cpu");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_GT(c->ceilings.bytes_per_s, 1e8);  // any machine copies more than 100 MB/s
  EXPECT_GT(c->ceilings.flops_per_s, 1e8);  // and multiplies faster than 0.1 GFLOP/s
  EXPECT_TRUE(std::isfinite(c->ceilings.bytes_per_s) && std::isfinite(c->ceilings.flops_per_s));
  EXPECT_EQ(c->device, ceilings_device_key("cpu").value());
  EXPECT_EQ(c->measured.size(), 16u);             // "YYYY-MM-DD HH:MM"
  EXPECT_FALSE(c->ceilings.handover_calibrated);  // a CPU "kernel" is a function call
}

TEST(CalibrationTest, GpuCalibrationMeasuresAPlausibleHandover) {
  const auto key = ceilings_device_key("cuda");
  if (!key.ok()) GTEST_SKIP() << key.status().to_string();  // CPU-only build, or no GPU
  auto c = calibrate_ceilings("cuda");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_TRUE(c->ceilings.handover_calibrated);
  EXPECT_GE(c->ceilings.handover_ns, kMinPlausibleHandoverNs);
  EXPECT_LE(c->ceilings.handover_ns, kMaxPlausibleHandoverNs);
  // The H200's was 1.14 us; on a Hopper it stays within a few times that.
  EXPECT_LT(c->ceilings.handover_ns, 5 * kH200HandoverNs) << c->device;
  EXPECT_EQ(c->device, *key);
  std::printf("handover on %s: %.3f us\n", c->device.c_str(), c->ceilings.handover_ns / 1e3);
}

TEST(CalibrationTest, ImplausibleHandoversAreErrorsThatSayWhatToDo) {
  EXPECT_TRUE(check_handover_ns(kH200HandoverNs, "measured on x").ok());
  EXPECT_TRUE(check_handover_ns(kMinPlausibleHandoverNs, "measured on x").ok());
  EXPECT_TRUE(check_handover_ns(kMaxPlausibleHandoverNs, "measured on x").ok());
  for (const double ns : {0.0, -1.0, 150.0, 60e3, std::nan("")}) {
    const Status s = check_handover_ns(ns, "measured on NVIDIA H200");
    ASSERT_FALSE(s.ok()) << ns;
    EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << ns;
    EXPECT_NE(s.message().find("measured on NVIDIA H200"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("outside the plausible 0.2-50 us"), std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("rerun --calibrate on an idle GPU"), std::string::npos)
        << s.message();
  }
}

TEST(CalibrationTest, UnknownDevicesAreErrorsThatSayWhatIsKnown) {
  for (const char* d : {"gpu", "cuda:", "cuda:x", "cuda:-1", "CPU"}) {
    const auto k = ceilings_device_key(d);
    ASSERT_FALSE(k.ok()) << d;
    EXPECT_NE(k.status().message().find("cpu, cuda or cuda:N"), std::string::npos) << d;
    EXPECT_FALSE(calibrate_ceilings(d).ok()) << d;
  }
}

TEST(CalibrationTest, CacheKeepsOneEntryPerDevice) {
  const fs::path dir = temp_dir("roundtrip");
  const std::string path = (dir / "sub" / "ceilings.json").string();
  auto none = load_cached_ceilings(path, "cpu (2 threads)");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());  // no file yet

  CalibratedCeilings a{{12e9, 80e9}, "cpu (2 threads)", "2026-11-30 10:00"};
  CalibratedCeilings b{{4.2e12, 7.5e14}, "NVIDIA H200", "2026-11-30 10:01"};
  ASSERT_TRUE(save_cached_ceilings(path, a).ok());  // creates the directories
  ASSERT_TRUE(save_cached_ceilings(path, b).ok());
  a.ceilings.bytes_per_s = 13e9;  // a recalibration replaces its own entry only
  ASSERT_TRUE(save_cached_ceilings(path, a).ok());

  auto got_a = load_cached_ceilings(path, a.device);
  auto got_b = load_cached_ceilings(path, b.device);
  ASSERT_TRUE(got_a.ok() && got_a->has_value() && got_b.ok() && got_b->has_value());
  EXPECT_EQ((*got_a)->ceilings.bytes_per_s, 13e9);
  EXPECT_EQ((*got_a)->ceilings.flops_per_s, 80e9);
  EXPECT_EQ((*got_b)->ceilings.flops_per_s, 7.5e14);
  EXPECT_EQ((*got_b)->measured, "2026-11-30 10:01");
  auto missing = load_cached_ceilings(path, "cpu (64 threads)");
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
  // Not calibrated, a handover is not cached: the entry keeps the H200's.
  EXPECT_FALSE((*got_a)->ceilings.handover_calibrated);
  EXPECT_EQ((*got_a)->ceilings.handover_ns, kH200HandoverNs);
  fs::remove_all(dir);
}

TEST(CalibrationTest, CacheKeepsAGpusMeasuredHandover) {
  const fs::path dir = temp_dir("handover");
  const std::string path = (dir / "ceilings.json").string();
  CalibratedCeilings gpu{{4.2e12, 7.5e14, 1250, true}, "NVIDIA H100", "2026-12-02 10:00"};
  ASSERT_TRUE(save_cached_ceilings(path, gpu).ok());
  auto got = load_cached_ceilings(path, gpu.device);
  ASSERT_TRUE(got.ok() && got->has_value()) << got.status().to_string();
  EXPECT_EQ((*got)->ceilings.handover_ns, 1250);
  EXPECT_TRUE((*got)->ceilings.handover_calibrated);
  // An entry cached before handovers were measured: the H200's, not calibrated.
  std::ofstream(path) << R"j({"NVIDIA H100": {"bytes_per_s": 3e12, "flops_per_s": 7e14}})j";
  got = load_cached_ceilings(path, gpu.device);
  ASSERT_TRUE(got.ok() && got->has_value()) << got.status().to_string();
  EXPECT_EQ((*got)->ceilings.handover_ns, kH200HandoverNs);
  EXPECT_FALSE((*got)->ceilings.handover_calibrated);
  fs::remove_all(dir);
}

TEST(CalibrationTest, CorruptCacheIsAnErrorThatNamesTheFile) {
  const fs::path dir = temp_dir("corrupt");
  fs::create_directories(dir);
  const std::string path = (dir / "ceilings.json").string();
  for (const char* text :
       {"not json", "[1, 2]", R"j({"cpu (2 threads)": {"bytes_per_s": -1, "flops_per_s": 5}})j",
        R"j({"cpu (2 threads)": {"bytes_per_s": "fast"}})j", R"j({"cpu (2 threads)": 3})j",
        R"j({"cpu (2 threads)": {"bytes_per_s": 1e9, "flops_per_s": 1e9, "handover_ns": 5}})j",
        R"j({"cpu (2 threads)": {"bytes_per_s": 1e9, "flops_per_s": 1e9, "handover_ns": "x"}})j"}) {
    std::ofstream(path) << text;
    const auto r = load_cached_ceilings(path, "cpu (2 threads)");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find(path), std::string::npos) << text;
    EXPECT_NE(r.status().message().find("delete it"), std::string::npos) << text;
  }
  // Saving over a corrupt cache refuses rather than dropping the file's other entries silently.
  std::ofstream(path) << "not json";
  EXPECT_FALSE(save_cached_ceilings(path, {{1e9, 1e9}, "cpu (2 threads)", "x"}).ok());
  fs::remove_all(dir);
}

TEST(CalibrationTest, CachedOrDefaultWithoutACacheIsTheH200s) {
  const fs::path dir = temp_dir("resolve_none");
  for (const std::string& path : {(dir / "ceilings.json").string(), std::string()}) {
    auto r = cached_or_default_ceilings(path, "NVIDIA H100");  // no file / no cache path
    ASSERT_TRUE(r.ok()) << path << ": " << r.status().to_string();
    EXPECT_EQ(r->first.handover_ns, kH200HandoverNs) << path;
    EXPECT_FALSE(r->first.handover_calibrated) << path;
    EXPECT_EQ(r->first.bytes_per_s, Ceilings{}.bytes_per_s) << path;
    EXPECT_EQ(r->second, "H200 measured defaults; --calibrate measures this machine") << path;
  }
  EXPECT_FALSE(fs::exists(dir));  // resolving never writes
}

TEST(CalibrationTest, CachedOrDefaultTakesThisDevicesEntryOnly) {
  const fs::path dir = temp_dir("resolve_cached");
  const std::string path = (dir / "ceilings.json").string();
  const CalibratedCeilings h100{{3.1e12, 6.5e14, 1250, true}, "NVIDIA H100", "2026-12-02 10:00"};
  ASSERT_TRUE(save_cached_ceilings(path, h100).ok());
  auto r = cached_or_default_ceilings(path, "NVIDIA H100");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->first.handover_ns, 1250);
  EXPECT_TRUE(r->first.handover_calibrated);
  EXPECT_EQ(r->first.bytes_per_s, 3.1e12);
  EXPECT_EQ(r->second,
            "calibrated 2026-12-02 10:00 on NVIDIA H100 (" + path + "; --calibrate to redo)");
  // Another device's entry is not this one's: the H200's defaults.
  auto other = cached_or_default_ceilings(path, "NVIDIA H200");
  ASSERT_TRUE(other.ok()) << other.status().to_string();
  EXPECT_EQ(other->first.handover_ns, kH200HandoverNs);
  EXPECT_FALSE(other->first.handover_calibrated);
  EXPECT_NE(other->second.find("H200 measured defaults"), std::string::npos) << other->second;
  fs::remove_all(dir);
}

TEST(CalibrationTest, CachedOrDefaultOverACorruptCacheIsAnErrorThatNamesTheFile) {
  const fs::path dir = temp_dir("resolve_corrupt");
  fs::create_directories(dir);
  const std::string path = (dir / "ceilings.json").string();
  std::ofstream(path) << "not json";
  const auto r = cached_or_default_ceilings(path, "NVIDIA H100");
  ASSERT_FALSE(r.ok());  // never the defaults in silence
  EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status().message();
  fs::remove_all(dir);
}

TEST(CalibrationTest, DefaultPathFollowsXdgCacheHomeThenHome) {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const std::string saved = xdg ? xdg : "", saved_home = home ? home : "";
  setenv("XDG_CACHE_HOME", "/tmp/xdg", 1);
  EXPECT_EQ(default_ceilings_cache_path(), "/tmp/xdg/roofline/ceilings.json");
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/tmp/home", 1);
  EXPECT_EQ(default_ceilings_cache_path(), "/tmp/home/.cache/roofline/ceilings.json");
  if (!saved.empty()) setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  if (!saved_home.empty()) setenv("HOME", saved_home.c_str(), 1);
}

}  // namespace
}  // namespace roofline
