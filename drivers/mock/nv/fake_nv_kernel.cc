// FakeNvKernel: device files, mmap, sysfs, the ioctl front door, queries, hooks, injections.

#include "drivers/mock/nv/fake_nv_kernel.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "base/format.h"
#include "drivers/mock/nv/fake_nv_state.h"
#include "drivers/nv/gpfifo.h"
#include "drivers/nv/rm_abi.h"

namespace baregrad::mock {
namespace {

std::string quoted(const std::string& path) { return "\"" + path + "\""; }

// Runs the hook calls collected under the lock once it is released.
void run_pending(std::vector<std::function<void()>> calls) {
  for (auto& call : calls) call();
}

}  // namespace

FakeBacking::~FakeBacking() {
  if (memfd < 0) return;  // process memory: not ours
  if (host != nullptr) ::munmap(host, size);
  ::close(memfd);
}

Result<std::shared_ptr<FakeBacking>> FakeBacking::create(uint64_t size, const std::string& name) {
  auto b = std::make_shared<FakeBacking>();
  b->size = size;
  b->memfd = ::memfd_create(name.c_str(), MFD_CLOEXEC);
  if (b->memfd < 0) return errno_error("memfd_create(" + quoted(name) + ")", errno);
  if (::ftruncate(b->memfd, static_cast<off_t>(size)) != 0) {
    return errno_error("ftruncate(memfd, " + hex(size) + ")", errno);
  }
  void* host = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, b->memfd, 0);
  if (host == MAP_FAILED) return errno_error("mmap(memfd, " + hex(size) + ")", errno);
  b->host = static_cast<uint8_t*>(host);
  return b;
}

FakeNvGpuConfig FakeNvGpuConfig::preset(nv::Generation g) {
  FakeNvGpuConfig c;
  c.generation = g;
  switch (g) {
    case nv::Generation::kAmpere:
      c.architecture = nv::kArchGa100;
      c.implementation = 2;  // NV2080_CTRL_MC_ARCH_INFO_IMPLEMENTATION_GA102
      c.name = "NVIDIA GeForce RTX 3090";
      c.pci_device_id = 0x2204;
      c.gpcs = 7, c.tpc_per_gpc = 6, c.sm_per_tpc = 2, c.tpcs = 41;
      c.max_warps_per_sm = 48, c.sm_version = 0x806;
      c.vram_bytes = 24576ull << 20, c.heap_bytes = 24064ull << 20;
      break;
    case nv::Generation::kAda:
      c.architecture = nv::kArchAd100;
      c.implementation = 2;  // ..._IMPLEMENTATION_AD102
      c.name = "NVIDIA GeForce RTX 4090";
      c.pci_device_id = 0x2684;
      c.gpcs = 12, c.tpc_per_gpc = 6, c.sm_per_tpc = 2, c.tpcs = 64;
      c.max_warps_per_sm = 48, c.sm_version = 0x809;
      c.vram_bytes = 24564ull << 20, c.heap_bytes = 24052ull << 20;
      break;
    case nv::Generation::kHopper:
      break;  // the defaults: GH100 as an H200
    case nv::Generation::kBlackwell:
      c.architecture = nv::kArchGb100;
      c.implementation = 0;  // ..._IMPLEMENTATION_GB100
      c.name = "NVIDIA B200";
      c.pci_device_id = 0x2901;
      c.gpcs = 8, c.tpc_per_gpc = 10, c.sm_per_tpc = 2, c.tpcs = 74;
      c.max_warps_per_sm = 64, c.sm_version = 0xa00;
      c.vram_bytes = 183359ull << 20, c.heap_bytes = 182847ull << 20;
      break;
  }
  return c;
}

FakeNvKernel::FakeNvKernel(FakeNvConfig config) : s_(std::make_unique<State>()) {
  s_->cfg = std::move(config);
  Result<nv::RmBranch> branch = nv::rm_branch_for_version(s_->cfg.driver_version);
  if (branch.ok()) s_->branch = *branch;
  for (size_t i = 0; i < s_->cfg.gpus.size(); ++i) {
    FakeGpuState g;
    g.cfg = s_->cfg.gpus[i];
    g.gpu_id = 0x100 * static_cast<uint32_t>(i + 1);  // what RM derives from the PCI bus
    for (int b = 0; b < 16; ++b) g.uuid.uuid[b] = static_cast<uint8_t>(0xb0 + 16 * i + b);
    Result<std::shared_ptr<FakeBacking>> page =
        FakeBacking::create(nv::kUsermodeBytes, "fake-nv-usermode" + std::to_string(i));
    CHECK(page.ok()) << page.status();
    g.usermode = *page;
    std::memset(g.usermode->host + nv::kDoorbellOffset, 0xff, 4);  // nothing pending
    s_->gpus.push_back(std::move(g));
  }
}

FakeNvKernel::~FakeNvKernel() = default;

const FakeNvConfig& FakeNvKernel::config() const { return s_->cfg; }

std::optional<FailRule> FakeNvKernel::State::take_rule(FailRule::Kind kind, uint64_t key) {
  for (auto it = rules.begin(); it != rules.end(); ++it) {
    if (it->kind != kind || it->key != key) continue;
    FailRule fired = *it;
    if (--it->count == 0) rules.erase(it);
    return fired;
  }
  return std::nullopt;
}

// ---- hcq::Os -----------------------------------------------------------------------------------

Result<int> FakeNvKernel::open(const std::string& path, int /*flags*/) {
  std::unique_lock lock(s_->mu);
  auto err = s_->open_errors.find(path);
  if (err != s_->open_errors.end()) return errno_error("open(" + quoted(path) + ")", err->second);
  FakeFd f;
  f.path = path;
  if (path == "/dev/nvidiactl") {
    f.kind = FdKind::kCtl;
  } else if (path == "/dev/nvidia-uvm") {
    f.kind = FdKind::kUvm;
  } else if (path.starts_with("/dev/nvidia") && path.size() > 11 &&
             path.find_first_not_of("0123456789", 11) == std::string::npos &&
             std::stoul(path.substr(11)) < s_->gpus.size()) {
    f.kind = FdKind::kDevice;
    f.gpu = static_cast<int>(std::stoul(path.substr(11)));
  } else {
    return errno_error("open(" + quoted(path) + ")", ENOENT);
  }
  int fd = s_->next_fd++;
  s_->fds.emplace(fd, std::move(f));
  return fd;
}

Status FakeNvKernel::close(int fd) {
  std::unique_lock lock(s_->mu);
  auto it = s_->fds.find(fd);
  if (it == s_->fds.end()) return errno_error("close(fd " + std::to_string(fd) + ")", EBADF);
  if (it->second.kind == FdKind::kCtl) s_->free_clients_of(fd);
  if (fd == s_->uvm_fd) {  // the process's UVM VA space goes with its fd
    s_->uvm.clear();
    s_->uvm_fd = -1;
    for (FakeGpuState& g : s_->gpus) g.uvm_registered = false, g.uvm_vaspace = 0;
  }
  s_->fds.erase(it);
  std::vector<std::function<void()>> calls = std::move(s_->pending);
  s_->pending.clear();
  lock.unlock();
  run_pending(std::move(calls));
  return Status();
}

Status FakeNvKernel::ioctl(int fd, unsigned long request, void* arg, std::string_view what) {
  std::unique_lock lock(s_->mu);
  auto fail = [&](int err) {
    return errno_error("ioctl " + std::string(what) + " (request " + hex(request) + ") on fd " +
                           std::to_string(fd),
                       err);
  };
  auto it = s_->fds.find(fd);
  if (it == s_->fds.end()) return fail(EBADF);
  FakeFd& f = it->second;
  bool uvm = f.kind == FdKind::kUvm;
  uint64_t nr = uvm ? request : nv::ioctl_nr(request);
  if (auto r = s_->take_rule(FailRule::Kind::kErrno, nr)) return fail(r->err);
  int err = 0;
  if (uvm) {
    err = s_->uvm_ioctl(fd, f, request, arg);
  } else if (!nv::is_nv_escape_request(request)) {
    s_->note(std::string(what) + ": request " + hex(request) + " is not _IOWR('F', ...)");
    err = EINVAL;
  } else {
    err = s_->rm_escape(fd, f, nv::ioctl_nr(request), arg, nv::ioctl_size(request));
  }
  std::vector<std::function<void()>> calls = std::move(s_->pending);
  s_->pending.clear();
  lock.unlock();
  run_pending(std::move(calls));
  return err == 0 ? Status() : fail(err);
}

Result<void*> FakeNvKernel::mmap(
    void* addr, size_t len, int prot, int flags, int fd, off_t offset) {
  std::unique_lock lock(s_->mu);
  std::string call = "mmap(len " + hex(len) + ", prot " + hex(static_cast<unsigned>(prot)) +
                     ", flags " + hex(static_cast<unsigned>(flags)) + ", fd " + std::to_string(fd) +
                     ", offset " + hex(static_cast<uint64_t>(offset)) + ")";
  int real_fd = -1;
  off_t real_offset = offset;
  FakeObject* target = nullptr;
  if (fd >= 0) {
    auto it = s_->fds.find(fd);
    if (it == s_->fds.end()) return errno_error(call, EBADF);
    const std::optional<MmapContext>& ctx = it->second.ctx;
    if (!ctx || (flags & MAP_SHARED) == 0 || offset < 0 ||
        static_cast<uint64_t>(offset) + len > ctx->length) {
      s_->note(call + ": no NV_ESC_RM_MAP_MEMORY context covers it");
      return errno_error(call, EINVAL);
    }
    real_fd = ctx->mem->memfd;
    target = s_->find(ctx->client, ctx->handle);
  }
  void* p = ::mmap(addr, len, prot, flags, real_fd, real_offset);
  if (p == MAP_FAILED) return errno_error(call, errno);
  uint64_t lo = reinterpret_cast<uint64_t>(p), hi = lo + len;
  for (auto& [h, c] : s_->clients) {  // whatever was mapped there is gone
    for (auto& [oh, o] : c.objects) {
      if (o.cpu_va && *o.cpu_va < hi && *o.cpu_va + (o.mem ? o.mem->size : 0) > lo)
        o.cpu_va.reset();
    }
  }
  if (target != nullptr) target->cpu_va = lo;
  return p;
}

Status FakeNvKernel::munmap(void* addr, size_t len) {
  std::unique_lock lock(s_->mu);
  if (::munmap(addr, len) != 0) {
    return errno_error(
        "munmap(" + hex(reinterpret_cast<uintptr_t>(addr)) + ", len " + hex(len) + ")", errno);
  }
  uint64_t lo = reinterpret_cast<uint64_t>(addr), hi = lo + len;
  for (auto& [h, c] : s_->clients) {
    for (auto& [oh, o] : c.objects) {
      if (o.cpu_va && *o.cpu_va < hi && *o.cpu_va + (o.mem ? o.mem->size : 0) > lo)
        o.cpu_va.reset();
    }
  }
  return Status();
}

Result<std::string> FakeNvKernel::read_file(const std::string& path) {
  std::shared_lock lock(s_->mu);
  auto err = s_->open_errors.find(path);
  if (err != s_->open_errors.end()) return errno_error("open(" + quoted(path) + ")", err->second);
  if (path == "/sys/module/nvidia/version") return s_->cfg.driver_version + "\n";
  return errno_error("open(" + quoted(path) + ")", ENOENT);
}

Result<std::vector<std::string>> FakeNvKernel::list_dir(const std::string& path) {
  return errno_error("opendir(" + quoted(path) + ")", ENOENT);
}

Result<int> FakeNvKernel::eventfd(unsigned initval, int flags) {
  return hcq::linux_os().eventfd(initval, flags);
}

Result<int> FakeNvKernel::poll(int fd, short events, int timeout_ms) {
  return hcq::linux_os().poll(fd, events, timeout_ms);
}

// ---- queries -----------------------------------------------------------------------------------

std::optional<uint8_t*> FakeNvKernel::resolve(uint64_t va, size_t bytes) const {
  std::shared_lock lock(s_->mu);
  auto it = s_->uvm.upper_bound(va);
  if (it == s_->uvm.begin()) return std::nullopt;
  const UvmRange& r = std::prev(it)->second;
  if (r.mem == nullptr || va - r.base > r.length || bytes > r.length - (va - r.base)) {
    return std::nullopt;
  }
  return r.mem->host + r.offset + (va - r.base);
}

std::vector<FakeNvAllocation> FakeNvKernel::allocations() const {
  std::shared_lock lock(s_->mu);
  std::vector<FakeNvAllocation> out;
  for (const auto& [h, c] : s_->clients) {
    for (const auto& [oh, o] : c.objects) {
      if (o.kind != ObjKind::kMemory) continue;
      FakeNvAllocation a{o.gpu, o.handle, o.cls, o.mem->size, std::nullopt, o.cpu_va};
      for (const auto& [base, r] : s_->uvm) {
        if (r.client == h && r.handle == o.handle && r.mem != nullptr) a.gpu_va = base;
      }
      out.push_back(a);
    }
  }
  return out;
}

std::vector<FakeNvChannel> FakeNvKernel::channels() const {
  std::shared_lock lock(s_->mu);
  std::vector<FakeNvChannel> out;
  for (const auto& [h, c] : s_->clients) {
    for (const auto& [oh, o] : c.objects) {
      if (o.kind == ObjKind::kChannel) out.push_back(o.channel);
    }
  }
  return out;
}

uint8_t* FakeNvKernel::usermode_page(int gpu) const {
  std::shared_lock lock(s_->mu);
  CHECK(gpu >= 0 && gpu < static_cast<int>(s_->gpus.size())) << "no fake GPU " << gpu;
  return s_->gpus[gpu].usermode->host;
}

std::vector<std::string> FakeNvKernel::log() const {
  std::shared_lock lock(s_->mu);
  return s_->log;
}

// ---- hooks -------------------------------------------------------------------------------------

void FakeNvKernel::on_channel(std::function<void(const FakeNvChannel&)> added,
                              std::function<void(const FakeNvChannel&)> removed) {
  std::unique_lock lock(s_->mu);
  s_->channel_added = std::move(added);
  s_->channel_removed = std::move(removed);
}

void FakeNvKernel::on_doorbell(std::function<void(int gpu, uint32_t token)> hook) {
  std::unique_lock lock(s_->mu);
  s_->doorbell = std::move(hook);
}

void FakeNvKernel::on_progress(std::function<void()> hook) {
  std::unique_lock lock(s_->mu);
  s_->progress = std::move(hook);
}

void FakeNvKernel::progress() {
  std::function<void()> hook;
  {
    std::shared_lock lock(s_->mu);
    hook = s_->progress;
  }
  if (hook) hook();
}

int FakeNvKernel::poll_doorbells() {
  std::vector<std::pair<int, uint32_t>> rung;
  std::function<void(int, uint32_t)> hook;
  {
    std::shared_lock lock(s_->mu);
    for (size_t i = 0; i < s_->gpus.size(); ++i) {
      auto* word = reinterpret_cast<uint32_t*>(s_->gpus[i].usermode->host + nv::kDoorbellOffset);
      uint32_t token = std::atomic_ref<uint32_t>(*word).exchange(0xffffffff);
      if (token != 0xffffffff) rung.emplace_back(static_cast<int>(i), token);
    }
    hook = s_->doorbell;
  }
  if (hook) {
    for (const auto& [gpu, token] : rung) hook(gpu, token);
  }
  return static_cast<int>(rung.size());
}

// ---- injection ---------------------------------------------------------------------------------

void FakeNvKernel::fail_escape(uint32_t escape, uint32_t rm_status, int count) {
  std::unique_lock lock(s_->mu);
  s_->rules.push_back({FailRule::Kind::kEscape, escape, rm_status, 0, count});
}

void FakeNvKernel::fail_alloc(uint32_t cls, uint32_t rm_status, int count) {
  std::unique_lock lock(s_->mu);
  s_->rules.push_back({FailRule::Kind::kAlloc, cls, rm_status, 0, count});
}

void FakeNvKernel::fail_control(uint32_t cmd, uint32_t rm_status, int count) {
  std::unique_lock lock(s_->mu);
  s_->rules.push_back({FailRule::Kind::kControl, cmd, rm_status, 0, count});
}

void FakeNvKernel::fail_uvm(unsigned long request, uint32_t rm_status, int count) {
  std::unique_lock lock(s_->mu);
  s_->rules.push_back({FailRule::Kind::kUvm, request, rm_status, 0, count});
}

void FakeNvKernel::fail_ioctl_errno(unsigned long nr, int err, int count) {
  std::unique_lock lock(s_->mu);
  s_->rules.push_back({FailRule::Kind::kErrno, nr, 0, err, count});
}

void FakeNvKernel::set_missing(const std::string& path, bool missing) {
  set_open_errno(path, missing ? ENOENT : 0);
}

void FakeNvKernel::set_open_errno(const std::string& path, int err) {
  std::unique_lock lock(s_->mu);
  if (err == 0) {
    s_->open_errors.erase(path);
  } else {
    s_->open_errors[path] = err;
  }
}

}  // namespace baregrad::mock
