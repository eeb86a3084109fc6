// A fake amdgpu KFD behind hcq::Os: a test instrument that the real drivers/amd kernel interface
// runs against in CI. It serves KFD's sysfs topology for a configured list of GPUs, /dev/kfd and
// /dev/dri/renderD<n>, and answers the KFD ioctls baregrad sends for a configured KFD version:
// each request number and struct size is checked against kfd_abi.h, and what the real KFD
// refuses (unknown gpu_id or handle, no ACQUIRE_VM, double free, freeing mapped memory,
// unmapping unmapped memory, bad sizes and queue parameters) fails with its errno.
//
// Memory is host memory: VRAM and GTT allocations are memfds, mapped where the driver mmaps the
// render node (at the VA it reserved, so GPU VA == CPU VA == a host address); userptr memory is
// the process memory itself. resolve() gives a fake GPU the host address of a GPU-mapped VA.
// Each GPU has a 0x2000-byte doorbell page (a memfd) that /dev/kfd maps; progress() reads the
// queues' doorbells, records new values and calls the doorbell and progress hooks. Anonymous
// mmaps, munmaps, eventfd and poll go to the real kernel.
//
// Stricter than the real KFD (each documented where it applies): struct sizes must match
// exactly (KFD zero-extends a shorter struct), sizes and VAs must be page-aligned, allocations
// may not overlap, an infinite WAIT_EVENTS is refused (it would hang the test), only queue types
// 0-2 and event types 0, 3, 8 exist.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "drivers/amd/kfd_abi.h"
#include "hcq/os.h"

namespace baregrad::mock {

// One fake GPU as its KFD topology node shows it. preset() gives a plausible part per target;
// the numbers are illustrative, not read from hardware.
struct FakeAmdGpuConfig {
  std::string name = "gfx1100";
  uint32_t gfx_target_version = 110000;
  uint32_t simd_count = 192, array_count = 12, simd_arrays_per_engine = 2;
  uint32_t cu_per_simd_array = 8, simd_per_cu = 2, max_waves_per_simd = 16;
  uint32_t lds_size_in_kb = 64, wave_front_size = 32, num_xcc = 1, max_slots_scratch_cu = 32;
  uint32_t vendor_id = 0x1002, device_id = 0x744c;
  uint64_t vram_bytes = 24ull << 30;  // ALLOC_MEMORY_OF_GPU of VRAM fails ENOMEM past it
  // "gfx90a" (MI210-like), "gfx942" (MI300X-like, 8 XCCs), "gfx1100" (RX 7900 XTX-like),
  // "gfx1201" (RX 9070 XT-like). CHECK-fails for another name.
  static FakeAmdGpuConfig preset(std::string_view target);
};

struct FakeKfdConfig {
  uint32_t major = 1, minor = 17;  // what AMDKFD_IOC_GET_VERSION answers
  std::vector<FakeAmdGpuConfig> gpus = {FakeAmdGpuConfig{}};
};

// A KFD allocation.
struct FakeKfdAllocation {
  int gpu = 0;
  uint64_t handle = 0, va = 0, size = 0, mmap_offset = 0;
  uint32_t flags = 0;  // KFD_IOC_ALLOC_MEM_FLAGS_*
  bool gpu_mapped = false;
  std::optional<uint64_t> cpu_va;  // where a render-node (or /dev/kfd) mmap put it
};

// A queue as CREATE_QUEUE made it: what a fake GPU needs to run it.
struct FakeKfdQueue {
  int gpu = 0;
  uint32_t id = 0, type = 0;  // KFD_IOC_QUEUE_TYPE_*
  uint64_t ring_va = 0;
  uint32_t ring_size = 0;
  uint64_t read_pointer_address = 0, write_pointer_address = 0;
  uint64_t eop_buffer_address = 0, eop_buffer_size = 0;
  uint64_t ctx_save_restore_address = 0;
  uint32_t ctx_save_restore_size = 0, ctl_stack_size = 0;
  uint32_t queue_percentage = 0, queue_priority = 0;
  uint64_t doorbell_offset = 0;       // as returned: mmap type, gpu_id and the byte offset
  uint64_t* doorbell_host = nullptr;  // the fake's own view of the 64-bit doorbell slot
  uint64_t serial = 0;  // unique per CREATE_QUEUE in the process: a reused id is a new queue
};

struct FakeKfdEvent {
  uint32_t id = 0, type = 0;  // KFD_IOC_EVENT_*
  bool auto_reset = false, signaled = false;
  uint64_t age = 0;  // 1 at creation, +1 per signal (KFD 1.14 event age)
};

// Live kernel objects: all zero after a well-behaved driver let go of everything.
struct FakeKfdCounts {
  int fds = 0, allocations = 0, gpu_mappings = 0, cpu_mappings = 0, queues = 0, events = 0;
  bool operator==(const FakeKfdCounts&) const = default;
};
// What is live after a driver let go of a GPU it opened: what KFD keeps for the process, and the
// driver with it (amd::KfdProcess): the render node's fd (KFD pins that file at ACQUIRE_VM) and
// the event page (allocated, CPU- and GPU-mapped; KFD refuses to free it).
inline constexpr FakeKfdCounts kProcessKept{
    .fds = 1, .allocations = 1, .gpu_mappings = 1, .cpu_mappings = 1};

class FakeKfd final : public hcq::Os {
 public:
  explicit FakeKfd(FakeKfdConfig config = {});
  ~FakeKfd() override;
  FakeKfd(const FakeKfd&) = delete;
  FakeKfd& operator=(const FakeKfd&) = delete;

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
  // poll_doorbells(), then the on_progress() hook. WAIT_EVENTS calls it while it waits.
  void progress() override;

  const FakeKfdConfig& config() const;
  uint32_t gpu_id(int gpu) const;         // what the topology and the handles carry
  uint32_t render_minor(int gpu) const;   // 128 + gpu
  uint32_t topology_node(int gpu) const;  // gpu + 1 (node 0 is the CPU)

  // ---- what a fake GPU and tests read (thread-safe) --------------------------------------------
  // The host address of [va, va + len) when one GPU-mapped allocation holds it all.
  std::optional<uint8_t*> resolve(uint64_t va, size_t len) const;
  std::vector<FakeKfdAllocation> allocations() const;
  std::vector<FakeKfdQueue> queues() const;
  std::vector<FakeKfdEvent> events() const;
  FakeKfdCounts live() const;
  // Every new value progress() saw in queue `id`'s doorbell, oldest first.
  std::vector<uint64_t> doorbell_writes(uint32_t queue_id) const;
  uint32_t runtime_enable_mode() const;  // the last RUNTIME_ENABLE mode_mask (~0u: none)
  // Explanations of the requests the fake refused, oldest first.
  std::vector<std::string> log() const;

  // ---- the fake GPU's side (hooks run without the fake's lock held) ----------------------------
  // Called by poll_doorbells() for each queue whose doorbell changed, with the new value.
  void on_doorbell(std::function<void(const FakeKfdQueue&, uint64_t value)> hook);
  // Called by progress(): a fake GPU runs here (it has no thread of its own).
  void on_progress(std::function<void()> hook);
  // Reads every queue's doorbell; records and reports the changed ones. Returns how many.
  int poll_doorbells();
  // The GPU's interrupt for signal event `id` (what SET_EVENT does too). NotFound if unknown.
  Status signal_event(uint32_t id);
  // A GPU VM fault on GPU `gpu`: every KFD_IOC_EVENT_MEMORY event fires with this data.
  void raise_memory_exception(int gpu, uint64_t va, const amd::KfdMemoryExceptionFailure& f);
  // A GPU reset: every KFD_IOC_EVENT_HW_EXCEPTION event fires with this data.
  void raise_hw_exception(int gpu, uint32_t reset_type, uint32_t reset_cause, bool memory_lost);

  // ---- failure injection ----------------------------------------------------------------------
  // The next `count` ioctls named `name` ("AMDKFD_IOC_ALLOC_MEMORY_OF_GPU"; CHECKed) or with
  // number `nr` fail with errno `err` before doing anything.
  void fail_next(std::string_view name, int err, int count = 1);
  void fail_next(uint32_t nr, int err, int count = 1);
  // open/read_file/list_dir of `path` fail with ENOENT (missing) or `err` (EACCES...); 0 clears.
  void set_missing(const std::string& path, bool missing = true);
  void set_open_errno(const std::string& path, int err);

  struct State;  // fake_kfd_state.h

 private:
  std::unique_ptr<State> s_;
};

}  // namespace baregrad::mock
