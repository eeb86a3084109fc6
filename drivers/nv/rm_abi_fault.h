// The RM ABI of fault reports: a channel's error notifier (what RM writes when it stops a
// channel), the robust-channel (RC) error codes it carries, the engine and MMU fault names, and
// the GT200_DEBUGGER (NV83DE) controls that read the MMU fault info and the SM error states.
// Our own declarations, as in rm_abi.h; where each fact was checked is in drivers/nv/README.md,
// "Fault reports". Every layout here is the same from 570.86.15 to 595.45.04 and in tinygrad's
// nv_610 autogen.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace baregrad::nv {

// ---- the channel error notifier (nvgputypes.h, nvos.h) --------------------------------------

// NvNotification (nvgputypes.h): one entry of the notifier array hObjectError points at. RM's
// system-memory path (notifyFillNvNotification, method_notification.c) writes info16, info32,
// nanoseconds[0] = the high word of the time, nanoseconds[1] = the low word, then status last.
struct NvNotification {
  uint32_t nanoseconds[2];
  uint32_t info32;  // RC error code (ROBUST_CHANNEL_*, below)
  uint16_t info16;  // NV2080_ENGINE_TYPE_* of the engine that faulted
  uint16_t status;  // 0 until an error; RM writes 0xffff (krcErrorSetNotifier)
};
static_assert(sizeof(NvNotification) == 16);
static_assert(offsetof(NvNotification, info32) == 8);
static_assert(offsetof(NvNotification, info16) == 12);
static_assert(offsetof(NvNotification, status) == 14);

// NV_CHANNELGPFIFO_NOTIFICATION_TYPE_ERROR (nvos.h): the entry RC errors are written to.
constexpr uint32_t kNvChannelGpfifoNotificationTypeError = 0;
// How much of each error notifier baregrad maps into the CPU (the entries it reads: one page).
constexpr uint64_t kErrorNotifierMapBytes = 4096;

// ---- robust-channel error codes (nverror.h): name, value, our one-line meaning --------------

#define BG_NV_RC_ERRORS(X)                                                              \
  X(ROBUST_CHANNEL_GR_EXCEPTION, 13, "graphics engine exception")                       \
  X(ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT, 31, "MMU fault")                             \
  X(ROBUST_CHANNEL_PBDMA_ERROR, 32, "host (PBDMA) error: a bad GP entry or pushbuffer") \
  X(ROBUST_CHANNEL_CE0_ERROR, 39, "copy engine 0 error")                                \
  X(ROBUST_CHANNEL_CE1_ERROR, 40, "copy engine 1 error")                                \
  X(ROBUST_CHANNEL_CE2_ERROR, 41, "copy engine 2 error")                                \
  X(ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR, 43, "channel reset by RM")                 \
  X(ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW, 44, "graphics fault during a context switch") \
  X(ROBUST_CHANNEL_PREEMPTIVE_REMOVAL, 45, "channel removed preemptively")              \
  X(ROBUST_CHANNEL_GPU_ECC_DBE, 48, "uncorrectable ECC error")                          \
  X(ROBUST_CHANNEL_GR_CLASS_ERROR, 69, "graphics engine class error (illegal method)")  \
  X(ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS, 79, "the GPU fell off the bus")          \
  X(ROBUST_CHANNEL_CONTAINED_ERROR, 94, "contained memory error")                       \
  X(ROBUST_CHANNEL_UNCONTAINED_ERROR, 95, "uncontained memory error")                   \
  X(GSP_RPC_TIMEOUT, 119, "GSP firmware RPC timeout")                                   \
  X(GSP_ERROR, 120, "GSP firmware error")

namespace rc_error {
#define BG_NV_RC_CONSTANT(name, value, meaning) constexpr uint32_t name = value;
BG_NV_RC_ERRORS(BG_NV_RC_CONSTANT)
#undef BG_NV_RC_CONSTANT
}  // namespace rc_error

// "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT (31): MMU fault"; "RC error 200" for others.
std::string rc_error_text(uint32_t code);

// ---- engines (cl2080_notification.h), the notifier's info16 ---------------------------------

constexpr uint32_t kNv2080EngineTypeCopy0 = 0x09;  // NV2080_ENGINE_TYPE_COPY0 (COPYn = 9 + n)
constexpr uint32_t kNv2080EngineTypeHost = 0x27;   // NV2080_ENGINE_TYPE_HOST
// "GR0" (NV2080_ENGINE_TYPE_GRAPHICS), "COPY0".."COPY9", "HOST", or "engine 0x..".
std::string nv2080_engine_name(uint32_t engine);

// ---- MMU fault types and access types (dev_fault.h) -----------------------------------------

constexpr uint32_t kNvPfaultFaultTypePte = 0x2;         // NV_PFAULT_FAULT_TYPE_PTE
constexpr uint32_t kNvPfaultAccessTypeVirtRead = 0x0;   // NV_PFAULT_ACCESS_TYPE_VIRT_READ
constexpr uint32_t kNvPfaultAccessTypeVirtWrite = 0x1;  // NV_PFAULT_ACCESS_TYPE_VIRT_WRITE
// "PTE" for NV_PFAULT_FAULT_TYPE_PTE ...; "fault type 0x.." beyond the table.
std::string mmu_fault_type_name(uint32_t type);
// "VIRT_READ" for NV_PFAULT_ACCESS_TYPE_VIRT_READ ...; "access type 0x.." beyond the table.
std::string mmu_access_type_name(uint32_t type);

// ---- GT200_DEBUGGER controls (ctrl83de/ctrl83dedebug.h) -------------------------------------

// NV83DE_CTRL_CMD_DEBUG_SET_EXCEPTION_MASK: which debug events the debugger object takes. While
// any debugger takes FATAL (the default is ALL), RM defers RC recovery of fatal exceptions, so
// the channel stops without its error notifier being written.
constexpr uint32_t kNv83deCtrlCmdDebugSetExceptionMask = 0x83de0309;
struct Nv83deCtrlDebugSetExceptionMaskParams {
  uint32_t exception_mask;
};
static_assert(sizeof(Nv83deCtrlDebugSetExceptionMaskParams) == 4);
constexpr uint32_t kNv83deCtrlDebugSetExceptionMaskFatal = 0x1;   // ..._MASK_FATAL
constexpr uint32_t kNv83deCtrlDebugSetExceptionMaskNone = 0x0;    // ..._MASK_NONE
constexpr uint32_t kNv83deCtrlDebugSetExceptionMaskAll = 0xffff;  // ..._MASK_ALL

// NV83DE_SM_ERROR_STATE_REGISTERS: one SM's hardware error state (HWW ESRs).
struct Nv83deSmErrorStateRegisters {
  uint32_t hww_global_esr;
  uint32_t hww_warp_esr;
  uint32_t hww_warp_esr_pc;  // the low 32 bits of the PC (deprecated)
  uint32_t hww_global_esr_report_mask;
  uint32_t hww_warp_esr_report_mask;
  uint64_t hww_esr_addr;
  uint64_t hww_warp_esr_pc64;  // the PC of the faulting warp
  uint32_t hww_cga_esr;
  uint32_t hww_cga_esr_report_mask;
};
static_assert(sizeof(Nv83deSmErrorStateRegisters) == 48);
static_assert(offsetof(Nv83deSmErrorStateRegisters, hww_warp_esr_report_mask) == 16);
static_assert(offsetof(Nv83deSmErrorStateRegisters, hww_esr_addr) == 24);
static_assert(offsetof(Nv83deSmErrorStateRegisters, hww_warp_esr_pc64) == 32);
static_assert(offsetof(Nv83deSmErrorStateRegisters, hww_cga_esr) == 40);

// NV83DE_MMU_FAULT_INFO: whether the GR context saw an MMU fault since the states were cleared.
struct Nv83deMmuFaultInfo {
  uint8_t valid;  // NvBool
  uint32_t fault_info;
};
static_assert(sizeof(Nv83deMmuFaultInfo) == 8);
static_assert(offsetof(Nv83deMmuFaultInfo, fault_info) == 4);

// NV83DE_CTRL_CMD_DEBUG_READ_ALL_SM_ERROR_STATES: num_sms_to_read (<= 100) SMs from
// starting_sm of the channel's (resident) GR context.
constexpr uint32_t kNv83deCtrlCmdDebugReadAllSmErrorStates = 0x83de030c;
constexpr uint32_t kNv83deCtrlDebugMaxSmsPerCall = 100;  // NV83DE_CTRL_DEBUG_MAX_SMS_PER_CALL
struct Nv83deCtrlDebugReadAllSmErrorStatesParams {
  uint32_t h_target_channel;
  uint32_t num_sms_to_read;
  Nv83deSmErrorStateRegisters sm_error_state_array[kNv83deCtrlDebugMaxSmsPerCall];
  uint32_t mmu_fault_info;  // deprecated: mmu_fault.fault_info
  Nv83deMmuFaultInfo mmu_fault;
  uint32_t starting_sm;
};
static_assert(sizeof(Nv83deCtrlDebugReadAllSmErrorStatesParams) == 4824);
static_assert(offsetof(Nv83deCtrlDebugReadAllSmErrorStatesParams, sm_error_state_array) == 8);
static_assert(offsetof(Nv83deCtrlDebugReadAllSmErrorStatesParams, mmu_fault_info) == 4808);
static_assert(offsetof(Nv83deCtrlDebugReadAllSmErrorStatesParams, mmu_fault) == 4812);
static_assert(offsetof(Nv83deCtrlDebugReadAllSmErrorStatesParams, starting_sm) == 4820);

// NV83DE_CTRL_CMD_DEBUG_READ_MMU_FAULT_INFO: the GR context's last MMU faults, oldest first
// (RM keeps a small ring: an entry may repeat an earlier report).
constexpr uint32_t kNv83deCtrlCmdDebugReadMmuFaultInfo = 0x83de0328;
constexpr uint32_t kNv83deCtrlDebugReadMmuFaultInfoMaxEntries = 4;
struct Nv83deCtrlDebugReadMmuFaultInfoEntry {
  uint64_t fault_address;
  uint32_t fault_type;   // NV_PFAULT_FAULT_TYPE_*
  uint32_t access_type;  // NV_PFAULT_ACCESS_TYPE_*
};
static_assert(sizeof(Nv83deCtrlDebugReadMmuFaultInfoEntry) == 16);
static_assert(offsetof(Nv83deCtrlDebugReadMmuFaultInfoEntry, access_type) == 12);
struct Nv83deCtrlDebugReadMmuFaultInfoParams {
  Nv83deCtrlDebugReadMmuFaultInfoEntry
      mmu_fault_info_list[kNv83deCtrlDebugReadMmuFaultInfoMaxEntries];
  uint32_t count;
};
static_assert(sizeof(Nv83deCtrlDebugReadMmuFaultInfoParams) == 72);
static_assert(offsetof(Nv83deCtrlDebugReadMmuFaultInfoParams, count) == 64);

}  // namespace baregrad::nv
