// Renders a linear ProgramSpec as OpenCL C 1.2 with the kernel ABI of
// compiler/target/cl_target.h. The text comes from the C renderer's writer (c_source.cc) in
// its OpenCL dialect.
#pragma once

#include <string>

#include "compiler/program.h"

namespace baregrad::compiler {

class ClRenderer : public Renderer {
 public:
  std::string name() const override { return "OpenCL C"; }
  std::string render(const ProgramSpec& spec) const override;
};

}  // namespace baregrad::compiler
