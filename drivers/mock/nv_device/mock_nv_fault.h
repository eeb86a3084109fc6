// Internal to MOCK+NV: how a fault the fake GPU records becomes what RM reports for it (the RC
// code and engine of the error notifier, the debugger's MMU fault info and SM error state), so
// that the device reads it through the same notifier and debugger path as on hardware.
#pragma once

#include <cstdint>
#include <optional>

#include "drivers/mock/nv/fake_nv_kernel.h"
#include "drivers/mock/nv_device/mock_nv.h"
#include "drivers/mock/nvgpu/fake_gpu.h"

namespace baregrad::mock {

// A launch whose twin failed (or whose program has no twin).
struct LaunchFailure {
  uint64_t program_va = 0;
  std::optional<TwinMemory::Fault> mmu;  // the twin's mmu_fault(), if it reported one
};

// The fault RM would report for `f` on a GPU of `sms` SMs. `launch` is the failure behind a
// FaultKind::kLaunch fault.
//   MMU faults: ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT, every channel of the group notified (RM's
//     MMU fault path), NV_PFAULT_FAULT_TYPE_PTE at the address (the fake has no page tables).
//   GP entry and pushbuffer errors, and method errors on the host class: PBDMA_ERROR, HOST.
//   Method errors on the compute class: GR_CLASS_ERROR; on the copy class: CE0_ERROR, COPY0.
//   Bad QMDs and failed launches: GR_EXCEPTION (a twin's mmu_fault(): an MMU fault), with the
//     SM error state of the last SM: a non-zero warp ESR (the fake has no ESR encoding) and, as
//     PC, the program's code address (the fake has no instruction stream).
FakeNvFault rm_fault_for(const Fault& f, const std::optional<LaunchFailure>& launch, uint32_t sms);

}  // namespace baregrad::mock
