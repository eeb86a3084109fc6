// The NVIDIA resource manager (RM) kernel ABI that baregrad uses: ioctl escapes and their
// request encoding, the NVOS* escape parameters, the allocation parameters of the objects of a
// bring-up, the control commands and their parameters, and the per-driver-branch layouts.
// Our own declarations; each struct names the NVIDIA struct it mirrors, with its size and field
// offsets static_asserted. Where each fact was checked (repository, tags, files) is listed in
// drivers/nv/README.md, "Kernel interface".
//
// Layouts are identical in every tag of a branch from 570.86.15 to 595.45.04 unless a struct
// says otherwise; struct layouts that changed come in one variant per branch range (the suffix
// names the first branch of the variant: Nvos46Parameters570 is 570.x, Nvos46Parameters580 is
// 580.x and later). Branch 610 is checked against tinygrad's nv_610 autogen (see README).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "drivers/nv/rm_abi_fault.h"  // error notifiers, RC codes, GT200_DEBUGGER controls

namespace baregrad::nv {

// ---- driver branches -----------------------------------------------------------------------

// A driver branch whose layouts baregrad knows. Branches within one value share every layout
// (575 differs from 570 and 580 and is not supported).
enum class RmBranch : uint16_t { k570 = 570, k580 = 580, k590 = 590, k595 = 595, k610 = 610 };

// The branch of a driver version string ("580.159.03"); FailedPrecondition
// "NVIDIA driver 535.104.05 has no baregrad layout (supported: 570, 580, 590, 595, 610)".
Result<RmBranch> rm_branch_for_version(std::string_view version);
int rm_branch_number(RmBranch b);

// ---- ioctl request encoding (nv-ioctl-numbers.h, nv_escape.h) ------------------------------

constexpr uint32_t kNvIoctlMagic = 'F';  // NV_IOCTL_MAGIC
constexpr uint32_t kNvIoctlBase = 200;   // NV_IOCTL_BASE

// RM escapes (nv_escape.h): the ioctl number is the escape itself.
constexpr uint32_t kNvEscRmAllocMemory = 0x27;   // NV_ESC_RM_ALLOC_MEMORY (/dev/nvidiaN only)
constexpr uint32_t kNvEscRmFree = 0x29;          // NV_ESC_RM_FREE
constexpr uint32_t kNvEscRmControl = 0x2a;       // NV_ESC_RM_CONTROL
constexpr uint32_t kNvEscRmAlloc = 0x2b;         // NV_ESC_RM_ALLOC
constexpr uint32_t kNvEscRmMapMemory = 0x4e;     // NV_ESC_RM_MAP_MEMORY
constexpr uint32_t kNvEscRmMapMemoryDma = 0x57;  // NV_ESC_RM_MAP_MEMORY_DMA
// Kernel-module escapes (nv-ioctl-numbers.h): NV_IOCTL_BASE + n.
constexpr uint32_t kNvEscCardInfo = kNvIoctlBase + 0;          // NV_ESC_CARD_INFO
constexpr uint32_t kNvEscRegisterFd = kNvIoctlBase + 1;        // NV_ESC_REGISTER_FD
constexpr uint32_t kNvEscCheckVersionStr = kNvIoctlBase + 10;  // NV_ESC_CHECK_VERSION_STR
constexpr uint32_t kNvEscAttachGpusToFd = kNvIoctlBase + 12;   // NV_ESC_ATTACH_GPUS_TO_FD

// _IOWR(NV_IOCTL_MAGIC, escape, bytes) as Linux encodes it (asm-generic/ioctl.h: dir 31:30 =
// read|write, size 29:16, type 15:8, nr 7:0). The driver checks the size against its own struct.
constexpr unsigned long nv_ioctl_request(uint32_t escape, size_t bytes) {
  return (3ul << 30) | (static_cast<unsigned long>(bytes & 0x3fff) << 16) | (kNvIoctlMagic << 8) |
         (escape & 0xff);
}
constexpr uint32_t ioctl_nr(unsigned long request) { return request & 0xff; }
constexpr uint32_t ioctl_type(unsigned long request) { return (request >> 8) & 0xff; }
constexpr size_t ioctl_size(unsigned long request) { return (request >> 16) & 0x3fff; }
constexpr uint32_t ioctl_dir(unsigned long request) { return (request >> 30) & 3; }
// Whether `request` is an _IOWR('F', ...) request (RM escapes); UVM requests are raw numbers.
constexpr bool is_nv_escape_request(unsigned long request) {
  return ioctl_type(request) == kNvIoctlMagic && ioctl_dir(request) == 3;
}
// "NV_ESC_RM_ALLOC", or "NV escape 0x.." for others.
std::string nv_escape_name(uint32_t escape);

// ---- RM classes of the bring-up objects (g_allclasses.h, class/cl*.h) ----------------------

constexpr uint32_t kNv01RootClient = 0x41;                // NV01_ROOT_CLIENT
constexpr uint32_t kNv01Device0 = 0x80;                   // NV01_DEVICE_0
constexpr uint32_t kNv20Subdevice0 = 0x2080;              // NV20_SUBDEVICE_0
constexpr uint32_t kNv01MemorySystem = 0x3e;              // NV01_MEMORY_SYSTEM
constexpr uint32_t kNv01MemoryLocalUser = 0x40;           // NV01_MEMORY_LOCAL_USER
constexpr uint32_t kNv01MemoryVirtual = 0x70;             // NV01_MEMORY_VIRTUAL
constexpr uint32_t kNv01MemorySystemOsDescriptor = 0x71;  // NV01_MEMORY_SYSTEM_OS_DESCRIPTOR
constexpr uint32_t kFermiVaspaceA = 0x90f1;               // FERMI_VASPACE_A
constexpr uint32_t kFermiContextShareA = 0x9067;          // FERMI_CONTEXT_SHARE_A
constexpr uint32_t kKeplerChannelGroupA = 0xa06c;         // KEPLER_CHANNEL_GROUP_A
constexpr uint32_t kGt200Debugger = 0x83de;               // GT200_DEBUGGER

// "KEPLER_CHANNEL_GROUP_A (0xa06c)" for these and the classes of classes.h.
std::string rm_class_name(uint32_t cls);

// ---- escape parameters (nvos.h, nv-ioctl.h, nv-unix-nvos-params-wrappers.h) ----------------

// NVOS00_PARAMETERS (NV_ESC_RM_FREE).
struct Nvos00Parameters {
  uint32_t h_root;
  uint32_t h_object_parent;
  uint32_t h_object_old;
  uint32_t status;
};
static_assert(sizeof(Nvos00Parameters) == 16);
static_assert(offsetof(Nvos00Parameters, status) == 12);

// NVOS02_PARAMETERS (inside NV_ESC_RM_ALLOC_MEMORY's wrapper).
struct Nvos02Parameters {
  uint32_t h_root;
  uint32_t h_object_parent;
  uint32_t h_object_new;
  uint32_t h_class;
  uint32_t flags;
  uint64_t p_memory;
  uint64_t limit;
  uint32_t status;
};
static_assert(sizeof(Nvos02Parameters) == 48);
static_assert(offsetof(Nvos02Parameters, flags) == 16);
static_assert(offsetof(Nvos02Parameters, p_memory) == 24);
static_assert(offsetof(Nvos02Parameters, limit) == 32);
static_assert(offsetof(Nvos02Parameters, status) == 40);

// NVOS02_FLAGS_* for NV01_MEMORY_SYSTEM_OS_DESCRIPTOR: PHYSICALITY 7:4 NONCONTIGUOUS,
// COHERENCY 15:12 CACHED, MAPPING 31:30 NO_MAP.
constexpr uint32_t kNvos02FlagsPhysicalityNoncontiguous = 1u << 4;
constexpr uint32_t kNvos02FlagsCoherencyCached = 1u << 12;
constexpr uint32_t kNvos02FlagsMappingNoMap = 1u << 30;

// nv_ioctl_nvos02_parameters_with_fd.
struct Nvos02ParametersWithFd {
  Nvos02Parameters params;
  int32_t fd;
};
static_assert(sizeof(Nvos02ParametersWithFd) == 56);
static_assert(offsetof(Nvos02ParametersWithFd, fd) == 48);

// NVOS21_PARAMETERS (NV_ESC_RM_ALLOC). h_object_new 0 lets RM pick the handle. RM copies the
// class's own parameter size from p_alloc_parms (it ignores params_size); baregrad sets
// params_size to what it passes, and the fake kernel checks it against the branch.
struct Nvos21Parameters {
  uint32_t h_root;
  uint32_t h_object_parent;
  uint32_t h_object_new;
  uint32_t h_class;
  uint64_t p_alloc_parms;
  uint32_t params_size;
  uint32_t status;
};
static_assert(sizeof(Nvos21Parameters) == 32);
static_assert(offsetof(Nvos21Parameters, p_alloc_parms) == 16);
static_assert(offsetof(Nvos21Parameters, params_size) == 24);
static_assert(offsetof(Nvos21Parameters, status) == 28);

// NVOS33_PARAMETERS (inside NV_ESC_RM_MAP_MEMORY's wrapper).
struct Nvos33Parameters {
  uint32_t h_client;
  uint32_t h_device;
  uint32_t h_memory;
  uint64_t offset;
  uint64_t length;
  uint64_t p_linear_address;
  uint32_t status;
  uint32_t flags;
};
static_assert(sizeof(Nvos33Parameters) == 48);
static_assert(offsetof(Nvos33Parameters, offset) == 16);
static_assert(offsetof(Nvos33Parameters, length) == 24);
static_assert(offsetof(Nvos33Parameters, p_linear_address) == 32);
static_assert(offsetof(Nvos33Parameters, status) == 40);
static_assert(offsetof(Nvos33Parameters, flags) == 44);

// nv_ioctl_nvos33_parameters_with_fd: `fd` is the file the mmap context is attached to (a
// /dev/nvidiaN fd for video memory, a /dev/nvidiactl fd for system memory); mmap it at offset 0.
struct Nvos33ParametersWithFd {
  Nvos33Parameters params;
  int32_t fd;
};
static_assert(sizeof(Nvos33ParametersWithFd) == 56);
static_assert(offsetof(Nvos33ParametersWithFd, fd) == 48);

// NVOS46_PARAMETERS (NV_ESC_RM_MAP_MEMORY_DMA), 570.x: 56 bytes.
struct Nvos46Parameters570 {
  uint32_t h_client;
  uint32_t h_device;
  uint32_t h_dma;
  uint32_t h_memory;
  uint64_t offset;
  uint64_t length;
  uint32_t flags;
  uint64_t dma_offset;
  uint32_t status;
};
static_assert(sizeof(Nvos46Parameters570) == 56);
static_assert(offsetof(Nvos46Parameters570, flags) == 32);
static_assert(offsetof(Nvos46Parameters570, dma_offset) == 40);
static_assert(offsetof(Nvos46Parameters570, status) == 48);

// NVOS46_PARAMETERS, 580.65.06 and later: flags2 and kindOverride before dmaOffset; 64 bytes.
struct Nvos46Parameters580 {
  uint32_t h_client;
  uint32_t h_device;
  uint32_t h_dma;
  uint32_t h_memory;
  uint64_t offset;
  uint64_t length;
  uint32_t flags;
  uint32_t flags2;
  uint32_t kind_override;
  uint64_t dma_offset;
  uint32_t status;
};
static_assert(sizeof(Nvos46Parameters580) == 64);
static_assert(offsetof(Nvos46Parameters580, flags2) == 36);
static_assert(offsetof(Nvos46Parameters580, kind_override) == 40);
static_assert(offsetof(Nvos46Parameters580, dma_offset) == 48);
static_assert(offsetof(Nvos46Parameters580, status) == 56);

// NVOS46_FLAGS_*: CACHE_SNOOP 4:4 ENABLE, PAGE_SIZE 11:8 4KB, DMA_OFFSET_FIXED 15:15 TRUE.
constexpr uint32_t kNvos46FlagsCacheSnoopEnable = 1u << 4;
constexpr uint32_t kNvos46FlagsPageSize4kb = 1u << 8;
constexpr uint32_t kNvos46FlagsDmaOffsetFixedTrue = 1u << 15;

// NVOS54_PARAMETERS (NV_ESC_RM_CONTROL). RM checks params_size against the command's size
// (NV_ERR_INVALID_ARGUMENT otherwise; rmapi/control.c).
struct Nvos54Parameters {
  uint32_t h_client;
  uint32_t h_object;
  uint32_t cmd;
  uint32_t flags;
  uint64_t params;
  uint32_t params_size;
  uint32_t status;
};
static_assert(sizeof(Nvos54Parameters) == 32);
static_assert(offsetof(Nvos54Parameters, params) == 16);
static_assert(offsetof(Nvos54Parameters, params_size) == 24);
static_assert(offsetof(Nvos54Parameters, status) == 28);

// nv_pci_info_t.
struct NvPciInfo {
  uint32_t domain;
  uint8_t bus;
  uint8_t slot;
  uint8_t function;
  uint16_t vendor_id;
  uint16_t device_id;
};
static_assert(sizeof(NvPciInfo) == 12);
static_assert(offsetof(NvPciInfo, vendor_id) == 8);

// nv_ioctl_card_info_t; NV_ESC_CARD_INFO takes an array of them (its size names the count).
struct NvIoctlCardInfo {
  uint8_t valid;  // NvBool
  NvPciInfo pci_info;
  uint32_t gpu_id;
  uint16_t interrupt_line;
  uint64_t reg_address;
  uint64_t reg_size;
  uint64_t fb_address;
  uint64_t fb_size;
  uint32_t minor_number;
  uint8_t dev_name[10];
};
static_assert(sizeof(NvIoctlCardInfo) == 72);
static_assert(offsetof(NvIoctlCardInfo, pci_info) == 4);
static_assert(offsetof(NvIoctlCardInfo, gpu_id) == 16);
static_assert(offsetof(NvIoctlCardInfo, reg_address) == 24);
static_assert(offsetof(NvIoctlCardInfo, fb_size) == 48);
static_assert(offsetof(NvIoctlCardInfo, minor_number) == 56);
static_assert(offsetof(NvIoctlCardInfo, dev_name) == 60);
constexpr int kCardInfoEntries = 64;  // what baregrad asks for (tinygrad's choice)

// nv_ioctl_register_fd_t (NV_ESC_REGISTER_FD on a /dev/nvidiaN fd).
struct NvIoctlRegisterFd {
  int32_t ctl_fd;
};
static_assert(sizeof(NvIoctlRegisterFd) == 4);

// nv_ioctl_rm_api_version_t (NV_ESC_CHECK_VERSION_STR). With cmd QUERY the driver answers
// reply RECOGNIZED and its version string.
struct NvIoctlRmApiVersion {
  uint32_t cmd;
  uint32_t reply;
  char version_string[64];  // NV_RM_API_VERSION_STRING_LENGTH
};
static_assert(sizeof(NvIoctlRmApiVersion) == 72);
static_assert(offsetof(NvIoctlRmApiVersion, version_string) == 8);
constexpr uint32_t kNvRmApiVersionCmdQuery = '2';       // NV_RM_API_VERSION_CMD_QUERY
constexpr uint32_t kNvRmApiVersionReplyRecognized = 1;  // NV_RM_API_VERSION_REPLY_RECOGNIZED

// ---- allocation parameters -----------------------------------------------------------------

// NV0080_ALLOC_PARAMETERS (cl0080.h).
struct Nv0080AllocParameters {
  uint32_t device_id;
  uint32_t h_client_share;
  uint32_t h_target_client;
  uint32_t h_target_device;
  uint32_t flags;
  uint64_t va_space_size;
  uint64_t va_start_internal;
  uint64_t va_limit_internal;
  uint32_t va_mode;
};
static_assert(sizeof(Nv0080AllocParameters) == 56);
static_assert(offsetof(Nv0080AllocParameters, va_space_size) == 24);
static_assert(offsetof(Nv0080AllocParameters, va_mode) == 48);
constexpr uint32_t kNvDeviceAllocationVamodeOptionalMultipleVaspaces = 0;

// NV2080_ALLOC_PARAMETERS (cl2080.h).
struct Nv2080AllocParameters {
  uint32_t sub_device_id;
};
static_assert(sizeof(Nv2080AllocParameters) == 4);

// NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS (cl0070.h).
struct NvMemoryVirtualAllocationParams {
  uint64_t offset;
  uint64_t limit;
  uint32_t h_va_space;
};
static_assert(sizeof(NvMemoryVirtualAllocationParams) == 24);
static_assert(offsetof(NvMemoryVirtualAllocationParams, h_va_space) == 16);

// NV_MEMORY_ALLOCATION_PARAMS (nvos.h), for NV01_MEMORY_LOCAL_USER and NV01_MEMORY_SYSTEM.
struct NvMemoryAllocationParams {
  uint32_t owner;
  uint32_t type;
  uint32_t flags;
  uint32_t width;
  uint32_t height;
  int32_t pitch;
  uint32_t attr;
  uint32_t attr2;
  uint32_t format;
  uint32_t compr_covg;
  uint32_t zcull_covg;
  uint64_t range_lo;
  uint64_t range_hi;
  uint64_t size;
  uint64_t alignment;
  uint64_t offset;
  uint64_t limit;
  uint64_t address;
  uint32_t ctag_offset;
  uint32_t h_va_space;
  uint32_t internalflags;
  uint32_t tag;
  int32_t numa_node;
};
static_assert(sizeof(NvMemoryAllocationParams) == 128);
static_assert(offsetof(NvMemoryAllocationParams, attr) == 24);
static_assert(offsetof(NvMemoryAllocationParams, format) == 32);
static_assert(offsetof(NvMemoryAllocationParams, range_lo) == 48);
static_assert(offsetof(NvMemoryAllocationParams, size) == 64);
static_assert(offsetof(NvMemoryAllocationParams, alignment) == 72);
static_assert(offsetof(NvMemoryAllocationParams, limit) == 88);
static_assert(offsetof(NvMemoryAllocationParams, ctag_offset) == 104);
static_assert(offsetof(NvMemoryAllocationParams, numa_node) == 120);

// NVOS32_* values for NV_MEMORY_ALLOCATION_PARAMS.
constexpr uint32_t kNvos32TypeImage = 0;                            // NVOS32_TYPE_IMAGE
constexpr uint32_t kNvos32TypeNotifier = 13;                        // NVOS32_TYPE_NOTIFIER
constexpr uint32_t kNvos32AllocFlagsIgnoreBankPlacement = 0x1;      // ..._IGNORE_BANK_PLACEMENT
constexpr uint32_t kNvos32AllocFlagsAlignmentForce = 0x100;         // ..._ALIGNMENT_FORCE
constexpr uint32_t kNvos32AllocFlagsMemoryHandleProvided = 0x4000;  // ..._MEMORY_HANDLE_PROVIDED
constexpr uint32_t kNvos32AllocFlagsMapNotRequired = 0x8000;        // ..._MAP_NOT_REQUIRED
constexpr uint32_t kNvos32AllocFlagsPersistentVidmem = 0x10000;     // ..._PERSISTENT_VIDMEM
// NVOS32_ATTR: PAGE_SIZE 24:23 (HUGE 3), LOCATION 26:25 (PCI 1), PHYSICALITY 28:27
// (CONTIGUOUS 2, ALLOW_NONCONTIGUOUS 3).
constexpr uint32_t kNvos32AttrPageSizeHuge = 3u << 23;
constexpr uint32_t kNvos32AttrLocationPci = 1u << 25;
constexpr uint32_t kNvos32AttrPhysicalityContiguous = 2u << 27;
constexpr uint32_t kNvos32AttrPhysicalityAllowNoncontiguous = 3u << 27;
// NVOS32_ATTR2: ZBC 1:0 (PREFER_NO_ZBC 1), GPU_CACHEABLE 3:2 (YES 1, NO 2),
// PAGE_SIZE_HUGE 21:20 (2MB 1).
constexpr uint32_t kNvos32Attr2ZbcPreferNoZbc = 1u << 0;
constexpr uint32_t kNvos32Attr2GpuCacheableYes = 1u << 2;
constexpr uint32_t kNvos32Attr2GpuCacheableNo = 2u << 2;
constexpr uint32_t kNvos32Attr2PageSizeHuge2mb = 1u << 20;
// NV_MEMORY_ALLOCATION_PARAMS.format: tinygrad's value, which works on its GPUs; the headers
// read here do not name it.
constexpr uint32_t kNvMemoryFormat = 6;

// NV_VASPACE_ALLOCATION_PARAMETERS (nvos.h), 570.x: 48 bytes.
struct NvVaspaceAllocationParameters570 {
  uint32_t index;
  uint32_t flags;
  uint64_t va_size;
  uint64_t va_start_internal;
  uint64_t va_limit_internal;
  uint32_t big_page_size;
  uint64_t va_base;
};
static_assert(sizeof(NvVaspaceAllocationParameters570) == 48);
static_assert(offsetof(NvVaspaceAllocationParameters570, big_page_size) == 32);
static_assert(offsetof(NvVaspaceAllocationParameters570, va_base) == 40);

// NV_VASPACE_ALLOCATION_PARAMETERS, 580.65.06 and later: pasid added; 56 bytes.
struct NvVaspaceAllocationParameters580 {
  uint32_t index;
  uint32_t flags;
  uint64_t va_size;
  uint64_t va_start_internal;
  uint64_t va_limit_internal;
  uint32_t big_page_size;
  uint64_t va_base;
  uint32_t pasid;
};
static_assert(sizeof(NvVaspaceAllocationParameters580) == 56);
static_assert(offsetof(NvVaspaceAllocationParameters580, va_base) == 40);
static_assert(offsetof(NvVaspaceAllocationParameters580, pasid) == 48);

constexpr uint32_t kNvVaspaceAllocationFlagsIsExternallyOwned = 1u << 3;   // BIT(3)
constexpr uint32_t kNvVaspaceAllocationFlagsEnablePageFaulting = 1u << 6;  // BIT(6)

// NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS (nvos.h).
struct NvChannelGroupAllocationParameters {
  uint32_t h_object_error;
  uint32_t h_object_ecc_error;
  uint32_t h_va_space;
  uint32_t engine_type;
  uint8_t b_is_calling_context_vgpu_plugin;
};
static_assert(sizeof(NvChannelGroupAllocationParameters) == 20);
static_assert(offsetof(NvChannelGroupAllocationParameters, engine_type) == 12);
constexpr uint32_t kNv2080EngineTypeGraphics = 1;  // NV2080_ENGINE_TYPE_GRAPHICS

// NV_CTXSHARE_ALLOCATION_PARAMETERS (nvos.h).
struct NvCtxshareAllocationParameters {
  uint32_t h_va_space;
  uint32_t flags;
  uint32_t subctx_id;
};
static_assert(sizeof(NvCtxshareAllocationParameters) == 12);
// NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT 1:0 ASYNC.
constexpr uint32_t kNvCtxshareAllocationFlagsSubcontextAsync = 1;

// NV_MEMORY_DESC_PARAMS (alloc/alloc_channel.h).
struct NvMemoryDescParams {
  uint64_t base;
  uint64_t size;
  uint32_t address_space;
  uint32_t cache_attrib;
};
static_assert(sizeof(NvMemoryDescParams) == 24);

// NV_CHANNEL_ALLOC_PARAMS (= NV_CHANNELGPFIFO_ALLOCATION_PARAMETERS, alloc/alloc_channel.h),
// 570.x through 595.x: 368 bytes.
struct NvChannelAllocParams570 {
  uint32_t h_object_error;
  uint32_t h_object_buffer;
  uint64_t gp_fifo_offset;
  uint32_t gp_fifo_entries;
  uint32_t flags;
  uint32_t h_context_share;
  uint32_t h_va_space;
  uint32_t h_userd_memory[8];  // NV_MAX_SUBDEVICES
  uint64_t userd_offset[8];
  uint32_t engine_type;
  uint32_t cid;
  uint32_t sub_device_id;
  uint32_t h_object_ecc_error;
  NvMemoryDescParams instance_mem;
  NvMemoryDescParams userd_mem;
  NvMemoryDescParams ramfc_mem;
  NvMemoryDescParams mthdbuf_mem;
  uint32_t h_phys_channel_group;
  uint32_t internal_flags;
  NvMemoryDescParams error_notifier_mem;
  NvMemoryDescParams ecc_error_notifier_mem;
  uint32_t process_id;
  uint32_t sub_process_id;
  uint32_t encrypt_iv[3];  // CC_CHAN_ALLOC_IV_SIZE_DWORD
  uint32_t decrypt_iv[3];
  uint32_t hmac_nonce[8];  // CC_CHAN_ALLOC_NONCE_SIZE_DWORD
  uint32_t tpc_config_id;
};
static_assert(sizeof(NvChannelAllocParams570) == 368);
static_assert(offsetof(NvChannelAllocParams570, gp_fifo_offset) == 8);
static_assert(offsetof(NvChannelAllocParams570, h_context_share) == 24);
static_assert(offsetof(NvChannelAllocParams570, h_userd_memory) == 32);
static_assert(offsetof(NvChannelAllocParams570, userd_offset) == 64);
static_assert(offsetof(NvChannelAllocParams570, engine_type) == 128);
static_assert(offsetof(NvChannelAllocParams570, instance_mem) == 144);
static_assert(offsetof(NvChannelAllocParams570, h_phys_channel_group) == 240);
static_assert(offsetof(NvChannelAllocParams570, error_notifier_mem) == 248);
static_assert(offsetof(NvChannelAllocParams570, process_id) == 296);
static_assert(offsetof(NvChannelAllocParams570, hmac_nonce) == 328);
static_assert(offsetof(NvChannelAllocParams570, tpc_config_id) == 360);

// NV_CHANNEL_ALLOC_PARAMS, 610.x: hHandleVASpace inserted after hVASpace; 376 bytes.
struct NvChannelAllocParams610 {
  uint32_t h_object_error;
  uint32_t h_object_buffer;
  uint64_t gp_fifo_offset;
  uint32_t gp_fifo_entries;
  uint32_t flags;
  uint32_t h_context_share;
  uint32_t h_va_space;
  uint32_t h_handle_va_space;
  uint32_t h_userd_memory[8];
  uint64_t userd_offset[8];
  uint32_t engine_type;
  uint32_t cid;
  uint32_t sub_device_id;
  uint32_t h_object_ecc_error;
  NvMemoryDescParams instance_mem;
  NvMemoryDescParams userd_mem;
  NvMemoryDescParams ramfc_mem;
  NvMemoryDescParams mthdbuf_mem;
  uint32_t h_phys_channel_group;
  uint32_t internal_flags;
  NvMemoryDescParams error_notifier_mem;
  NvMemoryDescParams ecc_error_notifier_mem;
  uint32_t process_id;
  uint32_t sub_process_id;
  uint32_t encrypt_iv[3];
  uint32_t decrypt_iv[3];
  uint32_t hmac_nonce[8];
  uint32_t tpc_config_id;
};
static_assert(sizeof(NvChannelAllocParams610) == 376);
static_assert(offsetof(NvChannelAllocParams610, h_handle_va_space) == 32);
static_assert(offsetof(NvChannelAllocParams610, h_userd_memory) == 36);
static_assert(offsetof(NvChannelAllocParams610, userd_offset) == 72);
static_assert(offsetof(NvChannelAllocParams610, engine_type) == 136);
static_assert(offsetof(NvChannelAllocParams610, instance_mem) == 152);
static_assert(offsetof(NvChannelAllocParams610, error_notifier_mem) == 256);
static_assert(offsetof(NvChannelAllocParams610, tpc_config_id) == 368);

// NV83DE_ALLOC_PARAMETERS (cl83de.h), for GT200_DEBUGGER (fault reports).
struct Nv83deAllocParameters {
  uint32_t h_debugger_client_obsolete;
  uint32_t h_app_client;
  uint32_t h_class3d_object;
};
static_assert(sizeof(Nv83deAllocParameters) == 12);

// ---- controls ------------------------------------------------------------------------------

// NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2 (ctrl0000gpu.h) on the root client.
constexpr uint32_t kNv0000CtrlCmdGpuGetIdInfoV2 = 0x205;
struct Nv0000CtrlGpuGetIdInfoV2Params {
  uint32_t gpu_id;
  uint32_t gpu_flags;
  uint32_t device_instance;
  uint32_t sub_device_instance;
  uint32_t sli_status;
  uint32_t board_id;
  uint32_t gpu_instance;
  int32_t numa_id;
};
static_assert(sizeof(Nv0000CtrlGpuGetIdInfoV2Params) == 32);
static_assert(offsetof(Nv0000CtrlGpuGetIdInfoV2Params, device_instance) == 8);

// NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2 (ctrl0080gpu.h) on the device. The list holds
// NV0080_CTRL_GPU_CLASSLIST_MAX_SIZE entries: 100 in 570.x, 200 from 580.65.06.
constexpr uint32_t kNv0080CtrlCmdGpuGetClasslistV2 = 0x800292;
template <int N>
struct Nv0080CtrlGpuGetClasslistV2Params {
  uint32_t num_classes;
  uint32_t class_list[N];
};
using Nv0080CtrlGpuGetClasslistV2Params570 = Nv0080CtrlGpuGetClasslistV2Params<100>;
using Nv0080CtrlGpuGetClasslistV2Params580 = Nv0080CtrlGpuGetClasslistV2Params<200>;
static_assert(sizeof(Nv0080CtrlGpuGetClasslistV2Params570) == 404);
static_assert(sizeof(Nv0080CtrlGpuGetClasslistV2Params580) == 804);

// NV2080_CTRL_CMD_GR_GET_INFO (ctrl2080gr.h) on the subdevice; gr_info_list points at
// gr_info_list_size NV2080_CTRL_GR_INFO {index, data} entries (NVXXXX_CTRL_XXX_INFO).
constexpr uint32_t kNv2080CtrlCmdGrGetInfo = 0x20801201;
struct Nv2080CtrlGrInfo {
  uint32_t index;
  uint32_t data;
};
static_assert(sizeof(Nv2080CtrlGrInfo) == 8);
// NV0080_CTRL_GR_ROUTE_INFO (= NV2080_CTRL_GR_ROUTE_INFO).
struct Nv2080CtrlGrRouteInfo {
  uint32_t flags;
  uint64_t route;
};
static_assert(sizeof(Nv2080CtrlGrRouteInfo) == 16);
struct Nv2080CtrlGrGetInfoParams {
  uint32_t gr_info_list_size;
  uint64_t gr_info_list;
  Nv2080CtrlGrRouteInfo gr_route_info;
};
static_assert(sizeof(Nv2080CtrlGrGetInfoParams) == 32);
static_assert(offsetof(Nv2080CtrlGrGetInfoParams, gr_info_list) == 8);
static_assert(offsetof(Nv2080CtrlGrGetInfoParams, gr_route_info) == 16);
// NV2080_CTRL_GR_INFO_INDEX_* (= NV0080_CTRL_GR_INFO_INDEX_*, ctrl0080gr.h).
constexpr uint32_t kGrInfoIndexShaderPipeSubCount = 0x09;  // active TPCs (UVM: tpcCount)
constexpr uint32_t kGrInfoIndexSmVersion = 0x0c;
constexpr uint32_t kGrInfoIndexMaxWarpsPerSm = 0x0d;
constexpr uint32_t kGrInfoIndexLitterNumGpcs = 0x14;
constexpr uint32_t kGrInfoIndexLitterNumTpcPerGpc = 0x17;
constexpr uint32_t kGrInfoIndexLitterNumSmPerTpc = 0x20;

// NV2080_CTRL_CMD_MC_GET_ARCH_INFO (ctrl2080mc.h); values in classes.h.
constexpr uint32_t kNv2080CtrlCmdMcGetArchInfo = 0x20801701;
struct Nv2080CtrlMcGetArchInfoParams {
  uint32_t architecture;
  uint32_t implementation;
  uint32_t revision;
  uint8_t sub_revision;
};
static_assert(sizeof(Nv2080CtrlMcGetArchInfoParams) == 16);

// NV2080_CTRL_CMD_GPU_GET_GID_INFO (ctrl2080gpu.h): with flags FORMAT_BINARY (1:0 = 2) and
// TYPE_SHA1 (2:2 = 0) `data` holds the 16-byte GPU UUID and `length` says 16.
constexpr uint32_t kNv2080CtrlCmdGpuGetGidInfo = 0x2080014a;
constexpr uint32_t kNv2080GpuCmdGpuGetGidFlagsFormatBinary = 2;
struct Nv2080CtrlGpuGetGidInfoParams {
  uint32_t index;
  uint32_t flags;
  uint32_t length;
  uint8_t data[256];  // NV2080_GPU_MAX_GID_LENGTH
};
static_assert(sizeof(Nv2080CtrlGpuGetGidInfoParams) == 268);
static_assert(offsetof(Nv2080CtrlGpuGetGidInfoParams, data) == 12);

// NV2080_CTRL_CMD_GPU_GET_NAME_STRING (ctrl2080gpu.h). Through 590.x the name is a union of
// ascii[64] and unicode (u16[64]): 132 bytes; from 595.44.02 ascii only: 68 bytes.
constexpr uint32_t kNv2080CtrlCmdGpuGetNameString = 0x20800110;
struct Nv2080CtrlGpuGetNameStringParams570 {
  uint32_t gpu_name_string_flags;  // 0: ASCII
  uint8_t ascii[128];              // the union, read as ascii[64]
};
static_assert(sizeof(Nv2080CtrlGpuGetNameStringParams570) == 132);
struct Nv2080CtrlGpuGetNameStringParams595 {
  uint32_t gpu_name_string_flags;
  uint8_t ascii[64];
};
static_assert(sizeof(Nv2080CtrlGpuGetNameStringParams595) == 68);

// NV2080_CTRL_CMD_FB_GET_INFO_V2 (ctrl2080fb.h): fb_info_list holds
// NV2080_CTRL_FB_INFO_MAX_LIST_SIZE entries, 0x39 in 570.x and 0x80 from 580.65.06. Data in KiB.
constexpr uint32_t kNv2080CtrlCmdFbGetInfoV2 = 0x20801303;
template <int N>
struct Nv2080CtrlFbGetInfoV2Params {
  uint32_t fb_info_list_size;
  Nv2080CtrlGrInfo fb_info_list[N];  // NV2080_CTRL_FB_INFO is NVXXXX_CTRL_XXX_INFO too
};
using Nv2080CtrlFbGetInfoV2Params570 = Nv2080CtrlFbGetInfoV2Params<0x39>;
using Nv2080CtrlFbGetInfoV2Params580 = Nv2080CtrlFbGetInfoV2Params<0x80>;
static_assert(sizeof(Nv2080CtrlFbGetInfoV2Params570) == 460);
static_assert(sizeof(Nv2080CtrlFbGetInfoV2Params580) == 1028);
constexpr uint32_t kFbInfoIndexRamSize = 0x07;   // NV2080_CTRL_FB_INFO_INDEX_RAM_SIZE
constexpr uint32_t kFbInfoIndexHeapSize = 0x09;  // NV2080_CTRL_FB_INFO_INDEX_HEAP_SIZE

// NV2080_CTRL_CMD_PERF_BOOST (ctrl2080perf.h): FLAGS CMD 1:0 BOOST_TO_MAX (2), CUDA 4:4 YES,
// CUDA_PRIORITY 6:6 HIGH; duration in seconds (0xffffffff: until the client exits).
constexpr uint32_t kNv2080CtrlCmdPerfBoost = 0x2080200a;
struct Nv2080CtrlPerfBoostParams {
  uint32_t flags;
  uint32_t duration;
};
static_assert(sizeof(Nv2080CtrlPerfBoostParams) == 8);
constexpr uint32_t kPerfBoostFlags = 2u | (1u << 4) | (1u << 6);

// NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN (ctrlc36f.h) on a channel: the doorbell value.
constexpr uint32_t kNvc36fCtrlCmdGpfifoGetWorkSubmitToken = 0xc36f0108;
struct Nvc36fCtrlGpfifoGetWorkSubmitTokenParams {
  uint32_t work_submit_token;
};
static_assert(sizeof(Nvc36fCtrlGpfifoGetWorkSubmitTokenParams) == 4);

// NVA06C_CTRL_CMD_GPFIFO_SCHEDULE (ctrla06c.h) on a channel group; its parameters are
// NVA06F_CTRL_GPFIFO_SCHEDULE_PARAMS (ctrla06fgpfifo.h): {bEnable, bSkipSubmit} in 570.x,
// bSkipEnable added in 575.51.02.
constexpr uint32_t kNva06cCtrlCmdGpfifoSchedule = 0xa06c0101;
struct Nva06cCtrlGpfifoScheduleParams570 {
  uint8_t b_enable;
  uint8_t b_skip_submit;
};
static_assert(sizeof(Nva06cCtrlGpfifoScheduleParams570) == 2);
struct Nva06cCtrlGpfifoScheduleParams580 {
  uint8_t b_enable;
  uint8_t b_skip_submit;
  uint8_t b_skip_enable;
};
static_assert(sizeof(Nva06cCtrlGpfifoScheduleParams580) == 3);

// "NV2080_CTRL_CMD_GR_GET_INFO (0x20801201)" for the commands above.
std::string rm_control_name(uint32_t cmd);

// ---- per-branch sizes (what the driver of branch `b` expects; 0 = not used by baregrad) -----

uint32_t rm_alloc_params_size(RmBranch b, uint32_t cls);
uint32_t rm_control_params_size(RmBranch b, uint32_t cmd);
// The struct size an escape's ioctl request must carry (0: an array, NV_ESC_CARD_INFO).
uint32_t nv_escape_size(RmBranch b, uint32_t escape);

}  // namespace baregrad::nv
