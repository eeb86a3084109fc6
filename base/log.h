#pragma once

// BG_LOG(level) << ...; writes one line to stderr when options().debug >= level. The operands
// are not evaluated otherwise.

#include <sstream>

#include "base/options.h"

namespace baregrad::detail {

// Buffers one log line; the destructor writes it to stderr with a single write.
class LogLine {
 public:
  LogLine() = default;
  LogLine(const LogLine&) = delete;
  LogLine& operator=(const LogLine&) = delete;
  ~LogLine();

  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

// Turns `stream << ...` into void so both arms of the ?: in BG_LOG agree.
struct LogVoidify {
  void operator&(std::ostream&) {}
};

}  // namespace baregrad::detail

#define BG_LOG(level)                     \
  (::baregrad::options().debug < (level)) \
      ? (void)0                           \
      : ::baregrad::detail::LogVoidify() & ::baregrad::detail::LogLine().stream()
