#include "drivers/mock/nv_device/mock_nv_fault.h"

#include "drivers/nv/classes.h"
#include "drivers/nv/rm_abi.h"

namespace baregrad::mock {
namespace {

using namespace nv::rc_error;

// The fake's warp ESR for a failed launch: any non-zero value (no hardware encoding is public).
constexpr uint32_t kFakeWarpEsr = 0x1;

bool is_compute(uint32_t cls) {
  for (uint32_t c : {nv::kAmpereComputeA, nv::kAmpereComputeB, nv::kAdaComputeA,
                     nv::kHopperComputeA, nv::kBlackwellComputeA, nv::kBlackwellComputeB})
    if (c == cls) return true;
  return false;
}

bool is_copy(uint32_t cls) {
  for (uint32_t c : {nv::kAmpereDmaCopyA, nv::kAmpereDmaCopyB, nv::kHopperDmaCopyA,
                     nv::kBlackwellDmaCopyA, nv::kBlackwellDmaCopyB})
    if (c == cls) return true;
  return false;
}

FakeNvMmuFault mmu(uint64_t va, bool write) {
  return {va, nv::kNvPfaultFaultTypePte,
          write ? nv::kNvPfaultAccessTypeVirtWrite : nv::kNvPfaultAccessTypeVirtRead};
}

}  // namespace

FakeNvFault rm_fault_for(const Fault& f, const std::optional<LaunchFailure>& launch, uint32_t sms) {
  FakeNvFault out;
  bool in_method = f.method != Fault::kNoMethod;
  // The engine: a launch is the GR engine's, a method its class's, the rest the host's.
  if (f.qmd_va != 0 || (in_method && is_compute(f.cls))) {
    out.engine = nv::kNv2080EngineTypeGraphics;
  } else if (in_method && is_copy(f.cls)) {
    out.engine = nv::kNv2080EngineTypeCopy0;
  } else {
    out.engine = nv::kNv2080EngineTypeHost;
  }
  switch (f.kind) {
    case FaultKind::kMmuFault:
      out.rc = ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT;
      out.mmu = mmu(f.address, f.access == Access::kWrite);
      break;
    case FaultKind::kGpEntry:
    case FaultKind::kPushbuffer:
      out.rc = ROBUST_CHANNEL_PBDMA_ERROR;
      break;
    case FaultKind::kIllegalMethod:
    case FaultKind::kIllegalClass:
    case FaultKind::kIllegalValue:
      out.rc = out.engine == nv::kNv2080EngineTypeGraphics ? ROBUST_CHANNEL_GR_CLASS_ERROR
               : out.engine == nv::kNv2080EngineTypeCopy0  ? ROBUST_CHANNEL_CE0_ERROR
                                                           : ROBUST_CHANNEL_PBDMA_ERROR;
      break;
    case FaultKind::kBadQmd:
      out.rc = ROBUST_CHANNEL_GR_EXCEPTION;
      break;
    case FaultKind::kLaunch:
      out.rc = ROBUST_CHANNEL_GR_EXCEPTION;
      if (launch) {
        out.sm = FakeNvSmError{.sm = sms ? sms - 1 : 0,
                               .global_esr = 0,
                               .warp_esr = kFakeWarpEsr,
                               .pc = launch->program_va};
        if (launch->mmu) {
          out.rc = ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT;
          out.mmu = mmu(launch->mmu->va, launch->mmu->write);
        }
      }
      break;
  }
  out.whole_group = out.rc == ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT;
  return out;
}

}  // namespace baregrad::mock
