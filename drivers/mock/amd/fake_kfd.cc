// FakeKfd: device files, the ioctl front door, mmap, queries, hooks and failure injection.

#include "drivers/mock/amd/fake_kfd.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <utility>

#include "base/format.h"
#include "drivers/mock/amd/fake_kfd_state.h"

namespace baregrad::mock {
namespace {

std::string quoted(const std::string& path) { return "\"" + path + "\""; }

}  // namespace

KfdBacking::~KfdBacking() {
  if (host != nullptr) ::munmap(host, size);
  if (memfd >= 0) ::close(memfd);
}

Result<std::shared_ptr<KfdBacking>> KfdBacking::create(uint64_t size, const std::string& name) {
  auto b = std::make_shared<KfdBacking>();
  b->size = size;
  b->memfd = ::memfd_create(name.c_str(), MFD_CLOEXEC);
  if (b->memfd < 0) return errno_error("memfd_create(" + quoted(name) + ")", errno);
  if (::ftruncate(b->memfd, static_cast<off_t>(size)) != 0) {
    return errno_error("ftruncate(memfd, " + hex(size) + ")", errno);
  }
  void* host = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, b->memfd, 0);
  if (host == MAP_FAILED) return errno_error("mmap(memfd, " + hex(size) + ")", errno);
  b->host = static_cast<uint8_t*>(host);
  // NOTE: the shared mapping keeps the pages; an fd per allocation would cap a process at its
  // open-file limit (KFD has no such cap). Later mmaps duplicate `host` (FakeKfd::mmap).
  ::close(b->memfd);
  b->memfd = -1;
  return b;
}

int FakeKfd::State::refuse(int err, std::string why) {
  log.push_back(std::move(why));
  return err;
}

KfdGpuState* FakeKfd::State::gpu_by_id(uint32_t gpu_id) {
  for (KfdGpuState& g : gpus) {
    if (g.gpu_id == gpu_id) return &g;
  }
  return nullptr;
}

bool FakeKfd::State::version_at_least(uint32_t major, uint32_t minor) const {
  return cfg.major > major || (cfg.major == major && cfg.minor >= minor);
}

FakeKfd::FakeKfd(FakeKfdConfig config) : s_(std::make_unique<State>()) {
  s_->cfg = std::move(config);
  for (size_t i = 0; i < s_->cfg.gpus.size(); ++i) {
    KfdGpuState g;
    g.cfg = s_->cfg.gpus[i];
    g.gpu_id = 0x1000 + 0x2345 * static_cast<uint32_t>(i + 1) % 0xe000;  // KFD hashes these
    auto doorbells = KfdBacking::create(kKfdDoorbellBytes, "fake-kfd-doorbells");
    auto mmio = KfdBacking::create(kKfdPage, "fake-kfd-mmio-remap");
    CHECK(doorbells.ok() && mmio.ok()) << "fake KFD: no memfd";
    g.doorbells = *doorbells;
    g.mmio = *mmio;
    s_->gpus.push_back(std::move(g));
  }
}

FakeKfd::~FakeKfd() = default;

const FakeKfdConfig& FakeKfd::config() const { return s_->cfg; }
uint32_t FakeKfd::gpu_id(int gpu) const { return s_->gpus.at(gpu).gpu_id; }
uint32_t FakeKfd::render_minor(int gpu) const { return 128 + static_cast<uint32_t>(gpu); }
uint32_t FakeKfd::topology_node(int gpu) const { return static_cast<uint32_t>(gpu) + 1; }

// ---- hcq::Os -----------------------------------------------------------------------------------

Result<int> FakeKfd::open(const std::string& path, int /*flags*/) {
  std::lock_guard lock(s_->mu);
  auto err = s_->open_errors.find(path);
  if (err != s_->open_errors.end()) return errno_error("open(" + quoted(path) + ")", err->second);
  KfdFakeFd f;
  if (path == "/dev/kfd") {
    f.kind = KfdFdKind::kKfd;
  } else {
    int gpu = -1;
    for (size_t i = 0; i < s_->gpus.size(); ++i) {
      if (path == "/dev/dri/renderD" + std::to_string(render_minor(static_cast<int>(i)))) {
        gpu = static_cast<int>(i);
      }
    }
    if (gpu < 0) return errno_error("open(" + quoted(path) + ")", ENOENT);
    f.kind = KfdFdKind::kRender;
    f.gpu = gpu;
  }
  int fd = s_->next_fd++;
  s_->fds.emplace(fd, f);
  return fd;
}

Status FakeKfd::close(int fd) {
  std::lock_guard lock(s_->mu);
  if (s_->fds.erase(fd) == 0) return errno_error("close(fd " + std::to_string(fd) + ")", EBADF);
  // NOTE: KFD keeps the process (its memory, queues, events) past the close; live() shows them.
  return Status();
}

Status FakeKfd::ioctl(int fd, unsigned long request, void* arg, std::string_view what) {
  using namespace amd;
  std::unique_lock lock(s_->mu);
  auto fail = [&](int err) {
    return errno_error("ioctl " + std::string(what) + " (request " + hex(request) + ") on fd " +
                           std::to_string(fd),
                       err);
  };
  auto it = s_->fds.find(fd);
  if (it == s_->fds.end()) return fail(EBADF);
  uint32_t nr = ioctl_nr(request);
  for (auto r = s_->rules.begin(); r != s_->rules.end(); ++r) {
    if (r->nr != nr) continue;
    int err = r->err;
    if (--r->count == 0) s_->rules.erase(r);
    return fail(err);
  }
  if (it->second.kind == KfdFdKind::kRender) {
    return fail(s_->refuse(ENOTTY, std::string(what) + ": DRM ioctls are not modelled"));
  }
  const KfdIoctlInfo* info = kfd_ioctl_info(nr);
  if (ioctl_type(request) != kAmdkfdIoctlBase || info == nullptr || info->request != request) {
    return fail(s_->refuse(
        EINVAL, std::string(what) + ": request " + hex(request) + " (size " +
                    std::to_string(ioctl_size(request)) + ") is not " +
                    (info ? std::string(info->name) + " " + hex(info->request) : "a KFD ioctl")));
  }
  int err = s_->dispatch(nr, arg, lock, [this] { progress(); });
  if (err == -1) err = s_->refuse(EINVAL, std::string(what) + ": not modelled by the fake");
  return err == 0 ? Status() : fail(err);
}

int FakeKfd::State::dispatch(uint32_t nr,
                             void* arg,
                             std::unique_lock<std::mutex>& lock,
                             const std::function<void()>& pump) {
  using namespace amd;
  switch (nr) {
    case 0x01:
      return get_version(*static_cast<KfdIoctlGetVersionArgs*>(arg));
    case 0x02:
      return create_queue(*static_cast<KfdIoctlCreateQueueArgs*>(arg));
    case 0x03:
      return destroy_queue(*static_cast<KfdIoctlDestroyQueueArgs*>(arg));
    case 0x08:
      return create_event(*static_cast<KfdIoctlCreateEventArgs*>(arg));
    case 0x09:
      return destroy_event(*static_cast<KfdIoctlDestroyEventArgs*>(arg));
    case 0x0a:
      return set_event(static_cast<KfdIoctlSetEventArgs*>(arg)->event_id);
    case 0x0c:
      return wait_events(*static_cast<KfdIoctlWaitEventsArgs*>(arg), lock, pump);
    case 0x15:
      return acquire_vm(*static_cast<KfdIoctlAcquireVmArgs*>(arg));
    case 0x16:
      return alloc_memory(*static_cast<KfdIoctlAllocMemoryOfGpuArgs*>(arg));
    case 0x17:
      return free_memory(*static_cast<KfdIoctlFreeMemoryOfGpuArgs*>(arg));
    case 0x18:
      return map_memory(*static_cast<KfdIoctlMapMemoryToGpuArgs*>(arg), true);
    case 0x19:
      return map_memory(*static_cast<KfdIoctlUnmapMemoryFromGpuArgs*>(arg), false);
    case 0x25:
      return runtime_enable(*static_cast<KfdIoctlRuntimeEnableArgs*>(arg));
    default:
      return -1;
  }
}

Result<void*> FakeKfd::mmap(void* addr, size_t len, int prot, int flags, int fd, off_t offset) {
  std::lock_guard lock(s_->mu);
  std::string call = "mmap(len " + hex(len) + ", prot " + hex(static_cast<unsigned>(prot)) +
                     ", flags " + hex(static_cast<unsigned>(flags)) + ", fd " + std::to_string(fd) +
                     ", offset " + hex(static_cast<uint64_t>(offset)) + ")";
  std::shared_ptr<KfdBacking> target;
  uint64_t handle = 0;
  if (fd >= 0) {
    auto it = s_->fds.find(fd);
    if (it == s_->fds.end()) return errno_error(call, EBADF);
    int err = 0;
    target = s_->mmap_target(it->second, static_cast<uint64_t>(offset), len, &handle, &err);
    if (target == nullptr) return errno_error(call, err);
    if ((flags & MAP_SHARED) == 0)
      return errno_error(call, s_->refuse(EINVAL, call + ": not MAP_SHARED"));
  }
  void* p;
  if (target) {
    // Another mapping of the allocation's pages: mremap of a shared mapping with old_size 0.
    int mflags = MREMAP_MAYMOVE | ((flags & MAP_FIXED) ? MREMAP_FIXED : 0);
    p = ::mremap(target->host, 0, len, mflags, addr);
    if (p != MAP_FAILED && prot != (PROT_READ | PROT_WRITE) && ::mprotect(p, len, prot) != 0) {
      int err = errno;
      ::munmap(p, len);
      return errno_error(call, err);
    }
  } else {
    p = ::mmap(addr, len, prot, flags, -1, offset);
  }
  if (p == MAP_FAILED) return errno_error(call, errno);
  uint64_t lo = reinterpret_cast<uint64_t>(p);
  s_->drop_cpu_mappings(lo, lo + len);
  if (handle != 0) s_->allocs.at(handle).info.cpu_va = lo;
  return p;
}

Status FakeKfd::munmap(void* addr, size_t len) {
  std::lock_guard lock(s_->mu);
  if (::munmap(addr, len) != 0) {
    return errno_error(
        "munmap(" + hex(reinterpret_cast<uintptr_t>(addr)) + ", len " + hex(len) + ")", errno);
  }
  uint64_t lo = reinterpret_cast<uint64_t>(addr);
  s_->drop_cpu_mappings(lo, lo + len);
  return Status();
}

void FakeKfd::State::drop_cpu_mappings(uint64_t lo, uint64_t hi) {
  for (auto& [h, a] : allocs) {
    std::optional<uint64_t>& cpu = a.info.cpu_va;
    if (cpu && *cpu < hi && *cpu + a.info.size > lo) cpu.reset();
  }
}

Result<std::string> FakeKfd::read_file(const std::string& path) {
  std::lock_guard lock(s_->mu);
  auto e = s_->open_errors.find(path);
  int err = e != s_->open_errors.end() ? e->second : 0;
  std::string out;
  if (err == 0) err = s_->sysfs_read(path, &out);
  if (err != 0) return errno_error("open(" + quoted(path) + ")", err);
  return out;
}

Result<std::vector<std::string>> FakeKfd::list_dir(const std::string& path) {
  std::lock_guard lock(s_->mu);
  auto e = s_->open_errors.find(path);
  int err = e != s_->open_errors.end() ? e->second : 0;
  std::vector<std::string> out;
  if (err == 0) err = s_->sysfs_list(path, &out);
  if (err != 0) return errno_error("opendir(" + quoted(path) + ")", err);
  return out;
}

Result<int> FakeKfd::eventfd(unsigned initval, int flags) {
  return hcq::linux_os().eventfd(initval, flags);
}

Result<int> FakeKfd::poll(int fd, short events, int timeout_ms) {
  return hcq::linux_os().poll(fd, events, timeout_ms);
}

void FakeKfd::progress() {
  poll_doorbells();
  std::function<void()> hook;
  {
    std::lock_guard lock(s_->mu);
    hook = s_->progress_hook;
  }
  if (hook) hook();
}

// ---- queries -----------------------------------------------------------------------------------

std::vector<FakeKfdAllocation> FakeKfd::allocations() const {
  std::lock_guard lock(s_->mu);
  std::vector<FakeKfdAllocation> out;
  for (const auto& [h, a] : s_->allocs) out.push_back(a.info);
  return out;
}

std::vector<FakeKfdQueue> FakeKfd::queues() const {
  std::lock_guard lock(s_->mu);
  std::vector<FakeKfdQueue> out;
  for (const auto& [id, q] : s_->queues) out.push_back(q.info);
  return out;
}

std::vector<FakeKfdEvent> FakeKfd::events() const {
  std::lock_guard lock(s_->mu);
  std::vector<FakeKfdEvent> out;
  for (const auto& [id, e] : s_->events) out.push_back(e.info);
  return out;
}

FakeKfdCounts FakeKfd::live() const {
  std::lock_guard lock(s_->mu);
  FakeKfdCounts c;
  c.fds = static_cast<int>(s_->fds.size());
  c.allocations = static_cast<int>(s_->allocs.size());
  for (const auto& [h, a] : s_->allocs) {
    c.gpu_mappings += a.info.gpu_mapped ? 1 : 0;
    c.cpu_mappings += a.info.cpu_va ? 1 : 0;
  }
  c.queues = static_cast<int>(s_->queues.size());
  c.events = static_cast<int>(s_->events.size());
  return c;
}

std::vector<uint64_t> FakeKfd::doorbell_writes(uint32_t queue_id) const {
  std::lock_guard lock(s_->mu);
  auto it = s_->queues.find(queue_id);
  return it == s_->queues.end() ? std::vector<uint64_t>{} : it->second.writes;
}

uint32_t FakeKfd::runtime_enable_mode() const {
  std::lock_guard lock(s_->mu);
  return s_->runtime_mode;
}

std::vector<std::string> FakeKfd::log() const {
  std::lock_guard lock(s_->mu);
  return s_->log;
}

// ---- hooks and injection -----------------------------------------------------------------------

void FakeKfd::on_doorbell(std::function<void(const FakeKfdQueue&, uint64_t)> hook) {
  std::lock_guard lock(s_->mu);
  s_->doorbell_hook = std::move(hook);
}

void FakeKfd::on_progress(std::function<void()> hook) {
  std::lock_guard lock(s_->mu);
  s_->progress_hook = std::move(hook);
}

int FakeKfd::poll_doorbells() {
  std::vector<std::pair<FakeKfdQueue, uint64_t>> rung;
  std::function<void(const FakeKfdQueue&, uint64_t)> hook;
  {
    std::lock_guard lock(s_->mu);
    for (auto& [id, q] : s_->queues) {
      uint64_t v = std::atomic_ref<uint64_t>(*q.info.doorbell_host).load(std::memory_order_acquire);
      if (v == q.last_doorbell) continue;
      q.last_doorbell = v;
      q.writes.push_back(v);
      rung.emplace_back(q.info, v);
    }
    hook = s_->doorbell_hook;
  }
  if (hook) {
    for (const auto& [q, v] : rung) hook(q, v);
  }
  return static_cast<int>(rung.size());
}

void FakeKfd::fail_next(std::string_view name, int err, int count) {
  const amd::KfdIoctlInfo* info = amd::kfd_ioctl_info(name);
  CHECK(info != nullptr) << "fail_next: no KFD ioctl named " << name;
  fail_next(info->nr, err, count);
}

void FakeKfd::fail_next(uint32_t nr, int err, int count) {
  std::lock_guard lock(s_->mu);
  s_->rules.push_back({nr, err, count});
}

void FakeKfd::set_missing(const std::string& path, bool missing) {
  set_open_errno(path, missing ? ENOENT : 0);
}

void FakeKfd::set_open_errno(const std::string& path, int err) {
  std::lock_guard lock(s_->mu);
  if (err == 0) {
    s_->open_errors.erase(path);
  } else {
    s_->open_errors[path] = err;
  }
}

}  // namespace baregrad::mock
