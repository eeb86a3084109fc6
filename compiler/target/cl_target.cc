#include "compiler/target/cl_target.h"

#include <algorithm>
#include <bit>

#include "compiler/render/cl_source.h"
#include "compiler/render/llvm_ir.h"

namespace baregrad::compiler {

TargetInfo cl_target_info(size_t max_work_group_size) {
  TargetInfo t;
  t.name = "opencl";
  t.vector_bytes = 16;  // vload4 / vstore4 of 32-bit elements
  t.threads = 1;
  t.registers = 64;
  t.native_transcendentals = false;  // OpenCL's exp2/log2/sin allow several ulp of error
  t.gpu = true;
  t.has_local = true;  // __local memory and barrier()
  t.max_block = static_cast<int>(std::bit_floor(std::clamp<size_t>(max_work_group_size, 1, 128)));
  return t;
}

ClTarget::ClTarget(TargetInfo info, std::string device_key)
    : Target(std::move(info)), device_key_(std::move(device_key)) {}

std::string ClTarget::cache_key() const { return "opencl-c:" + device_key_; }

std::string ClTarget::render(const ProgramSpec& spec) const { return ClRenderer().render(spec); }

Status ClTarget::layout(const ProgramSpec& spec, Binary* b) const {
  b->format = BinaryFormat::kOpenClC;
  b->arch = "opencl";
  b->num_bufs = gpu_buffer_slots(spec);
  for (const UOpPtr& u : spec.uops) {
    int n = u->dtype().count;
    if (n != 1 && n != 2 && n != 3 && n != 4 && n != 8 && n != 16)
      return invalid_argument("opencl: " + spec.name + " uses vectors of " + std::to_string(n) +
                              " lanes (" + u->dtype().name() + "); OpenCL C has 2, 3, 4, 8 and 16");
  }
  for (int d = 0; d < 3; d++) {
    int64_t items = spec.global_size[d] * spec.local_size[d];
    if (spec.global_size[d] < 1 || spec.local_size[d] < 1 ||
        spec.local_size[d] > info().max_block || items > int64_t{0xffffffff})
      return invalid_argument("opencl: " + spec.name + " has launch dims out of range in dim " +
                              std::to_string(d) + ": " + std::to_string(spec.global_size[d]) +
                              " work-groups of " + std::to_string(spec.local_size[d]));
    b->grid[d] = static_cast<uint32_t>(spec.global_size[d]);
    b->block[d] = static_cast<uint32_t>(spec.local_size[d]);
  }
  return Status();
}

Result<std::string> ClTarget::assemble(const std::string& source, const ProgramSpec&) const {
  return source;
}

}  // namespace baregrad::compiler
