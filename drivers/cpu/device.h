// The CPU as an HCQ device: memory is host memory (device address = host address), and a
// compute and a copy engine are worker threads that execute the packets of drivers/cpu/packets.h
// from a ring, with the semantics a GPU has: in-order per engine, ordered across engines only
// through signals, waits with timeouts, and a fault report plus a sticky error for a bad
// address, a bad packet or a hang.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/thread_pool.h"
#include "hcq/hcq.h"

namespace baregrad::drivers::cpu {

// A kernel with the CPU ABI: k(buffer addresses, scalars, first core item, end).
class Program : public hcq::Program {
 public:
  using Fn = void (*)(void* const* bufs, const int64_t* vars, int64_t lo, int64_t hi);
  // `buf_bytes[i]` is how many bytes the kernel may touch from buffer i (checked at exec).
  Program(std::string name, Fn fn, std::vector<size_t> buf_bytes, int num_vars)
      : hcq::Program(std::move(name), static_cast<int>(buf_bytes.size()), num_vars),
        fn_(fn),
        buf_bytes_(std::move(buf_bytes)) {}
  Fn fn() const { return fn_; }
  const std::vector<size_t>& buf_bytes() const { return buf_bytes_; }

 private:
  Fn fn_;
  std::vector<size_t> buf_bytes_;
};

class Device;

// One engine: a ring of packet words and the worker thread executing them.
class Engine {
 public:
  Engine(Device& dev, std::string name);
  ~Engine();
  // Appends `words` to the ring (waiting for room, up to the queue timeout) and rings the
  // doorbell; ResourceExhausted when they could never fit.
  Status publish(std::span<const uint32_t> words);
  const std::string& name() const { return name_; }

 private:
  void run();
  // Executes packets in [words, words + n); false after a fault.
  bool execute(const uint32_t* words, size_t n, bool indirect);
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

class Device : public hcq::Device {
 public:
  // `threads` <= 0: every core.
  static Result<std::unique_ptr<Device>> create(int threads = 0);
  ~Device() override;

  hcq::Allocator& allocator() override { return *allocator_; }
  std::unique_ptr<hcq::HwQueue> compute_queue() override;
  std::unique_ptr<hcq::HwQueue> copy_queue() override;
  // Every CPU device's memory is host memory: their queues reach each other's signals.
  std::string peer_group() const override { return "host"; }

  // How long a queue's wait may go without progress before the device faults.
  void set_queue_timeout(std::chrono::milliseconds t) { queue_timeout_ = t; }
  std::chrono::milliseconds queue_timeout() const { return queue_timeout_; }
  ThreadPool& pool() { return pool_; }
  Engine& engine(hcq::Engine e) { return e == hcq::Engine::kCompute ? *compute_ : *copy_; }

 private:
  explicit Device(int threads);

  std::unique_ptr<hcq::Allocator> allocator_;
  ThreadPool pool_;
  std::atomic<std::chrono::milliseconds> queue_timeout_{hcq::kDefaultTimeout};
  std::unique_ptr<Engine> compute_, copy_;
};

}  // namespace baregrad::drivers::cpu
