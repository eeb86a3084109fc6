// MOCK+AMD: the AMD HCQ device (drivers/amd/device.h) over the fake KFD (drivers/mock/amd) and
// the fake AMD GPU (drivers/mock/amdgpu), wired together: the KFD's memory is the GPU's memory,
// its queues the GPU's queues, and the KFD's progress() (the hcq::Os seam every wait calls) runs
// the GPU. A dispatch runs the host twin registered on that device for the Binary the program
// was loaded from (register_mock_amd_binary; twin_target.h does it for every kernel).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "drivers/amd/device.h"
#include "drivers/mock/amdgpu/executor.h"

namespace baregrad::mock {

class FakeAmdGpu;
class FakeKfd;

// The GPU memory a twin reaches, and where it reports the access the GPU would fault on.
class AmdTwinMemory {
 public:
  explicit AmdTwinMemory(const FakeKfd& kfd) : kfd_(kfd) {}
  // The host address of [va, va + bytes) when one GPU-mapped allocation holds it.
  std::optional<uint8_t*> resolve(uint64_t va, size_t bytes) const;
  // A VM fault at `va`: returns the Status the twin returns. The fake KFD then reports it as
  // the GPU would (a memory exception at `va`), which the device turns into its sticky error.
  Status vm_fault(uint64_t va, bool write, const std::string& what);
  const std::optional<uint64_t>& fault_va() const { return fault_va_; }

 private:
  const FakeKfd& kfd_;
  std::optional<uint64_t> fault_va_;
};

// A kernel's host twin: runs dispatch `l` (its kernarg bytes resolved by the GPU) on `dev`,
// reaching GPU memory through `mem`. A non-OK status is the dispatch's fault.
using MockAmdKernel =
    std::function<Status(const AmdLaunch& l, hcq::Device& dev, AmdTwinMemory& mem)>;

// A MOCK+AMD device on a fake GPU of target `gfx` (a FakeAmdGpuConfig preset: "gfx90a",
// "gfx942", "gfx1100", "gfx1201"; one fake KFD and GPU per device, owned by the device through
// its Os). Named options.name, "MOCK+AMD" when empty.
Result<std::unique_ptr<amd::Device>> open_mock_amd(const std::string& gfx = "gfx1100",
                                                   amd::DeviceOptions options = {});

// The fake GPU and KFD under a device open_mock_amd() made (for fault injection); null for
// another device.
FakeAmdGpu* mock_amd_gpu(const amd::Device& dev);
FakeKfd* mock_amd_kfd(const amd::Device& dev);

// Runs `kernel` for the dispatches on `dev` (a device open_mock_amd() made) of every program
// loaded from the Binary whose id is `binary_id`, whose code takes its kernarg pointer in user
// SGPRs `kernarg_sgpr` and the next, until the returned registration is destroyed. NotFound when
// `dev` is not such a device.
Result<std::shared_ptr<void>> register_mock_amd_binary(const amd::Device& dev,
                                                       const std::string& binary_id,
                                                       MockAmdKernel kernel,
                                                       uint32_t kernarg_sgpr);

}  // namespace baregrad::mock
