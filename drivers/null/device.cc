#include "drivers/null/device.h"

#include <atomic>
#include <cstdlib>

namespace baregrad::drivers::null {
namespace {

// Device memory is address space only; CPU-visible memory (signals, staging, argument blocks)
// is real host memory so the CPU side works unchanged.
class NullAllocator : public hcq::Allocator {
 public:
  using hcq::Allocator::Allocator;

 protected:
  Result<hcq::Buffer> raw_alloc(size_t bytes, hcq::BufferSpec spec) override {
    if (spec.cpu_access || spec.host) {
      void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
      if (!p) return resource_exhausted("aligned_alloc of " + std::to_string(bytes) + " bytes");
      return hcq::Buffer{reinterpret_cast<uint64_t>(p), bytes, p, 0, {}};
    }
    uint64_t va = next_va_.fetch_add((bytes + 0xfff) & ~uint64_t{0xfff});
    return hcq::Buffer{va, bytes, nullptr, 0, {}};
  }
  void raw_free(const hcq::Buffer& b) override { std::free(b.cpu); }

 private:
  std::atomic<uint64_t> next_va_{1ull << 44};
};

// Keeps only what completes at submit: signal writes and timestamps.
class Queue : public hcq::HwQueue {
 public:
  using hcq::HwQueue::HwQueue;
  hcq::HwQueue& wait(const hcq::Signal& s, hcq::Value) override {
    check_signal(s, "wait");
    return *this;
  }
  hcq::HwQueue& signal(const hcq::Signal& s, hcq::Value v) override {
    if (check_signal(s, "signal")) ops_.push_back({&s, v, false});
    return *this;
  }
  hcq::HwQueue& timestamp(const hcq::Signal& s) override {
    if (check_signal(s, "timestamp")) ops_.push_back({&s, 0, true});
    return *this;
  }
  hcq::HwQueue& memory_barrier() override { return *this; }
  hcq::HwQueue& exec(const hcq::Program& prg,
                     const hcq::ArgsState&,
                     hcq::Dim3 grid,
                     hcq::Dim3 block) override {
    if (engine() != hcq::Engine::kCompute)
      refuse(invalid_argument("exec of '" + prg.name() + "' on a copy queue of NULL"));
    else if (Status s = prg.check_launch(grid, block); !s.ok())
      refuse(std::move(s));
    return *this;
  }
  hcq::HwQueue& copy(hcq::Value, hcq::Value, hcq::Value) override { return *this; }
  Status bind() override { return Status(); }
  Status submit(std::span<const int64_t> vars) override {
    RETURN_IF_ERROR(refusal());
    RETURN_IF_ERROR(device().error());
    for (const Op& op : ops_) {
      auto* slot = reinterpret_cast<hcq::SignalSlot*>(op.sig->va());
      if (op.timestamp) {
        slot->timestamp.store(0, std::memory_order_release);
        continue;
      }
      if (op.value.symbolic() && static_cast<size_t>(op.value.var) >= vars.size())
        return invalid_argument("submit on NULL: variable " + std::to_string(op.value.var) +
                                " of " + std::to_string(vars.size()));
      int64_t v = op.value.symbolic() ? vars[op.value.var] : op.value.imm;
      slot->value.store(static_cast<uint64_t>(v), std::memory_order_release);
    }
    return Status();
  }
  void reset() override {
    ops_.clear();
    clear_refusal();
  }

 private:
  struct Op {
    const hcq::Signal* sig;
    hcq::Value value;
    bool timestamp;
  };
  std::vector<Op> ops_;
};
}  // namespace

Device::Device() : hcq::Device("NULL"), allocator_(std::make_unique<NullAllocator>(*this)) {}

Result<std::unique_ptr<Device>> Device::create() {
  std::unique_ptr<Device> dev(new Device());
  RETURN_IF_ERROR(dev->init_timeline());
  return dev;
}

Device::~Device() { release_memory(); }

std::unique_ptr<hcq::HwQueue> Device::compute_queue() {
  return std::make_unique<Queue>(*this, hcq::Engine::kCompute);
}

std::unique_ptr<hcq::HwQueue> Device::copy_queue() {
  return std::make_unique<Queue>(*this, hcq::Engine::kCopy);
}

}  // namespace baregrad::drivers::null
