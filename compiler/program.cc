#include "compiler/program.h"

#include <cstdio>

namespace baregrad::compiler {

std::string numbered_source(const std::string& src) {
  std::string out;
  size_t start = 0;
  for (int n = 1; start < src.size(); n++) {
    size_t end = src.find('\n', start);
    if (end == std::string::npos) end = src.size();
    char num[16];
    std::snprintf(num, sizeof(num), "%5d | ", n);
    out += num;
    out.append(src, start, end - start);
    out += '\n';
    start = end + 1;
  }
  return out;
}

}  // namespace baregrad::compiler
