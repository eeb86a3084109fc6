// A kernel's host twin (compiler/render/llvm_ir.h, LlvmAbi::kHostTwin) compiled for this machine
// and linked into the process: what a MOCK+ target registers with its fake GPU for every kernel
// it compiles (drivers/mock/nv_device/twin_target.h, drivers/mock/amd_device/twin_target.h).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "base/status.h"
#include "compiler/program.h"
#include "compiler/target/llvm_target.h"
#include "drivers/cpu/iface_host.h"

namespace baregrad::mock {

struct HostTwin {
  void (*fn)() = nullptr;
  // >= 0: `fn` is the one-thread form with this much shared memory per block (run_twin's
  // per_thread); -1: the grid form.
  int64_t smem_bytes = -1;
};

// Thread-safe; the twins it made stay linked while it lives.
class HostTwinCompiler {
 public:
  // The twin of `spec`, its object from the kernel cache when there (keyed by the host LLVM
  // target and the twin's IR), else compiled and cached.
  Result<HostTwin> compile(const compiler::ProgramSpec& spec);

 private:
  compiler::LlvmCompiler host_;
  cpu::ObjectLoader loader_;
  std::mutex mu_;
  std::vector<std::shared_ptr<const void>> code_;
};

}  // namespace baregrad::mock
