// The AMD code-object loader: one kernel of an HSA code object (an ELF64 shared object for
// EM_AMDGPU, as ld.lld links LLVM's AMDGPU output) as the GPU needs it. The allocated sections
// are laid out at their addresses in one image; the kernel descriptor (NAME.kd, 64 bytes) gives
// the dispatch facts; R_AMDGPU_RELATIVE64 relocations are kept to be applied once the image's
// GPU address is known. Malformed input is refused with InvalidArgument naming what is wrong;
// every offset is bounds-checked (base/elf.h).
// Sources: LLVM's AMDGPUUsage ("Code Object V5 Metadata", "Kernel Descriptor") and its headers
// llvm/Support/AMDHSAKernelDescriptor.h (the descriptor's layout and bit fields) and
// llvm/BinaryFormat/ELF.h (EM_AMDGPU, EF_AMDGPU_MACH_*, ELFOSABI_AMDGPU_HSA, R_AMDGPU_*), as
// Debian's llvm-19-dev installs them; tinygrad's AMDProgram for what a dispatch takes from it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace baregrad::amd {

// llvm::amdhsa::kernel_descriptor_t: what the CP reads to start a kernel (64-byte aligned).
struct KernelDescriptor {
  uint32_t group_segment_fixed_size;    // LDS bytes per work-group
  uint32_t private_segment_fixed_size;  // scratch bytes per work-item
  uint32_t kernarg_size;                // kernarg segment bytes
  uint8_t reserved0[4];
  int64_t kernel_code_entry_byte_offset;  // from the descriptor to the first instruction
  uint8_t reserved1[20];
  uint32_t compute_pgm_rsrc3;
  uint32_t compute_pgm_rsrc1;
  uint32_t compute_pgm_rsrc2;
  uint16_t kernel_code_properties;
  uint16_t kernarg_preload;
  uint8_t reserved3[4];
};
static_assert(sizeof(KernelDescriptor) == 64);
static_assert(offsetof(KernelDescriptor, kernel_code_entry_byte_offset) == 16);
static_assert(offsetof(KernelDescriptor, compute_pgm_rsrc3) == 44);
static_assert(offsetof(KernelDescriptor, compute_pgm_rsrc1) == 48);
static_assert(offsetof(KernelDescriptor, kernel_code_properties) == 56);

// Fields of COMPUTE_PGM_RSRC1/2 and kernel_code_properties the driver reads (mask, shift).
constexpr uint32_t COMPUTE_PGM_RSRC1_GRANULATED_WORKITEM_VGPR_COUNT = 0x3f;  // bits 5:0
constexpr uint32_t COMPUTE_PGM_RSRC2_ENABLE_PRIVATE_SEGMENT = 1u << 0;
constexpr uint32_t COMPUTE_PGM_RSRC2_USER_SGPR_COUNT_SHIFT = 1;  // bits 5:1
constexpr uint32_t COMPUTE_PGM_RSRC2_USER_SGPR_COUNT = 0x1fu << 1;
constexpr uint32_t COMPUTE_PGM_RSRC2_GRANULATED_LDS_SIZE = 0x1ffu << 15;  // CP fills it in
constexpr uint16_t KERNEL_CODE_PROPERTY_ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER = 1u << 0;
constexpr uint16_t KERNEL_CODE_PROPERTY_ENABLE_SGPR_DISPATCH_PTR = 1u << 1;
constexpr uint16_t KERNEL_CODE_PROPERTY_ENABLE_SGPR_QUEUE_PTR = 1u << 2;
constexpr uint16_t KERNEL_CODE_PROPERTY_ENABLE_SGPR_KERNARG_SEGMENT_PTR = 1u << 3;
constexpr uint16_t KERNEL_CODE_PROPERTY_ENABLE_WAVEFRONT_SIZE32 = 1u << 10;
constexpr uint16_t KERNEL_CODE_PROPERTY_USES_DYNAMIC_STACK = 1u << 11;

// The relocation the loader applies (R_AMDGPU_RELATIVE64: u64 at the offset = base + addend);
// R_AMDGPU_NONE entries are skipped and every other type refused.
constexpr uint32_t R_AMDGPU_NONE = 0;
constexpr uint32_t R_AMDGPU_RELATIVE64 = 13;

struct CodeObjectReloc {
  uint64_t offset = 0;  // bytes into the image
  int64_t addend = 0;
};

struct CodeObject {
  std::string name;  // the kernel
  std::string gfx;   // from e_flags: "gfx1100"; "mach 0x<hex>" for a target baregrad lacks
  // The allocated sections at their addresses (the image is uploaded at a 4 KiB-aligned base
  // and relocated); NOBITS sections are zeros.
  std::vector<uint8_t> image;
  uint64_t descriptor_offset = 0;  // NAME.kd in the image; what an AQL packet's kernel_object adds
  uint64_t code_offset = 0;        // the first instruction (256-byte aligned): COMPUTE_PGM_LO/HI
  KernelDescriptor descriptor{};
  bool wave32 = false;  // KERNEL_CODE_PROPERTY_ENABLE_WAVEFRONT_SIZE32
  int vgprs = 0;        // VGPRs a work-item is allocated (the rsrc1 granules)
  int user_sgprs = 0;   // COMPUTE_PGM_RSRC2 USER_SGPR_COUNT
  std::vector<CodeObjectReloc> relocs;
};

// Loads kernel `name` from `elf`. InvalidArgument naming the problem for a truncated or non-AMDGPU
// ELF, one that is not an HSA code object (OS ABI), a section past its end, a missing kernel or
// descriptor, a descriptor or entry that is misaligned or outside the code, reserved descriptor
// bytes that are not zero, or a relocation the loader does not apply.
Result<CodeObject> load_code_object(std::span<const uint8_t> elf, const std::string& name);

// Applies every relocation for the image uploaded at GPU address `base`, in place.
Status relocate(CodeObject& co, uint64_t base);

// "gfx90a", "gfx942", "gfx1100", "gfx1201" from EF_AMDGPU_MACH; "mach 0x<hex>" for others.
std::string gfx_of_mach(uint32_t mach);

}  // namespace baregrad::amd
