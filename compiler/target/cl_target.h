#pragma once

// The OpenCL target: kernels as OpenCL C source (render/cl_source.h), built by the OpenCL
// device they are loaded on (runtime/cl/cl_device.h): the OpenCL compiler belongs to the
// platform, so the Binary carries the text and the device calls clBuildProgram on it.
//
// Kernel ABI (OpenCL C), for a program with B buffer slots and V vars:
//   __kernel void NAME(__global uchar* buf0, ulong off0, ..., __global uchar* buf<B-1>,
//                      ulong off<B-1>, long var0, ..., long var<V-1>)
// Slot i's elements start `off<i>` bytes into buffer object `buf<i>` (a Buffer's address may
// point inside an allocation). The launch is an NDRange of grid[d] * block[d] work-items in
// work-groups of block[d] (d = 0, 1, 2).

#include <string>

#include "compiler/target/target.h"

namespace baregrad::compiler {

// What the codegen knows about an OpenCL device whose work-groups hold at most
// `max_work_group_size` work-items (CL_DEVICE_MAX_WORK_GROUP_SIZE).
TargetInfo cl_target_info(size_t max_work_group_size);

class ClTarget final : public Target {
 public:
  // `device_key` names the platform, the device and its driver version: OpenCL C built by
  // another implementation may behave differently, so it is part of cache_key().
  ClTarget(TargetInfo info, std::string device_key);

  std::string cache_key() const override;
  // OpenCL C with the ABI above.
  std::string render(const ProgramSpec& spec) const override;

 protected:
  // kOpenClC, arch "opencl"; grid and block from the spec's launch dims.
  Status layout(const ProgramSpec& spec, Binary* b) const override;
  // The source itself: the device builds it.
  Result<std::string> assemble(const std::string& source, const ProgramSpec& spec) const override;

 private:
  std::string device_key_;
};

}  // namespace baregrad::compiler
