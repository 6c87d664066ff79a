// Status and StatusOr: errors as values across the public API.
//
// Anything that can fail because of the outside world (files, requests, flags, sizes, memory)
// returns a Status whose message says what was wrong and what to do about it. Broken internal
// invariants are not Statuses: they abort loudly (ROOFLINE_CHECK in src/core/check.h).
#pragma once

#include <string>
#include <type_traits>
#include <utility>
#include <variant>

namespace roofline {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // a flag, request or size the caller gave is wrong
  kNotFound,           // a file, tensor or key that must exist does not
  kDataLoss,           // a file is truncated or its contents contradict themselves
  kUnimplemented,      // valid input we do not support (an architecture, a dtype)
  kOutOfRange,         // an index or size beyond what the model or cache holds
  kResourceExhausted,  // memory or KV blocks ran out
  kIoError,            // the OS refused a read, map or write
  kInternal,
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid argument: --max-tokens must be positive"
  std::string to_string() const;

  // Prefixes context to the message, e.g. with_context("loading models/x").
  Status with_context(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status ok_status() { return Status(); }
inline Status invalid_argument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status data_loss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status out_of_range(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status resource_exhausted(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status io_error(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
inline Status internal_error(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// Holds either a value or a non-ok Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : v_(std::move(status)) {  // NOLINT: implicit by design
    if (std::get<Status>(v_).ok()) v_ = Status(StatusCode::kInternal, "StatusOr built from ok");
  }
  StatusOr(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  template <typename U, typename = std::enable_if_t<std::is_convertible_v<U&&, T> &&
                                                    !std::is_same_v<std::decay_t<U>, Status>>>
  StatusOr(U&& value) : v_(T(std::forward<U>(value))) {}  // NOLINT

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<Status, T> v_;
};

}  // namespace roofline

#define ROOFLINE_STATUS_CONCAT_INNER(a, b) a##b
#define ROOFLINE_STATUS_CONCAT(a, b) ROOFLINE_STATUS_CONCAT_INNER(a, b)

#define ROOFLINE_RETURN_IF_ERROR(expr)                   \
  do {                                                   \
    ::roofline::Status roofline_status_ = (expr);        \
    if (!roofline_status_.ok()) return roofline_status_; \
  } while (0)

#define ROOFLINE_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return tmp.status();                  \
  lhs = std::move(tmp).value()

#define ROOFLINE_ASSIGN_OR_RETURN(lhs, expr) \
  ROOFLINE_ASSIGN_OR_RETURN_IMPL(ROOFLINE_STATUS_CONCAT(roofline_statusor_, __LINE__), lhs, expr)
