// Signals, the timeline protocol and the sticky error state shared by every HCQ device.
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <ctime>
#include <thread>

#include "base/options.h"
#include "base/thread_pool.h"
#include "hcq/hcq.h"

namespace baregrad::hcq {
namespace {
constexpr size_t kSignalPageBytes = 4096;

// The futex of a 64-bit value is its low half (little-endian): a change of the value that
// leaves the low half equal is still seen, at the next timed wakeup.
void futex_wait(const std::atomic<uint64_t>* value, uint64_t seen, std::chrono::milliseconds t) {
  timespec ts{static_cast<time_t>(t.count() / 1000), static_cast<long>(t.count() % 1000) * 1000000};
  syscall(SYS_futex, reinterpret_cast<const uint32_t*>(value), FUTEX_WAIT_PRIVATE,
          static_cast<uint32_t>(seen), &ts, nullptr, 0);
}

void futex_wake(const std::atomic<uint64_t>* value) {
  syscall(SYS_futex, reinterpret_cast<const uint32_t*>(value), FUTEX_WAKE_PRIVATE, INT32_MAX,
          nullptr, nullptr, 0);
}

}  // namespace

Signal::Signal(Device& dev, SignalSlot* slot, uint64_t va, std::string name)
    : dev_(dev), slot_(slot), va_(va), name_(std::move(name)) {}

Signal::~Signal() { dev_.release_slot(slot_, va_); }

std::chrono::milliseconds default_timeout() {
  return std::chrono::milliseconds(std::max(100, options().hang_timeout_ms));
}

Status Signal::wait(uint64_t v, std::chrono::milliseconds timeout) const {
  using Clock = std::chrono::steady_clock;
  uint64_t seen = value();
  if (seen >= v) return Status();
  uint64_t work = dev_.work_done();
  auto last_progress = Clock::now();
  auto start = Clock::now();
  for (uint32_t round = 0;; round++) {
    if (dev_.failed()) return dev_.error();
    // Spin briefly (the latency of a tiny launch), then yield for up to 2 ms (other runnable
    // threads, such as a CPU device's workers, get the core; waking a sleeping vCPU costs ~100
    // us), then sleep on the value's futex at most 1 ms a time: the CPU device wakes it, a
    // GPU's write is seen at the next poll.
    if (round < 64) {
      for (int i = 0; i < 8; i++) cpu_relax();
    } else if ((round & 15) != 0 || Clock::now() - start < std::chrono::milliseconds(2)) {
      std::this_thread::yield();
    } else {
      dev_.waiters_.fetch_add(1, std::memory_order_seq_cst);
      if (slot_->value.load(std::memory_order_seq_cst) == seen)
        futex_wait(&slot_->value, seen, std::chrono::milliseconds(1));
      dev_.waiters_.fetch_sub(1, std::memory_order_relaxed);
      dev_.progress();
    }
    uint64_t now_seen = value();
    if (now_seen >= v) return Status();
    auto now = Clock::now();
    uint64_t now_work = dev_.work_done();
    if (now_seen != seen || now_work != work) {
      seen = now_seen;
      work = now_work;
      last_progress = now;
    } else if (now - last_progress > timeout) {
      return deadline_exceeded("host wait on signal '" + name_ + "' of " + dev_.name() +
                               ": expected >= " + std::to_string(v) + ", saw " +
                               std::to_string(seen) + " for " + std::to_string(timeout.count()) +
                               " ms without progress (HANG_TIMEOUT_MS)");
    }
  }
}

void Signal::wake_waiters(const SignalSlot* slot) { futex_wake(&slot->value); }

Device::~Device() {
  timelines_[0].reset();
  timelines_[1].reset();
  // Signal pages belong to the allocator, which the driver destroys after this base; the
  // driver frees them through its allocator before that (see free_signal_pages()).
}

Result<std::unique_ptr<Signal>> Device::new_signal(std::string name, uint64_t initial) {
  SignalSlot* slot = nullptr;
  uint64_t va = 0;
  {
    std::lock_guard lock(mu_);
    if (free_slots_.empty()) {
      BufferSpec spec{.host = true, .cpu_access = true, .uncached = true, .nolru = true};
      ASSIGN_OR_RETURN(Buffer page, allocator().alloc(kSignalPageBytes, spec));
      signal_pages_.push_back(page);
      for (size_t off = kSignalPageBytes; off >= sizeof(SignalSlot); off -= sizeof(SignalSlot))
        free_slots_.push_back(
            reinterpret_cast<SignalSlot*>(static_cast<uint8_t*>(page.cpu) + off - 16));
    }
    slot = free_slots_.back();
    free_slots_.pop_back();
    for (const Buffer& p : signal_pages_) {
      auto* base = static_cast<uint8_t*>(p.cpu);
      auto* s = reinterpret_cast<uint8_t*>(slot);
      if (s >= base && s < base + p.size) va = p.va + static_cast<uint64_t>(s - base);
    }
  }
  slot->value.store(initial, std::memory_order_relaxed);
  slot->timestamp.store(0, std::memory_order_release);
  {
    std::lock_guard lock(mu_);
    signal_names_[va] = name;
  }
  return std::make_unique<Signal>(*this, slot, va, std::move(name));
}

void Device::release_slot(SignalSlot* slot, uint64_t va) {
  std::lock_guard lock(mu_);
  free_slots_.push_back(slot);
  signal_names_.erase(va);
}

std::string Device::signal_name(uint64_t va) const {
  std::lock_guard lock(mu_);
  auto it = signal_names_.find(va);
  return it == signal_names_.end() ? "?" : it->second;
}

Status Device::init_timeline() {
  ASSIGN_OR_RETURN(timelines_[0], new_signal("timeline"));
  ASSIGN_OR_RETURN(timelines_[1], new_signal("timeline shadow"));
  timeline_value_ = 1;
  return Status();
}

void Device::free_signal_pages() {
  timelines_[0].reset();
  timelines_[1].reset();
  std::lock_guard lock(mu_);
  for (const Buffer& p : signal_pages_) allocator().free(p);
  signal_pages_.clear();
  free_slots_.clear();
}

void Device::release_memory() {
  allocator().release_staging();
  (void)allocator().clear_cache();
  free_signal_pages();
}

Status Device::synchronize(std::chrono::milliseconds timeout) {
  RETURN_IF_ERROR(error());
  std::lock_guard lock(submit_mu_);
  if (!timelines_[0]) return Status();  // torn down
  Status s = timeline().wait(timeline_value_ - 1, timeout);
  if (!s.ok()) {
    if (s.code() == StatusCode::kDeadlineExceeded) {
      std::string what = describe_hang();
      set_error(what.empty() ? s : deadline_exceeded(s.message() + "; " + what));
    }
    return error();
  }
  if (timeline_value_ > kTimelineWrap) {
    // Every queue is idle: swap to the shadow signal and start again from 1.
    int next = 1 - active_.load();
    timelines_[next]->set(0);
    timeline_value_ = 1;
    active_.store(next, std::memory_order_release);
    epoch_.fetch_add(1, std::memory_order_release);
  }
  return Status();
}

Result<uint64_t> Device::submit_on_timeline(HwQueue& q,
                                            const std::function<void(HwQueue&)>& body,
                                            std::span<const int64_t> vars,
                                            std::string_view label) {
  RETURN_IF_ERROR(error());
  std::unique_ptr<Signal> start, end;
  if (profiling()) {
    ASSIGN_OR_RETURN(start, new_signal("profile start"));
    ASSIGN_OR_RETURN(end, new_signal("profile end"));
  }
  std::lock_guard lock(submit_mu_);
  uint64_t v = timeline_value_.fetch_add(1);
  q.reset();
  q.wait(timeline(), v - 1);
  if (start) q.timestamp(*start);
  body(q);
  if (end) q.timestamp(*end);
  q.signal(timeline(), v);
  if (Status s = q.submit(vars); !s.ok()) {
    timeline_value_ = v;  // nothing was published: hand the value out again
    return s;
  }
  if (start)
    pending_events_.push_back({label.empty() ? "submission" : std::string(label), q.engine(),
                               std::move(start), std::move(end)});
  return v;
}

Result<std::vector<Device::ProfileEvent>> Device::take_profile() {
  RETURN_IF_ERROR(synchronize());
  std::vector<PendingEvent> pending;
  {
    std::lock_guard lock(submit_mu_);
    pending.swap(pending_events_);
  }
  std::vector<ProfileEvent> out;
  for (auto& e : pending)
    out.push_back({std::move(e.name), e.engine, e.start->timestamp_ns(), e.end->timestamp_ns()});
  return out;
}

Result<uint64_t> Device::submit_with_timeline(const std::function<Status(uint64_t v)>& submit) {
  RETURN_IF_ERROR(error());
  std::lock_guard lock(submit_mu_);
  uint64_t v = timeline_value_.fetch_add(1);
  if (Status s = submit(v); !s.ok()) {
    timeline_value_ = v;
    return s;
  }
  return v;
}

Status Device::set_timeline_for_test(uint64_t v) {
  RETURN_IF_ERROR(synchronize());
  std::lock_guard lock(submit_mu_);
  timeline().set(v - 1);
  timeline_value_ = v;
  return Status();
}

Status Device::error() const {
  if (!failed()) return Status();
  std::lock_guard lock(mu_);
  return error_;
}

void Device::set_error(Status s) {
  CHECK(!s.ok()) << "set_error with OK";
  std::lock_guard lock(mu_);
  if (failed_.load()) return;
  error_ = Status(s.code(), name_ + " is in the error state after: " + s.message());
  failed_.store(true, std::memory_order_release);
}

}  // namespace baregrad::hcq
