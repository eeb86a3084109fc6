#pragma once

// The NVIDIA target: kernel AST -> GPU-lowered program -> LLVM IR -> PTX (LLVM NVPTX) ->
// cubin (ptxas), for one sm. The Binary is the cubin (format kCubin, arch "sm_90"): one
// entry whose parameters are one 8-byte address per buffer slot, then one 8-byte value per
// var, launched as grid x block. drivers/nv loads it; so does DEV=CUDA (cuModuleLoadData).

#include <memory>
#include <string>

#include "compiler/target/nvptx_target.h"
#include "compiler/target/ptxas.h"
#include "compiler/target/target.h"

namespace baregrad::compiler {

class NvTarget : public Target {
 public:
  // A target for sm_<sm>. InvalidArgument for an unsupported sm (NvptxCompiler::supported);
  // NotFound, naming the paths tried, when there is no ptxas.
  static Result<std::unique_ptr<NvTarget>> create(int sm);
  ~NvTarget() override;

  int sm() const { return sm_; }
  const Ptxas& ptxas() const { return ptxas_; }
  // The LLVM NVPTX key and the ptxas key (its version, the sm and the flags).
  std::string cache_key() const override;
  std::string render(const ProgramSpec& spec) const override;
  // The kernel's PTX.
  Result<std::string> listing(const CompiledKernel& k) const override;

 protected:
  NvTarget(int sm, Ptxas ptxas);
  // kCubin for sm_<sm>; a parameter per buffer slot (gpu_buffer_slots); the grid and block of
  // the lowered program, InvalidArgument outside what a launch takes (block <= 1024 per dim,
  // grid < 2^31).
  Status layout(const ProgramSpec& spec, Binary* b) const override;
  // PTX, then ptxas.
  Result<std::string> assemble(const std::string& source, const ProgramSpec& spec) const override;

 private:
  int sm_;
  Ptxas ptxas_;
  NvptxCompiler nvptx_;
};

}  // namespace baregrad::compiler
