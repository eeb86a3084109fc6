#include "drivers/mock/nvgpu/fake_gpu.h"

#include <chrono>
#include <sstream>

#include "base/check.h"
#include "base/format.h"
#include "drivers/mock/nvgpu/channel.h"

namespace baregrad::mock {

// The channel lock, re-entrant for its holder: a KernelExecutor runs under it and may call back.
class FakeNvGpu::Lock {
 public:
  explicit Lock(FakeNvGpu& g) : g_(g) {
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
  FakeNvGpu& g_;
};

std::string_view fault_kind_name(FaultKind k) {
  switch (k) {
    case FaultKind::kMmuFault:
      return "MMU fault";
    case FaultKind::kGpEntry:
      return "GP entry error";
    case FaultKind::kPushbuffer:
      return "pushbuffer error";
    case FaultKind::kIllegalMethod:
      return "illegal method";
    case FaultKind::kIllegalClass:
      return "illegal class";
    case FaultKind::kIllegalValue:
      return "illegal value";
    case FaultKind::kBadQmd:
      return "bad QMD";
    case FaultKind::kLaunch:
      return "launch error";
  }
  UNREACHABLE() << "fault kind " << static_cast<int>(k);
}

std::string Fault::to_string() const {
  std::ostringstream os;
  os << fault_kind_name(kind);
  if (access != Access::kNone) os << (access == Access::kRead ? " (read)" : " (write)");
  os << " at " << hex(address) << " on channel " << token;
  if (method != kNoMethod) {
    std::string_view name = method_name(cls, method);
    os << ": " << nv::class_name(cls) << " subchannel " << subchannel << " method " << hex(method);
    if (!name.empty()) os << " (" << name << ")";
    os << " at pushbuffer " << hex(pushbuffer_va);
  }
  if (qmd_va != 0) os << ", QMD " << hex(qmd_va);
  os << ": " << what;
  return os.str();
}

FakeNvGpu::FakeNvGpu(GpuMemory& memory, nv::Generation generation)
    : memory_(memory), generation_(generation) {}

FakeNvGpu::~FakeNvGpu() = default;

uint32_t FakeNvGpu::host_class() const {
  switch (generation_) {
    case nv::Generation::kAmpere:
    case nv::Generation::kAda:
      return nv::kAmpereChannelGpfifoA;
    case nv::Generation::kHopper:
      return nv::kHopperChannelGpfifoA;
    case nv::Generation::kBlackwell:
      return nv::kBlackwellChannelGpfifoA;
  }
  UNREACHABLE() << "generation " << static_cast<int>(generation_);
}

Status FakeNvGpu::add_channel(const ChannelConfig& c) {
  if (c.ring_entries < 2 || c.ring_va % 8 != 0 || c.userd_va % 4 != 0) {
    return invalid_argument("GPFIFO channel " + std::to_string(c.token) + ": a ring of " +
                            std::to_string(c.ring_entries) + " entries at " + hex(c.ring_va) +
                            ", USERD at " + hex(c.userd_va) +
                            " (>= 2 entries, ring 8-byte and USERD 4-byte aligned)");
  }
  Lock lock(*this);
  if (find(c.token) != nullptr) {
    return invalid_argument("GPFIFO channel token " + std::to_string(c.token) + " is in use");
  }
  auto ch = std::make_unique<Channel>();
  ch->cfg = c;
  channels_.push_back(std::move(ch));
  return {};
}

Status FakeNvGpu::remove_channel(uint32_t token) {
  Lock lock(*this);
  CHECK(!lock.nested()) << "remove_channel from inside a launch";
  for (auto it = channels_.begin(); it != channels_.end(); ++it) {
    if ((*it)->cfg.token == token) {
      channels_.erase(it);
      return {};
    }
  }
  return not_found("no GPFIFO channel with token " + std::to_string(token));
}

void FakeNvGpu::set_executor(KernelExecutor* e) {
  Lock lock(*this);
  executor_ = e;
}

void FakeNvGpu::ring(uint32_t token) {
  {
    std::lock_guard info(info_mu_);
    counters_.doorbells++;
    if (lost_doorbells_ > 0) {
      lost_doorbells_--;
      counters_.lost_doorbells++;
      return;
    }
  }
  {
    Lock lock(*this);
    if (find(token) == nullptr) {
      std::lock_guard info(info_mu_);
      counters_.unknown_doorbells++;
      return;
    }
  }
  run_until_idle();
}

bool FakeNvGpu::run_until_idle() {
  Lock lock(*this);
  if (lock.nested()) return false;
  bool any = false;
  for (;;) {
    bool pass = false;
    // By index: a launch callback may add channels (Channel objects do not move).
    for (size_t i = 0; i < channels_.size(); i++) pass |= run_channel(*channels_[i]);
    if (!pass) return any;
    any = true;
  }
}

bool FakeNvGpu::run_channel(Channel& ch) {
  if (ch.dead) return false;
  {
    std::lock_guard info(info_mu_);
    if (hung_.count(ch.cfg.token) != 0) return false;
  }
  return ChannelRunner(*this, ch).run();
}

FakeNvGpu::Channel* FakeNvGpu::find(uint32_t token) {
  for (auto& ch : channels_) {
    if (ch->cfg.token == token) return ch.get();
  }
  return nullptr;
}

std::vector<Fault> FakeNvGpu::faults() const {
  std::lock_guard info(info_mu_);
  return faults_;
}

void FakeNvGpu::on_fault(std::function<void(const Fault&)> hook) {
  std::lock_guard info(info_mu_);
  fault_hook_ = std::move(hook);
}

GpuCounters FakeNvGpu::counters() const {
  std::lock_guard info(info_mu_);
  return counters_;
}

Result<ChannelStatus> FakeNvGpu::channel_status(uint32_t token) {
  Lock lock(*this);
  const Channel* ch = find(token);
  if (ch == nullptr) return not_found("no GPFIFO channel with token " + std::to_string(token));
  ChannelStatus s;
  s.gp_get = ch->gp_get;
  s.busy = ch->seg.active;
  s.blocked = ch->blocked;
  s.dead = ch->dead;
  s.classes = ch->classes;
  {
    std::lock_guard info(info_mu_);
    s.hung = hung_.count(token) != 0;
  }
  for (uint32_t sc = 0; sc < 8; sc++) {
    if (!is_compute_class(ch->classes[sc])) continue;
    auto get = [&](uint32_t m) { return uint64_t{ch->engine_data(sc, m)}; };
    // The _A method holds the upper bits, _B the lower 32 (the class headers' field layout).
    uint64_t upper = local_memory_upper_mask(ch->classes[sc]);
    s.local_memory_va = (get(0x790) & upper) << 32 | get(0x794);
    s.local_memory_bytes_per_tpc = (get(0x2e4) & 0xff) << 32 | get(0x2e8);
    s.local_memory_max_sm_count = static_cast<uint32_t>(get(0x2ec) & 0x1ff);
    s.local_memory_window = (get(0x7b0) & 0x1ffff) << 32 | get(0x7b4);
    s.shared_memory_window = (get(0x2a0) & 0x1ffff) << 32 | get(0x2a4);
    break;
  }
  return s;
}

uint64_t FakeNvGpu::timestamp_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

void FakeNvGpu::inject_mmu_fault_at(uint64_t va) {
  std::lock_guard info(info_mu_);
  fault_vas_.insert(va);
}

void FakeNvGpu::inject_hang(uint32_t token) {
  std::lock_guard info(info_mu_);
  hung_.insert(token);
}

void FakeNvGpu::inject_lost_doorbell(uint32_t n) {
  std::lock_guard info(info_mu_);
  lost_doorbells_ += n;
}

uint32_t FakeNvGpu::Channel::host_data(uint32_t method) const {
  auto it = host.find(method);
  return it == host.end() ? 0 : it->second;
}

uint32_t FakeNvGpu::Channel::engine_data(uint32_t subchannel, uint32_t method) const {
  auto it = engine.find(subchannel << 16 | method);
  return it == engine.end() ? 0 : it->second;
}

}  // namespace baregrad::mock
