#pragma once

// The AMD target: kernel AST -> GPU-lowered program -> LLVM IR (LlvmAbi::kAmdgpu) -> LLVM's
// AMDGPU backend (relocatable object) -> ld.lld -> HSA code object, for one gfx target. The
// Binary is the code object (format kAmdHsa, arch "gfx1100"): one kernel NAME with its kernel
// descriptor NAME.kd, whose kernarg segment is one 8-byte address per buffer slot, then one
// 8-byte value per var (no implicit kernargs), launched as grid (work-groups) x block.
// drivers/amd loads it (code_object.h).

#include <memory>
#include <string>
#include <vector>

#include "compiler/target/lld.h"
#include "compiler/target/llvm_target.h"
#include "compiler/target/target.h"

namespace baregrad::compiler {

// The gfx targets baregrad compiles for: "gfx90a", "gfx942" (CDNA, wave64), "gfx1100",
// "gfx1201" (RDNA3/4, wave32).
const std::vector<std::string>& amd_gfx_targets();
// The codegen's view of `gfx` (one of amd_gfx_targets(), CHECKed): GPU lowering in blocks of
// up to 128 threads, LDS and barriers, wave exchanges (ds_bpermute) across its wave size.
TargetInfo amd_target_info(const std::string& gfx);
// The wave size LLVM compiles `gfx` for: 64 on gfx9 (CDNA), 32 on gfx11/gfx12 (RDNA).
int amd_wave_size(const std::string& gfx);

class AmdTarget : public Target {
 public:
  // A target for `gfx`. InvalidArgument naming the supported targets for another; NotFound,
  // naming the paths tried, when there is no ld.lld.
  static Result<std::unique_ptr<AmdTarget>> create(const std::string& gfx);
  ~AmdTarget() override;

  const std::string& gfx() const { return gfx_; }
  const LdLld& lld() const { return lld_; }
  // The LLVM AMDGPU key and the linker's.
  std::string cache_key() const override;
  std::string render(const ProgramSpec& spec) const override;
  // The kernel's AMDGPU assembly (with LLVM's register and LDS summary comments).
  Result<std::string> listing(const CompiledKernel& k) const override;

 protected:
  AmdTarget(std::string gfx, LdLld lld);
  // kAmdHsa for gfx; a kernarg per buffer slot (gpu_buffer_slots); InvalidArgument outside
  // what a dispatch takes (block <= 1024 threads; grid x block < 2^32 work-items per dim).
  Status layout(const ProgramSpec& spec, Binary* b) const override;
  // The relocatable object from LLVM, then ld.lld -shared.
  Result<std::string> assemble(const std::string& source, const ProgramSpec& spec) const override;

 private:
  std::string gfx_;
  LdLld lld_;
  LlvmCompiler llvm_;
};

}  // namespace baregrad::compiler
