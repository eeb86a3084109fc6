// FakeKfd's state, shared by the fake_kfd*.cc files; not part of the interface.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "drivers/amd/kfd_abi.h"
#include "drivers/mock/amd/fake_kfd.h"

namespace baregrad::mock {

// mmap offsets of /dev/kfd (kfd_priv.h, kernel-internal): the type in bits 63:62, the gpu_id in
// bits 61:46. CREATE_QUEUE's doorbell_offset carries them; MMIO_REMAP's mmap_offset too.
constexpr uint64_t kKfdMmapTypeShift = 62;
constexpr uint64_t kKfdMmapTypeDoorbell = 3ull << kKfdMmapTypeShift;
constexpr uint64_t kKfdMmapTypeMmio = 0ull << kKfdMmapTypeShift;
constexpr uint64_t kKfdMmapGpuIdShift = 46;
constexpr uint64_t kKfdMmapGpuIdMask = 0xffffull << kKfdMmapGpuIdShift;
constexpr uint64_t kKfdPage = 4096;
constexpr uint64_t kKfdDoorbellBytes = 0x2000;  // 1024 64-bit doorbells per process and GPU

// Host memory for a fake allocation: the fake's own shared mapping of a memfd (closed once
// mapped: the mapping keeps the pages, and other mappings duplicate it).
struct KfdBacking {
  int memfd = -1;
  uint8_t* host = nullptr;
  uint64_t size = 0;
  KfdBacking() = default;
  KfdBacking(const KfdBacking&) = delete;
  KfdBacking& operator=(const KfdBacking&) = delete;
  ~KfdBacking();
  static Result<std::shared_ptr<KfdBacking>> create(uint64_t size, const std::string& name);
};

enum class KfdFdKind { kKfd, kRender };
struct KfdFakeFd {
  KfdFdKind kind = KfdFdKind::kKfd;
  int gpu = -1;  // render nodes
};

struct KfdGpuState {
  FakeAmdGpuConfig cfg;
  uint32_t gpu_id = 0;
  int acquired_fd = -1;  // the render fd ACQUIRE_VM bound, -1 before
  uint64_t vram_used = 0;
  std::shared_ptr<KfdBacking> doorbells, mmio;
  std::vector<bool> doorbell_used = std::vector<bool>(kKfdDoorbellBytes / 8);
};

struct KfdAllocState {
  FakeKfdAllocation info;
  std::shared_ptr<KfdBacking> mem;  // null for userptr: the process memory at va is the backing
};

struct KfdQueueState {
  FakeKfdQueue info;
  uint64_t last_doorbell = 0;
  std::vector<uint64_t> writes;
};

struct KfdEventState {
  FakeKfdEvent info;
  amd::KfdHsaMemoryExceptionData memory{};
  amd::KfdHsaHwExceptionData hw{};
};

struct KfdFailRule {
  uint32_t nr = 0;
  int err = 0;
  int count = 0;
};

struct FakeKfd::State {
  mutable std::mutex mu;
  FakeKfdConfig cfg;
  std::vector<KfdGpuState> gpus;
  std::map<int, KfdFakeFd> fds;
  int next_fd = 1000;
  std::map<uint64_t, KfdAllocState> allocs;  // by handle
  uint32_t next_idr = 1;
  uint64_t next_queue_serial = 1;
  uint64_t next_mmap_offset = 1ull << 32;
  std::map<uint32_t, KfdQueueState> queues;  // by queue id
  std::map<uint32_t, KfdEventState> events;  // by event id
  bool event_page_set = false;
  uint32_t runtime_mode = ~0u;
  std::vector<KfdFailRule> rules;
  std::map<std::string, int> open_errors;
  std::vector<std::string> log;
  std::function<void()> progress_hook;
  std::function<void(const FakeKfdQueue&, uint64_t)> doorbell_hook;

  // Records why a request was refused and returns `err`.
  int refuse(int err, std::string why);
  // The GPU with `gpu_id`, or nullptr.
  KfdGpuState* gpu_by_id(uint32_t gpu_id);
  // The allocation GPU-mapped on `gpu` (any GPU when -1) holding [va, va + len), or nullptr.
  const KfdAllocState* mapped_at(uint64_t va, uint64_t len, int gpu) const;
  bool version_at_least(uint32_t major, uint32_t minor) const;

  // Runs ioctl `nr` (checked against kfd_abi.h); 0, an errno, or -1 for one not modelled.
  int dispatch(uint32_t nr,
               void* arg,
               std::unique_lock<std::mutex>& lock,
               const std::function<void()>& pump);
  // The ioctls; each returns 0 or an errno (fake_kfd_memory.cc, fake_kfd_queue.cc).
  int get_version(amd::KfdIoctlGetVersionArgs& a);
  int acquire_vm(amd::KfdIoctlAcquireVmArgs& a);
  int runtime_enable(amd::KfdIoctlRuntimeEnableArgs& a);
  int alloc_memory(amd::KfdIoctlAllocMemoryOfGpuArgs& a);
  int free_memory(amd::KfdIoctlFreeMemoryOfGpuArgs& a);
  int map_memory(amd::KfdIoctlMapMemoryToGpuArgs& a, bool map);
  int create_queue(amd::KfdIoctlCreateQueueArgs& a);
  int destroy_queue(amd::KfdIoctlDestroyQueueArgs& a);
  int create_event(amd::KfdIoctlCreateEventArgs& a);
  int destroy_event(amd::KfdIoctlDestroyEventArgs& a);
  int set_event(uint32_t id);
  // WAIT_EVENTS: unlocks `lock` to run `pump` (FakeKfd::progress) while it waits.
  int wait_events(amd::KfdIoctlWaitEventsArgs& a,
                  std::unique_lock<std::mutex>& lock,
                  const std::function<void()>& pump);
  // The memfd an mmap of `fd` at `offset` for `len` bytes maps, and the allocation it is (if
  // any); nullptr with an errno for one the real driver would refuse.
  std::shared_ptr<KfdBacking> mmap_target(
      const KfdFakeFd& f, uint64_t offset, uint64_t len, uint64_t* alloc_handle, int* err);
  // Forgets CPU mappings inside [lo, hi) (munmap or a new mapping over them).
  void drop_cpu_mappings(uint64_t lo, uint64_t hi);

  // sysfs (fake_kfd_sysfs.cc): the file at `path`, or an errno.
  int sysfs_read(const std::string& path, std::string* out) const;
  int sysfs_list(const std::string& path, std::vector<std::string>* out) const;
};

}  // namespace baregrad::mock
