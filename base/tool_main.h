#pragma once

// The main() of a command-line tool (bare_info, bare_bench, examples/digits).

#include <functional>
#include <string_view>

namespace baregrad {

// Exit status of a tool for bad arguments or options.
constexpr int kExitUsage = 2;

// Reads the options first, so that a bad environment variable is refused before any work, then
// runs `body` and returns its exit status. An escaping exception prints one line on stderr
// naming the tool: a bad option ("bare_info: THREADS=-3: must be an integer in [0, 1024]")
// returns kExitUsage, another baregrad::Error or std::exception ("bare_info: [op] message") 1.
int run_tool(std::string_view tool, const std::function<int()>& body);

}  // namespace baregrad
