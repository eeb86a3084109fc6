// Pass: range-level IR -> the linear instruction list of program.h. Each node is placed in the
// innermost loop among those it depends on (so loop-invariant work is hoisted); loops nest by
// their enclosing-RANGE source and are emitted between RANGE and ENDRANGE.
#pragma once

#include <vector>

#include "compiler/uop.h"

namespace baregrad::compiler {

std::vector<UOpPtr> linearize(const UOpPtr& sink);

}  // namespace baregrad::compiler
