// Logging sink.
#include "core/log.h"

#include <atomic>
#include <cstdio>

namespace roofline {

namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kWarning)};
}

void set_log_level(LogLevel level) { g_level.store(static_cast<int>(level)); }
LogLevel log_level() { return static_cast<LogLevel>(g_level.load()); }

void log_message(LogLevel level, const std::string& message) {
  static const char* kNames[] = {"debug", "info", "warning", "error"};
  std::fprintf(stderr, "roofline %s: %s\n", kNames[static_cast<int>(level)], message.c_str());
}

}  // namespace roofline
