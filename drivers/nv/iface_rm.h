// The NVIDIA kernel interface: every ioctl the NV driver makes, to the resource manager (RM,
// /dev/nvidiactl and /dev/nvidiaN) and to nvidia-uvm (/dev/nvidia-uvm), through an hcq::Os.
//
// RmIface is the process's connection (one per process, shared by its GPUs): the control and
// UVM fds, the driver branch (which selects struct layouts), the root client, the GPU list and
// the reserved VA ranges. RmGpu is one GPU brought up through it, as a library of steps; run
// in order by bring_up(), they produce a BringUp (handles, classes, GR and memory facts, the
// usermode doorbell page, a compute and a copy channel) that NvDevice consumes:
//
//   open ctl, check version, root client, open uvm x2, UVM_INITIALIZE, UVM_MM_INITIALIZE,
//   CARD_INFO, reserve VA                                            (RmIface::open)
//   open /dev/nvidiaN + REGISTER_FD, GPU_GET_ID_INFO_V2               (RmGpu::open)
//   NV01_DEVICE_0, NV20_SUBDEVICE_0, MC_GET_ARCH_INFO + GET_CLASSLIST_V2, NV01_MEMORY_VIRTUAL,
//   usermode object + its page mapped, PERF_BOOST (may fail), FERMI_VASPACE_A, GET_GID_INFO,
//   UVM_REGISTER_GPU + UVM_REGISTER_GPU_VASPACE, GR / FB / name queries, KEPLER_CHANNEL_GROUP_A,
//   GPFIFO area, FERMI_CONTEXT_SHARE_A, compute channel (error notifier + its CPU mapping,
//   channel, compute object, GT200_DEBUGGER + SET_EXCEPTION_MASK NONE, token,
//   UVM_REGISTER_CHANNEL), copy channel (the same without the debugger),
//   NVA06C_CTRL_CMD_GPFIFO_SCHEDULE                                   (bring_up)
//
// Errors name the call: "NV_ESC_RM_ALLOC of HOPPER_CHANNEL_GPFIFO_A (0xc86f) under handle
// 0xcaf0000b: NV_ERR_INVALID_ARGUMENT (0x1f): invalid argument".
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "drivers/nv/classes.h"
#include "drivers/nv/rm_abi.h"
#include "drivers/nv/uvm_abi.h"
#include "drivers/nv/va_range.h"
#include "hcq/os.h"

namespace baregrad::nv {

constexpr const char* kNvCtlPath = "/dev/nvidiactl";
constexpr const char* kNvUvmPath = "/dev/nvidia-uvm";
constexpr const char* kNvVersionPath = "/sys/module/nvidia/version";
// "/dev/nvidia<minor>".
std::string nv_device_path(uint32_t minor);

// Where the fixed VA ranges go. CPU-visible buffers (signals, rings, kernel arguments) come from
// the low range, which stays below 2^40 so AMPERE_CHANNEL_GPFIFO_A semaphores can address it;
// everything else from the high range. tinygrad's bases; the sizes are baregrad's.
struct RmVaOptions {
  uint64_t low_base = 0x10'0000'0000;
  uint64_t low_size = 64ull << 30;
  uint64_t low_limit = 1ull << 40;
  uint64_t high_base = 0x20'0000'0000;
  uint64_t high_size = 8ull << 40;
  uint64_t high_limit = 1ull << 47;
};

// One GPU as NV_ESC_CARD_INFO lists it.
struct RmCard {
  uint32_t gpu_id = 0;
  uint32_t minor_number = 0;
  NvPciInfo pci{};
  uint64_t fb_size = 0;  // BAR1 aperture size as the driver reports it
};

class RmIface {
 public:
  // Opens /dev/nvidiactl, reads the driver version (NV_ESC_CHECK_VERSION_STR, else
  // /sys/module/nvidia/version) and picks its layouts, allocates the root client, opens
  // /dev/nvidia-uvm twice (UVM_INITIALIZE; UVM_MM_INITIALIZE, whose failure is tolerated as
  // CUDA does), lists the GPUs and reserves the VA ranges.
  static Result<std::unique_ptr<RmIface>> open(hcq::Os& os, RmVaOptions va = {});
  // Frees the root client (and so every object of every GPU) and closes the fds.
  ~RmIface();
  RmIface(const RmIface&) = delete;
  RmIface& operator=(const RmIface&) = delete;

  hcq::Os& os() const { return os_; }
  RmBranch branch() const { return branch_; }
  const std::string& driver_version() const { return version_; }
  uint32_t root() const { return root_; }
  int ctl_fd() const { return ctl_.get(); }
  int uvm_fd() const { return uvm_.get(); }
  // The GPUs the driver lists (valid NV_ESC_CARD_INFO entries), in its order.
  const std::vector<RmCard>& cards() const { return cards_; }
  VaRange& low_va() { return *low_va_; }
  VaRange& high_va() { return *high_va_; }

  // ---- primitives: one ioctl each; errors name the call, the class or command and handles ----

  // NV_ESC_RM_ALLOC (NVOS21) of `cls` under `parent` with `params` (params_size bytes, or none);
  // returns the handle RM assigned.
  Result<uint32_t> alloc(uint32_t parent, uint32_t cls, const void* params, uint32_t params_size);
  template <class P>
  Result<uint32_t> alloc(uint32_t parent, uint32_t cls, const P& params) {
    return alloc(parent, cls, &params, sizeof(P));
  }
  // NV_ESC_RM_CONTROL (NVOS54) `cmd` on `object`; `params` is read and written.
  Status control(uint32_t object, uint32_t cmd, void* params, uint32_t params_size);
  template <class P>
  Status control(uint32_t object, uint32_t cmd, P& params) {
    return control(object, cmd, &params, sizeof(P));
  }
  // NV_ESC_RM_FREE (NVOS00) of `object` under `parent`; freeing an object frees its children.
  Status free(uint32_t parent, uint32_t object);
  // A UVM ioctl on the first UVM fd (or `fd`); `what` names it with its arguments.
  Status uvm(
      unsigned long request, void* params, size_t size, const std::string& what, int fd = -1);
  // An NV escape on `fd` (_IOWR('F', escape, bytes)); errors name `what`.
  Status escape(int fd, uint32_t escape, void* arg, size_t bytes, const std::string& what);
  // A handle for objects whose handle the client picks (NV_ESC_RM_ALLOC_MEMORY).
  uint32_t next_client_handle() { return next_client_handle_++; }

 private:
  RmIface(hcq::Os& os, hcq::Fd ctl);
  Status check_version();
  Status open_uvm();
  Status read_cards();

  hcq::Os& os_;
  hcq::Fd ctl_, uvm_, uvm_mm_;
  RmBranch branch_ = RmBranch::k580;
  std::string version_;
  uint32_t root_ = 0;
  std::vector<RmCard> cards_;
  std::unique_ptr<VaRange> low_va_, high_va_;
  std::atomic<uint32_t> next_client_handle_{0x00b00001};
};

// What NV2080_CTRL_CMD_GR_GET_INFO says about the SMs.
struct RmGrInfo {
  uint32_t gpcs = 0;         // LITTER_NUM_GPCS (the chip's, before floorsweeping)
  uint32_t tpc_per_gpc = 0;  // LITTER_NUM_TPC_PER_GPC
  uint32_t sm_per_tpc = 0;   // LITTER_NUM_SM_PER_TPC
  uint32_t tpcs = 0;         // SHADER_PIPE_SUB_COUNT: the active TPCs
  uint32_t sms = 0;          // tpcs * sm_per_tpc
  uint32_t max_warps_per_sm = 0;
  uint32_t sm_version = 0;  // NV2080_CTRL_GR_INFO_SM_VERSION_*: 0x900 for sm_90
};
// "sm_90" for 0x900, "sm_86" for 0x806, "sm_120" for 0xa04 (tinygrad's special case).
std::string sm_arch_name(uint32_t sm_version);

enum class RmMemoryKind : uint8_t {
  kVideo,   // NV01_MEMORY_LOCAL_USER: GPU memory (CPU access through BAR1)
  kSystem,  // NV01_MEMORY_SYSTEM: uncached system memory owned by RM
  kHost,    // NV01_MEMORY_SYSTEM_OS_DESCRIPTOR: pinned process memory (anonymous, shared)
};
std::string_view memory_kind_name(RmMemoryKind k);

struct RmMemoryRequest {
  uint64_t size = 0;
  RmMemoryKind kind = RmMemoryKind::kVideo;
  bool cpu_access = false;  // map into the CPU at the GPU VA (kHost always is)
  bool contiguous = false;  // physically contiguous (kVideo, kSystem)
};

// One allocation: GPU VA == CPU VA; `cpu_mapped` says whether the CPU can touch it.
struct RmAllocation {
  uint32_t handle = 0;
  uint64_t va = 0;
  uint64_t size = 0;  // rounded up to page_size
  uint32_t page_size = 0;
  RmMemoryKind kind = RmMemoryKind::kVideo;
  bool cpu_mapped = false;
  void* cpu() const { return cpu_mapped ? reinterpret_cast<void*>(va) : nullptr; }
};

// A GPFIFO channel: its ring and USERD live in the GPFIFO area (CPU-mapped video memory).
struct RmChannel {
  uint32_t handle = 0;
  uint32_t gpfifo_class = 0;
  uint32_t engine_object = 0;  // the compute or copy object on subchannel 1 or 4
  uint32_t engine_class = 0;
  uint32_t work_submit_token = 0;  // the doorbell value
  uint32_t entries = 0;
  uint64_t ring_va = 0;   // entries * 8 bytes of GP entries
  uint64_t userd_va = 0;  // the 512-byte USERD (GPGet/GPPut) right after the ring
  RmAllocation error_notifier;
  // Its first kErrorNotifierMapBytes mapped into the CPU (elsewhere than its GPU VA): the
  // NvNotification entries RM writes when it stops the channel.
  uint8_t* error_notifier_cpu = nullptr;
};

// What RM wrote into a channel's error notifier (NvNotification, rm_abi_fault.h).
struct RmErrorNotifier {
  uint16_t status = 0;  // 0: no error (RM writes 0xffff)
  uint16_t info16 = 0;  // NV2080_ENGINE_TYPE_* of the engine that faulted
  uint32_t info32 = 0;  // the ROBUST_CHANNEL_* error code
  uint64_t timestamp_ns = 0;
};

// One entry of NV83DE_CTRL_CMD_DEBUG_READ_MMU_FAULT_INFO.
struct RmMmuFault {
  uint64_t address = 0;
  uint32_t fault_type = 0;   // NV_PFAULT_FAULT_TYPE_*
  uint32_t access_type = 0;  // NV_PFAULT_ACCESS_TYPE_*
};

// One SM whose error state (NV83DE_SM_ERROR_STATE_REGISTERS) has an ESR set.
struct RmSmError {
  uint32_t sm = 0;
  uint32_t global_esr = 0, warp_esr = 0;
  uint64_t warp_pc = 0;  // hwwWarpEsrPc64
};

// What NV83DE_CTRL_CMD_DEBUG_READ_ALL_SM_ERROR_STATES says about a channel's GR context.
struct RmSmErrors {
  bool mmu_fault = false;  // mmuFault.valid: READ_MMU_FAULT_INFO has the addresses
  uint32_t mmu_fault_info = 0;
  std::vector<RmSmError> errors;  // by SM
};

struct BringUpOptions {
  uint32_t gpfifo_entries = 0x10000;            // per channel (a power of two, >= 512)
  uint64_t error_notifier_bytes = 48ull << 20;  // per channel; tinygrad's size
  bool perf_boost = true;                       // NV2080_CTRL_CMD_PERF_BOOST (failure logged)
};

// Everything the bring-up learned and allocated.
struct BringUp {
  int index = 0;  // in RmIface::cards()
  RmCard card;
  uint32_t device_instance = 0;
  // RM handles.
  uint32_t device = 0, subdevice = 0, virtmem = 0, usermode = 0, vaspace = 0;
  uint32_t channel_group = 0, ctxshare = 0, debugger = 0;
  // Classes.
  GpuClasses classes{};
  std::vector<uint32_t> class_list;  // NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2
  // Facts.
  NvProcessorUuid uuid{};
  std::string name;  // "NVIDIA H200"
  RmGrInfo gr;
  std::string arch;               // "sm_90"
  uint64_t vram_bytes = 0;        // FB_INFO RAM_SIZE
  uint64_t heap_bytes = 0;        // FB_INFO HEAP_SIZE: what allocations can use
  void* usermode_page = nullptr;  // kUsermodeBytes; the doorbell is at kDoorbellOffset
  RmAllocation gpfifo_area;
  RmChannel compute, copy;
};

class RmGpu {
 public:
  // Opens /dev/nvidia<minor> of iface.cards()[index], registers it with the control fd and
  // reads the GPU's device instance.
  static Result<std::unique_ptr<RmGpu>> open(RmIface& iface, int index);
  // Frees what the steps allocated (channels, memory, objects) and unregisters from UVM.
  ~RmGpu();
  RmGpu(const RmGpu&) = delete;
  RmGpu& operator=(const RmGpu&) = delete;

  RmIface& iface() const { return iface_; }
  const BringUp& info() const { return info_; }
  int device_fd() const { return dev_.get(); }

  // ---- the steps, in bring-up order ----
  Status alloc_device();     // NV01_DEVICE_0 under the root client
  Status alloc_subdevice();  // NV20_SUBDEVICE_0 under the device
  Status query_classes();    // MC_GET_ARCH_INFO -> classes.h; all of them in GET_CLASSLIST_V2
  Status alloc_virtmem();    // NV01_MEMORY_VIRTUAL: target of NV_ESC_RM_MAP_MEMORY_DMA
  Status setup_usermode();   // the usermode object and a CPU mapping of its doorbell page
  Status perf_boost();       // NV2080_CTRL_CMD_PERF_BOOST
  Status alloc_vaspace();    // FERMI_VASPACE_A, externally owned (by UVM), page faulting
  Status register_uvm();     // GET_GID_INFO (the UUID), UVM_REGISTER_GPU(_VASPACE)
  Status query_info();       // GR info (SMs, sm_version), FB sizes, the name
  Status alloc_channel_group(const BringUpOptions& opts);  // TSG, GPFIFO area, ctxshare
  // A channel in the group at `slot` of the GPFIFO area with its error notifier (the first page
  // CPU-mapped), engine object (compute: also GT200_DEBUGGER, its exception mask set to NONE so
  // that RM runs RC recovery and writes the notifiers; a refusal is logged), work-submit token
  // and UVM registration.
  Result<RmChannel> alloc_channel(bool compute, int slot, const BringUpOptions& opts);
  Status schedule();  // NVA06C_CTRL_CMD_GPFIFO_SCHEDULE on the channel group

  // ---- memory (thread-safe) ----
  // Allocates, maps into the CPU (cpu_access or kHost) at the GPU VA, and maps into the GPU
  // (UVM_CREATE_EXTERNAL_RANGE, NV_ESC_RM_MAP_MEMORY_DMA, UVM_MAP_EXTERNAL_ALLOCATION). On
  // failure nothing stays allocated.
  Result<RmAllocation> alloc_memory(const RmMemoryRequest& req);
  // Unmaps from the GPU (UVM_FREE) and the CPU (the VA is reserved again), frees the RM object
  // and returns the VA. Every step runs; the first error is returned.
  Status free_memory(const RmAllocation& a);

  // ---- fault reports (thread-safe) ----
  // The status of `ch`'s error notifier entry (NV_CHANNELGPFIFO_NOTIFICATION_TYPE_ERROR): 0
  // until RM stops the channel. One 16-bit load (acquire), cheap enough for every poll.
  static uint16_t error_status(const RmChannel& ch);
  // The whole entry; fields other than status are meaningful once status is non-zero.
  static RmErrorNotifier read_error_notifier(const RmChannel& ch);
  // NV83DE_CTRL_CMD_DEBUG_READ_ALL_SM_ERROR_STATES on the debugger for channel `ch`, over every
  // SM in pages of NV83DE_CTRL_DEBUG_MAX_SMS_PER_CALL.
  Result<RmSmErrors> read_sm_errors(const RmChannel& ch);
  // NV83DE_CTRL_CMD_DEBUG_READ_MMU_FAULT_INFO on the debugger: the MMU faults RM recorded for
  // the debugger's GR context, oldest first.
  Result<std::vector<RmMmuFault>> read_mmu_faults();

 private:
  RmGpu(RmIface& iface, int index, hcq::Fd dev);
  friend Result<std::unique_ptr<RmGpu>> bring_up(RmIface&, int, const BringUpOptions&);
  Result<hcq::Fd> open_device_fd();
  Result<void*> map_to_cpu(uint32_t handle, uint64_t bytes, void* at, bool system);
  Status map_to_gpu(const RmAllocation& a);
  Status uvm_free(uint64_t va, uint64_t bytes);
  std::string where() const;  // "GPU 0 (/dev/nvidia0)"

  RmIface& iface_;
  hcq::Fd dev_;
  BringUp info_;
  hcq::Mapping usermode_map_;
  std::vector<hcq::Mapping> notifier_maps_;  // the channels' error_notifier_cpu
  bool uvm_gpu_ = false, uvm_vaspace_ = false;
  uint64_t gpfifo_stride_ = 0;       // bytes per channel slot in the GPFIFO area
  std::vector<RmAllocation> owned_;  // the GPFIFO area and error notifiers
  std::vector<std::pair<uint64_t, uint64_t>> channel_va_;  // UVM_REGISTER_CHANNEL ranges
};

// Opens GPU `index` and runs every step in order.
Result<std::unique_ptr<RmGpu>> bring_up(RmIface& iface, int index, const BringUpOptions& opts = {});

}  // namespace baregrad::nv
