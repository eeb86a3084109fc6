// The fake NVIDIA kernel's state: fds, RM clients and objects, UVM ranges, GPUs, injections.
// Internal to drivers/mock/nv; every member is guarded by State::mu.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "drivers/mock/nv/fake_nv_kernel.h"
#include "drivers/nv/rm_abi.h"
#include "drivers/nv/uvm_abi.h"

namespace baregrad::mock {

// The host memory behind an RM memory object: a memfd mapped once by the fake (`host`), or the
// process memory an OS-descriptor object describes (memfd -1, not owned).
struct FakeBacking {
  int memfd = -1;
  uint8_t* host = nullptr;
  uint64_t size = 0;
  ~FakeBacking();
  // A zero-filled memfd of `size` bytes (pages appear when touched).
  static Result<std::shared_ptr<FakeBacking>> create(uint64_t size, const std::string& name);
};

enum class ObjKind : uint8_t {
  kClient,
  kDevice,
  kSubdevice,
  kMemory,
  kVirtmem,
  kVaspace,
  kUsermode,
  kChannelGroup,
  kCtxshare,
  kChannel,
  kEngine,
  kDebugger,
};

struct FakeObject {
  uint32_t handle = 0, parent = 0, cls = 0;
  ObjKind kind = ObjKind::kClient;
  int gpu = -1;
  std::vector<uint32_t> children{};
  std::shared_ptr<FakeBacking> mem{};  // memory and usermode objects
  std::optional<uint64_t> dma_va{};    // NV_ESC_RM_MAP_MEMORY_DMA (memory objects)
  std::optional<uint64_t> cpu_va{};    // the last device-fd mmap of it
  uint32_t vaspace_flags = 0;          // FERMI_VASPACE_A
  uint32_t vaspace = 0;                // FERMI_CONTEXT_SHARE_A: its VA space
  FakeNvChannel channel{};             // channels
  bool has_engine = false;             // channels: an engine object was allocated on it
  uint32_t exception_mask = nv::kNv83deCtrlDebugSetExceptionMaskAll;  // debuggers
  uint32_t debug_target = 0;  // debuggers: hClass3dObject (a compute object)
  // Channel groups: the GR context's fault state (raise_fault(), the debugger controls).
  std::vector<FakeNvMmuFault> mmu_faults{};  // oldest first, the last 4
  bool mmu_fault_valid = false;
  uint32_t mmu_fault_info = 0;
  std::map<uint32_t, FakeNvSmError> sm_errors{};  // by SM
};

struct FakeClient {
  int ctl_fd = -1;                         // the /dev/nvidiactl fd that allocated it
  std::map<uint32_t, FakeObject> objects;  // the client itself included
  uint32_t next_handle = 0xcaf00000;       // RS_UNIQUE_HANDLE_BASE
};

enum class FdKind : uint8_t { kCtl, kDevice, kUvm };

// What NV_ESC_RM_MAP_MEMORY attached to a file; the next mmap of that file maps it.
struct MmapContext {
  std::shared_ptr<FakeBacking> mem;
  uint64_t length = 0;
  uint32_t client = 0, handle = 0;
};

struct FakeFd {
  FdKind kind = FdKind::kCtl;
  int gpu = -1;  // kDevice
  std::string path;
  int registered_ctl = -1;  // NV_ESC_REGISTER_FD
  std::optional<MmapContext> ctx;
  bool uvm_initialized = false;
};

// A UVM range: an external range (resolvable once mapped) or a channel's registered range.
struct UvmRange {
  uint64_t base = 0, length = 0;
  bool channel = false;
  std::shared_ptr<FakeBacking> mem{};  // set by UVM_MAP_EXTERNAL_ALLOCATION
  uint64_t offset = 0;
  uint32_t client = 0, handle = 0;
  int gpu = -1;
};

struct FakeGpuState {
  FakeNvGpuConfig cfg;
  uint32_t gpu_id = 0;
  nv::NvProcessorUuid uuid{};
  std::shared_ptr<FakeBacking> usermode;  // the doorbell page
  uint64_t vram_used = 0;
  bool uvm_registered = false;
  uint32_t uvm_vaspace = 0;  // the registered FERMI_VASPACE_A, 0 when none
  uint32_t uvm_vaspace_client = 0;
};

// The classes NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2 reports for `g` (fake_nv_rm.cc).
std::vector<uint32_t> fake_class_list(const FakeNvGpuConfig& g);

struct FailRule {
  enum class Kind : uint8_t { kEscape, kAlloc, kControl, kUvm, kErrno } kind;
  uint64_t key = 0;
  uint32_t status = 0;
  int err = 0;
  int count = 1;
};

struct FakeNvKernel::State {
  FakeNvConfig cfg;
  std::optional<nv::RmBranch> branch;  // nullopt for an unsupported version
  mutable std::shared_mutex mu;
  std::map<int, FakeFd> fds;
  int next_fd = 1 << 20;  // far above any real fd
  std::map<uint32_t, FakeClient> clients;
  uint32_t next_client = 0xc1d00001;  // RS_CLIENT_HANDLE_BASE + 1
  std::map<uint64_t, UvmRange> uvm;   // by base
  int uvm_fd = -1;                    // the fd whose VA space the ranges belong to
  std::vector<FakeGpuState> gpus;
  std::vector<FailRule> rules;
  std::map<std::string, int> open_errors;
  std::vector<std::string> log;
  uint32_t next_token = 1;
  std::function<void(const FakeNvChannel&)> channel_added, channel_removed;
  std::function<void(int, uint32_t)> doorbell;
  std::function<void()> progress;
  std::vector<std::function<void()>> pending;  // hook calls, run once the lock is dropped

  // The rule of `kind` for `key` that fires now (its count is consumed), if any.
  std::optional<FailRule> take_rule(FailRule::Kind kind, uint64_t key);
  void note(std::string what) { log.push_back(std::move(what)); }

  // ---- RM (fake_nv_rm.cc) ----
  FakeObject* find(uint32_t client, uint32_t handle);
  // Dispatches an NV escape on `fd`; returns the errno (0: done, status in the struct).
  int rm_escape(int fd, FakeFd& f, uint32_t escape, void* arg, size_t size);
  uint32_t rm_alloc(int fd, nv::Nvos21Parameters& p);
  uint32_t rm_control(int fd, nv::Nvos54Parameters& p);
  uint32_t rm_free(int fd, const nv::Nvos00Parameters& p);
  uint32_t rm_alloc_memory(FakeFd& f, nv::Nvos02ParametersWithFd& p);
  uint32_t rm_map_memory(int fd, nv::Nvos33ParametersWithFd& p);
  uint32_t rm_map_memory_dma(int fd, void* arg);
  void free_object(FakeClient& c, uint32_t handle);
  uint32_t control_device(FakeObject& o, uint32_t cmd, void* params);
  uint32_t control_subdevice(FakeObject& o, uint32_t cmd, void* params);
  // The GT200_DEBUGGER controls (fake_nv_fault.cc).
  uint32_t control_debugger(FakeClient& c, FakeObject& o, uint32_t cmd, void* params);
  // The channel group of debugger `o`'s target, or null.
  FakeObject* debugger_group(FakeClient& c, const FakeObject& o);
  uint32_t alloc_check(FakeClient& c, const nv::Nvos21Parameters& p, FakeObject& obj);
  uint32_t alloc_channel(FakeClient& c, const nv::Nvos21Parameters& p, FakeObject& obj);
  void free_clients_of(int ctl_fd);

  // ---- UVM (fake_nv_uvm.cc) ----
  int uvm_ioctl(int fd, FakeFd& f, unsigned long request, void* arg);
  uint32_t uvm_dispatch(int fd, FakeFd& f, unsigned long request, void* arg);
  int gpu_of_uuid(const nv::NvProcessorUuid& uuid) const;
  bool overlaps(uint64_t base, uint64_t length) const;
};

}  // namespace baregrad::mock
