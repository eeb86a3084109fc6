// Pass: REDUCE -> accumulators. Each REDUCE(value, ranges...) becomes a DEFINE_ACC initialised
// to the op's identity in the enclosing loop, an ACC_LOAD / op / ACC_STORE inside its ranges,
// and an ACC_LOAD after them.
#pragma once

#include "compiler/uop.h"

namespace baregrad::compiler {

UOpPtr lower_reduce(const UOpPtr& sink);
// The identity of reduce `op` (ADD, MUL, MAX) in `dtype`.
UOpPtr reduce_identity(Op op, DType dtype);

}  // namespace baregrad::compiler
