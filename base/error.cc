#include "base/error.h"

namespace baregrad {

namespace {

// NOTE: appends instead of `"[" + std::string(op)`, which trips GCC 12's -Wrestrict false
// positive at -O3 (GCC bug 105329).
std::string bracketed(std::string_view op, std::string_view message) {
  std::string text;
  text.reserve(op.size() + message.size() + 3);
  text.append("[").append(op).append("] ").append(message);
  return text;
}

}  // namespace

Error::Error(std::string_view op, std::string_view message, ErrorKind kind)
    : std::runtime_error(bracketed(op, message)), op_(op), message_(message), kind_(kind) {}

void fail(std::string_view op, std::string_view message) { throw Error(op, message); }
void fail(std::string_view op, std::string_view message, ErrorKind kind) {
  throw Error(op, message, kind);
}

}  // namespace baregrad
