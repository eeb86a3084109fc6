// RmGpu fault reports: the channels' error notifiers and the GT200_DEBUGGER's controls.

#include <algorithm>
#include <atomic>
#include <memory>

#include "drivers/nv/iface_rm.h"

namespace baregrad::nv {
namespace {

// The error entry of `ch`'s notifier array; null before the channel is set up.
NvNotification* error_entry(const RmChannel& ch) {
  if (ch.error_notifier_cpu == nullptr) return nullptr;
  return reinterpret_cast<NvNotification*>(ch.error_notifier_cpu) +
         kNvChannelGpfifoNotificationTypeError;
}

}  // namespace

uint16_t RmGpu::error_status(const RmChannel& ch) {
  NvNotification* n = error_entry(ch);
  // NOTE: RM writes status last; acquire orders the reads of the other fields after it.
  return n ? std::atomic_ref<uint16_t>(n->status).load(std::memory_order_acquire) : 0;
}

RmErrorNotifier RmGpu::read_error_notifier(const RmChannel& ch) {
  RmErrorNotifier out;
  NvNotification* n = error_entry(ch);
  if (n == nullptr) return out;
  out.status = std::atomic_ref<uint16_t>(n->status).load(std::memory_order_acquire);
  auto load32 = [](uint32_t& v) {
    return std::atomic_ref<uint32_t>(v).load(std::memory_order_relaxed);
  };
  out.info16 = std::atomic_ref<uint16_t>(n->info16).load(std::memory_order_relaxed);
  out.info32 = load32(n->info32);
  // notifyFillNvNotification stores the high word of the time first.
  out.timestamp_ns = uint64_t{load32(n->nanoseconds[0])} << 32 | load32(n->nanoseconds[1]);
  return out;
}

Result<RmSmErrors> RmGpu::read_sm_errors(const RmChannel& ch) {
  RmSmErrors out;
  uint32_t sms = std::max<uint32_t>(info_.gr.sms, 1);
  auto p = std::make_unique<Nv83deCtrlDebugReadAllSmErrorStatesParams>();
  for (uint32_t start = 0; start < sms; start += kNv83deCtrlDebugMaxSmsPerCall) {
    *p = {};
    p->h_target_channel = ch.handle;
    p->starting_sm = start;
    p->num_sms_to_read = std::min(kNv83deCtrlDebugMaxSmsPerCall, sms - start);
    RETURN_IF_ERROR(iface_.control(info_.debugger, kNv83deCtrlCmdDebugReadAllSmErrorStates, *p));
    if (p->mmu_fault.valid) {
      out.mmu_fault = true;
      out.mmu_fault_info = p->mmu_fault.fault_info;
    }
    for (uint32_t i = 0; i < p->num_sms_to_read; ++i) {
      const Nv83deSmErrorStateRegisters& r = p->sm_error_state_array[i];
      if (r.hww_global_esr == 0 && r.hww_warp_esr == 0) continue;
      out.errors.push_back({start + i, r.hww_global_esr, r.hww_warp_esr, r.hww_warp_esr_pc64});
    }
  }
  return out;
}

Result<std::vector<RmMmuFault>> RmGpu::read_mmu_faults() {
  Nv83deCtrlDebugReadMmuFaultInfoParams p{};
  RETURN_IF_ERROR(iface_.control(info_.debugger, kNv83deCtrlCmdDebugReadMmuFaultInfo, p));
  std::vector<RmMmuFault> out;
  uint32_t n = std::min(p.count, kNv83deCtrlDebugReadMmuFaultInfoMaxEntries);
  for (uint32_t i = 0; i < n; ++i) {
    const Nv83deCtrlDebugReadMmuFaultInfoEntry& e = p.mmu_fault_info_list[i];
    out.push_back({e.fault_address, e.fault_type, e.access_type});
  }
  return out;
}

}  // namespace baregrad::nv
