// The fake RM's channel errors: raise_fault() (the error notifiers and the GR context's fault
// state, as RM records them after a fault interrupt) and the GT200_DEBUGGER controls that read
// that state back.

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>

#include "base/format.h"
#include "drivers/mock/nv/fake_nv_state.h"
#include "drivers/nv/rm_status.h"

namespace baregrad::mock {
namespace {

using namespace nv;
using namespace nv::rm_status;

// Writes entry NV_CHANNELGPFIFO_NOTIFICATION_TYPE_ERROR in the order of RM's system-memory
// path (notifyFillNvNotification): info16, info32, time high, time low, then status.
void write_error_notifier(uint8_t* host, const FakeNvFault& f) {
  auto* n = reinterpret_cast<NvNotification*>(host) + kNvChannelGpfifoNotificationTypeError;
  auto ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                      std::chrono::system_clock::now().time_since_epoch())
                                      .count());
  std::atomic_ref<uint16_t>(n->info16).store(f.engine, std::memory_order_relaxed);
  std::atomic_ref<uint32_t>(n->info32).store(f.rc, std::memory_order_relaxed);
  std::atomic_ref<uint32_t>(n->nanoseconds[0]).store(ns >> 32, std::memory_order_relaxed);
  std::atomic_ref<uint32_t>(n->nanoseconds[1]).store(ns & 0xffffffff, std::memory_order_relaxed);
  std::atomic_ref<uint16_t>(n->status).store(0xffff, std::memory_order_release);
}

}  // namespace

Status FakeNvKernel::raise_fault(uint32_t token, const FakeNvFault& f) {
  std::unique_lock lock(s_->mu);
  for (auto& [h, c] : s_->clients) {
    for (auto& [oh, ch] : c.objects) {
      if (ch.kind != ObjKind::kChannel || ch.channel.token != token) continue;
      FakeObject& group = c.objects[ch.parent];
      if (f.mmu) {
        group.mmu_faults.push_back(*f.mmu);
        if (group.mmu_faults.size() > kNv83deCtrlDebugReadMmuFaultInfoMaxEntries) {
          group.mmu_faults.erase(group.mmu_faults.begin());
        }
        group.mmu_fault_valid = true;
        group.mmu_fault_info = f.mmu->fault_type;  // the fake's NV_PFIFO_INTR_MMU_FAULT_INFO
      }
      if (f.sm) group.sm_errors[f.sm->sm] = *f.sm;
      for (auto& [dh, d] : c.objects) {
        if (d.kind == ObjKind::kDebugger && s_->debugger_group(c, d) == &group &&
            (d.exception_mask & kNv83deCtrlDebugSetExceptionMaskFatal) != 0) {
          s_->note("RC of channel " + hex(ch.handle) + " deferred: debugger " + hex(dh) +
                   " takes FATAL exceptions");
          return Status();
        }
      }
      std::vector<uint32_t> notify = {oh};
      if (f.whole_group) notify = group.children;
      for (uint32_t n : notify) {
        const FakeObject& target = c.objects[n];
        if (target.kind != ObjKind::kChannel) continue;
        auto mem = c.objects.find(target.channel.error_notifier);
        if (mem == c.objects.end() || mem->second.mem == nullptr) continue;  // no notifier
        write_error_notifier(mem->second.mem->host, f);
      }
      return Status();
    }
  }
  return not_found("raise_fault: no channel with work-submit token " + std::to_string(token));
}

FakeObject* FakeNvKernel::State::debugger_group(FakeClient& c, const FakeObject& o) {
  auto engine = c.objects.find(o.debug_target);
  if (engine == c.objects.end()) return nullptr;
  auto channel = c.objects.find(engine->second.parent);
  if (channel == c.objects.end()) return nullptr;
  auto group = c.objects.find(channel->second.parent);
  return group == c.objects.end() ? nullptr : &group->second;
}

uint32_t FakeNvKernel::State::control_debugger(FakeClient& c,
                                               FakeObject& o,
                                               uint32_t cmd,
                                               void* params) {
  std::string what = "NV_ESC_RM_CONTROL " + rm_control_name(cmd);
  FakeObject* group = debugger_group(c, o);
  if (group == nullptr) {
    note(what + ": the debugger's object " + hex(o.debug_target) + " is gone");
    return NV_ERR_INVALID_OBJECT_HANDLE;
  }
  switch (cmd) {
    case kNv83deCtrlCmdDebugSetExceptionMask: {
      uint32_t mask = static_cast<Nv83deCtrlDebugSetExceptionMaskParams*>(params)->exception_mask;
      if (mask > kNv83deCtrlDebugSetExceptionMaskAll) return NV_ERR_INVALID_ARGUMENT;
      o.exception_mask = mask;
      return NV_OK;
    }
    case kNv83deCtrlCmdDebugReadAllSmErrorStates: {
      auto* q = static_cast<Nv83deCtrlDebugReadAllSmErrorStatesParams*>(params);
      auto ch = c.objects.find(q->h_target_channel);
      if (ch == c.objects.end() || ch->second.kind != ObjKind::kChannel) {
        note(what + ": hTargetChannel " + hex(q->h_target_channel) + " is no channel");
        return NV_ERR_INVALID_OBJECT_HANDLE;
      }
      const FakeNvGpuConfig& g = gpus[o.gpu].cfg;
      uint32_t sms = g.tpcs * g.sm_per_tpc;
      if (q->num_sms_to_read > kNv83deCtrlDebugMaxSmsPerCall || q->starting_sm >= sms) {
        note(what + ": " + std::to_string(q->num_sms_to_read) + " SMs from SM " +
             std::to_string(q->starting_sm) + " of " + std::to_string(sms));
        return NV_ERR_INVALID_ARGUMENT;
      }
      const FakeObject& ctx = c.objects[ch->second.parent];  // the GR context: the group's
      std::memset(q->sm_error_state_array, 0, sizeof(q->sm_error_state_array));
      for (uint32_t i = 0; i < q->num_sms_to_read && q->starting_sm + i < sms; ++i) {
        auto e = ctx.sm_errors.find(q->starting_sm + i);
        if (e == ctx.sm_errors.end()) continue;
        Nv83deSmErrorStateRegisters& r = q->sm_error_state_array[i];
        r.hww_global_esr = e->second.global_esr;
        r.hww_warp_esr = e->second.warp_esr;
        r.hww_warp_esr_pc = static_cast<uint32_t>(e->second.pc);
        r.hww_warp_esr_pc64 = e->second.pc;
      }
      q->mmu_fault = {ctx.mmu_fault_valid, ctx.mmu_fault_info};
      q->mmu_fault_info = ctx.mmu_fault_info;
      return NV_OK;
    }
    case kNv83deCtrlCmdDebugReadMmuFaultInfo: {
      auto* q = static_cast<Nv83deCtrlDebugReadMmuFaultInfoParams*>(params);
      *q = {};
      for (const FakeNvMmuFault& m : group->mmu_faults) {
        q->mmu_fault_info_list[q->count++] = {m.address, m.fault_type, m.access_type};
      }
      return NV_OK;
    }
    default:
      note(what + ": not modelled");
      return NV_ERR_NOT_SUPPORTED;
  }
}

}  // namespace baregrad::mock
