#include "base/log.h"

#include <cstdio>
#include <string>

namespace baregrad::detail {

LogLine::~LogLine() {
  std::string line = stream_.str() + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace baregrad::detail
