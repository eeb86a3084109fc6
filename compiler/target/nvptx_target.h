// LLVM IR (LlvmIrRenderer with LlvmAbi::kNvptx) -> PTX text, in-process with LLVM's NVPTX
// backend, and what the codegen knows about NVIDIA GPUs.
#pragma once

#include <string>

#include "compiler/opt/kernel.h"
#include "compiler/target/llvm_target.h"

namespace baregrad::compiler {

// The codegen's view of an sm_<sm> GPU: GPU lowering (one thread per output element, or per
// 4 x 4 register tile of a large matmul; blocks of up to 128), software transcendentals (no
// libdevice).
TargetInfo nv_target_info(int sm);

class NvptxCompiler {
 public:
  // Compute capabilities with a known PTX ISA version: 75, 80, 86, 87, 89, 90, 100, 120.
  static bool supported(int sm);
  // `sm` must be supported (CHECKed).
  explicit NvptxCompiler(int sm);

  int sm() const { return sm_; }
  // "llvm19-nvptx64-sm_90-ptx78" plus the rewritten target when it differs; part of every
  // cache key of PTX.
  std::string cache_key() const;
  // The PTX of `ir`, which must define kernel `name`, with `.target sm_<sm>`. InvalidArgument
  // with the numbered IR when LLVM rejects it.
  // NOTE: LLVM 19 knows no sm_100 / sm_120: it targets sm_90 there and the `.version` /
  // `.target` lines are rewritten to the PTX ISA that introduced the real target (PTX is
  // forward compatible; ptxas accepts it either way).
  Result<std::string> ptx(const std::string& ir, const std::string& name) const;

 private:
  int sm_;
  LlvmCompiler llvm_;
};

}  // namespace baregrad::compiler
