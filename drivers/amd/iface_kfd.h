// The AMD kernel interface: every ioctl the AMD driver makes, to amdgpu's KFD (/dev/kfd) and
// its render node, through an hcq::Os. KfdIface is one GPU opened through KFD:
//
//   open /dev/kfd, read the sysfs topology, AMDKFD_IOC_GET_VERSION (>= 1.14), open
//   /dev/dri/renderD<minor>, AMDKFD_IOC_ACQUIRE_VM, AMDKFD_IOC_RUNTIME_ENABLE     (open)
//   reserve VA, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, mmap the render node at the VA,
//   AMDKFD_IOC_MAP_MEMORY_TO_GPU; undone in reverse order                           (alloc)
//   AMDKFD_IOC_CREATE_QUEUE, the doorbell page mapped once from /dev/kfd            (create_queue)
//   AMDKFD_IOC_CREATE_EVENT (the first passes the event page), _SET_EVENT, _WAIT_EVENTS
//
// GPU VA == CPU VA for every allocation. Resources are RAII objects that must not outlive the
// KfdIface that made them. Errors name the call: "KFD alloc of 0x1000 bytes of VRAM
// (CPU-visible) on AMD GPU 0 (gpu_id 0x5a10, gfx1100): ioctl AMDKFD_IOC_ALLOC_MEMORY_OF_GPU
// (request 0xc0284b16) on fd 3 failed: errno 12 (Cannot allocate memory)".
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"
#include "drivers/amd/kfd_abi.h"
#include "drivers/amd/topology.h"
#include "hcq/mmio.h"
#include "hcq/os.h"

namespace baregrad::amd {

constexpr const char* kKfdPath = "/dev/kfd";
// "/dev/dri/renderD128".
std::string render_node_path(uint32_t minor);

struct KfdVersion {
  uint32_t major = 0, minor = 0;
  auto operator<=>(const KfdVersion&) const = default;
  std::string str() const;  // "1.14"
};
// RUNTIME_ENABLE (1.13) as tinygrad calls it (from 1.14), and the 1.14 kfd_event_data.
constexpr KfdVersion kMinKfdVersion{1, 14};

constexpr uint64_t kKfdPageBytes = 4096;
constexpr uint64_t kKfdDoorbellPageBytes = 0x2000;  // a process's doorbells on one GPU
constexpr uint64_t kKfdDoorbellPageMask = kKfdDoorbellPageBytes - 1;
constexpr uint64_t kKfdMmioRemapBytes = 4096;  // the HDP flush page (KFD_MMIO_REMAP_*)

enum class KfdMemKind : uint8_t {
  kVram,       // device memory (CPU access through the BAR: PUBLIC)
  kGtt,        // uncached, coherent host memory the GPU reaches through GART (rings, signals)
  kUserptr,    // anonymous MAP_SHARED process memory pinned for the GPU
  kDoorbell,   // the process's doorbell page, GPU-mapped (kKfdDoorbellPageBytes; no CPU map)
  kMmioRemap,  // the MMIO remap page (kKfdMmioRemapBytes), CPU-mapped from /dev/kfd
};
// "VRAM", "GTT", "userptr", "doorbell", "MMIO remap".
std::string_view kfd_mem_kind_name(KfdMemKind kind);
// The KFD_IOC_ALLOC_MEM_FLAGS_* an allocation of `kind` sends (tinygrad's choice for the first
// three: WRITABLE | EXECUTABLE | NO_SUBSTITUTE, plus COHERENT | UNCACHED for GTT, PUBLIC when the
// CPU maps it).
uint32_t kfd_alloc_flags(KfdMemKind kind, bool cpu_access);

class KfdIface;

// One KFD allocation: GPU VA == CPU VA. Move-only; released (GPU unmap, CPU unmap, free) on
// destruction.
class KfdMemory {
 public:
  KfdMemory() = default;
  KfdMemory(KfdMemory&& other) noexcept;
  KfdMemory& operator=(KfdMemory&& other) noexcept;
  KfdMemory(const KfdMemory&) = delete;
  KfdMemory& operator=(const KfdMemory&) = delete;
  ~KfdMemory();

  bool valid() const { return iface_ != nullptr; }
  uint64_t handle() const { return handle_; }  // KFD's handle (gpu_id in bits 63:32)
  uint64_t va() const { return va_; }          // GPU and CPU address
  uint64_t size() const { return size_; }      // bytes, a multiple of kKfdPageBytes
  KfdMemKind kind() const { return kind_; }
  // The CPU address (== va()), or nullptr when the CPU does not map it.
  void* cpu() const { return cpu_ ? reinterpret_cast<void*>(va_) : nullptr; }
  // AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, munmap, AMDKFD_IOC_FREE_MEMORY_OF_GPU: every step runs,
  // the first error is returned; afterwards this holds nothing.
  Status free();
  // Lets go of the memory without unmapping or freeing it: it stays allocated and mapped for
  // the process's life (the event page, which KFD refuses to free). Afterwards this holds nothing.
  void pin();

 private:
  friend class KfdIface;
  KfdIface* iface_ = nullptr;
  uint64_t handle_ = 0, va_ = 0, size_ = 0;
  KfdMemKind kind_ = KfdMemKind::kVram;
  bool cpu_ = false, allocated_ = false, gpu_mapped_ = false;
  hcq::Mapping range_;  // the VA reservation, then the CPU mapping over it
};

enum class KfdQueueType : uint32_t {
  kCompute = kKfdIocQueueTypeCompute,  // PM4
  kSdma = kKfdIocQueueTypeSdma,
  kComputeAql = kKfdIocQueueTypeComputeAql,
};
// "compute (PM4)", "SDMA", "compute (AQL)".
std::string_view kfd_queue_type_name(KfdQueueType type);

struct KfdQueueRequest {
  KfdQueueType type = KfdQueueType::kCompute;
  const KfdMemory* ring = nullptr;     // required; its size a power of two
  uint64_t read_pointer_address = 0;   // 8 bytes the engine writes its read pointer to
  uint64_t write_pointer_address = 0;  // 8 bytes the driver writes its write pointer to
  const KfdMemory* eop = nullptr;      // compute: the end-of-pipe buffer (RELEASE_MEM needs it)
  const KfdMemory* ctx_save_restore = nullptr;  // compute: the CWSR area
  uint32_t ctx_save_restore_size = 0;           // bytes KFD uses of it (kfd_queue.c sizes)
  uint32_t ctl_stack_size = 0;
  uint32_t xcc = 0;       // queue_percentage bits 15:8, as tinygrad sends it
  uint32_t priority = 7;  // 0..kKfdMaxQueuePriority
};

// A user-mode queue. Move-only; AMDKFD_IOC_DESTROY_QUEUE on destruction.
class KfdQueue {
 public:
  KfdQueue() = default;
  KfdQueue(KfdQueue&& other) noexcept;
  KfdQueue& operator=(KfdQueue&& other) noexcept;
  KfdQueue(const KfdQueue&) = delete;
  KfdQueue& operator=(const KfdQueue&) = delete;
  ~KfdQueue();

  bool valid() const { return iface_ != nullptr; }
  uint32_t id() const { return id_; }
  KfdQueueType type() const { return type_; }
  uint64_t doorbell_offset() const { return doorbell_offset_; }  // as KFD returned it
  // The queue's 64-bit doorbell in the doorbell page (PM4: dwords written, SDMA: bytes, AQL:
  // the last packet index; the queue code writes the write pointer first).
  const hcq::Doorbell& doorbell() const { return doorbell_; }
  void* doorbell_address() const { return doorbell_address_; }
  // AMDKFD_IOC_DESTROY_QUEUE; afterwards this holds nothing.
  Status destroy();

 private:
  friend class KfdIface;
  KfdIface* iface_ = nullptr;
  uint32_t id_ = 0;
  KfdQueueType type_ = KfdQueueType::kCompute;
  uint64_t doorbell_offset_ = 0;
  hcq::Doorbell doorbell_;
  void* doorbell_address_ = nullptr;
};

enum class KfdEventType : uint32_t {
  kSignal = kKfdIocEventSignal,
  kHwException = kKfdIocEventHwException,
  kMemory = kKfdIocEventMemory,
};

// A KFD event. Move-only; AMDKFD_IOC_DESTROY_EVENT on destruction.
class KfdEvent {
 public:
  KfdEvent() = default;
  KfdEvent(KfdEvent&& other) noexcept;
  KfdEvent& operator=(KfdEvent&& other) noexcept;
  KfdEvent(const KfdEvent&) = delete;
  KfdEvent& operator=(const KfdEvent&) = delete;
  ~KfdEvent();

  bool valid() const { return iface_ != nullptr; }
  uint32_t id() const { return id_; }
  KfdEventType type() const { return type_; }
  uint32_t slot_index() const { return slot_index_; }
  uint32_t trigger_data() const { return trigger_data_; }  // what the GPU writes to signal it
  // Signal events: the event page slot (event page va + slot * 8) the GPU writes before its
  // interrupt; 0 for others.
  uint64_t mailbox_va() const { return mailbox_va_; }
  // AMDKFD_IOC_DESTROY_EVENT; afterwards this holds nothing.
  Status destroy();

 private:
  friend class KfdIface;
  KfdIface* iface_ = nullptr;
  uint32_t id_ = 0, slot_index_ = 0, trigger_data_ = 0;
  KfdEventType type_ = KfdEventType::kSignal;
  uint64_t mailbox_va_ = 0;
};

// What a KFD_IOC_EVENT_MEMORY event reported (kfd_hsa_memory_exception_data).
struct KfdMemoryException {
  uint32_t gpu_id = 0;
  uint64_t va = 0;
  bool not_present = false, read_only = false, no_execute = false, imprecise = false;
  uint32_t error_type = 0;  // KFD_MEM_ERR_*
  // "GPU memory fault at 0x1000 (gpu_id 0x5a10): not present, imprecise".
  std::string to_string() const;
};

// What a KFD_IOC_EVENT_HW_EXCEPTION event reported (kfd_hsa_hw_exception_data).
struct KfdHwException {
  uint32_t gpu_id = 0;
  uint32_t reset_type = 0, reset_cause = 0;
  bool memory_lost = false;
  // "GPU reset (gpu_id 0x5a10): whole GPU, cause GPU hang, memory lost".
  std::string to_string() const;
};

// The outcome of KfdIface::wait(). With last_event_age 0 KFD does not say which signal event
// fired; exception events that fired carry their data.
struct KfdWaitResult {
  bool timed_out = false;  // KFD_IOC_WAIT_RESULT_TIMEOUT
  std::optional<KfdMemoryException> memory;
  std::optional<KfdHwException> hw;
  bool fault() const { return memory.has_value() || hw.has_value(); }
};

// What KFD keeps per process and the driver must therefore keep too, per Os (one per process
// for the real kernel, one per fake): the render-node fds (render_fd()) and the event page
// (create_event()). Guarded by mu().
struct KfdProcess {
  std::map<std::string, int> render_fds;  // by render node path
  uint64_t event_page_va = 0, event_page_handle = 0;
  std::set<uint32_t> event_page_gpus;  // gpu_ids it is mapped into
  static KfdProcess& of(const hcq::Os& os);
  static std::mutex& mu();
};

class KfdIface {
 public:
  // Opens GPU `index` of those KFD lists (see the file comment for the steps). NotFound
  // without /dev/kfd or for an index past the GPUs; FailedPrecondition on EACCES (naming the
  // render and video groups) and for a KFD older than kMinKfdVersion (naming both).
  static Result<std::unique_ptr<KfdIface>> open(std::shared_ptr<hcq::Os> os, int index);
  // Unmaps the doorbell page and closes /dev/kfd; the render node and the event page stay for
  // the process (render_fd(), create_event()).
  ~KfdIface();
  KfdIface(const KfdIface&) = delete;
  KfdIface& operator=(const KfdIface&) = delete;

  hcq::Os& os() const { return *os_; }
  const KfdGpuNode& node() const { return node_; }
  uint32_t gpu_id() const { return node_.gpu_id; }
  int index() const { return index_; }
  int gpu_count() const { return gpu_count_; }  // GPUs in the topology
  KfdVersion version() const { return version_; }
  int kfd_fd() const { return kfd_.get(); }
  // The render node's fd: one per Os and render node for the process's life, never closed (KFD
  // pins the file of a process's first ACQUIRE_VM until the process ends and answers EBUSY to
  // ACQUIRE_VM with another: kfd_chardev.c kfd_ioctl_acquire_vm), so that a GPU reopened in
  // the same process acquires its VM again.
  int render_fd() const { return render_fd_; }
  // "AMD GPU 0 (gpu_id 0x5a10, gfx1100)".
  std::string where() const;

  // `size` bytes (rounded up to pages) of `kind`, CPU-mapped when cpu_access (userptr always
  // is), GPU-mapped; on failure nothing stays allocated. Thread-safe.
  Result<KfdMemory> alloc(uint64_t size, KfdMemKind kind, bool cpu_access);
  // AMDKFD_IOC_CREATE_QUEUE, mapping the doorbell page on the first queue. Thread-safe.
  Result<KfdQueue> create_queue(const KfdQueueRequest& req);
  // AMDKFD_IOC_CREATE_EVENT. The process's first event (per Os) allocates the event page
  // (kKfdEventPageBytes of CPU-mapped GTT) and passes its handle; KFD keeps it for the process,
  // refuses a second one (EINVAL) and refuses to free it (EPERM), so it is never freed, and
  // another GPU's first event maps it into that GPU (MAP_MEMORY_TO_GPU). Thread-safe.
  Result<KfdEvent> create_event(KfdEventType type, bool auto_reset);
  // AMDKFD_IOC_SET_EVENT (signal events).
  Status set_event(const KfdEvent& event);
  // AMDKFD_IOC_WAIT_EVENTS for any of `events`, at most timeout_ms (<= kKfdMaxFiniteTimeoutMs:
  // never an unbounded wait). Aborted when KFD reports an event destroyed during the wait.
  Result<KfdWaitResult> wait(std::span<const KfdEvent* const> events, uint32_t timeout_ms);
  // The address of the process's event page (CPU and GPU), 0 before its first create_event.
  uint64_t event_page_va() const;

 private:
  friend class KfdMemory;
  friend class KfdQueue;
  friend class KfdEvent;
  KfdIface(std::shared_ptr<hcq::Os> os, hcq::Fd kfd);
  Status check_version();
  Status open_render_node();
  // os_->ioctl on /dev/kfd; `name` is the uapi request name.
  Status kfd_ioctl(unsigned long request, void* arg, const char* name);
  Status map_to_gpu(uint64_t handle);
  Status unmap_from_gpu(uint64_t handle);
  Status free_handle(uint64_t handle);
  Status destroy_queue(uint32_t id);
  Status destroy_event(uint32_t id);
  Result<hcq::Mmio> doorbell_page(uint64_t doorbell_offset);

  std::shared_ptr<hcq::Os> os_;
  hcq::Fd kfd_;
  int render_fd_ = -1;  // kept (render_fd())
  KfdGpuNode node_;
  int index_ = 0, gpu_count_ = 0;
  KfdVersion version_;
  mutable std::mutex mu_;  // the lazily made doorbell mapping and event page
  hcq::Mapping doorbells_;
  uint64_t doorbells_base_ = 0;
  uint64_t event_page_va_ = 0;  // under mu_; 0 until this GPU reaches the event page
};

}  // namespace baregrad::amd
