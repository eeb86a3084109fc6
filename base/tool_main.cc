#include "base/tool_main.h"

#include <cstdio>
#include <exception>
#include <string>

#include "base/error.h"
#include "base/options.h"

namespace baregrad {

int run_tool(std::string_view tool, const std::function<int()>& body) {
  std::string name(tool);
  try {
    (void)options();
    return body();
  } catch (const Error& e) {
    if (e.op() == "options") {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), e.message().c_str());
      return kExitUsage;
    }
    std::fprintf(stderr, "%s: %s\n", name.c_str(), e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), e.what());
  }
  return 1;
}

}  // namespace baregrad
