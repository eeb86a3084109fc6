// Which constants of a kernel become launch scalars (compiler/passes/lift_consts.h), and which
// buffers a launch passes from further on (shift_views below).
//
// A kernel is first compiled with its constants inlined: the code generator folds them and the
// program runs at full speed. When the same kernel comes back with other values in some
// constants (a Python scalar that changes between calls: `a * float(i)`, an annealed
// temperature), those constants are lifted into launch scalars and one program serves every
// later value. Each kernel shape therefore compiles at most twice, however many values it sees;
// a constant that never changes stays inlined. Kernels captured by a TinyJit keep their
// constants inlined (a capture replays fixed values).
//
// Kernels are told apart by their AST with every liftable constant lifted ("the template");
// the record of which of its constants changed is bounded (max_records() templates and as many
// remembered ASTs; past that it starts over, at the cost of one more compile per shape).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "compiler/program.h"
#include "compiler/uop.h"

namespace baregrad::tensor {

struct KernelPlan {
  compiler::UOpPtr ast;       // what to compile: the kernel with its changing constants lifted
  std::vector<int64_t> bits;  // compiler::const_bits of each liftable constant, by lifted index
  // (slot, bytes): the launch passes that buffer's address this many bytes further on, and
  // `ast` reads and writes it that much nearer its start (see shift_views()).
  std::vector<std::pair<int, int64_t>> shifts;
};

// The plan for kernel AST `ast`, recording its constants' values. `inline_all` (a capture)
// returns `ast` itself and records nothing.
KernelPlan plan_kernel(const compiler::UOpPtr& ast, bool inline_all = false);

// `ast` with the buffers it reaches only far from their start seen from nearer on: for each
// buffer whose views are single views with offsets of at least 64 bytes, the offsets less the
// smallest (rounded down to 64 bytes, so any alignment the code relies on stays), that amount
// returned as the slot's shift. A write into row i of a cache (t[i] = v, t[i:i+2] += 1) is then
// one kernel for every row rather than one per row, each compiled on first use.
KernelPlan shift_views(const compiler::UOpPtr& ast);

// The launch scalars of `spec` (the program compiled from plan.ast), in spec.vars order: lifted
// constants, and the Variables of symbolic shapes from `vals`.
std::vector<int64_t> launch_vars(const compiler::ProgramSpec& spec,
                                 const KernelPlan& plan,
                                 const compiler::Bindings& vals = {});

struct ConstArgStats {
  size_t templates = 0;  // kernel shapes seen
  size_t lifted = 0;     // of those, with at least one lifted constant
};
ConstArgStats const_arg_stats();
// Forgets every record (the next kernel of each shape compiles with its constants inlined).
void clear_const_args();

// The bound on each record: PROGRAM_CACHE_SIZE, at least 16.
size_t max_records();

}  // namespace baregrad::tensor
