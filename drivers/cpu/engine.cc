#include "drivers/cpu/engine.h"

#include <pthread.h>

#include <chrono>
#include <cstring>

#include "base/format.h"
#include "base/thread_pool.h"
#include "drivers/cpu/device.h"
#include "drivers/cpu/packets.h"
#include "drivers/cpu/program.h"

namespace baregrad::cpu {
namespace {

constexpr size_t kRingWords = 1 << 16;
// A copy this small costs less than the handoff to the worker (see Engine::runs_inline).
constexpr uint64_t kInlineCopyBytes = 64 * 1024;

uint64_t clock_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

uint64_t u64(const uint32_t* w) { return w[0] | static_cast<uint64_t>(w[1]) << 32; }

}  // namespace

Engine::Engine(Device& dev, std::string name)
    : dev_(dev), name_(std::move(name)), ring_(kRingWords), worker_([this] { run(); }) {}

Engine::~Engine() {
  stop_.store(true);
  doorbell_.fetch_add(1);
  doorbell_.notify_all();
  worker_.join();
}

Status Engine::publish(std::span<const uint32_t> words) {
  if (words.size() > ring_.size())
    return resource_exhausted(name_ + ": a submission of " + std::to_string(words.size()) +
                              " words cannot fit the ring of " + std::to_string(ring_.size()));
  std::lock_guard lock(publish_mu_);
  uint64_t w = wptr_.load(std::memory_order_relaxed);
  // NOTE: the read pointer reaches the write pointer (release) only after the worker executed
  // every published packet, and nothing is published while publish_mu_ is held: an idle engine
  // stays idle, so this thread may be the engine for one submission. Its writes reach the
  // worker through the next publish (publish_mu_, then wptr_'s release).
  if (rptr_.load(std::memory_order_acquire) == w && runs_inline(words)) {
    busy_.store(true, std::memory_order_release);
    if (!dev_.failed()) execute(words.data(), words.size(), false);
    busy_.store(false, std::memory_order_release);
    return Status();
  }
  auto t0 = std::chrono::steady_clock::now();
  uint64_t last_r = rptr_.load(std::memory_order_acquire);
  while (w + words.size() - rptr_.load(std::memory_order_acquire) > ring_.size()) {
    RETURN_IF_ERROR(dev_.error());
    uint64_t r = rptr_.load(std::memory_order_acquire);
    if (r != last_r) {
      last_r = r;
      t0 = std::chrono::steady_clock::now();
    } else if (std::chrono::steady_clock::now() - t0 > dev_.queue_timeout()) {
      return deadline_exceeded(name_ + ": the ring stayed full for " +
                               std::to_string(dev_.queue_timeout().count()) + " ms");
    }
    std::this_thread::yield();
  }
  for (size_t i = 0; i < words.size(); i++) ring_[(w + i) % ring_.size()] = words[i];
  // NOTE: the words are written before the write pointer is published (release), and the
  // doorbell is rung after it, so the worker never sees a pointer past unwritten words.
  wptr_.store(w + words.size(), std::memory_order_release);
  doorbell_.fetch_add(1, std::memory_order_release);
  doorbell_.notify_one();
  return Status();
}

void Engine::run() {
  // Named for top, perf and gdb ("bg-" and the engine's name, within Linux's 15 characters).
  pthread_setname_np(pthread_self(), ("bg-" + name_).substr(0, 15).c_str());
  std::vector<uint32_t> packet;
  for (;;) {
    uint64_t r = rptr_.load(std::memory_order_relaxed);
    uint64_t w = wptr_.load(std::memory_order_acquire);
    if (r == w) {
      // Spin, then yield (the host is likely preparing the next launch), then sleep on the
      // doorbell.
      spin_while([&] {
        w = wptr_.load(std::memory_order_acquire);
        return r == w && !stop_.load();
      });
      if (r == w) {
        uint32_t db = doorbell_.load(std::memory_order_acquire);
        if (stop_.load()) return;
        if (wptr_.load(std::memory_order_acquire) == r) doorbell_.wait(db);
        continue;
      }
    }
    // Copy the ring's words out (they may wrap around its end), then run them.
    packet.resize(w - r);
    for (uint64_t i = r; i < w; i++) packet[i - r] = ring_[i % ring_.size()];
    busy_.store(true, std::memory_order_release);
    if (!dev_.failed()) execute(packet.data(), packet.size(), false);
    busy_.store(false, std::memory_order_release);
    rptr_.store(w, std::memory_order_release);
  }
}

bool Engine::runs_inline(std::span<const uint32_t> words) const {
  for (size_t i = 0; i < words.size();) {
    uint32_t h = words[i];
    const uint32_t* p = words.data() + i + 1;
    size_t len = payload_of(h);
    if (i + 1 + len > words.size()) return false;  // the worker reports it
    i += 1 + len;
    switch (opcode_of(h)) {
      case Opcode::kWait:
        if (len != 4) return false;
        if (reinterpret_cast<const hcq::SignalSlot*>(u64(p))->value.load(
                std::memory_order_acquire) < u64(p + 2))
          return false;
        break;
      case Opcode::kSignal:
      case Opcode::kTimestamp:
      case Opcode::kBarrier:
        break;
      case Opcode::kExec:
        if (len != 10 || !reinterpret_cast<const Program*>(u64(p))->serial()) return false;
        break;
      case Opcode::kCopy:
        if (len != 6 || u64(p + 4) >= kInlineCopyBytes) return false;
        break;
      default:  // indirect (a bound queue: a replay, possibly long) or invalid
        return false;
    }
  }
  return true;
}

bool Engine::fault(Status s) {
  dev_.set_error(s);
  return false;
}

bool Engine::mapped(uint64_t va, uint64_t bytes, std::optional<hcq::Buffer>* owner) {
  uint64_t gen = dev_.allocator().unmap_generation();
  if (gen != recent_gen_) {
    for (Range& r : recent_) r = {};
    recent_gen_ = gen;
  }
  for (const Range& r : recent_)
    if (r.end > r.va && va >= r.va && va + bytes <= r.end) return true;
  *owner = dev_.allocator().find(va);
  if (!*owner || va + bytes > (*owner)->va + (*owner)->size) return false;
  recent_[recent_next_++ % 8] = {(*owner)->va, (*owner)->va + (*owner)->size};
  return true;
}

bool Engine::wait(const uint32_t* p) {
  auto* slot = reinterpret_cast<const hcq::SignalSlot*>(u64(p));
  uint64_t want = u64(p + 2), seen = slot->value.load(std::memory_order_acquire);
  uint64_t work = dev_.work_done();
  auto last = std::chrono::steady_clock::now();
  for (uint32_t spins = 0; seen < want; spins++) {
    if (dev_.failed() || stop_.load()) return false;
    if (spins < 4096) {
      cpu_relax();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    uint64_t now_seen = slot->value.load(std::memory_order_acquire);
    auto now = std::chrono::steady_clock::now();
    uint64_t now_work = dev_.work_done();
    if (now_seen != seen || now_work != work) {  // a long kernel elsewhere is progress too
      seen = now_seen;
      work = now_work;
      last = now;
    } else if (now - last > dev_.queue_timeout()) {
      return fault(deadline_exceeded(name_ + ": wait on signal '" + dev_.signal_name(u64(p)) +
                                     "' (" + hex(u64(p)) + ") for >= " + std::to_string(want) +
                                     " saw " + std::to_string(seen) + " without progress for " +
                                     std::to_string(dev_.queue_timeout().count()) + " ms"));
    }
  }
  return true;
}

bool Engine::exec(const uint32_t* p) {
  const auto* prg = reinterpret_cast<const Program*>(u64(p));
  const auto* args = reinterpret_cast<void* const*>(u64(p + 2));
  const auto* bufs = args;
  const auto* vars = reinterpret_cast<const int64_t*>(args + prg->num_bufs());
  for (int b = 0; b < prg->num_bufs(); b++) {
    uint64_t va = reinterpret_cast<uint64_t>(bufs[b]);
    size_t need = prg->buf_bytes()[b];
    std::optional<hcq::Buffer> owner;
    if (need && !mapped(va, need, &owner))
      return fault(internal("MMU fault: " + name_ + ": kernel '" + prg->name() + "' buffer " +
                            std::to_string(b) + " at " + hex(va) + " (" + std::to_string(need) +
                            " bytes) is outside every allocation" +
                            (owner ? " (it starts inside one of " + std::to_string(owner->size) +
                                         " bytes at " + hex(owner->va) + ")"
                                   : "")));
  }
  uint32_t items = p[4];
  Program::Fn fn = prg->fn();  // the program object is not touched once the kernel runs
  // Each thread runs its share in up to 64 chunks and reports each one done, so that waits
  // see a long kernel progress (see hcq::Device::note_work_done); an item that never ends
  // still stops the reports and is reported as a hang.
  auto run = [&](int64_t lo, int64_t hi) {
    int64_t step = std::max<int64_t>(1, (hi - lo + 63) / 64);
    for (int64_t s = lo; s < hi; s += step) {
      fn(bufs, vars, s, std::min(hi, s + step));
      dev_.note_work_done();
    }
  };
  if (items <= 1 || prg->serial()) {
    fn(bufs, vars, 0, items);
    dev_.note_work_done();
  } else {
    dev_.pool().parallel_for(items, run);
  }
  return true;
}

bool Engine::execute(const uint32_t* words, size_t n, bool indirect) {
  for (size_t i = 0; i < n;) {
    uint32_t h = words[i];
    const uint32_t* p = words + i + 1;
    size_t len = payload_of(h);
    if (i + 1 + len > n)
      return fault(internal(name_ + ": packet " + hex(h) + " at word " + std::to_string(i) +
                            " runs past the submission (" + std::to_string(n) + " words)"));
    i += 1 + len;
    switch (opcode_of(h)) {
      case Opcode::kWait:
        if (!wait(p)) return false;
        break;
      case Opcode::kSignal: {
        auto* slot = reinterpret_cast<hcq::SignalSlot*>(u64(p));
        slot->value.store(u64(p + 2), std::memory_order_seq_cst);
        if (dev_.has_waiters()) hcq::Signal::wake_waiters(slot);
        break;
      }
      case Opcode::kTimestamp:
        reinterpret_cast<hcq::SignalSlot*>(u64(p))->timestamp.store(clock_ns(),
                                                                    std::memory_order_release);
        break;
      case Opcode::kBarrier:
        // NOTE: one engine thread runs the commands in order and signals publish with release,
        // so a full fence suffices; a seq_cst RMW is one (and ThreadSanitizer understands it).
        fence_.fetch_add(1, std::memory_order_seq_cst);
        break;
      case Opcode::kExec:
        if (!exec(p)) return false;
        break;
      case Opcode::kCopy: {
        uint64_t dst = u64(p), src = u64(p + 2), bytes = u64(p + 4);
        for (auto [what, va] : {std::pair{"destination", dst}, std::pair{"source", src}}) {
          std::optional<hcq::Buffer> owner;
          if (!mapped(va, bytes, &owner))
            return fault(internal("MMU fault: " + name_ + ": copy of " + std::to_string(bytes) +
                                  " bytes with " + what + " " + hex(va) +
                                  " outside every allocation"));
        }
        std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
        break;
      }
      case Opcode::kIndirect:
        if (indirect) return fault(internal(name_ + ": nested indirect packet"));
        if (!execute(reinterpret_cast<const uint32_t*>(u64(p)), u64(p + 2), true)) return false;
        break;
      default:
        return fault(internal(name_ + ": invalid packet header " + hex(h)));
    }
  }
  return true;
}

}  // namespace baregrad::cpu
