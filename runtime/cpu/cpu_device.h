// The CPU device: kernels compiled in-process (LLVM) or by clang (C), run on every core by the
// CPU HCQ device (drivers/cpu): memory, copies and launches all go through its queues
// (hcq_runtime.h). With the NULL executor (DEV=NULL) the same kernels compile and nothing runs.
#pragma once

#include <memory>
#include <string>

#include "compiler/program.h"
#include "runtime/cpu/object_loader.h"
#include "runtime/hcq_runtime.h"

namespace baregrad::runtime {

enum class CpuBackend { kLlvm, kClang };

class CpuDevice : public HcqRuntimeDevice {
 public:
  // `threads` <= 0 means every core (or options().threads when set). Throws baregrad::Error
  // when the HCQ device cannot start.
  explicit CpuDevice(CpuBackend backend = CpuBackend::kLlvm, int threads = 0, bool null = false);
  ~CpuDevice() override;

  std::string name() const override;
  // True unless this is the NULL device (whose kernels never run).
  bool host_addressable() const override { return !null_; }
  const compiler::TargetInfo& target() const override { return target_; }
  // NULL: zeros (nothing was ever computed).
  Status copy_out(void* dst, Buffer src, size_t bytes) override;

 protected:
  Result<std::shared_ptr<Program>> build(
      const compiler::UOpPtr& ast, const std::optional<std::vector<compiler::Opt>>& opts) override;
  LaunchShape shape(const Program& prg) const override;

 private:
  CpuBackend backend_;
  compiler::TargetInfo target_;
  std::unique_ptr<compiler::Renderer> renderer_;
  std::unique_ptr<compiler::Compiler> compiler_;
  ObjectLoader loader_;
  bool null_;
};

}  // namespace baregrad::runtime
