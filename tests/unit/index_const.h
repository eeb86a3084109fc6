// c64: the index constant the compiler unit tests build expressions from.
#pragma once

#include <cstdint>

#include "compiler/uop.h"

namespace baregrad::compiler {

inline UOpPtr c64(int64_t v) { return UOp::index_const(v); }

}  // namespace baregrad::compiler
