#pragma once

// The CPU targets: kernels for the host CPU as relocatable ELF objects with the CPU ABI of
// program.h, compiled in-process by LLVM (DEV=CPU) or by clang from C (DEV=CPU:C).

#include <memory>
#include <string>

#include "compiler/target/target.h"

namespace baregrad::compiler {

enum class CpuCompiler { kLlvm, kClang };

class CpuTarget final : public Target {
 public:
  // Kernels split over `threads` cores; clang is options().cc (CPU_CC).
  CpuTarget(CpuCompiler compiler, int threads);
  ~CpuTarget() override;

  std::string cache_key() const override;
  std::string render(const ProgramSpec& spec) const override;
  // The kernel as C (the LLVM target renders the C renderer's form too).
  Result<std::string> listing(const CompiledKernel& k) const override;

 protected:
  // kHostElf for host_arch(); grid[0] = the items split over the cores (thread_extent).
  Status layout(const ProgramSpec& spec, Binary* b) const override;
  Result<std::string> assemble(const std::string& source, const ProgramSpec& spec) const override;

 private:
  CpuCompiler kind_;
  std::unique_ptr<Renderer> renderer_;
  std::unique_ptr<Compiler> compiler_;
};

}  // namespace baregrad::compiler
