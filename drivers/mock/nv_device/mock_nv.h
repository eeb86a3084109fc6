// MOCK+NV: the NVIDIA HCQ device (drivers/nv/device.h) over the fake kernel driver
// (drivers/mock/nv) and the fake GPU (drivers/mock/nvgpu), wired together: the kernel's UVM
// mappings are the GPU's memory, its channels the GPU's channels, its doorbell page the GPU's
// doorbell, and the kernel's progress() (the hcq::Os seam every wait calls) runs the GPU.
// A launch runs a host twin: the one registered for the program's code address (code-less
// programs, register_mock_kernel), else the one registered on that device for the Binary the
// program was loaded from (register_mock_binary; twin_target.h does it for every kernel).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "drivers/mock/nvgpu/executor.h"
#include "drivers/mock/nvgpu/memory.h"
#include "drivers/nv/device.h"
#include "drivers/nv/program.h"

namespace baregrad::mock {

// The GPU memory a twin reaches, and where it reports the access the GPU would fault on.
class TwinMemory final : public GpuMemory {
 public:
  struct Fault {
    uint64_t va = 0;
    bool write = false;
  };
  explicit TwinMemory(GpuMemory& inner) : inner_(inner) {}
  std::optional<uint8_t*> resolve(uint64_t va, size_t bytes) override {
    return inner_.resolve(va, bytes);
  }
  // An MMU fault at `va` (a write or a read): returns the Status the twin returns. The launch
  // then fails as an SM's MMU fault does: RC ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT, the address
  // in the debugger's MMU fault info.
  Status mmu_fault(uint64_t va, bool write, const std::string& what);
  const std::optional<Fault>& fault() const { return fault_; }

 private:
  GpuMemory& inner_;
  std::optional<Fault> fault_;
};

// A kernel's host twin: runs the launch `li` (constant bank 0 in li.cbank0) on device `dev`,
// reaching GPU memory through `mem`. A non-OK status is the launch fault the GPU records (an
// MMU fault when it came from mem.mmu_fault(), a graphics exception otherwise).
using MockKernel = std::function<Status(const LaunchInfo& li, hcq::Device& dev, TwinMemory& mem)>;

// A MOCK+NV device on a fake GPU of `generation` (one fake kernel driver and GPU per device,
// owned by the device through its Os; every MOCK+NV device of the process shares the peer
// group "MOCK+NV": their GPUs resolve each other's memory). Named options.name, "MOCK+NV" when
// that is the default "NV". Each fault the GPU records is raised in the fake kernel as RM
// would report it (error notifiers, debugger state; mock_nv_fault.h), and the device reads it
// from there.
Result<std::unique_ptr<nv::Device>> open_mock_nv(
    nv::Generation generation = nv::Generation::kHopper, nv::DeviceOptions options = {});

class FakeNvGpu;
// The fake GPU under a device open_mock_nv() made (for fault injection); null for another.
FakeNvGpu* mock_nv_gpu(const nv::Device& dev);

// A code-less nv::Program (256 bytes of host memory give it a unique code address; the fake GPU
// never reads code) whose launches on any MOCK+NV device run `kernel`; its parameters start at
// `param_offset` in constant bank 0 (0x210: sm_90's; Blackwell's is 0x380).
std::unique_ptr<nv::Program> mock_program(
    std::string name, int num_bufs, int num_vars, MockKernel kernel, uint32_t param_offset = 0x210);

// Runs `kernel` for the launches of the program whose code starts at `program_va` (a loaded
// nv::Program's code_va()) on any MOCK+NV device, until the returned registration is destroyed.
std::shared_ptr<void> register_mock_kernel(uint64_t program_va, MockKernel kernel);

// Runs `kernel` for the launches on `dev` (a device open_mock_nv() made) of every program
// loaded from the Binary whose id is `binary_id`, until the returned registration is destroyed.
// NotFound when `dev` is not such a device.
Result<std::shared_ptr<void>> register_mock_binary(const nv::Device& dev,
                                                   const std::string& binary_id,
                                                   MockKernel kernel);

}  // namespace baregrad::mock
