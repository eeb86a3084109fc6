// A float64 reference evaluator for kernel ASTs: walks every element of the kernel's full
// shape directly from the views, independent of the codegen it checks.
#pragma once

#include <vector>

#include "compiler/uop.h"

namespace baregrad::testing {

// bufs[slot] holds each buffer's elements as doubles; stored buffers are overwritten with the
// values the kernel must produce (rounded to their dtype).
void reference_run(const compiler::UOpPtr& ast, std::vector<std::vector<double>>& bufs);

}  // namespace baregrad::testing
