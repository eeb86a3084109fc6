// Whether a suite cannot run here for want of a build tool, not for a bug: ptxas (the CUDA
// toolkit) is the one a plain Debian machine lacks. Such a suite skips, naming the tool.
#pragma once

#include <string>

#include "base/status.h"

namespace baregrad::tests {

// True when `s` is the NotFound of a missing ptxas (compiler::Ptxas::find).
inline bool missing_tool(const Status& s) {
  return s.code() == StatusCode::kNotFound &&
         s.message().find("ptxas not found") != std::string::npos;
}

}  // namespace baregrad::tests
