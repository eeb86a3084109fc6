// Renders a linear ProgramSpec as readable C11 for clang (ext_vector_type vectors, _Float16,
// __bf16). Compile the result with -fwrapv -ffp-contract=fast (ClangCompiler's flags): signed
// integer ops wrap like exec_alu_int only under -fwrapv.
#pragma once

#include <string>

#include "compiler/program.h"

namespace baregrad::compiler {

// NOTE: integer IDIV/MOD by zero, and INT_MIN / -1 at int32/int64, are undefined in the C this
// emits (x86 traps); the IR never emits them for index math. Float->int casts of out-of-range
// values are undefined as well.
class CRenderer : public Renderer {
 public:
  std::string name() const override { return "C"; }
  // C source defining `void spec.name(void* const* bufs, const int64_t* vars, int64_t core_lo,
  // int64_t core_hi)`; CHECK-fails on IR outside program.h's linear contract.
  std::string render(const ProgramSpec& spec) const override;
};

}  // namespace baregrad::compiler
