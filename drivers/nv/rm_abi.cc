#include "drivers/nv/rm_abi.h"

#include <charconv>
#include <utility>

#include "base/format.h"
#include "drivers/nv/classes.h"
#include "drivers/nv/uvm_abi.h"

namespace baregrad::nv {

Result<RmBranch> rm_branch_for_version(std::string_view version) {
  int major = 0;
  auto [end, ec] = std::from_chars(version.data(), version.data() + version.size(), major);
  if (ec == std::errc() && (end == version.data() + version.size() || *end == '.')) {
    switch (major) {
      case 570:
        return RmBranch::k570;
      case 580:
        return RmBranch::k580;
      case 590:
        return RmBranch::k590;
      case 595:
        return RmBranch::k595;
      case 610:
        return RmBranch::k610;
      default:
        break;
    }
  }
  return failed_precondition("NVIDIA driver " + std::string(version) +
                             " has no baregrad layout (supported: 570, 580, 590, 595, 610)");
}

int rm_branch_number(RmBranch b) { return static_cast<int>(b); }

std::string nv_escape_name(uint32_t escape) {
  switch (escape) {
    case kNvEscRmAllocMemory:
      return "NV_ESC_RM_ALLOC_MEMORY";
    case kNvEscRmFree:
      return "NV_ESC_RM_FREE";
    case kNvEscRmControl:
      return "NV_ESC_RM_CONTROL";
    case kNvEscRmAlloc:
      return "NV_ESC_RM_ALLOC";
    case kNvEscRmMapMemory:
      return "NV_ESC_RM_MAP_MEMORY";
    case kNvEscRmMapMemoryDma:
      return "NV_ESC_RM_MAP_MEMORY_DMA";
    case kNvEscCardInfo:
      return "NV_ESC_CARD_INFO";
    case kNvEscRegisterFd:
      return "NV_ESC_REGISTER_FD";
    case kNvEscCheckVersionStr:
      return "NV_ESC_CHECK_VERSION_STR";
    case kNvEscAttachGpusToFd:
      return "NV_ESC_ATTACH_GPUS_TO_FD";
    default:
      return "NV escape " + hex(escape);
  }
}

std::string rm_class_name(uint32_t cls) {
  static constexpr std::pair<uint32_t, std::string_view> kNames[] = {
      {kNv01RootClient, "NV01_ROOT_CLIENT"},
      {kNv01Device0, "NV01_DEVICE_0"},
      {kNv20Subdevice0, "NV20_SUBDEVICE_0"},
      {kNv01MemorySystem, "NV01_MEMORY_SYSTEM"},
      {kNv01MemoryLocalUser, "NV01_MEMORY_LOCAL_USER"},
      {kNv01MemoryVirtual, "NV01_MEMORY_VIRTUAL"},
      {kNv01MemorySystemOsDescriptor, "NV01_MEMORY_SYSTEM_OS_DESCRIPTOR"},
      {kFermiVaspaceA, "FERMI_VASPACE_A"},
      {kFermiContextShareA, "FERMI_CONTEXT_SHARE_A"},
      {kKeplerChannelGroupA, "KEPLER_CHANNEL_GROUP_A"},
      {kGt200Debugger, "GT200_DEBUGGER"},
  };
  for (const auto& [id, name] : kNames) {
    if (id == cls) return std::string(name) + " (" + hex(cls) + ")";
  }
  return class_name(cls);
}

std::string rm_control_name(uint32_t cmd) {
  static constexpr std::pair<uint32_t, std::string_view> kNames[] = {
      {kNv0000CtrlCmdGpuGetIdInfoV2, "NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2"},
      {kNv0080CtrlCmdGpuGetClasslistV2, "NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2"},
      {kNv2080CtrlCmdGrGetInfo, "NV2080_CTRL_CMD_GR_GET_INFO"},
      {kNv2080CtrlCmdMcGetArchInfo, "NV2080_CTRL_CMD_MC_GET_ARCH_INFO"},
      {kNv2080CtrlCmdGpuGetGidInfo, "NV2080_CTRL_CMD_GPU_GET_GID_INFO"},
      {kNv2080CtrlCmdGpuGetNameString, "NV2080_CTRL_CMD_GPU_GET_NAME_STRING"},
      {kNv2080CtrlCmdFbGetInfoV2, "NV2080_CTRL_CMD_FB_GET_INFO_V2"},
      {kNv2080CtrlCmdPerfBoost, "NV2080_CTRL_CMD_PERF_BOOST"},
      {kNvc36fCtrlCmdGpfifoGetWorkSubmitToken, "NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN"},
      {kNva06cCtrlCmdGpfifoSchedule, "NVA06C_CTRL_CMD_GPFIFO_SCHEDULE"},
      {kNv83deCtrlCmdDebugSetExceptionMask, "NV83DE_CTRL_CMD_DEBUG_SET_EXCEPTION_MASK"},
      {kNv83deCtrlCmdDebugReadAllSmErrorStates, "NV83DE_CTRL_CMD_DEBUG_READ_ALL_SM_ERROR_STATES"},
      {kNv83deCtrlCmdDebugReadMmuFaultInfo, "NV83DE_CTRL_CMD_DEBUG_READ_MMU_FAULT_INFO"},
  };
  for (const auto& [id, name] : kNames) {
    if (id == cmd) return std::string(name) + " (" + hex(cmd) + ")";
  }
  return "control " + hex(cmd);
}

uint32_t rm_alloc_params_size(RmBranch b, uint32_t cls) {
  switch (cls) {
    case kNv01Device0:
      return sizeof(Nv0080AllocParameters);
    case kNv20Subdevice0:
      return sizeof(Nv2080AllocParameters);
    case kNv01MemorySystem:
    case kNv01MemoryLocalUser:
      return sizeof(NvMemoryAllocationParams);
    case kNv01MemoryVirtual:
      return sizeof(NvMemoryVirtualAllocationParams);
    case kFermiVaspaceA:
      return b == RmBranch::k570 ? sizeof(NvVaspaceAllocationParameters570)
                                 : sizeof(NvVaspaceAllocationParameters580);
    case kFermiContextShareA:
      return sizeof(NvCtxshareAllocationParameters);
    case kKeplerChannelGroupA:
      return sizeof(NvChannelGroupAllocationParameters);
    case kGt200Debugger:
      return sizeof(Nv83deAllocParameters);
    case kAmpereChannelGpfifoA:
    case kHopperChannelGpfifoA:
    case kBlackwellChannelGpfifoA:
    case kBlackwellChannelGpfifoB:
      return b == RmBranch::k610 ? sizeof(NvChannelAllocParams610)
                                 : sizeof(NvChannelAllocParams570);
    default:
      return 0;  // the root client, usermode, compute and copy classes: no parameters
  }
}

uint32_t rm_control_params_size(RmBranch b, uint32_t cmd) {
  bool is570 = b == RmBranch::k570;
  switch (cmd) {
    case kNv0000CtrlCmdGpuGetIdInfoV2:
      return sizeof(Nv0000CtrlGpuGetIdInfoV2Params);
    case kNv0080CtrlCmdGpuGetClasslistV2:
      return is570 ? sizeof(Nv0080CtrlGpuGetClasslistV2Params570)
                   : sizeof(Nv0080CtrlGpuGetClasslistV2Params580);
    case kNv2080CtrlCmdGrGetInfo:
      return sizeof(Nv2080CtrlGrGetInfoParams);
    case kNv2080CtrlCmdMcGetArchInfo:
      return sizeof(Nv2080CtrlMcGetArchInfoParams);
    case kNv2080CtrlCmdGpuGetGidInfo:
      return sizeof(Nv2080CtrlGpuGetGidInfoParams);
    case kNv2080CtrlCmdGpuGetNameString:
      return b >= RmBranch::k595 ? sizeof(Nv2080CtrlGpuGetNameStringParams595)
                                 : sizeof(Nv2080CtrlGpuGetNameStringParams570);
    case kNv2080CtrlCmdFbGetInfoV2:
      return is570 ? sizeof(Nv2080CtrlFbGetInfoV2Params570)
                   : sizeof(Nv2080CtrlFbGetInfoV2Params580);
    case kNv2080CtrlCmdPerfBoost:
      return sizeof(Nv2080CtrlPerfBoostParams);
    case kNvc36fCtrlCmdGpfifoGetWorkSubmitToken:
      return sizeof(Nvc36fCtrlGpfifoGetWorkSubmitTokenParams);
    case kNva06cCtrlCmdGpfifoSchedule:
      return is570 ? sizeof(Nva06cCtrlGpfifoScheduleParams570)
                   : sizeof(Nva06cCtrlGpfifoScheduleParams580);
    case kNv83deCtrlCmdDebugSetExceptionMask:
      return sizeof(Nv83deCtrlDebugSetExceptionMaskParams);
    case kNv83deCtrlCmdDebugReadAllSmErrorStates:
      return sizeof(Nv83deCtrlDebugReadAllSmErrorStatesParams);
    case kNv83deCtrlCmdDebugReadMmuFaultInfo:
      return sizeof(Nv83deCtrlDebugReadMmuFaultInfoParams);
    default:
      return 0;
  }
}

uint32_t nv_escape_size(RmBranch b, uint32_t escape) {
  switch (escape) {
    case kNvEscRmAllocMemory:
      return sizeof(Nvos02ParametersWithFd);
    case kNvEscRmFree:
      return sizeof(Nvos00Parameters);
    case kNvEscRmControl:
      return sizeof(Nvos54Parameters);
    case kNvEscRmAlloc:
      return sizeof(Nvos21Parameters);
    case kNvEscRmMapMemory:
      return sizeof(Nvos33ParametersWithFd);
    case kNvEscRmMapMemoryDma:
      return b == RmBranch::k570 ? sizeof(Nvos46Parameters570) : sizeof(Nvos46Parameters580);
    case kNvEscRegisterFd:
      return sizeof(NvIoctlRegisterFd);
    case kNvEscCheckVersionStr:
      return sizeof(NvIoctlRmApiVersion);
    default:
      return 0;  // NV_ESC_CARD_INFO and NV_ESC_ATTACH_GPUS_TO_FD take arrays
  }
}

std::string uvm_ioctl_name(unsigned long request) {
  switch (request) {
    case kUvmInitialize:
      return "UVM_INITIALIZE";
    case kUvmRegisterGpuVaspace:
      return "UVM_REGISTER_GPU_VASPACE";
    case kUvmUnregisterGpuVaspace:
      return "UVM_UNREGISTER_GPU_VASPACE";
    case kUvmRegisterChannel:
      return "UVM_REGISTER_CHANNEL";
    case kUvmMapExternalAllocation:
      return "UVM_MAP_EXTERNAL_ALLOCATION";
    case kUvmFree:
      return "UVM_FREE";
    case kUvmRegisterGpu:
      return "UVM_REGISTER_GPU";
    case kUvmUnregisterGpu:
      return "UVM_UNREGISTER_GPU";
    case kUvmCreateExternalRange:
      return "UVM_CREATE_EXTERNAL_RANGE";
    case kUvmMmInitialize:
      return "UVM_MM_INITIALIZE";
    default:
      return "UVM ioctl " + hex(request);
  }
}

size_t uvm_params_size(RmBranch b, unsigned long request) {
  switch (request) {
    case kUvmInitialize:
      return sizeof(UvmInitializeParams);
    case kUvmRegisterGpuVaspace:
      return sizeof(UvmRegisterGpuVaspaceParams);
    case kUvmUnregisterGpuVaspace:
      return sizeof(UvmUnregisterGpuVaspaceParams);
    case kUvmRegisterChannel:
      return sizeof(UvmRegisterChannelParams);
    case kUvmMapExternalAllocation:
      return sizeof(UvmMapExternalAllocationParams);
    case kUvmFree:
      return b >= RmBranch::k590 ? sizeof(UvmFreeParams590) : sizeof(UvmFreeParams570);
    case kUvmRegisterGpu:
      return sizeof(UvmRegisterGpuParams);
    case kUvmUnregisterGpu:
      return sizeof(UvmUnregisterGpuParams);
    case kUvmCreateExternalRange:
      return sizeof(UvmCreateExternalRangeParams);
    case kUvmMmInitialize:
      return sizeof(UvmMmInitializeParams);
    default:
      return 0;
  }
}

size_t uvm_status_offset(RmBranch b, unsigned long request) {
  switch (request) {
    case kUvmInitialize:
      return offsetof(UvmInitializeParams, rm_status);
    case kUvmRegisterGpuVaspace:
      return offsetof(UvmRegisterGpuVaspaceParams, rm_status);
    case kUvmUnregisterGpuVaspace:
      return offsetof(UvmUnregisterGpuVaspaceParams, rm_status);
    case kUvmRegisterChannel:
      return offsetof(UvmRegisterChannelParams, rm_status);
    case kUvmMapExternalAllocation:
      return offsetof(UvmMapExternalAllocationParams, rm_status);
    case kUvmFree:
      return b >= RmBranch::k590 ? offsetof(UvmFreeParams590, rm_status)
                                 : offsetof(UvmFreeParams570, rm_status);
    case kUvmRegisterGpu:
      return offsetof(UvmRegisterGpuParams, rm_status);
    case kUvmUnregisterGpu:
      return offsetof(UvmUnregisterGpuParams, rm_status);
    case kUvmCreateExternalRange:
      return offsetof(UvmCreateExternalRangeParams, rm_status);
    case kUvmMmInitialize:
      return offsetof(UvmMmInitializeParams, rm_status);
    default:
      return 0;
  }
}

}  // namespace baregrad::nv
