#include "base/status.h"

#include <array>
#include <cerrno>
#include <system_error>

#include "base/error.h"

namespace baregrad {

namespace {

constexpr std::array<std::string_view, 10> kCodeNames = {
    "Ok",          "InvalidArgument", "NotFound", "ResourceExhausted",  "DeadlineExceeded",
    "Unavailable", "Unimplemented",   "Internal", "FailedPrecondition", "Aborted",
};
static_assert(kCodeNames.size() == static_cast<size_t>(StatusCode::kAborted) + 1);

StatusCode code_for_errno(int err) {
  switch (err) {
    case ENOENT:
    case ENODEV:
    case ENXIO:
      return StatusCode::kNotFound;
    case ENOMEM:
    case ENOSPC:
    case EMFILE:
    case ENFILE:
      return StatusCode::kResourceExhausted;
    case ETIMEDOUT:
    case ETIME:
      return StatusCode::kDeadlineExceeded;
    case EAGAIN:
    case EBUSY:
    case EINTR:
      return StatusCode::kUnavailable;
    case EINVAL:
    case EFAULT:
    case E2BIG:
      return StatusCode::kInvalidArgument;
    case ENOSYS:
    case ENOTSUP:
    case ENOTTY:
      return StatusCode::kUnimplemented;
    case EPERM:
    case EACCES:
      return StatusCode::kFailedPrecondition;
    default:
      return StatusCode::kInternal;
  }
}

}  // namespace

std::string_view status_code_name(StatusCode code) {
  auto index = static_cast<size_t>(code);
  CHECK_LT(index, kCodeNames.size()) << "bad StatusCode";
  return kCodeNames[index];
}

Status::Status(StatusCode code, std::string message, std::source_location loc)
    : code_(code), message_(std::move(message)), loc_(loc) {
  CHECK(code != StatusCode::kOk) << "an error Status needs a non-OK code: " << message_;
}

std::string Status::to_string() const {
  if (ok()) return "OK";
  std::string text = std::string(status_code_name(code_)) + ": " + message_;
  std::string_view path = file();
  if (path.empty()) return text;
  size_t slash = path.find_last_of('/');
  if (slash != std::string_view::npos) path.remove_prefix(slash + 1);
  return text + " (" + std::string(path) + ":" + std::to_string(line()) + ")";
}

void Status::throw_if_error(std::string_view op) const {
  if (!ok()) [[unlikely]] {
    fail(op, to_string(),
         code() == StatusCode::kResourceExhausted ? ErrorKind::kMemory : ErrorKind::kRuntime);
  }
}

std::ostream& operator<<(std::ostream& os, const Status& status) {
  return os << status.to_string();
}

Status invalid_argument(std::string message, Loc loc) {
  return Status(StatusCode::kInvalidArgument, std::move(message), loc);
}
Status not_found(std::string message, Loc loc) {
  return Status(StatusCode::kNotFound, std::move(message), loc);
}
Status resource_exhausted(std::string message, Loc loc) {
  return Status(StatusCode::kResourceExhausted, std::move(message), loc);
}
Status deadline_exceeded(std::string message, Loc loc) {
  return Status(StatusCode::kDeadlineExceeded, std::move(message), loc);
}
Status unavailable(std::string message, Loc loc) {
  return Status(StatusCode::kUnavailable, std::move(message), loc);
}
Status unimplemented(std::string message, Loc loc) {
  return Status(StatusCode::kUnimplemented, std::move(message), loc);
}
Status internal(std::string message, Loc loc) {
  return Status(StatusCode::kInternal, std::move(message), loc);
}
Status failed_precondition(std::string message, Loc loc) {
  return Status(StatusCode::kFailedPrecondition, std::move(message), loc);
}
Status aborted(std::string message, Loc loc) {
  return Status(StatusCode::kAborted, std::move(message), loc);
}

Status errno_error(std::string_view call, int err, Loc loc) {
  std::string text = std::string(call) + " failed: errno " + std::to_string(err) + " (" +
                     std::generic_category().message(err) + ")";
  return Status(code_for_errno(err), std::move(text), loc);
}

Status in_context(const std::string& what, const Status& s) {
  return s.ok() ? s : Status(s.code(), what + ": " + s.message());
}

}  // namespace baregrad
