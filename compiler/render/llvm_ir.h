// Renders linear programs to LLVM 19 IR text for x86-64 hosts (see program.h for the contract).
#pragma once

#include <string>

#include "compiler/program.h"

namespace baregrad::compiler {

// The kernel is `define void @NAME(ptr %bufs, ptr %vars, i64 %core_lo, i64 %core_hi)` wrapping
// an always-inlined `@NAME_body` whose buffer parameters are `noalias`: buffers bound to
// different slots must not overlap.
class LlvmIrRenderer : public Renderer {
 public:
  std::string name() const override { return "llvm"; }
  // A complete module (no triple or data layout; LlvmCompiler sets the host's).
  std::string render(const ProgramSpec& spec) const override;
};

}  // namespace baregrad::compiler
