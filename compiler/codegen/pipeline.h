// The codegen pipeline: kernel AST -> linear program, one visible list of passes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compiler/opt/kernel.h"
#include "compiler/program.h"

namespace baregrad::compiler {

// Lowers a kernel AST for `target`. `opts` replaces the heuristic choices when given.
// Throws baregrad::Error naming the node and rule when the AST is malformed.
ProgramSpec lower_kernel(const UOpPtr& ast,
                         const TargetInfo& target,
                         const std::optional<std::vector<Opt>>& opts = std::nullopt);

// A readable kernel name from the kernel's shape: E_ (elementwise) or r_ (reduce) + dims.
std::string kernel_name(const Kernel& k);

}  // namespace baregrad::compiler
