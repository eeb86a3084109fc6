// The nvidia-uvm ioctls baregrad uses (kernel-open/nvidia-uvm/uvm_ioctl.h, uvm_linux_ioctl.h,
// uvm_types.h, common/inc/nv_uvm_user_types.h). UVM requests are raw numbers, not _IOC
// encodings: the driver copies sizeof(params) of its own branch, so nothing checks the size a
// caller meant. Every params struct ends in an NV_STATUS rmStatus. Identical from 570.86.15 to
// 595.45.04 (and 610 per tinygrad's autogen) except UVM_FREE_PARAMS.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "drivers/nv/rm_abi.h"

namespace baregrad::nv {

constexpr unsigned long kUvmInitialize = 0x30000001;     // UVM_INITIALIZE (uvm_linux_ioctl.h)
constexpr unsigned long kUvmRegisterGpuVaspace = 25;     // UVM_REGISTER_GPU_VASPACE
constexpr unsigned long kUvmUnregisterGpuVaspace = 26;   // UVM_UNREGISTER_GPU_VASPACE
constexpr unsigned long kUvmRegisterChannel = 27;        // UVM_REGISTER_CHANNEL
constexpr unsigned long kUvmMapExternalAllocation = 33;  // UVM_MAP_EXTERNAL_ALLOCATION
constexpr unsigned long kUvmFree = 34;                   // UVM_FREE
constexpr unsigned long kUvmRegisterGpu = 37;            // UVM_REGISTER_GPU
constexpr unsigned long kUvmUnregisterGpu = 38;          // UVM_UNREGISTER_GPU
constexpr unsigned long kUvmCreateExternalRange = 73;    // UVM_CREATE_EXTERNAL_RANGE
constexpr unsigned long kUvmMmInitialize = 75;           // UVM_MM_INITIALIZE

// NvProcessorUuid (nvCpuUuid.h): 16 bytes.
struct NvProcessorUuid {
  uint8_t uuid[16];
};
static_assert(sizeof(NvProcessorUuid) == 16);

// UVM_INITIALIZE_PARAMS: the first ioctl on a UVM fd (others fail NV_ERR_ILLEGAL_ACTION before).
struct UvmInitializeParams {
  uint64_t flags;
  uint32_t rm_status;
};
static_assert(sizeof(UvmInitializeParams) == 16);
static_assert(offsetof(UvmInitializeParams, rm_status) == 8);

// UVM_MM_INITIALIZE_PARAMS: on a second UVM fd, binds the process mm to the first one.
struct UvmMmInitializeParams {
  int32_t uvm_fd;
  uint32_t rm_status;
};
static_assert(sizeof(UvmMmInitializeParams) == 8);

// UVM_REGISTER_GPU_PARAMS (rmCtrlFd -1: no SMC partition).
struct UvmRegisterGpuParams {
  NvProcessorUuid gpu_uuid;
  uint8_t numa_enabled;  // NvBool, out
  int32_t numa_node_id;  // out
  int32_t rm_ctrl_fd;
  uint32_t h_client;
  uint32_t h_smc_part_ref;
  uint32_t rm_status;
};
static_assert(sizeof(UvmRegisterGpuParams) == 40);
static_assert(offsetof(UvmRegisterGpuParams, numa_node_id) == 20);
static_assert(offsetof(UvmRegisterGpuParams, rm_ctrl_fd) == 24);
static_assert(offsetof(UvmRegisterGpuParams, rm_status) == 36);

// UVM_UNREGISTER_GPU_PARAMS.
struct UvmUnregisterGpuParams {
  NvProcessorUuid gpu_uuid;
  uint32_t rm_status;
};
static_assert(sizeof(UvmUnregisterGpuParams) == 20);

// UVM_REGISTER_GPU_VASPACE_PARAMS.
struct UvmRegisterGpuVaspaceParams {
  NvProcessorUuid gpu_uuid;
  int32_t rm_ctrl_fd;
  uint32_t h_client;
  uint32_t h_va_space;
  uint32_t rm_status;
};
static_assert(sizeof(UvmRegisterGpuVaspaceParams) == 32);
static_assert(offsetof(UvmRegisterGpuVaspaceParams, rm_status) == 28);

// UVM_UNREGISTER_GPU_VASPACE_PARAMS.
struct UvmUnregisterGpuVaspaceParams {
  NvProcessorUuid gpu_uuid;
  uint32_t rm_status;
};
static_assert(sizeof(UvmUnregisterGpuVaspaceParams) == 20);

// UVM_REGISTER_CHANNEL_PARAMS: UVM maps the channel's context buffers in [base, base + length).
struct UvmRegisterChannelParams {
  NvProcessorUuid gpu_uuid;
  int32_t rm_ctrl_fd;
  uint32_t h_client;
  uint32_t h_channel;
  uint64_t base;
  uint64_t length;
  uint32_t rm_status;
};
static_assert(sizeof(UvmRegisterChannelParams) == 56);
static_assert(offsetof(UvmRegisterChannelParams, base) == 32);
static_assert(offsetof(UvmRegisterChannelParams, rm_status) == 48);

// UVM_CREATE_EXTERNAL_RANGE_PARAMS (base and length 4 KiB aligned).
struct UvmCreateExternalRangeParams {
  uint64_t base;
  uint64_t length;
  uint32_t rm_status;
};
static_assert(sizeof(UvmCreateExternalRangeParams) == 24);

// UvmGpuMappingAttributes (uvm_types.h); gpuMappingType 1 = UvmGpuMappingTypeReadWriteAtomic.
struct UvmGpuMappingAttributes {
  NvProcessorUuid gpu_uuid;
  uint32_t gpu_mapping_type;
  uint32_t gpu_caching_type;
  uint32_t gpu_format_type;
  uint32_t gpu_element_bits;
  uint32_t gpu_compression_type;
};
static_assert(sizeof(UvmGpuMappingAttributes) == 36);
constexpr uint32_t kUvmGpuMappingTypeReadWriteAtomic = 1;

// UVM_MAP_EXTERNAL_ALLOCATION_PARAMS: 256 (UVM_MAX_GPUS = NV_MAX_DEVICES 32 x 8) attributes.
struct UvmMapExternalAllocationParams {
  uint64_t base;
  uint64_t length;
  uint64_t offset;
  UvmGpuMappingAttributes per_gpu_attributes[256];
  uint64_t gpu_attributes_count;
  int32_t rm_ctrl_fd;
  uint32_t h_client;
  uint32_t h_memory;
  uint32_t rm_status;
};
static_assert(sizeof(UvmMapExternalAllocationParams) == 9264);
static_assert(offsetof(UvmMapExternalAllocationParams, per_gpu_attributes) == 24);
static_assert(offsetof(UvmMapExternalAllocationParams, gpu_attributes_count) == 9240);
static_assert(offsetof(UvmMapExternalAllocationParams, rm_ctrl_fd) == 9248);
static_assert(offsetof(UvmMapExternalAllocationParams, rm_status) == 9260);

// UVM_FREE_PARAMS through 580.x: {base, length, rmStatus}, 24 bytes.
struct UvmFreeParams570 {
  uint64_t base;
  uint64_t length;
  uint32_t rm_status;
};
static_assert(sizeof(UvmFreeParams570) == 24);
// UVM_FREE_PARAMS from 590.44.01: {base, rmStatus}, 16 bytes (the whole range at base).
struct UvmFreeParams590 {
  uint64_t base;
  uint32_t rm_status;
};
static_assert(sizeof(UvmFreeParams590) == 16);

// "UVM_REGISTER_GPU", or "UVM ioctl <n>" for others.
std::string uvm_ioctl_name(unsigned long request);
// The params size of a UVM request on branch `b` (0 for requests baregrad does not use), and
// the offset of its rmStatus.
size_t uvm_params_size(RmBranch b, unsigned long request);
size_t uvm_status_offset(RmBranch b, unsigned long request);

}  // namespace baregrad::nv
