#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace baregrad {

// The user-facing error above the tensor layer. what() is "[op] message".
class Error : public std::runtime_error {
 public:
  Error(std::string_view op, std::string_view message);

  // The operation that failed, e.g. "realize" or "options".
  const std::string& op() const { return op_; }
  // The message without the "[op] " prefix.
  const std::string& message() const { return message_; }

 private:
  std::string op_;
  std::string message_;
};

// Throws Error(op, message).
[[noreturn]] void fail(std::string_view op, std::string_view message);

}  // namespace baregrad
