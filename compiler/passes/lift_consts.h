// Value constants of a kernel AST as launch scalars. A Python scalar that changes from call to
// call (`a * float(i)`, a decayed learning rate) would otherwise make a new kernel for every
// value. lift_consts turns chosen CONSTs into DEFINE_VARs that carry the constant's bits, so one
// compiled program serves every value; the launch passes const_bits() of each.
//
// A lifted constant of dtype T is read back exactly: a float is the bit pattern of its value in
// T (BITCAST of the var narrowed to T's width), an integer its value (a CAST of the var).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/uop.h"

namespace baregrad::compiler {

// The CONSTs of kernel AST `sink` that can be lifted (integer and float values; not bool, not
// fp8), each once, in toposort order.
std::vector<UOpPtr> liftable_consts(const UOpPtr& sink);

// The name of the DEFINE_VAR that lifts constant number `i` of liftable_consts().
std::string lifted_name(size_t i);
// Which constant a lifted DEFINE_VAR named `name` carries, or -1 for another name.
int lifted_index(const std::string& name);

// The int64 a launch passes for constant `c` (a liftable CONST).
int64_t const_bits(const UOp& c);

// `sink` with consts[i] replaced by its lifted form for every i in `which`.
UOpPtr lift_consts(const UOpPtr& sink,
                   const std::vector<UOpPtr>& consts,
                   const std::vector<size_t>& which);

}  // namespace baregrad::compiler
