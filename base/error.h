#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace baregrad {

// What kind of misuse an Error reports; the Python bindings raise the matching exception.
enum class ErrorKind {
  kRuntime,  // device, realize and runtime failures (RuntimeError); the default
  kValue,    // bad shapes, axes or values (ValueError)
  kIndex,    // an index out of range (IndexError)
  kType,     // an unsupported dtype or type combination (TypeError)
  kMemory,   // an allocation that cannot be made (MemoryError)
};

// The user-facing error above the tensor layer. what() is "[op] message".
class Error : public std::runtime_error {
 public:
  Error(std::string_view op, std::string_view message, ErrorKind kind = ErrorKind::kRuntime);

  // The operation that failed, e.g. "realize" or "options".
  const std::string& op() const { return op_; }
  // The message without the "[op] " prefix.
  const std::string& message() const { return message_; }
  // Which Python exception the bindings raise for it.
  ErrorKind kind() const { return kind_; }

 private:
  std::string op_;
  std::string message_;
  ErrorKind kind_;
};

// Throws Error(op, message, kind).
[[noreturn]] void fail(std::string_view op, std::string_view message);
[[noreturn]] void fail(std::string_view op, std::string_view message, ErrorKind kind);

}  // namespace baregrad
