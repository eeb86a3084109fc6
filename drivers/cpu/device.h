#pragma once

// The CPU as an HCQ device: memory is host memory (device address = host address), and a
// compute and a copy engine (engine.h) execute the packets its queues record, with the
// semantics a GPU has: in-order per engine, ordered across engines only through signals, waits
// with timeouts, and a fault report plus a sticky error for a bad address, a bad packet or a
// hang. Kernels are host ELF objects linked into the process (iface_host.h).

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "base/thread_pool.h"
#include "drivers/cpu/engine.h"
#include "drivers/cpu/iface_host.h"
#include "hcq/hcq.h"

namespace baregrad::cpu {

class Device final : public hcq::Device {
 public:
  // A device named `name` whose kernels run on `threads` threads (<= 0: every core).
  static Result<std::unique_ptr<Device>> create(int threads = 0, std::string name = "CPU");
  ~Device() override;

  hcq::Allocator& allocator() override { return *allocator_; }
  std::unique_ptr<hcq::HwQueue> compute_queue() override;
  std::unique_ptr<hcq::HwQueue> copy_queue() override;
  // Links a host ELF object (BinaryFormat::kHostElf for this CPU's arch) into the process;
  // the code stays mapped until the device is destroyed.
  Result<std::unique_ptr<hcq::Program>> load_program(const Binary& binary) override;
  // Every CPU device's memory is host memory: their queues reach each other's signals.
  std::string peer_group() const override { return "host"; }
  bool host_addressable() const override { return true; }

  // How long a queue's wait may go without progress before the device faults.
  void set_queue_timeout(std::chrono::milliseconds t) { queue_timeout_ = t; }
  std::chrono::milliseconds queue_timeout() const { return queue_timeout_; }
  int threads() const { return pool_->threads(); }
  ThreadPool& pool() { return *pool_; }
  Engine& engine(hcq::Engine e) { return e == hcq::Engine::kCompute ? *compute_ : *copy_; }
  // True while a kernel or copy still runs on a device that failed (a hang: the host gave up
  // waiting). Its memory and threads are then never released, only left to the process's
  // exit: freeing them would crash the work still running on them.
  bool abandoned() const;

 private:
  Device(int threads, std::string name);

  std::unique_ptr<hcq::Allocator> allocator_;
  std::unique_ptr<ThreadPool> pool_;
  std::atomic<std::chrono::milliseconds> queue_timeout_{hcq::default_timeout()};
  std::unique_ptr<Engine> compute_, copy_;
  ObjectLoader loader_;
};

}  // namespace baregrad::cpu
