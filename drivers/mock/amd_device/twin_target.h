#pragma once

// MOCK+AMD as the device table assembles it: the AMD target whose every kernel also gets a host
// twin (the same lowered program rendered with LlvmAbi::kHostTwin, compiled for the host and
// linked into the process) registered with the MOCK+AMD device for the kernel's Binary, so that
// the fake GPU runs the twin when the driver dispatches the code object. Only MOCK+ devices pay
// for twins; DEV=AMD compiles code objects alone.

#include <memory>
#include <string>

#include "base/status.h"
#include "compiler/target/target.h"
#include "drivers/amd/device.h"

namespace baregrad::mock {

struct MockAmd {
  std::unique_ptr<amd::Device> device;  // over the fake KFD and GPU (mock_amd.h)
  std::unique_ptr<compiler::Target> target;
};

// A MOCK+AMD device named `name` on a fake `gfx` GPU with `options` (its name replaced), and
// its twin-making target. NotFound (naming the device) when there is no ld.lld.
Result<MockAmd> open_mock_amd_with_twins(const std::string& name,
                                         const std::string& gfx = "gfx1100",
                                         amd::DeviceOptions options = {});

}  // namespace baregrad::mock
