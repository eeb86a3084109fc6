// A kernel on an AMD GPU: an HSA code object's image uploaded to device memory and relocated at
// its address, with what a PM4 dispatch programs (COMPUTE_PGM_*, the LDS size, the wave size).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/binary.h"
#include "base/status.h"
#include "drivers/amd/arch.h"
#include "drivers/amd/code_object.h"
#include "hcq/hcq.h"

namespace baregrad::amd {

class Device;

// The largest work-group a dispatch takes (COMPUTE_NUM_THREAD_* and the HSA limit).
constexpr uint32_t kMaxBlockThreads = 1024;

class Program : public hcq::Program {
 public:
  // Loads the kernel of `binary` (BinaryFormat::kAmdHsa for `arch`) on `dev`: reads its code
  // object, refuses what the PM4 queue cannot launch (a dynamic stack, user SGPRs other than the
  // private segment buffer and the kernarg pointer, kernarg preloading, a kernarg segment larger
  // than the Binary's argument block), grows the device's scratch to what it needs
  // (Device::ensure_scratch), uploads the image into CPU-visible VRAM, relocates it there and
  // registers its code range (and the binary's id) with `dev` for fault reports. InvalidArgument
  // names what is wrong.
  static Result<std::unique_ptr<Program>> load(Device& dev,
                                               const ArchInfo& arch,
                                               const Binary& binary);
  ~Program() override;

  // The kernarg segment is the argument block itself: no driver prefix, no hidden arguments.
  size_t args_prefix() const override { return 0; }
  // Block <= 1024 threads; grid x block < 2^32 work-items per dimension (the dispatch's
  // 32-bit work-item ids).
  Status check_launch(hcq::Dim3 grid, hcq::Dim3 block) const override;

  uint64_t code_va() const { return code_va_; }              // COMPUTE_PGM_LO/HI << 8
  uint64_t descriptor_va() const { return descriptor_va_; }  // NAME.kd (AQL kernel_object)
  uint64_t code_bytes() const { return code_bytes_; }
  const KernelDescriptor& descriptor() const { return desc_; }
  // COMPUTE_PGM_RSRC1 (gfx11: | PRIV), RSRC2 (| LDS granules at 15), RSRC3, as dispatched.
  uint32_t rsrc1() const { return rsrc1_; }
  uint32_t rsrc2() const { return rsrc2_; }
  uint32_t rsrc3() const { return rsrc3_; }
  uint32_t lds_bytes() const { return desc_.group_segment_fixed_size; }
  uint32_t scratch_bytes() const { return desc_.private_segment_fixed_size; }  // per work-item
  uint32_t wave_size() const { return wave_size_; }
  // The user SGPRs a dispatch sets, in order: the private segment buffer V# (4 words; gfx9
  // kernels ask for it even without scratch), then the kernarg segment pointer (2 words).
  bool private_segment_buffer() const { return private_segment_buffer_; }
  bool kernarg_ptr() const { return kernarg_ptr_; }

 private:
  Program(std::string name, int num_bufs, int num_vars) : hcq::Program(name, num_bufs, num_vars) {}

  Device* dev_ = nullptr;  // owner of image_
  hcq::Buffer image_;
  uint64_t code_va_ = 0, descriptor_va_ = 0, code_bytes_ = 0;
  KernelDescriptor desc_{};
  uint32_t rsrc1_ = 0, rsrc2_ = 0, rsrc3_ = 0, wave_size_ = 64;
  bool private_segment_buffer_ = false, kernarg_ptr_ = false;
};

// COMPUTE_PGM_RSRC2 with the kernel's LDS in GRANULATED_LDS_SIZE (bits 23:15, 512-byte granules,
// as tinygrad's AMDProgram writes it; the CP does not derive it from the descriptor).
uint32_t rsrc2_with_lds(uint32_t rsrc2, uint32_t lds_bytes);

}  // namespace baregrad::amd
