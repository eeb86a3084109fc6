// MOCK+NV: the NVIDIA HCQ device (drivers/nv/device.h) over the fake kernel driver
// (drivers/mock/nv) and the fake GPU (drivers/mock/nvgpu), wired together: the kernel's UVM
// mappings are the GPU's memory, its channels the GPU's channels, its doorbell page the GPU's
// doorbell. Code-less programs run host twins registered process-wide by program address.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "drivers/mock/nvgpu/executor.h"
#include "drivers/mock/nvgpu/memory.h"
#include "drivers/nv/device.h"
#include "drivers/nv/program.h"

namespace baregrad::mock {

// A kernel's host twin: runs the launch `li` (constant bank 0 in li.cbank0) on device `dev`,
// reaching GPU memory through `mem`. A non-OK status is the launch fault the GPU records.
using MockKernel = std::function<Status(const LaunchInfo& li, hcq::Device& dev, GpuMemory& mem)>;

// A MOCK+NV device on a fake GPU of `generation` (one fake kernel driver and GPU per device;
// every MOCK+NV device of the process shares a peer group: their GPUs resolve each other's
// memory).
Result<std::unique_ptr<nv::Device>> open_mock_nv(
    nv::Generation generation = nv::Generation::kHopper);

// A code-less nv::Program whose launches on any MOCK+NV device run `kernel`.
std::unique_ptr<nv::Program> mock_program(std::string name,
                                          int num_bufs,
                                          int num_vars,
                                          MockKernel kernel);

}  // namespace baregrad::mock
