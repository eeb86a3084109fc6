// FakeAmdGpu: hooks, the pump, queue bookkeeping, memory access, faults, interrupts, counters.
#include "drivers/mock/amdgpu/fake_gpu.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <sstream>

#include "base/check.h"
#include "base/format.h"
#include "drivers/amd/kfd_abi.h"

namespace baregrad::mock {

// The queue lock, re-entrant for its holder: an AmdKernelExecutor runs under it and may call back.
class FakeAmdGpu::Lock {
 public:
  explicit Lock(FakeAmdGpu& g) : g_(g) {
    g_.mu_.lock();
    ++g_.depth_;
  }
  ~Lock() {
    --g_.depth_;
    g_.mu_.unlock();
  }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;
  bool nested() const { return g_.depth_ > 1; }

 private:
  FakeAmdGpu& g_;
};

std::string AmdGpuFault::to_string() const {
  std::ostringstream os;
  switch (kind) {
    case Kind::kVmFault:
      os << "VM fault";
      break;
    case Kind::kBadPacket:
      os << "bad packet";
      break;
    case Kind::kLaunch:
      os << "launch error";
      break;
    case Kind::kHang:
      os << "hang";
      break;
  }
  os << " at " << hex(address) << " on queue " << queue_id;
  if (packet_va != 0) os << ", packet at " << hex(packet_va);
  os << ": " << what;
  return os.str();
}

FakeAmdGpu::FakeAmdGpu(FakeKfd& kfd, int gpu) : kfd_(kfd), gpu_(gpu) {
  CHECK(gpu >= 0 && static_cast<size_t>(gpu) < kfd.config().gpus.size()) << "no fake GPU " << gpu;
  auto arch = amd::arch_for_target_version(kfd.config().gpus[gpu].gfx_target_version);
  CHECK(arch.ok()) << arch.status();
  arch_ = *arch;
  kfd_.on_doorbell([this](const FakeKfdQueue& q, uint64_t v) { doorbell(q, v); });
  kfd_.on_progress([this] { run_until_idle(); });
}

FakeAmdGpu::~FakeAmdGpu() {
  kfd_.on_doorbell(nullptr);
  kfd_.on_progress(nullptr);
  Lock lock(*this);  // a pump still running on another thread finishes first
}

void FakeAmdGpu::set_executor(AmdKernelExecutor* e) {
  Lock lock(*this);
  executor_ = e;
}

void FakeAmdGpu::doorbell(const FakeKfdQueue& q, uint64_t /*value*/) {
  if (q.gpu != gpu_) return;
  {
    std::lock_guard info(info_mu_);
    counters_.doorbells++;
    if (lost_doorbells_ > 0) {
      lost_doorbells_--;
      counters_.lost_doorbells++;
      return;
    }
  }
  run_until_idle();
}

bool FakeAmdGpu::run_until_idle() {
  Lock lock(*this);
  if (lock.nested()) return false;
  sync_queues();
  bool any = false;
  for (;;) {
    bool pass = false;
    for (auto& [id, q] : queues_) pass |= run_queue(*q);
    if (!pass) return any;
    any = true;
  }
}

void FakeAmdGpu::sync_queues() {
  std::set<uint32_t> live;
  for (const FakeKfdQueue& k : kfd_.queues()) {
    if (k.gpu != gpu_) continue;
    live.insert(k.id);
    auto it = queues_.find(k.id);
    const FakeKfdQueue* old = it == queues_.end() ? nullptr : &it->second->info;
    // A queue id KFD reused for a different queue (even at the same addresses) starts afresh.
    if (old == nullptr || old->serial != k.serial) {
      auto q = std::make_unique<Queue>();
      q->info = k;
      queues_[k.id] = std::move(q);
    }
  }
  std::erase_if(queues_, [&](const auto& kv) { return live.count(kv.first) == 0; });
}

bool FakeAmdGpu::run_queue(Queue& q) {
  if (q.dead) return false;
  {
    std::lock_guard info(info_mu_);
    if (hung_.count(q.info.id) != 0) return false;
  }
  switch (q.info.type) {
    case amd::kKfdIocQueueTypeCompute:
      return run_pm4_queue(q);
    case amd::kKfdIocQueueTypeSdma:
      return run_sdma_queue(q);
    case amd::kKfdIocQueueTypeComputeAql:
      return run_aql_queue(q);
  }
  bad_packet(q, 0, "queue type " + std::to_string(q.info.type) + " is not modelled");
  return false;
}

uint8_t* FakeAmdGpu::access(
    Queue& q, uint64_t va, size_t len, uint64_t packet_va, const std::string& what) {
  CHECK_GT(len, 0u);
  std::string range = what + ": " + std::to_string(len) + " bytes at " + hex(va);
  if (va + len < va) {
    fault(q, AmdGpuFault::Kind::kVmFault, va, packet_va, range + " wraps the address space");
    return nullptr;
  }
  std::optional<uint64_t> injected;
  {
    std::lock_guard info(info_mu_);
    auto it = fault_vas_.lower_bound(va);
    if (it != fault_vas_.end() && *it - va < len) injected = *it;
  }
  if (injected) {
    fault(q, AmdGpuFault::Kind::kVmFault, *injected, packet_va,
          range + " (" + hex(*injected) + " made unmapped)");
    return nullptr;
  }
  if (auto p = kfd_.resolve(va, len)) return *p;
  // The first byte no allocation covers (resolve is monotonic in the length from one start).
  uint64_t bad = va;
  if (kfd_.resolve(va, 1)) {
    size_t ok = 1, fail = len;
    while (fail - ok > 1) {
      size_t mid = ok + (fail - ok) / 2;
      (kfd_.resolve(va, mid) ? ok : fail) = mid;
    }
    bad = va + ok;
  }
  fault(q, AmdGpuFault::Kind::kVmFault, bad, packet_va,
        range + " (no GPU mapping covers " + hex(bad) + ")");
  return nullptr;
}

FakeAmdGpu::Step FakeAmdGpu::fault(
    Queue& q, AmdGpuFault::Kind k, uint64_t address, uint64_t packet_va, std::string what) {
  AmdGpuFault f{k, q.info.id, address, packet_va, std::move(what)};
  q.dead = true;
  q.blocked = false;
  std::function<void(const AmdGpuFault&)> hook;
  {
    std::lock_guard info(info_mu_);
    faults_.push_back(f);
    hook = fault_hook_;
  }
  if (hook) hook(f);
  if (k == AmdGpuFault::Kind::kVmFault) {
    // A page not present, as the UTCL2 reports a VA with no PTE; precise (the faulting VA).
    kfd_.raise_memory_exception(gpu_, address, amd::KfdMemoryExceptionFailure{1, 0, 0, 0});
  }
  return Step::kStop;
}

FakeAmdGpu::Step FakeAmdGpu::bad_packet(Queue& q, uint64_t packet_va, std::string what) {
  return fault(q, AmdGpuFault::Kind::kBadPacket, packet_va, packet_va, std::move(what));
}

FakeAmdGpu::Step FakeAmdGpu::launch(Queue& q, const AmdLaunch& l) {
  if (l.grid.x == 0 || l.grid.y == 0 || l.grid.z == 0) return Step::kNext;  // nothing to run
  AmdKernelExecutor* e = &executor();
  Status s = e->launch(l);
  if (!s.ok()) {
    return fault(q, AmdGpuFault::Kind::kLaunch, l.packet_va, l.packet_va,
                 "dispatch of code at " + hex(l.code_va) + ": " + std::string(s.message()));
  }
  count(&AmdGpuCounters::dispatches);
  return Step::kNext;
}

std::optional<uint64_t> FakeAmdGpu::load(
    Queue& q, uint64_t va, int bytes, uint64_t packet_va, const std::string& what) {
  CHECK(bytes == 4 || bytes == 8);
  if (va % static_cast<uint64_t>(bytes) != 0) {
    bad_packet(q, packet_va,
               what + " at " + hex(va) + " is not " + std::to_string(bytes) + "-byte aligned");
    return std::nullopt;
  }
  uint8_t* p = access(q, va, static_cast<size_t>(bytes), packet_va, what);
  if (p == nullptr) return std::nullopt;
  // The host mapping keeps the VA's offset in its page, so `p` is aligned too.
  if (bytes == 4) {
    return std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(p))
        .load(std::memory_order_acquire);
  }
  return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(p)).load(std::memory_order_acquire);
}

bool FakeAmdGpu::store(
    Queue& q, uint64_t va, int bytes, uint64_t value, uint64_t packet_va, const std::string& what) {
  CHECK(bytes == 4 || bytes == 8);
  if (va % static_cast<uint64_t>(bytes) != 0) {
    bad_packet(q, packet_va,
               what + " at " + hex(va) + " is not " + std::to_string(bytes) + "-byte aligned");
    return false;
  }
  uint8_t* p = access(q, va, static_cast<size_t>(bytes), packet_va, what);
  if (p == nullptr) return false;
  if (bytes == 4) {
    std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(p))
        .store(static_cast<uint32_t>(value), std::memory_order_release);
  } else {
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(p))
        .store(value, std::memory_order_release);
  }
  return true;
}

std::optional<uint64_t> FakeAmdGpu::read_wptr(Queue& q) {
  return load(q, q.info.write_pointer_address, 8, 0, "write pointer");
}

bool FakeAmdGpu::write_rptr(Queue& q) {
  return store(q, q.info.read_pointer_address, 8, q.rptr, 0, "read pointer");
}

void FakeAmdGpu::interrupt(uint32_t event_id) {
  count(&AmdGpuCounters::interrupts);
  // NOTE: KFD ignores an interrupt for an event it does not know; so does the fake.
  (void)kfd_.signal_event(event_id);
}

void FakeAmdGpu::count(uint64_t AmdGpuCounters::* field, uint64_t n) {
  std::lock_guard info(info_mu_);
  counters_.*field += n;
}

FakeAmdGpu::Step FakeAmdGpu::block(Queue& q) {
  if (!q.blocked) count(&AmdGpuCounters::waits_blocked);
  q.blocked = true;
  return Step::kBlocked;
}

std::vector<AmdGpuFault> FakeAmdGpu::faults() const {
  std::lock_guard info(info_mu_);
  return faults_;
}

void FakeAmdGpu::on_fault(std::function<void(const AmdGpuFault&)> hook) {
  std::lock_guard info(info_mu_);
  fault_hook_ = std::move(hook);
}

AmdGpuCounters FakeAmdGpu::counters() const {
  std::lock_guard info(info_mu_);
  return counters_;
}

uint64_t FakeAmdGpu::timestamp_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

void FakeAmdGpu::inject_vm_fault_at(uint64_t va) {
  std::lock_guard info(info_mu_);
  fault_vas_.insert(va);
}

void FakeAmdGpu::inject_hang(uint32_t queue_id) {
  std::lock_guard info(info_mu_);
  hung_.insert(queue_id);
}

void FakeAmdGpu::inject_lost_doorbell(uint32_t n) {
  std::lock_guard info(info_mu_);
  lost_doorbells_ += n;
}

}  // namespace baregrad::mock
