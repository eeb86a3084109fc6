// DEV=NV, NV:N and MOCK+NV: kernels compiled by NvCompiler (LLVM NVPTX -> PTX -> ptxas ->
// cubin), loaded by the NVIDIA HCQ device (drivers/nv: the cubin uploaded and relocated in GPU
// memory) and launched through its queues (hcq_runtime.h). MOCK+NV runs the same driver code
// over the fake kernel driver and the fake GPU (drivers/mock); the fake GPU runs each loaded
// kernel's host twin with the grid, block and constant bank it decodes from the QMD.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "compiler/target/nv_program.h"
#include "drivers/nv/device.h"
#include "runtime/cpu/object_loader.h"
#include "runtime/hcq_runtime.h"

namespace baregrad::runtime {

class NvRuntimeDevice : public HcqRuntimeDevice {
 public:
  // GPU `index` through the RM (/dev/nvidiactl), named "NV" (index 0) or "NV:<index>"; with
  // `mock`, a MOCK+NV device (a Hopper) named "MOCK+NV" or "MOCK+NV:<index>". NotFound without
  // the device nodes or without ptxas; the driver's own errors otherwise.
  static Result<std::shared_ptr<Device>> open(int index, bool mock);
  ~NvRuntimeDevice() override;

  std::string name() const override { return name_; }
  const compiler::TargetInfo& target() const override { return compiler_->target(); }
  nv::Device& nv() { return *nv_; }
  bool mock() const { return mock_; }

 protected:
  Result<std::shared_ptr<Program>> build(
      const compiler::UOpPtr& ast, const std::optional<std::vector<compiler::Opt>>& opts) override;
  LaunchShape shape(const Program& prg) const override;

 private:
  NvRuntimeDevice(std::string name, bool mock) : name_(std::move(name)), mock_(mock) {}

  std::string name_;
  bool mock_;
  nv::Device* nv_ = nullptr;  // owned by the base (attach)
  std::optional<compiler::NvCompiler> compiler_;
  ObjectLoader twins_;  // MOCK+NV: the kernels' host twins (must outlive every launch)
};

}  // namespace baregrad::runtime
