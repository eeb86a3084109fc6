// A fake NVIDIA kernel driver (nvidia.ko's RM escapes and nvidia-uvm.ko) behind hcq::Os: a test
// instrument that the real drivers/nv kernel interface runs against in CI. It keeps fds, an RM
// object tree (clients, devices, memory, channels...), UVM ranges, and answers the escapes,
// controls and UVM ioctls baregrad uses, for a configured driver version (its struct layouts:
// request sizes and parameter sizes are checked against that branch) and GPU generation.
//
// Memory is host memory: every RM memory object is a memfd (or, for OS-descriptor objects, the
// process memory it describes), mapped where the driver asks (CPU mappings through mmap on a
// device fd) and resolvable at its GPU VA (UVM mappings) with resolve(), which is what a fake GPU
// reads and writes through. Anonymous mmaps, munmaps, eventfd and poll go to the real kernel.
//
// README.md describes the contract with the fake GPU (channels, doorbells) and what is modelled.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "drivers/nv/classes.h"
#include "hcq/os.h"

namespace baregrad::mock {

// One fake GPU. preset() gives a plausible part per generation (the numbers are illustrative,
// not read from hardware).
struct FakeNvGpuConfig {
  nv::Generation generation = nv::Generation::kHopper;
  uint32_t architecture = nv::kArchGh100;  // NV2080_CTRL_CMD_MC_GET_ARCH_INFO
  uint32_t implementation = 0;
  std::string name = "NVIDIA H200";
  uint16_t pci_device_id = 0x2335;
  // NV2080_CTRL_CMD_GR_GET_INFO: LITTER_NUM_GPCS/TPC_PER_GPC/SM_PER_TPC, SHADER_PIPE_SUB_COUNT
  // (active TPCs), MAX_WARPS_PER_SM, SM_VERSION.
  uint32_t gpcs = 8, tpc_per_gpc = 9, sm_per_tpc = 2, tpcs = 66;
  uint32_t max_warps_per_sm = 64, sm_version = 0x900;
  uint64_t vram_bytes = 143771ull << 20;  // FB RAM_SIZE; NV01_MEMORY_LOCAL_USER is limited to it
  uint64_t heap_bytes = 143259ull << 20;  // FB HEAP_SIZE
  // Ampere: GA102 (82 SMs, sm_86); Ada: AD102 (128, sm_89); Hopper: GH100 as an H200 (132,
  // sm_90); Blackwell: GB100 as a B200 (148, sm_100).
  static FakeNvGpuConfig preset(nv::Generation g);
};

struct FakeNvConfig {
  std::string driver_version = "580.159.03";  // NV_ESC_CHECK_VERSION_STR and /sys/module
  std::vector<FakeNvGpuConfig> gpus = {FakeNvGpuConfig{}};
  uint32_t perf_boost_status = 0;     // what NV2080_CTRL_CMD_PERF_BOOST answers
  uint32_t mm_initialize_status = 0;  // what UVM_MM_INITIALIZE answers
};

// A GPFIFO channel once its engine object exists: what a fake GPU needs to run it.
struct FakeNvChannel {
  int gpu = 0;
  uint32_t handle = 0;
  uint32_t gpfifo_class = 0;
  uint32_t engine_class = 0;  // the compute or copy class allocated on it
  bool compute = false;
  uint32_t token = 0;           // its work-submit token
  uint64_t ring_va = 0;         // gpFifoOffset
  uint32_t entries = 0;         // gpFifoEntries
  uint64_t userd_va = 0;        // GPU VA of hUserdMemory[0] (its DMA mapping) + userdOffset[0]
  bool scheduled = false;       // its channel group got NVA06C_CTRL_CMD_GPFIFO_SCHEDULE
  uint32_t error_notifier = 0;  // hObjectError: the memory raise_fault() writes
};

// A fault as RM reports it after the GPU stopped a channel (raise_fault()).
struct FakeNvMmuFault {
  uint64_t address = 0;
  uint32_t fault_type = 0;   // NV_PFAULT_FAULT_TYPE_*
  uint32_t access_type = 0;  // NV_PFAULT_ACCESS_TYPE_*
};
struct FakeNvSmError {
  uint32_t sm = 0;  // which SM's NV83DE_SM_ERROR_STATE_REGISTERS hold it
  uint32_t global_esr = 0, warp_esr = 0;
  uint64_t pc = 0;  // hwwWarpEsrPc64 (and its low half in hwwWarpEsrPc)
};
struct FakeNvFault {
  uint32_t rc = 0;           // the ROBUST_CHANNEL_* code: the notifier's info32
  uint16_t engine = 0;       // the NV2080_ENGINE_TYPE_* that faulted: the notifier's info16
  bool whole_group = false;  // notify every channel of the group (RM does for MMU faults)
  std::optional<FakeNvMmuFault> mmu{};  // for NV83DE_CTRL_CMD_DEBUG_READ_MMU_FAULT_INFO
  std::optional<FakeNvSmError> sm{};    // for NV83DE_CTRL_CMD_DEBUG_READ_ALL_SM_ERROR_STATES
};

// An RM memory object.
struct FakeNvAllocation {
  int gpu = 0;
  uint32_t handle = 0;
  uint32_t cls = 0;  // NV01_MEMORY_LOCAL_USER, NV01_MEMORY_SYSTEM, ..._OS_DESCRIPTOR
  uint64_t size = 0;
  std::optional<uint64_t> gpu_va;  // where UVM maps it
  std::optional<uint64_t> cpu_va;  // where a device-fd mmap put it
};

class FakeNvKernel final : public hcq::Os {
 public:
  explicit FakeNvKernel(FakeNvConfig config = {});
  ~FakeNvKernel() override;
  FakeNvKernel(const FakeNvKernel&) = delete;
  FakeNvKernel& operator=(const FakeNvKernel&) = delete;

  // ---- hcq::Os --------------------------------------------------------------------------------
  Result<int> open(const std::string& path, int flags) override;
  Status close(int fd) override;
  Status ioctl(int fd, unsigned long request, void* arg, std::string_view what) override;
  Result<void*> mmap(void* addr, size_t len, int prot, int flags, int fd, off_t offset) override;
  Status munmap(void* addr, size_t len) override;
  Result<std::string> read_file(const std::string& path) override;
  Result<std::vector<std::string>> list_dir(const std::string& path) override;
  Result<int> eventfd(unsigned initval, int flags) override;
  Result<int> poll(int fd, short events, int timeout_ms) override;
  // What a device's waits call between polls: the on_progress() hook (nothing without one).
  void progress() override;

  const FakeNvConfig& config() const;

  // ---- what a fake GPU and tests read (thread-safe) ---------------------------------------------
  // The host address of GPU VAs [va, va + bytes) when one UVM-mapped allocation holds them all.
  std::optional<uint8_t*> resolve(uint64_t va, size_t bytes) const;
  std::vector<FakeNvAllocation> allocations() const;
  std::vector<FakeNvChannel> channels() const;
  // GPU `gpu`'s usermode page (64 KiB of host memory; the doorbell is at +0x90).
  uint8_t* usermode_page(int gpu) const;
  // Explanations of the requests the fake refused or failed, oldest first.
  std::vector<std::string> log() const;

  // ---- the fake GPU's hooks (called without the kernel's lock held) ----------------------------
  // A channel became runnable (its engine object was allocated) / was freed.
  void on_channel(std::function<void(const FakeNvChannel&)> added,
                  std::function<void(const FakeNvChannel&)> removed);
  // Doorbells: called with the GPU and the token the driver wrote to NOTIFY_CHANNEL_PENDING.
  void on_doorbell(std::function<void(int gpu, uint32_t token)> hook);
  // Reads and clears each GPU's NOTIFY_CHANNEL_PENDING (an atomic exchange with 0xffffffff);
  // for each written token calls the doorbell hook. Returns how many it found. The mock device
  // calls this from its progress() hook: doorbell writes are plain stores nothing can trap.
  int poll_doorbells();
  // Called by progress(): a fake GPU runs here (it has no thread of its own).
  void on_progress(std::function<void()> hook);

  // ---- channel errors (what RM does after a GPU fault interrupt) -------------------------------
  // The channel with work-submit token `token` faulted: records `f.mmu` and `f.sm` in its
  // channel group's GR context (the state the GT200_DEBUGGER controls read), then writes the
  // error notifier entry (NV_CHANNELGPFIFO_NOTIFICATION_TYPE_ERROR) of the channel, or of every
  // channel of the group, the way RM's krcErrorSetNotifier does: info16, info32, the time, and
  // status 0xffff last. While a debugger of the group takes FATAL exceptions (its exception
  // mask; ALL until NV83DE_CTRL_CMD_DEBUG_SET_EXCEPTION_MASK) RC is deferred: nothing is
  // written. NotFound for an unknown token.
  Status raise_fault(uint32_t token, const FakeNvFault& f);

  // ---- fault and failure injection ------------------------------------------------------------
  // The next `count` NV escapes `escape` (kNvEscRm*) fail with RM status `rm_status` in their
  // status field, without doing anything.
  void fail_escape(uint32_t escape, uint32_t rm_status, int count = 1);
  // The next `count` NV_ESC_RM_ALLOCs of class `cls` fail with `rm_status`.
  void fail_alloc(uint32_t cls, uint32_t rm_status, int count = 1);
  // The next `count` NV_ESC_RM_CONTROLs of `cmd` fail with `rm_status`.
  void fail_control(uint32_t cmd, uint32_t rm_status, int count = 1);
  // The next `count` UVM ioctls `request` fail with `rm_status` in rmStatus.
  void fail_uvm(unsigned long request, uint32_t rm_status, int count = 1);
  // The next `count` ioctls with ioctl number `nr` (an escape, or a UVM request) fail with
  // errno `err` (the request is not looked at).
  void fail_ioctl_errno(unsigned long nr, int err, int count = 1);
  // open(path) fails with ENOENT (missing) or `err` (EACCES, EPERM...); 0 clears it.
  void set_missing(const std::string& path, bool missing = true);
  void set_open_errno(const std::string& path, int err);

  struct State;  // fake_nv_state.h

 private:
  std::unique_ptr<State> s_;
};

}  // namespace baregrad::mock
