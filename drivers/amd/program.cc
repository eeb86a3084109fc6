#include "drivers/amd/program.h"

#include <cstring>
#include <span>

#include "base/format.h"
#include "drivers/amd/device.h"

namespace baregrad::amd {
namespace {

// The user-SGPR inputs other than the private segment buffer and the kernarg pointer (llvm
// AMDHSAKernelDescriptor.h KERNEL_CODE_PROPERTY_ENABLE_SGPR_*): the PM4 dispatch provides none;
// on an AQL queue the CP sets them up from the descriptor (the dispatch packet, amd_queue_t).
constexpr struct {
  uint16_t bit;
  const char* name;
} kUnsupportedSgprs[] = {
    {KERNEL_CODE_PROPERTY_ENABLE_SGPR_DISPATCH_PTR, "ENABLE_SGPR_DISPATCH_PTR"},
    {KERNEL_CODE_PROPERTY_ENABLE_SGPR_QUEUE_PTR, "ENABLE_SGPR_QUEUE_PTR"},
    {1u << 4, "ENABLE_SGPR_DISPATCH_ID"},
    {1u << 5, "ENABLE_SGPR_FLAT_SCRATCH_INIT"},
    {1u << 6, "ENABLE_SGPR_PRIVATE_SEGMENT_SIZE"},
};
constexpr int kMaxUserSgprs = 16;  // COMPUTE_USER_DATA_0..15
constexpr uint32_t kLdsGranuleBytes = 512;
constexpr uint32_t kLdsSizeShift = 15;
constexpr uint32_t kLdsSizeMask = 0x1ff;
// WORKAROUND(gfx11): tinygrad sets COMPUTE_PGM_RSRC1 bit 20 (PRIV) on gfx11 for CWSR.
constexpr uint32_t kRsrc1Priv = 1u << 20;

}  // namespace

uint32_t rsrc2_with_lds(uint32_t rsrc2, uint32_t lds_bytes) {
  uint32_t granules = (lds_bytes + kLdsGranuleBytes - 1) / kLdsGranuleBytes & kLdsSizeMask;
  return (rsrc2 & ~COMPUTE_PGM_RSRC2_GRANULATED_LDS_SIZE) | granules << kLdsSizeShift;
}

Result<std::unique_ptr<Program>> Program::load(Device& dev, const ArchInfo& arch, const Binary& b) {
  auto elf = std::span(reinterpret_cast<const uint8_t*>(b.code.data()), b.code.size());
  ASSIGN_OR_RETURN(CodeObject co, load_code_object(elf, b.entry));
  auto refuse = [&](const std::string& why) { return invalid_argument(why); };
  if (co.gfx != arch.name)
    return refuse("the code object's e_flags say " + co.gfx + " (the Binary says " + b.arch + ")");
  const KernelDescriptor& d = co.descriptor;
  if (d.kernel_code_properties & KERNEL_CODE_PROPERTY_USES_DYNAMIC_STACK)
    return refuse("the kernel uses a dynamic stack (" +
                  std::to_string(d.private_segment_fixed_size) +
                  " bytes of scratch per work-item and more): scratch is sized at load");
  for (const auto& s : kUnsupportedSgprs) {
    if ((d.kernel_code_properties & s.bit) && !dev.aql())
      return refuse("the kernel asks for " + std::string(s.name) +
                    ": the PM4 dispatch passes only the private segment buffer and the kernarg "
                    "segment pointer (the AQL compute queue, AMD_AQL=1, passes it)");
  }
  // In user-SGPR order: the private segment buffer (4), then the kernarg pointer (2). LLVM may
  // count more (WORKAROUND(gfx11): the user SGPR init bug pads user + system SGPRs to 16).
  bool psb =
      (d.kernel_code_properties & KERNEL_CODE_PROPERTY_ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER) != 0;
  bool kernarg_ptr =
      (d.kernel_code_properties & KERNEL_CODE_PROPERTY_ENABLE_SGPR_KERNARG_SEGMENT_PTR) != 0;
  int needed = (psb ? 4 : 0) + (kernarg_ptr ? 2 : 0);
  if (co.user_sgprs < needed || co.user_sgprs > kMaxUserSgprs)
    return refuse(std::to_string(co.user_sgprs) + " user SGPRs (USER_SGPR_COUNT) for " +
                  std::to_string(needed) + " words of enabled inputs (at most " +
                  std::to_string(kMaxUserSgprs) + ")");
  if (d.kernarg_preload != 0)
    return refuse("kernarg preloading (kernarg_preload " + hex(d.kernarg_preload) +
                  ") is not supported");
  uint32_t wave = co.wave32 ? 32 : 64;
  if ((wave == 32 && !arch.supports_wave32) || (wave == 64 && !arch.supports_wave64))
    return refuse(std::string(arch.name) + " does not run wave" + std::to_string(wave));
  if (d.group_segment_fixed_size > arch.lds_bytes_per_workgroup)
    return refuse(std::to_string(d.group_segment_fixed_size) + " bytes of LDS exceed the " +
                  std::to_string(arch.lds_bytes_per_workgroup) + " of a work-group");
  size_t args_bytes = 8 * static_cast<size_t>(b.num_bufs + b.num_vars);
  if (d.kernarg_size > args_bytes)
    return refuse("a kernarg segment of " + std::to_string(d.kernarg_size) +
                  " bytes, but the Binary's argument block has " + std::to_string(args_bytes) +
                  " (hidden kernel arguments are not provided)");

  if (d.private_segment_fixed_size != 0)
    RETURN_IF_ERROR(dev.ensure_scratch(d.private_segment_fixed_size));
  std::unique_ptr<Program> p(new Program(b.entry, b.num_bufs, b.num_vars));
  // NOTE: CPU-visible VRAM (PUBLIC: a resizable BAR on large GPUs), written by the CPU; tinygrad
  // uploads through the copy queue instead.
  ASSIGN_OR_RETURN(p->image_, dev.allocator().alloc(co.image.size(), {.cpu_access = true}));
  p->dev_ = &dev;
  RETURN_IF_ERROR(relocate(co, p->image_.va));
  std::memcpy(p->image_.cpu, co.image.data(), co.image.size());
  p->code_va_ = p->image_.va + co.code_offset;
  p->descriptor_va_ = p->image_.va + co.descriptor_offset;
  p->code_bytes_ = co.image.size() - co.code_offset;
  p->desc_ = d;
  p->wave_size_ = wave;
  p->private_segment_buffer_ = psb;
  p->kernarg_ptr_ = kernarg_ptr;
  p->rsrc1_ = d.compute_pgm_rsrc1 | (arch.gc_major == 11 ? kRsrc1Priv : 0);
  p->rsrc2_ = rsrc2_with_lds(d.compute_pgm_rsrc2, d.group_segment_fixed_size);
  p->rsrc3_ = d.compute_pgm_rsrc3;
  dev.register_program(p->code_va_, p->code_bytes_, b.entry, b.id);
  return p;
}

Program::~Program() {
  if (dev_ == nullptr) return;
  dev_->unregister_program(code_va_);
  dev_->allocator().free(image_);
}

Status Program::check_launch(hcq::Dim3 grid, hcq::Dim3 block) const {
  RETURN_IF_ERROR(hcq::Program::check_launch(grid, block));
  auto refuse = [&](const std::string& why) {
    return invalid_argument("launch of " + name() + " with grid " + std::to_string(grid.x) + "x" +
                            std::to_string(grid.y) + "x" + std::to_string(grid.z) + " and block " +
                            std::to_string(block.x) + "x" + std::to_string(block.y) + "x" +
                            std::to_string(block.z) + ": " + why);
  };
  if (uint64_t{block.x} * block.y * block.z > kMaxBlockThreads)
    return refuse("over " + std::to_string(kMaxBlockThreads) + " threads per work-group");
  for (auto [g, l] : {std::pair{grid.x, block.x}, {grid.y, block.y}, {grid.z, block.z}}) {
    if (uint64_t{g} * l > UINT32_MAX) return refuse("2^32 or more work-items in a dimension");
  }
  return Status();
}

}  // namespace baregrad::amd
