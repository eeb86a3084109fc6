#pragma once

// A kernel on DEV=NULL: its name and arity only; it never runs.

#include "hcq/hcq.h"

namespace baregrad::null {

class Program final : public hcq::Program {
 public:
  using hcq::Program::Program;
};

}  // namespace baregrad::null
