// A kernel on an NVIDIA GPU: a cubin's image uploaded to device memory and relocated at its
// address, with the launch facts the QMD needs.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "base/status.h"
#include "drivers/nv/cubin.h"
#include "hcq/hcq.h"

namespace baregrad::nv {

class Device;

// Local memory every launch needs per thread beyond the kernel's own stack
// (EIATTR_MIN_STACK_SIZE): tinygrad's NV backend adds 0x240 (shared/reference/hcq-interfaces.md
// 2.8) to size both the QMD's SHADER_LOCAL_MEMORY_HIGH_SIZE and the device's local memory.
constexpr uint32_t kLocalReserveBytes = 0x240;

// Per-GPU launch limits check_launch() applies.
struct LaunchLimits {
  uint32_t max_shared_bytes = 227 << 10;  // the largest carveout minus the 1 KiB reserved
  uint32_t registers_per_sm = 65536;
  uint32_t local_bytes_per_thread = 0;  // code-less programs; loaded ones ask their device
};

class Program : public hcq::Program {
 public:
  // Loads kernel `name` of `elf` on `dev`: uploads the image, relocates it at its address, and
  // registers its code range (and `binary_id`) with `dev`: fault reports name kernels by PC.
  static Result<std::unique_ptr<Program>> load(Device& dev,
                                               std::span<const uint8_t> elf,
                                               const std::string& name,
                                               int num_bufs,
                                               int num_vars,
                                               const std::string& binary_id = "");
  ~Program() override;

  // The parameters start at the cubin's EIATTR_PARAM_CBANK offset in constant bank 0.
  size_t args_prefix() const override { return param_offset_; }
  // Block <= 1024 threads (x, y <= 1024, z <= 64), grid within the QMD fields, registers x
  // threads within the SM's register file, shared and local memory within the device's.
  Status check_launch(hcq::Dim3 grid, hcq::Dim3 block) const override;

  uint64_t code_va() const { return code_va_; }
  uint32_t code_bytes() const { return code_bytes_; }
  uint32_t registers() const { return registers_; }
  uint32_t shared_bytes() const { return shared_bytes_; }
  // Local memory per thread a launch needs: the stack plus kLocalReserveBytes (0 when the
  // program's code was placed by its creator).
  uint32_t local_bytes() const { return local_bytes_; }
  uint32_t sass_version() const { return sass_version_; }
  // Constant banks other than 0 (module constants) in the uploaded image.
  const std::vector<CubinConstBank>& constant_banks() const { return banks_; }
  uint64_t image_va() const { return image_.va; }

 protected:
  // A program whose code its creator placed at `code_va` (nothing is uploaded or registered):
  // no registers, shared or local memory; parameters from `param_offset` in constant bank 0.
  Program(std::string name, int num_bufs, int num_vars, uint64_t code_va, uint32_t param_offset);

 private:
  struct Cubin {};
  Program(Cubin, std::string name, int num_bufs, int num_vars);

  Device* dev_ = nullptr;  // owner of image_ (null when the creator placed the code)
  hcq::Buffer image_;
  uint64_t code_va_ = 0;
  uint32_t code_bytes_ = 0;
  uint32_t registers_ = 0, shared_bytes_ = 0, local_bytes_ = 0, sass_version_ = 0;
  uint32_t param_offset_ = 0;
  std::vector<CubinConstBank> banks_;
  LaunchLimits limits_;
};

}  // namespace baregrad::nv
