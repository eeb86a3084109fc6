// The AMD KFD kernel ABI that baregrad uses: the /dev/kfd ioctl request encoding, the argument
// structs of the ioctls drivers/amd makes, the allocation flags, queue, event and wait-result
// values. Our own declarations of the Linux uapi header include/uapi/linux/kfd_ioctl.h (checked
// at torvalds/linux 100c85421b52, KFD 1.15, and against the 1.16-1.18 changes named below);
// each struct names the struct it mirrors, with its size and key offsets static_asserted.
// drivers/amd/README.md, "Kernel interface", lists where each fact was checked.
//
// NOTE: KFD 1.17 appended sdma_engine_id and pad to kfd_ioctl_create_queue_args (88 -> 96
// bytes). We send the 88-byte form: kfd_ioctl() copies the caller's size and zero-fills the
// rest (kfd_chardev.c), so it works on every KFD, and sdma_engine_id only matters for
// KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID, which we do not use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace baregrad::amd {

// ---- ioctl request encoding (asm-generic/ioctl.h) ---------------------------------------------

// _IOC direction bits (bits 31:30): write = user to kernel, read = kernel to user.
constexpr uint32_t kIocNone = 0;
constexpr uint32_t kIocWrite = 1;
constexpr uint32_t kIocRead = 2;

// _IOC(dir, type, nr, size): dir 31:30, size 29:16, type 15:8, nr 7:0.
constexpr unsigned long ioc(uint32_t dir, uint32_t type, uint32_t nr, size_t size) {
  return (static_cast<unsigned long>(dir) << 30) |
         (static_cast<unsigned long>(size & 0x3fff) << 16) |
         (static_cast<unsigned long>(type & 0xff) << 8) | (nr & 0xff);
}
constexpr uint32_t ioctl_nr(unsigned long request) { return request & 0xff; }
constexpr uint32_t ioctl_type(unsigned long request) { return (request >> 8) & 0xff; }
constexpr size_t ioctl_size(unsigned long request) { return (request >> 16) & 0x3fff; }
constexpr uint32_t ioctl_dir(unsigned long request) { return (request >> 30) & 3; }

constexpr uint32_t kAmdkfdIoctlBase = 'K';  // AMDKFD_IOCTL_BASE
// AMDKFD_IOR / AMDKFD_IOW / AMDKFD_IOWR of a struct of `bytes` bytes.
constexpr unsigned long amdkfd_ior(uint32_t nr, size_t bytes) {
  return ioc(kIocRead, kAmdkfdIoctlBase, nr, bytes);
}
constexpr unsigned long amdkfd_iow(uint32_t nr, size_t bytes) {
  return ioc(kIocWrite, kAmdkfdIoctlBase, nr, bytes);
}
constexpr unsigned long amdkfd_iowr(uint32_t nr, size_t bytes) {
  return ioc(kIocRead | kIocWrite, kAmdkfdIoctlBase, nr, bytes);
}

// ---- versions ----------------------------------------------------------------------------------

// kfd_ioctl_get_version_args (AMDKFD_IOC_GET_VERSION).
struct KfdIoctlGetVersionArgs {
  uint32_t major_version;
  uint32_t minor_version;
};
static_assert(sizeof(KfdIoctlGetVersionArgs) == 8);

// ---- queues ------------------------------------------------------------------------------------

// KFD_IOC_QUEUE_TYPE_*: COMPUTE is a PM4 ring, COMPUTE_AQL an HSA AQL ring.
constexpr uint32_t kKfdIocQueueTypeCompute = 0x0;
constexpr uint32_t kKfdIocQueueTypeSdma = 0x1;
constexpr uint32_t kKfdIocQueueTypeComputeAql = 0x2;
constexpr uint32_t kKfdIocQueueTypeSdmaXgmi = 0x3;
constexpr uint32_t kKfdIocQueueTypeSdmaByEngId = 0x4;  // KFD 1.17
constexpr uint32_t kKfdMaxQueuePercentage = 100;       // KFD_MAX_QUEUE_PERCENTAGE
constexpr uint32_t kKfdMaxQueuePriority = 15;          // KFD_MAX_QUEUE_PRIORITY

// kfd_ioctl_create_queue_args as of KFD 1.16 (see the NOTE above). doorbell_offset, queue_id
// come back from KFD.
struct KfdIoctlCreateQueueArgs {
  uint64_t ring_base_address;
  uint64_t write_pointer_address;
  uint64_t read_pointer_address;
  uint64_t doorbell_offset;
  uint32_t ring_size;
  uint32_t gpu_id;
  uint32_t queue_type;
  uint32_t queue_percentage;  // bits 7:0 percent; tinygrad puts the XCC index in bits 15:8
  uint32_t queue_priority;
  uint32_t queue_id;
  uint64_t eop_buffer_address;
  uint64_t eop_buffer_size;
  uint64_t ctx_save_restore_address;
  uint32_t ctx_save_restore_size;
  uint32_t ctl_stack_size;
};
static_assert(sizeof(KfdIoctlCreateQueueArgs) == 88);
static_assert(offsetof(KfdIoctlCreateQueueArgs, doorbell_offset) == 24);
static_assert(offsetof(KfdIoctlCreateQueueArgs, ring_size) == 32);
static_assert(offsetof(KfdIoctlCreateQueueArgs, queue_id) == 52);
static_assert(offsetof(KfdIoctlCreateQueueArgs, eop_buffer_address) == 56);
static_assert(offsetof(KfdIoctlCreateQueueArgs, ctx_save_restore_size) == 80);
static_assert(offsetof(KfdIoctlCreateQueueArgs, ctl_stack_size) == 84);

// kfd_ioctl_destroy_queue_args.
struct KfdIoctlDestroyQueueArgs {
  uint32_t queue_id;
  uint32_t pad;
};
static_assert(sizeof(KfdIoctlDestroyQueueArgs) == 8);

// ---- process apertures -------------------------------------------------------------------------

// kfd_process_device_apertures: one GPU's apertures in this process.
struct KfdProcessDeviceApertures {
  uint64_t lds_base, lds_limit;
  uint64_t scratch_base, scratch_limit;
  uint64_t gpuvm_base, gpuvm_limit;
  uint32_t gpu_id;
  uint32_t pad;
};
static_assert(sizeof(KfdProcessDeviceApertures) == 56);
static_assert(offsetof(KfdProcessDeviceApertures, gpuvm_base) == 32);
static_assert(offsetof(KfdProcessDeviceApertures, gpu_id) == 48);

// kfd_ioctl_get_process_apertures_new_args: num_of_nodes entries at the pointer.
struct KfdIoctlGetProcessAperturesNewArgs {
  uint64_t kfd_process_device_apertures_ptr;
  uint32_t num_of_nodes;
  uint32_t pad;
};
static_assert(sizeof(KfdIoctlGetProcessAperturesNewArgs) == 16);

// ---- events ------------------------------------------------------------------------------------

// KFD_IOC_EVENT_* (HSA_EVENTTYPE).
constexpr uint32_t kKfdIocEventSignal = 0;
constexpr uint32_t kKfdIocEventNodechange = 1;
constexpr uint32_t kKfdIocEventDevicestatechange = 2;
constexpr uint32_t kKfdIocEventHwException = 3;
constexpr uint32_t kKfdIocEventSystemEvent = 4;
constexpr uint32_t kKfdIocEventDebugEvent = 5;
constexpr uint32_t kKfdIocEventProfileEvent = 6;
constexpr uint32_t kKfdIocEventQueueEvent = 7;
constexpr uint32_t kKfdIocEventMemory = 8;

// KFD_IOC_WAIT_RESULT_*.
constexpr uint32_t kKfdIocWaitResultComplete = 0;
constexpr uint32_t kKfdIocWaitResultTimeout = 1;
constexpr uint32_t kKfdIocWaitResultFail = 2;  // an event was destroyed during the wait

constexpr uint32_t kKfdSignalEventLimit = 4096;  // KFD_SIGNAL_EVENT_LIMIT: 8-byte slots a page
constexpr uint64_t kKfdEventPageBytes = uint64_t{kKfdSignalEventLimit} * 8;
// WAIT_EVENTS timeouts (kfd_priv.h, kernel-internal): 0 polls, 0xffffffff never returns; KFD
// takes values >= 2^31 ms as (nearly) infinite too (kfd_events.c user_timeout_to_jiffies).
constexpr uint32_t kKfdEventTimeoutImmediate = 0;
constexpr uint32_t kKfdEventTimeoutInfinite = 0xffffffffu;
constexpr uint32_t kKfdMaxFiniteTimeoutMs = 0x7fffffffu;

// kfd_hsa_hw_exception_data.reset_type / reset_cause.
constexpr uint32_t kKfdHwExceptionWholeGpuReset = 0;
constexpr uint32_t kKfdHwExceptionPerEngineReset = 1;
constexpr uint32_t kKfdHwExceptionGpuHang = 0;
constexpr uint32_t kKfdHwExceptionEcc = 1;
// kfd_hsa_memory_exception_data.ErrorType (KFD_MEM_ERR_*).
constexpr uint32_t kKfdMemErrNoRas = 0;
constexpr uint32_t kKfdMemErrSramEcc = 1;
constexpr uint32_t kKfdMemErrPoisonConsumed = 2;
constexpr uint32_t kKfdMemErrGpuHang = 3;

// kfd_ioctl_create_event_args. event_page_offset: to KFD, the handle of the event page (first
// event only); event_trigger_data, event_id, event_slot_index come back.
struct KfdIoctlCreateEventArgs {
  uint64_t event_page_offset;
  uint32_t event_trigger_data;
  uint32_t event_type;
  uint32_t auto_reset;
  uint32_t node_id;
  uint32_t event_id;
  uint32_t event_slot_index;
};
static_assert(sizeof(KfdIoctlCreateEventArgs) == 32);
static_assert(offsetof(KfdIoctlCreateEventArgs, event_type) == 12);
static_assert(offsetof(KfdIoctlCreateEventArgs, event_id) == 24);
static_assert(offsetof(KfdIoctlCreateEventArgs, event_slot_index) == 28);

// kfd_ioctl_destroy_event_args and kfd_ioctl_set_event_args.
struct KfdIoctlDestroyEventArgs {
  uint32_t event_id;
  uint32_t pad;
};
static_assert(sizeof(KfdIoctlDestroyEventArgs) == 8);
struct KfdIoctlSetEventArgs {
  uint32_t event_id;
  uint32_t pad;
};
static_assert(sizeof(KfdIoctlSetEventArgs) == 8);

// kfd_memory_exception_failure (NotPresent, ReadOnly, NoExecute, imprecise).
struct KfdMemoryExceptionFailure {
  uint32_t not_present;
  uint32_t read_only;
  uint32_t no_execute;
  uint32_t imprecise;
};
static_assert(sizeof(KfdMemoryExceptionFailure) == 16);

// kfd_hsa_memory_exception_data.
struct KfdHsaMemoryExceptionData {
  KfdMemoryExceptionFailure failure;
  uint64_t va;
  uint32_t gpu_id;
  uint32_t error_type;  // ErrorType: KFD_MEM_ERR_*
};
static_assert(sizeof(KfdHsaMemoryExceptionData) == 32);
static_assert(offsetof(KfdHsaMemoryExceptionData, va) == 16);
static_assert(offsetof(KfdHsaMemoryExceptionData, gpu_id) == 24);

// kfd_hsa_hw_exception_data.
struct KfdHsaHwExceptionData {
  uint32_t reset_type;
  uint32_t reset_cause;
  uint32_t memory_lost;
  uint32_t gpu_id;
};
static_assert(sizeof(KfdHsaHwExceptionData) == 16);

// kfd_hsa_signal_event_data (KFD 1.14): 0 keeps the pre-1.14 wait semantics.
struct KfdHsaSignalEventData {
  uint64_t last_event_age;
};
static_assert(sizeof(KfdHsaSignalEventData) == 8);

// kfd_event_data: one entry of the WAIT_EVENTS array.
struct KfdEventData {
  union {
    KfdHsaMemoryExceptionData memory_exception_data;
    KfdHsaHwExceptionData hw_exception_data;
    KfdHsaSignalEventData signal_event_data;
  };
  uint64_t kfd_event_data_ext;
  uint32_t event_id;
  uint32_t pad;
};
static_assert(sizeof(KfdEventData) == 48);
static_assert(offsetof(KfdEventData, kfd_event_data_ext) == 32);
static_assert(offsetof(KfdEventData, event_id) == 40);

// kfd_ioctl_wait_events_args. timeout in ms; wait_result comes back.
struct KfdIoctlWaitEventsArgs {
  uint64_t events_ptr;
  uint32_t num_events;
  uint32_t wait_for_all;
  uint32_t timeout;
  uint32_t wait_result;
};
static_assert(sizeof(KfdIoctlWaitEventsArgs) == 24);
static_assert(offsetof(KfdIoctlWaitEventsArgs, timeout) == 16);

// ---- memory ------------------------------------------------------------------------------------

// kfd_ioctl_acquire_vm_args: the render node whose VM KFD uses for gpu_id.
struct KfdIoctlAcquireVmArgs {
  uint32_t drm_fd;
  uint32_t gpu_id;
};
static_assert(sizeof(KfdIoctlAcquireVmArgs) == 8);

// KFD_IOC_ALLOC_MEM_FLAGS_*: one memory type, then attributes.
constexpr uint32_t kKfdIocAllocMemFlagsVram = 1u << 0;
constexpr uint32_t kKfdIocAllocMemFlagsGtt = 1u << 1;
constexpr uint32_t kKfdIocAllocMemFlagsUserptr = 1u << 2;
constexpr uint32_t kKfdIocAllocMemFlagsDoorbell = 1u << 3;
constexpr uint32_t kKfdIocAllocMemFlagsMmioRemap = 1u << 4;
constexpr uint32_t kKfdIocAllocMemFlagsWritable = 1u << 31;
constexpr uint32_t kKfdIocAllocMemFlagsExecutable = 1u << 30;
constexpr uint32_t kKfdIocAllocMemFlagsPublic = 1u << 29;
constexpr uint32_t kKfdIocAllocMemFlagsNoSubstitute = 1u << 28;
constexpr uint32_t kKfdIocAllocMemFlagsAqlQueueMem = 1u << 27;
constexpr uint32_t kKfdIocAllocMemFlagsCoherent = 1u << 26;
constexpr uint32_t kKfdIocAllocMemFlagsUncached = 1u << 25;
constexpr uint32_t kKfdIocAllocMemFlagsExtCoherent = 1u << 24;
constexpr uint32_t kKfdIocAllocMemFlagsContiguous = 1u << 23;  // KFD 1.16
constexpr uint32_t kKfdIocAllocMemTypeMask =
    kKfdIocAllocMemFlagsVram | kKfdIocAllocMemFlagsGtt | kKfdIocAllocMemFlagsUserptr |
    kKfdIocAllocMemFlagsDoorbell | kKfdIocAllocMemFlagsMmioRemap;

// kfd_ioctl_alloc_memory_of_gpu_args. mmap_offset: to KFD the CPU address (userptr), from KFD
// the offset to mmap the render node (or /dev/kfd for MMIO_REMAP) at.
struct KfdIoctlAllocMemoryOfGpuArgs {
  uint64_t va_addr;
  uint64_t size;
  uint64_t handle;
  uint64_t mmap_offset;
  uint32_t gpu_id;
  uint32_t flags;
};
static_assert(sizeof(KfdIoctlAllocMemoryOfGpuArgs) == 40);
static_assert(offsetof(KfdIoctlAllocMemoryOfGpuArgs, handle) == 16);
static_assert(offsetof(KfdIoctlAllocMemoryOfGpuArgs, mmap_offset) == 24);
static_assert(offsetof(KfdIoctlAllocMemoryOfGpuArgs, gpu_id) == 32);
static_assert(offsetof(KfdIoctlAllocMemoryOfGpuArgs, flags) == 36);

// kfd_ioctl_free_memory_of_gpu_args.
struct KfdIoctlFreeMemoryOfGpuArgs {
  uint64_t handle;
};
static_assert(sizeof(KfdIoctlFreeMemoryOfGpuArgs) == 8);

// kfd_ioctl_map_memory_to_gpu_args / kfd_ioctl_unmap_memory_from_gpu_args (same layout):
// n_devices u32 gpu_ids at the pointer; n_success counts the ones done (start at 0).
struct KfdIoctlMapMemoryToGpuArgs {
  uint64_t handle;
  uint64_t device_ids_array_ptr;
  uint32_t n_devices;
  uint32_t n_success;
};
static_assert(sizeof(KfdIoctlMapMemoryToGpuArgs) == 24);
static_assert(offsetof(KfdIoctlMapMemoryToGpuArgs, n_success) == 20);
using KfdIoctlUnmapMemoryFromGpuArgs = KfdIoctlMapMemoryToGpuArgs;

// ---- runtime (KFD 1.13 debugger API) -----------------------------------------------------------

// KFD_RUNTIME_ENABLE_MODE_*: mode_mask 0 is "runtime enabled without the debugger".
constexpr uint32_t kKfdRuntimeEnableModeEnableMask = 1;
constexpr uint32_t kKfdRuntimeEnableModeTtmpSaveMask = 2;

// kfd_ioctl_runtime_enable_args.
struct KfdIoctlRuntimeEnableArgs {
  uint64_t r_debug;
  uint32_t mode_mask;
  uint32_t capabilities_mask;
};
static_assert(sizeof(KfdIoctlRuntimeEnableArgs) == 16);

// ---- requests (AMDKFD_IOC_*) -------------------------------------------------------------------

constexpr unsigned long kAmdkfdIocGetVersion = amdkfd_ior(0x01, sizeof(KfdIoctlGetVersionArgs));
constexpr unsigned long kAmdkfdIocCreateQueue = amdkfd_iowr(0x02, sizeof(KfdIoctlCreateQueueArgs));
constexpr unsigned long kAmdkfdIocDestroyQueue =
    amdkfd_iowr(0x03, sizeof(KfdIoctlDestroyQueueArgs));
constexpr unsigned long kAmdkfdIocCreateEvent = amdkfd_iowr(0x08, sizeof(KfdIoctlCreateEventArgs));
constexpr unsigned long kAmdkfdIocDestroyEvent = amdkfd_iow(0x09, sizeof(KfdIoctlDestroyEventArgs));
constexpr unsigned long kAmdkfdIocSetEvent = amdkfd_iow(0x0a, sizeof(KfdIoctlSetEventArgs));
constexpr unsigned long kAmdkfdIocWaitEvents = amdkfd_iowr(0x0c, sizeof(KfdIoctlWaitEventsArgs));
constexpr unsigned long kAmdkfdIocGetProcessAperturesNew =
    amdkfd_iowr(0x14, sizeof(KfdIoctlGetProcessAperturesNewArgs));
constexpr unsigned long kAmdkfdIocAcquireVm = amdkfd_iow(0x15, sizeof(KfdIoctlAcquireVmArgs));
constexpr unsigned long kAmdkfdIocAllocMemoryOfGpu =
    amdkfd_iowr(0x16, sizeof(KfdIoctlAllocMemoryOfGpuArgs));
constexpr unsigned long kAmdkfdIocFreeMemoryOfGpu =
    amdkfd_iow(0x17, sizeof(KfdIoctlFreeMemoryOfGpuArgs));
constexpr unsigned long kAmdkfdIocMapMemoryToGpu =
    amdkfd_iowr(0x18, sizeof(KfdIoctlMapMemoryToGpuArgs));
constexpr unsigned long kAmdkfdIocUnmapMemoryFromGpu =
    amdkfd_iowr(0x19, sizeof(KfdIoctlUnmapMemoryFromGpuArgs));
constexpr unsigned long kAmdkfdIocRuntimeEnable =
    amdkfd_iowr(0x25, sizeof(KfdIoctlRuntimeEnableArgs));

// One of the requests above: its number, full request and uapi name.
struct KfdIoctlInfo {
  uint32_t nr;
  unsigned long request;
  const char* name;  // "AMDKFD_IOC_ALLOC_MEMORY_OF_GPU"
};
// The request baregrad sends with number `nr`, or nullptr for one it does not use.
const KfdIoctlInfo* kfd_ioctl_info(uint32_t nr);
// The entry whose name is `name`, or nullptr.
const KfdIoctlInfo* kfd_ioctl_info(std::string_view name);
// "AMDKFD_IOC_WAIT_EVENTS", or "AMDKFD ioctl 0x1f" for a number baregrad does not use.
std::string kfd_ioctl_name(uint32_t nr);

}  // namespace baregrad::amd
