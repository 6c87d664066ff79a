// Minimal leveled logging to stderr. The library never writes to stdout (that is the CLI's).
#pragma once

#include <sstream>
#include <string>

namespace roofline {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

void set_log_level(LogLevel level);
LogLevel log_level();
void log_message(LogLevel level, const std::string& message);

}  // namespace roofline

#define ROOFLINE_LOG(level, expr)                                                   \
  do {                                                                              \
    if (::roofline::LogLevel::level >= ::roofline::log_level()) {                   \
      std::ostringstream roofline_log_ss_;                                          \
      roofline_log_ss_ << expr;                                                     \
      ::roofline::log_message(::roofline::LogLevel::level, roofline_log_ss_.str()); \
    }                                                                               \
  } while (0)
