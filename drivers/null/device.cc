#include "drivers/null/device.h"

#include <atomic>
#include <cstdlib>

#include "drivers/null/compute_queue.h"
#include "drivers/null/copy_queue.h"
#include "drivers/null/program.h"

namespace baregrad::null {
namespace {

// Device memory is address space only; CPU-visible memory (signals, staging, argument blocks)
// is real host memory so the CPU side works unchanged.
class NullAllocator final : public hcq::Allocator {
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

}  // namespace

Device::Device() : hcq::Device("NULL"), allocator_(std::make_unique<NullAllocator>(*this)) {}

Result<std::unique_ptr<Device>> Device::create() {
  std::unique_ptr<Device> dev(new Device());
  RETURN_IF_ERROR(dev->init_timeline());
  return dev;
}

Device::~Device() { release_memory(); }

std::unique_ptr<hcq::HwQueue> Device::compute_queue() {
  return std::make_unique<ComputeQueue>(*this);
}

std::unique_ptr<hcq::HwQueue> Device::copy_queue() { return std::make_unique<CopyQueue>(*this); }

Result<std::unique_ptr<hcq::Program>> Device::load_program(const Binary& b) {
  if (b.num_bufs < 0 || b.num_vars < 0)
    return invalid_argument("load " + b.entry + " on NULL: " + std::to_string(b.num_bufs) +
                            " buffers and " + std::to_string(b.num_vars) + " scalars");
  return std::unique_ptr<hcq::Program>(std::make_unique<Program>(b.entry, b.num_bufs, b.num_vars));
}

}  // namespace baregrad::null
