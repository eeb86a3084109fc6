#include "drivers/nv/program.h"

#include <cstring>

#include "drivers/nv/device.h"
#include "drivers/nv/qmd.h"

namespace baregrad::nv {
Program::Program(Cubin, std::string name, int num_bufs, int num_vars)
    : hcq::Program(std::move(name), num_bufs, num_vars) {}

Program::Program(
    std::string name, int num_bufs, int num_vars, uint64_t code_va, uint32_t param_offset)
    : hcq::Program(std::move(name), num_bufs, num_vars),
      code_va_(code_va),
      param_offset_(param_offset) {}

Result<std::unique_ptr<Program>> Program::load(Device& dev,
                                               std::span<const uint8_t> elf,
                                               const std::string& name,
                                               int num_bufs,
                                               int num_vars,
                                               const std::string& binary_id) {
  ASSIGN_OR_RETURN(CubinImage img, load_cubin(elf, name));
  std::unique_ptr<Program> p(new Program(Cubin{}, name, num_bufs, num_vars));
  ASSIGN_OR_RETURN(p->image_, dev.allocator().alloc(img.image_size, {.cpu_access = true}));
  p->dev_ = &dev;
  RETURN_IF_ERROR(relocate(img, p->image_.va));
  std::memcpy(p->image_.cpu, img.image.data(), img.image.size());
  std::memset(static_cast<uint8_t*>(p->image_.cpu) + img.image.size(), 0,
              img.image_size - img.image.size());
  p->code_va_ = p->image_.va + img.code_offset;
  p->code_bytes_ = static_cast<uint32_t>(img.code_size);
  p->registers_ = static_cast<uint32_t>(img.registers);
  p->shared_bytes_ = img.shared_bytes;
  p->local_bytes_ = img.local_bytes + kLocalReserveBytes;
  p->sass_version_ = static_cast<uint32_t>(img.sm / 10 << 4 | img.sm % 10);  // 90 -> 0x90
  p->param_offset_ = img.param_offset;
  p->banks_ = img.constant_banks;
  p->limits_ = dev.limits();
  dev.register_program(p->code_va_, p->code_bytes_, name, binary_id);
  return p;
}

Program::~Program() {
  if (dev_ && code_bytes_) dev_->unregister_program(code_va_);
  if (dev_ && image_.size) dev_->allocator().free(image_);
}

Status Program::check_launch(hcq::Dim3 grid, hcq::Dim3 block) const {
  RETURN_IF_ERROR(hcq::Program::check_launch(grid, block));
  uint64_t threads = uint64_t{block.x} * block.y * block.z;
  auto refuse = [&](const std::string& why) {
    return invalid_argument("launch of " + name() + " with grid " + std::to_string(grid.x) + "x" +
                            std::to_string(grid.y) + "x" + std::to_string(grid.z) + " and block " +
                            std::to_string(block.x) + "x" + std::to_string(block.y) + "x" +
                            std::to_string(block.z) + ": " + why);
  };
  if (threads > kMaxBlockThreads || block.x > kMaxBlockThreads || block.y > kMaxBlockThreads ||
      block.z > kMaxBlockZ)
    return refuse("over 1024 threads per block (z <= 64)");
  if (grid.x > kMaxGridX || grid.y > kMaxGridYZ || grid.z > kMaxGridYZ)
    return refuse("grid over 2^31-1 x 65535 x 65535");
  if (uint64_t{registers_} * threads > limits_.registers_per_sm)
    return refuse(std::to_string(registers_) + " registers x " + std::to_string(threads) +
                  " threads exceed the SM's " + std::to_string(limits_.registers_per_sm));
  if (shared_bytes_ > limits_.max_shared_bytes)
    return refuse(std::to_string(shared_bytes_) + " bytes of shared memory exceed " +
                  std::to_string(limits_.max_shared_bytes));
  uint32_t local = dev_ ? dev_->local_bytes_per_thread() : limits_.local_bytes_per_thread;
  if (local_bytes_ > local)
    return refuse(std::to_string(local_bytes_) + " bytes of local memory per thread exceed the " +
                  std::to_string(local) + " the device provides");
  return Status();
}

}  // namespace baregrad::nv
