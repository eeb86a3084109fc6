#pragma once

// MOCK+NV as the device table assembles it: the NVIDIA target whose every kernel also gets a
// host twin (the same lowered program rendered with LlvmAbi::kHostTwin, compiled for the host
// and linked into the process) registered with the MOCK+NV device for the kernel's Binary, so
// that the fake GPU runs the twin when the driver launches the cubin. Only MOCK+ devices pay
// for twins; DEV=NV compiles cubins alone.

#include <memory>
#include <string>

#include "base/status.h"
#include "compiler/target/target.h"
#include "drivers/nv/device.h"

namespace baregrad::mock {

struct MockNv {
  std::unique_ptr<nv::Device> device;  // over the fake kernel driver and GPU (mock_nv.h)
  std::unique_ptr<compiler::Target> target;
};

// A MOCK+NV device named `name` and its twin-making target. NotFound (naming the device) when
// there is no ptxas.
Result<MockNv> open_mock_nv_with_twins(const std::string& name);

}  // namespace baregrad::mock
