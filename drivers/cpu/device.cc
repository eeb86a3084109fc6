#include "drivers/cpu/device.h"

#include <thread>

#include "base/log.h"
#include "drivers/cpu/compute_queue.h"
#include "drivers/cpu/copy_queue.h"
#include "drivers/cpu/program.h"

namespace baregrad::cpu {
namespace {

class HostAllocator final : public hcq::Allocator {
 public:
  explicit HostAllocator(Device& dev) : hcq::Allocator(dev), dev_(dev) {}

 protected:
  Result<hcq::Buffer> raw_alloc(size_t bytes, hcq::BufferSpec) override {
    return host_alloc(bytes);
  }
  void raw_free(const hcq::Buffer& b) override {
    if (!dev_.abandoned()) host_free(b);  // else a hung kernel may still be using it
  }

 private:
  Device& dev_;
};

}  // namespace

Device::Device(int threads, std::string name)
    : hcq::Device(std::move(name)),
      allocator_(std::make_unique<HostAllocator>(*this)),
      pool_(std::make_unique<ThreadPool>(
          threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency()))) {}

Result<std::unique_ptr<Device>> Device::create(int threads, std::string name) {
  std::unique_ptr<Device> dev(new Device(threads, std::move(name)));
  RETURN_IF_ERROR(dev->init_timeline());
  dev->compute_ = std::make_unique<Engine>(*dev, "compute queue of " + dev->name());
  dev->copy_ = std::make_unique<Engine>(*dev, "copy queue of " + dev->name());
  return dev;
}

Device::~Device() {
  (void)synchronize(std::chrono::milliseconds(5000));
  if (abandoned()) {
    // Joining would wait for the hung work and freeing would crash it: both are left to exit.
    BG_LOG(0) << name()
              << ": work still runs on this failed device; its threads and memory are left "
                 "to the process's exit";
    (void)compute_.release();
    (void)copy_.release();
    (void)pool_.release();
    return;
  }
  compute_.reset();
  copy_.reset();
  release_memory();
}

std::unique_ptr<hcq::HwQueue> Device::compute_queue() {
  return std::make_unique<ComputeQueue>(*this);
}

std::unique_ptr<hcq::HwQueue> Device::copy_queue() { return std::make_unique<CopyQueue>(*this); }

Result<std::unique_ptr<hcq::Program>> Device::load_program(const Binary& b) {
  if (b.format != BinaryFormat::kHostElf || b.arch != host_arch())
    return invalid_argument("load " + b.entry + " on " + name() + ": a " +
                            binary_format_name(b.format) + " binary for " + b.arch +
                            " (this device runs host-elf for " + host_arch() + ")");
  if (b.buf_bytes.size() != static_cast<size_t>(b.num_bufs) || b.num_vars < 0)
    return invalid_argument("load " + b.entry + " on " + name() + ": " +
                            std::to_string(b.buf_bytes.size()) + " buffer sizes for " +
                            std::to_string(b.num_bufs) + " buffers");
  ASSIGN_OR_RETURN(LoadedKernel k, loader_.load(b.code, b.entry));
  // Waking a worker costs ~10-20 us here, about what one core takes to move 64 KiB or do 100k
  // flops: a launch estimated below both runs on one core.
  constexpr double kSerialBytes = 64 * 1024, kSerialFlops = 100'000;
  bool serial = b.bytes > 0 && b.bytes < kSerialBytes && b.flops < kSerialFlops;
  return std::unique_ptr<hcq::Program>(
      std::make_unique<Program>(b.entry, k.fn, b.buf_bytes, b.num_vars, std::move(k.code), serial));
}

bool Device::abandoned() const {
  return failed() && ((compute_ && compute_->busy()) || (copy_ && copy_->busy()));
}

}  // namespace baregrad::cpu
