// The IR verifier. Each check returns OK or an InvalidArgument status whose message names the
// offending node (op, dtype, short arg) and the rule, e.g.
//   "spec: ADD float32 has sources of different dtypes (float32, int32)".
#pragma once

#include <vector>

#include "base/status.h"
#include "compiler/uop.h"

namespace baregrad::compiler {

// Rules every node obeys anywhere: arity per ops.def, ALU source / result dtypes, CONST arg
// kind per dtype, DEFINE_GLOBAL pointer dtype and int64 slot, DEFINE_VAR / SPECIAL args.
Status verify_node(const UOp* n);
// verify_node on every node reachable from `root`.
Status verify_expr(const UOpPtr& root);
// A kernel AST: a SINK of STOREs through VIEWs of DEFINE_GLOBALs, LOADs of VIEWs, every view
// of the kernel shape's rank with each dim equal to it or 1 where reduced, REDUCE_AXIS with
// valid distinct axes and ADD/MUL/MAX, stores of the buffer's element dtype.
Status verify_kernel_ast(const UOpPtr& sink);
// The graph after lowering: no VIEW / REDUCE_AXIS, LOAD / STORE through INDEX whose index is
// int64 and whose optional valid is bool; STORE's INDEX has no valid.
Status verify_lowered(const UOpPtr& sink);
// A linear program: node rules, every source defined before use, RANGE / ENDRANGE balanced
// and properly nested, ACC_STORE / ACC_LOAD target a DEFINE_ACC.
Status verify_linear(const std::vector<UOpPtr>& uops);

}  // namespace baregrad::compiler
