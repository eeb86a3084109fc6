#include "drivers/mock/amd_device/mock_amd.h"

#include <mutex>
#include <unordered_map>
#include <vector>

#include "base/format.h"
#include "base/log.h"
#include "drivers/mock/amd/fake_kfd.h"
#include "drivers/mock/amdgpu/fake_gpu.h"

namespace baregrad::mock {
namespace {

// Runs the twins of one device's binaries. Dispatches run on the pumping thread under the fake
// GPU's lock; the fault hook runs right after a failed one on that thread.
class TwinExecutor final : public AmdKernelExecutor {
 public:
  explicit TwinExecutor(FakeKfd& kfd) : kfd_(kfd) {}
  void set_device(amd::Device* d) { dev_ = d; }
  void add_binary(const std::string& id, MockAmdKernel k, uint32_t kernarg_sgpr) {
    std::lock_guard lock(mu_);
    Entry& e = binaries_[id];
    e.kernel = std::move(k);
    e.kernarg_sgpr = kernarg_sgpr;
    e.count++;
  }
  void remove_binary(const std::string& id) {
    std::lock_guard lock(mu_);
    auto it = binaries_.find(id);
    if (it != binaries_.end() && --it->second.count == 0) binaries_.erase(it);
  }
  uint32_t kernarg_user_sgpr(uint64_t code_va) override {
    const Entry* e = find(code_va);
    return e ? e->kernarg_sgpr : 0;
  }
  Status launch(const AmdLaunch& l) override {
    fault_va_.reset();
    MockAmdKernel k;
    if (const Entry* e = find(l.code_va)) k = e->kernel;
    if (!k) return not_found("dispatch of unknown kernel code at " + hex(l.code_va));
    AmdTwinMemory mem(kfd_);
    Status s = k(l, *dev_, mem);
    fault_va_ = mem.fault_va();
    return s;
  }
  // The VM fault address of the last dispatch, if its twin reported one.
  const std::optional<uint64_t>& fault_va() const { return fault_va_; }

 private:
  struct Entry {
    MockAmdKernel kernel;
    uint32_t kernarg_sgpr = 0;
    int count = 0;  // registrations
  };
  // NOTE: a copy under the lock would cost a std::function copy per lookup; entries are only
  // erased by remove_binary(), never while a dispatch of that binary runs.
  const Entry* find(uint64_t code_va) {
    if (dev_ == nullptr) return nullptr;
    std::string id = dev_->binary_at(code_va);
    std::lock_guard lock(mu_);
    auto it = binaries_.find(id);
    return id.empty() || it == binaries_.end() ? nullptr : &it->second;
  }

  FakeKfd& kfd_;
  amd::Device* dev_ = nullptr;
  std::optional<uint64_t> fault_va_;
  std::mutex mu_;
  std::unordered_map<std::string, Entry> binaries_;
};

// The fakes one MOCK+AMD device owns, in construction order.
struct Fakes {
  explicit Fakes(const std::string& gfx)
      : kfd(FakeKfdConfig{.gpus = {FakeAmdGpuConfig::preset(gfx)}}), gpu(kfd), executor(kfd) {
    gpu.set_executor(&executor);
  }
  FakeKfd kfd;
  FakeAmdGpu gpu;
  TwinExecutor executor;
  const amd::Device* device = nullptr;  // the device over these fakes, once created
};

struct Registry {
  std::mutex mu;
  std::vector<std::weak_ptr<Fakes>> fakes;
};
Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

std::shared_ptr<Fakes> fakes_of(const amd::Device& dev) {
  std::lock_guard lock(registry().mu);
  auto& v = registry().fakes;
  std::erase_if(v, [](const std::weak_ptr<Fakes>& w) { return w.expired(); });
  for (const auto& w : v)
    if (auto f = w.lock(); f && f->device == &dev) return f;
  return nullptr;
}

}  // namespace

std::optional<uint8_t*> AmdTwinMemory::resolve(uint64_t va, size_t bytes) const {
  return kfd_.resolve(va, bytes);
}

Status AmdTwinMemory::vm_fault(uint64_t va, bool write, const std::string& what) {
  if (!fault_va_) fault_va_ = va;
  return internal("VM fault (" + std::string(write ? "write" : "read") + ") at " + hex(va) + ": " +
                  what);
}

Result<std::unique_ptr<amd::Device>> open_mock_amd(const std::string& gfx,
                                                   amd::DeviceOptions options) {
  auto fakes = std::make_shared<Fakes>(gfx);
  Fakes* f = fakes.get();
  // A twin's VM fault is what the GPU's memory exception reports; the GPU raises its own.
  f->gpu.on_fault([f](const AmdGpuFault& x) {
    BG_LOG(1) << "MOCK+AMD: the fake GPU stopped a queue: " << x.to_string();
    if (x.kind == AmdGpuFault::Kind::kLaunch) {
      if (const auto& va = f->executor.fault_va()) {
        f->kfd.raise_memory_exception(
            0, *va, {.not_present = 1, .read_only = 0, .no_execute = 0, .imprecise = 0});
      } else {
        f->kfd.raise_hw_exception(0, 0, 0, false);
      }
    }
  });
  {
    std::lock_guard lock(registry().mu);
    registry().fakes.push_back(fakes);
  }
  if (options.name.empty()) options.name = "MOCK+AMD";
  // The device owns the fakes through its Os: they go after it.
  std::shared_ptr<hcq::Os> os(fakes, &f->kfd);
  ASSIGN_OR_RETURN(auto dev, amd::Device::create(std::move(os), 0, std::move(options)));
  f->executor.set_device(dev.get());
  f->device = dev.get();
  return dev;
}

FakeAmdGpu* mock_amd_gpu(const amd::Device& dev) {
  auto f = fakes_of(dev);
  return f ? &f->gpu : nullptr;
}

FakeKfd* mock_amd_kfd(const amd::Device& dev) {
  auto f = fakes_of(dev);
  return f ? &f->kfd : nullptr;
}

Result<std::shared_ptr<void>> register_mock_amd_binary(const amd::Device& dev,
                                                       const std::string& binary_id,
                                                       MockAmdKernel kernel,
                                                       uint32_t kernarg_sgpr) {
  std::shared_ptr<Fakes> fakes = fakes_of(dev);
  if (!fakes) return not_found(dev.name() + " is not a MOCK+AMD device");
  fakes->executor.add_binary(binary_id, std::move(kernel), kernarg_sgpr);
  struct Registration {
    std::weak_ptr<Fakes> fakes;
    std::string id;
    ~Registration() {
      if (auto f = fakes.lock()) f->executor.remove_binary(id);
    }
  };
  return std::shared_ptr<void>(new Registration{fakes, binary_id});
}

}  // namespace baregrad::mock
