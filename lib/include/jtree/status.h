// jtree/status.h — the error model of the whole library.
//
// Every fallible function returns a `Status` or a `Result<T>`; both are [[nodiscard]]. A
// `Status` carries one code from a small closed set and a message that names the structure and
// the place at fault, for example
//   "jtree: /data/ckpt.jtree: leaf params/w: chunk 17: checksum mismatch".
// The library never throws across its public API (allocation failure aside).
//
// Thread safety: Status and Result are values; copies are independent.
#pragma once

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "jtree/export.h"

namespace jtree {

/// The closed set of error codes. Bindings map each to an exception class.
enum class StatusCode : int {
  kOk = 0,
  kCorruption = 1,       ///< the file's bytes are inconsistent, damaged or hostile
  kIOError = 2,          ///< the storage backend failed (read, write, network, disk full)
  kInvalidArgument = 3,  ///< the caller asked for something impossible (bad slice, bad option)
  kNotSupported = 4,     ///< the file needs a version or feature this build does not have
  kNotFound = 5,         ///< no such file, key path or chunk
  kAlreadyExists = 6,    ///< the target exists and overwriting was not allowed
  kPermissionDenied = 7, ///< the backend refused access (file mode, credentials)
  kAborted = 8,          ///< the operation was cancelled (by a callback or a deadline)
  kResourceExhausted = 9 ///< a configured limit was hit (a file larger than the limits allow)
};

/// Name of a code, e.g. "Corruption".
JTREE_API std::string_view status_code_name(StatusCode code);

/// The outcome of an operation: ok, or a code with a message.
class [[nodiscard]] JTREE_API Status {
 public:
  Status() = default;  ///< ok
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status success() { return Status(); }
  static Status corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
  static Status io_error(std::string m) { return {StatusCode::kIOError, std::move(m)}; }
  static Status invalid_argument(std::string m) {
    return {StatusCode::kInvalidArgument, std::move(m)};
  }
  static Status not_supported(std::string m) { return {StatusCode::kNotSupported, std::move(m)}; }
  static Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status already_exists(std::string m) {
    return {StatusCode::kAlreadyExists, std::move(m)};
  }
  static Status permission_denied(std::string m) {
    return {StatusCode::kPermissionDenied, std::move(m)};
  }
  static Status aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
  static Status resource_exhausted(std::string m) {
    return {StatusCode::kResourceExhausted, std::move(m)};
  }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  /// The message without the code name; empty when ok.
  const std::string& message() const { return message_; }
  /// "Corruption: <message>", or "OK".
  std::string to_string() const;

  /// A copy whose message is "<prefix>: <message>" (context added on the way up the stack);
  /// unchanged when the message already starts with "<prefix>: ".
  Status with_prefix(std::string_view prefix) const;

  bool is_corruption() const { return code_ == StatusCode::kCorruption; }
  bool is_not_found() const { return code_ == StatusCode::kNotFound; }
  bool is_not_supported() const { return code_ == StatusCode::kNotSupported; }
  bool is_io_error() const { return code_ == StatusCode::kIOError; }
  bool is_invalid_argument() const { return code_ == StatusCode::kInvalidArgument; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

/// A value or an error Status. Access the value only when ok().
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT: implicit by design
    assert(!std::get<Status>(v_).ok() && "Result constructed from an OK status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  /// The error, or OK when a value is held.
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }

  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace jtree

// Early-return helpers for implementation files and users who like them.
#define JTREE_RETURN_IF_ERROR(expr)         \
  do {                                      \
    ::jtree::Status _jt_st = (expr);        \
    if (!_jt_st.ok()) return _jt_st;        \
  } while (0)

#define JTREE_CONCAT_INNER(a, b) a##b
#define JTREE_CONCAT(a, b) JTREE_CONCAT_INNER(a, b)
#define JTREE_ASSIGN_OR_RETURN(lhs, expr) \
  JTREE_ASSIGN_OR_RETURN_IMPL(JTREE_CONCAT(_jt_res_, __LINE__), lhs, expr)
#define JTREE_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
