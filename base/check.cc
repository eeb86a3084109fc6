#include "base/check.h"

#include <cstdio>
#include <cstdlib>

namespace baregrad::detail {

CheckFailure::CheckFailure(std::string headline, const char* file, int line)
    : headline_(std::move(headline)), file_(file), line_(line) {}

CheckFailure::~CheckFailure() {
  std::string text = headline_ + " at " + file_ + ":" + std::to_string(line_);
  std::string message = stream_.str();
  if (!message.empty()) text += ": " + message;
  text += "\n";
  // One write so concurrent failures do not interleave within a line.
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
  std::abort();
}

}  // namespace baregrad::detail
