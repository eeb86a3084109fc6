// Internal to symbolic.cc: the index-math rules that symbolic() adds to symbolic_simple().
#pragma once

#include <utility>
#include <vector>

#include "compiler/pattern.h"

namespace baregrad::compiler {

// Rules for sums, IDIV / MOD, comparisons and MAX over ints (range rules: int64 only).
std::vector<std::pair<UPat, RewriteFn>> index_rules();

}  // namespace baregrad::compiler
