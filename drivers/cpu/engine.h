#pragma once

// The CPU device's hardware: an engine is a ring of packet words (packets.h) and the worker
// thread that executes them, in order, with a GPU's semantics: waits with timeouts, and a
// fault report plus the device's sticky error for a bad address, a bad packet or a hang.

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "hcq/hcq.h"

namespace baregrad::cpu {

class Device;

class Engine {
 public:
  Engine(Device& dev, std::string name);
  ~Engine();
  // Appends `words` to the ring (waiting for room, up to the queue timeout) and rings the
  // doorbell; ResourceExhausted when they could never fit. A small submission that finds the
  // engine idle runs at once on the calling thread instead (see runs_inline()).
  Status publish(std::span<const uint32_t> words);
  const std::string& name() const { return name_; }
  // Whether the worker is executing packets now (not waiting for the doorbell).
  bool busy() const { return busy_.load(std::memory_order_acquire); }

 private:
  void run();
  // Whether `words` may run on the submitting thread: every wait is already met, every kernel
  // is serial (Program::serial) and every copy is under kInlineCopyBytes, and nothing is
  // indirect. Such work takes less than handing it to the worker and back (two cache-line
  // transfers between cores and, in a VM, often a wakeup), and cannot block.
  bool runs_inline(std::span<const uint32_t> words) const;
  // Executes packets in [words, words + n); false after a fault.
  bool execute(const uint32_t* words, size_t n, bool indirect);
  bool exec(const uint32_t* p);
  bool wait(const uint32_t* p);
  bool fault(Status s);
  // Whether [va, va + bytes) lies in one mapped allocation; the allocation found last is kept
  // while nothing was unmapped, so replays of bound queues skip the lookup. On failure `owner`
  // is the allocation holding va, if any.
  bool mapped(uint64_t va, uint64_t bytes, std::optional<hcq::Buffer>* owner);

  Device& dev_;
  std::string name_;
  std::vector<uint32_t> ring_;
  std::atomic<uint64_t> wptr_{0}, rptr_{0};
  std::atomic<uint32_t> doorbell_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> busy_{false};
  std::atomic<uint64_t> fence_{0};  // the barrier packet's full fence
  struct Range {
    uint64_t va = 0, end = 0;
  };
  Range recent_[8];  // allocations found by mapped(), valid in generation recent_gen_
  uint64_t recent_gen_ = ~0ull;
  unsigned recent_next_ = 0;
  std::mutex publish_mu_;
  std::thread worker_;
};

}  // namespace baregrad::cpu
