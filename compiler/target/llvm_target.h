// Compiles LLVM IR text (LlvmIrRenderer's output) with LLVM's O2 pipeline to an ELF object (for
// the host CPU, or a relocatable AMDGPU object) or to assembly (PTX for NVPTX). LLVM headers stay
// inside llvm_target.cc.
#pragma once

#include <string>

#include "compiler/program.h"

namespace baregrad::compiler {

// Registers LLVM's native target, asm printer and asm parser; once per process, thread-safe.
void init_llvm_native_target();
// Registers the NVPTX target and its asm printer; once per process, thread-safe.
void init_llvm_nvptx_target();
// Registers the AMDGPU target and its asm printer; once per process, thread-safe.
void init_llvm_amdgpu_target();

// Thread-safe: each call builds its own LLVMContext and TargetMachine.
class LlvmCompiler : public Compiler {
 public:
  // Targets the host: default triple, host CPU and its features.
  LlvmCompiler();
  // Targets `triple` (the host's, "nvptx64-nvidia-cuda" or "amdgcn-amd-amdhsa"), `cpu`
  // ("sm_90", "gfx1100") and `features` ("+ptx85", "+wavefrontsize32").
  LlvmCompiler(std::string triple, std::string cpu, std::string features);

  // "llvm<major>-<triple>-<cpu>-<hash of the feature string>-O2".
  std::string cache_key() const override;
  // The ELF object of `src` after the O2 pipeline; `name` must be defined by `src`. Parse and
  // verifier errors come back as InvalidArgument with the numbered source appended.
  Result<std::string> compile(const std::string& src, const std::string& name) const override;
  // The module after the O2 pipeline, as IR text (for tests and DEBUG).
  Result<std::string> optimized_ir(const std::string& src) const;
  // The target assembly of the optimised module (PTX for NVPTX). With `name`, `src` must
  // define it, as for compile().
  Result<std::string> assembly(const std::string& src, const std::string& name = "") const;

  const std::string& triple() const { return triple_; }
  const std::string& cpu() const { return cpu_; }
  // Comma-separated "+feature" / "-feature" list passed to the TargetMachine.
  const std::string& features() const { return features_; }

 private:
  enum class Output { kIr, kAssembly, kObject };
  Result<std::string> run(const std::string& src, const std::string& name, Output out) const;

  std::string triple_, cpu_, features_;
};

}  // namespace baregrad::compiler
