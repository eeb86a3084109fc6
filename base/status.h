#pragma once

// Status and Result<T>: the error model below the tensor layer. Errors carry a code, a message
// and the source location that created them; throw_if_error() converts to baregrad::Error at the
// one boundary where that is wanted.

#include <ostream>
#include <source_location>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include "base/check.h"

namespace baregrad {

enum class StatusCode {
  kOk,
  kInvalidArgument,
  kNotFound,
  kResourceExhausted,
  kDeadlineExceeded,
  kUnavailable,
  kUnimplemented,
  kInternal,
  kFailedPrecondition,
  kAborted,
};

// "Ok", "InvalidArgument", ... (the enumerator without the k).
std::string_view status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  // The OK status.
  Status() = default;
  // An error; `code` must not be kOk (CHECKed).
  Status(StatusCode code,
         std::string message,
         std::source_location loc = std::source_location::current());

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // Source file as the compiler named it ("" for OK).
  std::string_view file() const { return loc_.file_name(); }
  // Source line (0 for OK).
  int line() const { return static_cast<int>(loc_.line()); }
  // "OK", or "InvalidArgument: message (status.cc:12)" with the file's base name.
  std::string to_string() const;
  // Throws baregrad::Error(op, to_string()) unless ok(); kResourceExhausted is a kMemory error.
  void throw_if_error(std::string_view op) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::source_location loc_;
};

std::ostream& operator<<(std::ostream& os, const Status& status);

using Loc = std::source_location;
Status invalid_argument(std::string message, Loc loc = Loc::current());
Status not_found(std::string message, Loc loc = Loc::current());
Status resource_exhausted(std::string message, Loc loc = Loc::current());
Status deadline_exceeded(std::string message, Loc loc = Loc::current());
Status unavailable(std::string message, Loc loc = Loc::current());
Status unimplemented(std::string message, Loc loc = Loc::current());
Status internal(std::string message, Loc loc = Loc::current());
Status failed_precondition(std::string message, Loc loc = Loc::current());
Status aborted(std::string message, Loc loc = Loc::current());
// "<call> failed: errno <err> (<strerror text>)", coded by errno (ENOENT -> kNotFound, ...).
Status errno_error(std::string_view call, int err, Loc loc = Loc::current());
// `s` with "<what>: " in front of its message, its code kept (OK stays OK).
Status in_context(const std::string& what, const Status& s);

// Either a T or a non-OK Status.
template <class T>
class [[nodiscard]] Result {
  static_assert(!std::is_same_v<std::remove_cv_t<T>, Status>, "use Status, not Result<Status>");
  static_assert(!std::is_reference_v<T>, "Result<T&> is not supported");

 public:
  // An error; `status` must not be OK (CHECKed).
  Result(Status status) : data_(std::in_place_index<1>, std::move(status)) {
    CHECK(!std::get<1>(data_).ok()) << "Result built from an OK Status";
  }
  // A value; anything T is constructible from.
  template <class U = T>
    requires(std::is_constructible_v<T, U &&> && !std::is_same_v<std::remove_cvref_t<U>, Status> &&
             !std::is_same_v<std::remove_cvref_t<U>, Result>)
  Result(U&& value) : data_(std::in_place_index<0>, std::forward<U>(value)) {}

  bool ok() const { return data_.index() == 0; }
  // OK when holding a value, else the error.
  const Status& status() const& { return ok() ? ok_status() : std::get<1>(data_); }
  Status status() && { return ok() ? Status() : std::get<1>(std::move(data_)); }

  // The value; CHECK-fails with the status text when holding an error.
  T& value() & {
    check_ok();
    return std::get<0>(data_);
  }
  const T& value() const& {
    check_ok();
    return std::get<0>(data_);
  }
  T&& value() && {
    check_ok();
    return std::get<0>(std::move(data_));
  }

  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  static const Status& ok_status() {
    static const Status kOk;
    return kOk;
  }
  void check_ok() const {
    CHECK(ok()) << "Result::value() on error: " << std::get<1>(data_).to_string();
  }

  std::variant<T, Status> data_;
};

namespace detail {
inline Status to_status(Status status) { return status; }
template <class T>
Status to_status(const Result<T>& result) {
  return result.status();
}
template <class T>
Status to_status(Result<T>&& result) {
  return std::move(result).status();
}
}  // namespace detail

}  // namespace baregrad

#define BG_CONCAT_INNER(a, b) a##b
#define BG_CONCAT(a, b) BG_CONCAT_INNER(a, b)

// Returns the Status of `expr` (a Status or a Result) from the enclosing function if not OK.
#define RETURN_IF_ERROR(expr)                                            \
  do {                                                                   \
    ::baregrad::Status bg_status_ = ::baregrad::detail::to_status(expr); \
    if (!bg_status_.ok()) [[unlikely]] {                                 \
      return bg_status_;                                                 \
    }                                                                    \
  } while (0)

// `lhs = value of expr` (a Result), or returns its Status. lhs may declare: `auto x`, `int y`.
#define ASSIGN_OR_RETURN(lhs, expr) \
  BG_ASSIGN_OR_RETURN_IMPL(BG_CONCAT(bg_result_, __COUNTER__), lhs, expr)
#define BG_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) [[unlikely]] {                  \
    return std::move(tmp).status();              \
  }                                              \
  lhs = std::move(tmp).value()
