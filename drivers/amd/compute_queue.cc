#include "drivers/amd/compute_queue.h"

#include <algorithm>

#include "base/format.h"
#include "drivers/amd/aql.h"
#include "drivers/amd/pm4.h"
#include "drivers/amd/program.h"
#include "drivers/amd/scratch.h"

namespace baregrad::amd {
namespace {
constexpr size_t kWaitWords = 7, kReleaseWords = 8, kAcquireWords = 8;
}  // namespace

hcq::HwQueue& ComputeQueue::wait(const hcq::Signal& s, hcq::Value v) {
  if (check_signal(s, "wait") && check_wait_value(s, v) && fits(kWaitWords))
    emit_wait_reg_mem(cs_, static_cast<int64_t>(s.va()), Word::lo(v), 0xffffffff,
                      CompareFunc::kGreaterEqual);
  return *this;
}

hcq::HwQueue& ComputeQueue::signal(const hcq::Signal& s, hcq::Value v) {
  if (!check_signal(s, "signal") || !fits(2 * kReleaseWords)) return *this;
  const ArchInfo& arch = dev_.arch();
  emit_release_mem(cs_, arch,
                   {.addr = static_cast<int64_t>(s.va()),
                    .data = v,
                    .data_sel = DataSel::k64BitData,
                    .cache_flush = true});
  const KfdEvent& e = dev_.signal_event();
  emit_release_mem(cs_, arch,
                   {.addr = static_cast<int64_t>(e.mailbox_va()),
                    .data = e.id(),
                    .data_sel = DataSel::k32BitLow,
                    .int_sel = IntSel::kSendInterruptAfterWriteConfirm,
                    .ctxid = e.id()});
  return *this;
}

hcq::HwQueue& ComputeQueue::timestamp(const hcq::Signal& s) {
  if (!check_signal(s, "timestamp") || !fits(2 * kReleaseWords + kAcquireWords)) return *this;
  const ArchInfo& arch = dev_.arch();
  emit_release_mem(cs_, arch, {.cache_flush = false});
  emit_release_mem(
      cs_, arch, {.addr = static_cast<int64_t>(s.va() + 8), .data_sel = DataSel::kGpuClockCounter});
  emit_acquire_mem(cs_, arch);
  return *this;
}

hcq::HwQueue& ComputeQueue::memory_barrier() {
  if (fits(kAcquireWords)) emit_acquire_mem(cs_, dev_.arch());
  return *this;
}

hcq::HwQueue& ComputeQueue::copy(hcq::Value dst, hcq::Value src, hcq::Value bytes) {
  // Constant ranges are checked now; symbolic addresses fault on the GPU.
  if (!check_copy(dst, src, bytes, cs_.name())) return *this;
  if (bytes.symbolic()) {
    if (!fits(kDmaDataDwords)) return *this;
    emit_dma_data_copy(cs_, dst, src, bytes);
    bound_copy_count(bytes, kDmaDataMaxBytes, "DMA_DATA");
    return *this;
  }
  auto n = static_cast<uint64_t>(bytes.imm);
  if ((dst.symbolic() || src.symbolic()) && n > kDmaDataMaxBytes) {
    refuse(invalid_argument("copy of " + std::to_string(n) + " bytes on the " + cs_.name() +
                            " between symbolic addresses: over the " +
                            std::to_string(kDmaDataMaxBytes) + " of one DMA_DATA"));
    return *this;
  }
  if (!fits(kDmaDataDwords * ((n + kDmaDataMaxBytes - 1) / kDmaDataMaxBytes))) return *this;
  for (uint64_t done = 0; done < n; done += kDmaDataMaxBytes) {
    auto at = [done](hcq::Value a) {
      return a.symbolic() ? a : hcq::Value::of(a.imm + static_cast<int64_t>(done));
    };
    emit_dma_data_copy(cs_, at(dst), at(src),
                       static_cast<int64_t>(std::min(n - done, kDmaDataMaxBytes)));
  }
  return *this;
}

hcq::HwQueue& ComputeQueue::exec(const hcq::Program& hprg,
                                 const hcq::ArgsState& args,
                                 hcq::Dim3 grid,
                                 hcq::Dim3 block) {
  const auto* prg = program_of<Program>(hprg, cs_.name(), "AMD");
  if (!prg || !check_exec(*prg, args, cs_.name())) return *this;
  if (!ok(prg->check_launch(grid, block)) || !fits(kExecWords)) return *this;
  const hcq::Buffer& ka = args.mem();
  if (ka.va % 16 != 0 || ka.size < prg->descriptor().kernarg_size) {
    refuse(invalid_argument("exec of '" + prg->name() + "': the argument block at " + hex(ka.va) +
                            " (" + std::to_string(ka.size) + " bytes) is not a 16-byte aligned " +
                            "kernarg segment of " + std::to_string(prg->descriptor().kernarg_size) +
                            " bytes"));
    return *this;
  }
  if (dev_.aql()) {
    if (!fits(kAqlPacketWords)) return *this;
    // One kernel dispatch packet: its header's barrier bit orders it after everything before it
    // in the queue, its system-scope acquire and release fences invalidate and write back the
    // caches; the CP takes the registers from the kernel descriptor, the scratch from the
    // queue's amd_queue_t (Device::ensure_scratch).
    aql_at_.push_back(static_cast<uint32_t>(cs_.size()));
    std::span<uint32_t> w = cs_.reserve(kAqlPacketWords);
    KernelDispatch d{
        .dims = 3,
        .workgroup_size = {static_cast<uint16_t>(block.x), static_cast<uint16_t>(block.y),
                           static_cast<uint16_t>(block.z)},
        .grid_size = {grid.x * block.x, grid.y * block.y, grid.z * block.z},
        .private_segment_size = prg->scratch_bytes(),
        .group_segment_size = prg->lds_bytes(),
        .kernel_object = prg->descriptor_va(),
        .kernarg_address = ka.va,
    };
    w[0] = encode_kernel_dispatch(AqlSlot(w.data(), kAqlPacketWords), d);
    args_.push_back(&args);
    kernels_.push_back(prg->name());
    return *this;
  }
  const ArchInfo& arch = dev_.arch();
  const ComputeRegs& r = arch.regs;
  // Invalidate the instruction, scalar, vector L0 and L1 caches; L2 stays (tinygrad: gl2=0).
  emit_acquire_mem(cs_, arch, {.gl2 = false});
  uint64_t code = prg->code_va();
  emit_set_sh_reg(cs_, r.compute_pgm_lo,
                  {static_cast<uint32_t>(code >> 8), static_cast<uint32_t>(code >> 40)});
  emit_set_sh_reg(cs_, r.compute_pgm_rsrc1, {prg->rsrc1(), prg->rsrc2()});
  emit_set_sh_reg(cs_, r.compute_pgm_rsrc3, {prg->rsrc3()});
  // Scratch: COMPUTE_TMPRING_SIZE, and its base where kernels take it from the CP (architected
  // flat scratch) or in the private segment buffer V# (gfx90a). A kernel without scratch gets
  // none: a stray scratch access faults at 0.
  Device::Scratch scratch = prg->scratch_bytes() ? dev_.scratch() : Device::Scratch{};
  emit_set_sh_reg(cs_, r.compute_tmpring_size, {scratch.tmpring_size});
  if (arch.architected_flat_scratch && scratch.va != 0)
    emit_set_sh_reg(
        cs_, r.compute_dispatch_scratch_base_lo,
        {static_cast<uint32_t>(scratch.va >> 8), static_cast<uint32_t>(scratch.va >> 40)});
  emit_set_sh_reg(cs_, r.compute_restart_x, {0u, 0u, 0u});
  auto kl = static_cast<uint32_t>(ka.va), kh = static_cast<uint32_t>(ka.va >> 32);
  uint32_t v[4];
  private_segment_buffer(scratch.va, v);
  if (prg->private_segment_buffer() && prg->kernarg_ptr()) {
    emit_set_sh_reg(cs_, r.compute_user_data_0, {v[0], v[1], v[2], v[3], kl, kh});
  } else if (prg->private_segment_buffer()) {
    emit_set_sh_reg(cs_, r.compute_user_data_0, {v[0], v[1], v[2], v[3]});
  } else if (prg->kernarg_ptr()) {
    emit_set_sh_reg(cs_, r.compute_user_data_0, {kl, kh});
  }
  emit_set_sh_reg(cs_, r.compute_resource_limits, {0u});
  emit_set_sh_reg(cs_, r.compute_start_x, {0u, 0u, 0u, block.x, block.y, block.z});
  emit_dispatch_direct(cs_, arch, grid.x, grid.y, grid.z, prg->wave_size());
  emit_cs_partial_flush(cs_);
  args_.push_back(&args);
  kernels_.push_back(prg->name());
  return *this;
}

}  // namespace baregrad::amd
