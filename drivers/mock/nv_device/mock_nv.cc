#include "drivers/mock/nv_device/mock_nv.h"

#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "base/format.h"
#include "base/log.h"
#include "drivers/mock/nv/fake_nv_kernel.h"
#include "drivers/mock/nv_device/mock_nv_fault.h"
#include "drivers/mock/nvgpu/fake_gpu.h"

namespace baregrad::mock {
namespace {

// The process's MOCK+NV kernels (peer memory) and twins; each behind its own lock.
struct Fakes;
struct Registry {
  std::mutex mu;
  std::vector<FakeNvKernel*> kernels;
  std::vector<std::weak_ptr<Fakes>> fakes;
  std::mutex twin_mu;
  std::unordered_map<uint64_t, MockKernel> twins;
  std::unordered_map<uint64_t, std::string> names;  // code-less programs' names, by address
};
Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

// The GPU's view of memory: its own kernel's UVM mappings, then those of the other MOCK+NV
// devices (their peer group; NOTE: not limited to buffers mapped with map_into).
class PeerMemory final : public GpuMemory {
 public:
  explicit PeerMemory(FakeNvKernel& k) : k_(k) {}
  std::optional<uint8_t*> resolve(uint64_t va, size_t bytes) override {
    if (auto p = k_.resolve(va, bytes)) return p;
    Registry& r = registry();
    std::lock_guard lock(r.mu);
    for (FakeNvKernel* k : r.kernels)
      if (k != &k_)
        if (auto p = k->resolve(va, bytes)) return p;
    return std::nullopt;
  }

 private:
  FakeNvKernel& k_;
};

// Code-less programs own 256 bytes at code_va() (nv::Program); their registered code range.
constexpr uint64_t kCodelessBytes = 256;

// Runs twins. Launches run on the pumping thread with the GPU's channels locked, and the
// GPU's fault hook runs right after a failed one on that thread: failure() needs no lock.
class TwinExecutor final : public KernelExecutor {
 public:
  explicit TwinExecutor(GpuMemory& mem) : mem_(mem) {}
  void set_device(nv::Device* d) { dev_ = d; }
  // The twins of this device's binaries, by Binary id (register_mock_binary).
  void add_binary(const std::string& id, MockKernel k) {
    std::lock_guard lock(mu_);
    auto& e = binaries_[id];
    e.kernel = std::move(k);
    e.count++;
  }
  void remove_binary(const std::string& id) {
    std::lock_guard lock(mu_);
    auto it = binaries_.find(id);
    if (it != binaries_.end() && --it->second.count == 0) binaries_.erase(it);
  }
  Status launch(const LaunchInfo& li) override {
    failure_.reset();
    MockKernel k;
    std::string name;
    {
      Registry& r = registry();
      std::lock_guard lock(r.twin_mu);
      if (auto it = r.twins.find(li.program_va); it != r.twins.end()) {
        k = it->second;
        if (auto n = r.names.find(li.program_va); n != r.names.end()) name = n->second;
      }
    }
    if (!k && dev_) {
      std::string id = dev_->binary_at(li.program_va);
      std::lock_guard lock(mu_);
      if (auto it = binaries_.find(id); !id.empty() && it != binaries_.end()) k = it->second.kernel;
    }
    if (!k) {
      // NOTE: a freed code-less program may have had this address; its name must not stay.
      if (dev_ && dev_->binary_at(li.program_va).empty()) dev_->unregister_program(li.program_va);
      failure_ = LaunchFailure{li.program_va, std::nullopt};
      return not_found("launch of unknown program at " + hex(li.program_va));
    }
    // Code-less programs belong to no device: their range is registered where they run.
    if (!name.empty()) dev_->register_program(li.program_va, kCodelessBytes, name);
    TwinMemory mem(mem_);
    Status s = k(li, *dev_, mem);
    if (!s.ok()) failure_ = LaunchFailure{li.program_va, mem.fault()};
    return s;
  }
  // The failure of the last launch, if it failed.
  const std::optional<LaunchFailure>& failure() const { return failure_; }

 private:
  GpuMemory& mem_;
  nv::Device* dev_ = nullptr;
  std::optional<LaunchFailure> failure_;
  struct BinaryTwin {
    MockKernel kernel;
    int count = 0;  // registrations
  };
  std::mutex mu_;
  std::unordered_map<std::string, BinaryTwin> binaries_;
};

// The fakes one MOCK+NV device owns, in construction order.
struct Fakes {
  explicit Fakes(nv::Generation g)
      : kernel(FakeNvConfig{.gpus = {FakeNvGpuConfig::preset(g)}}),
        memory(kernel),
        gpu(memory, g),
        executor(memory) {
    gpu.set_executor(&executor);
    std::lock_guard lock(registry().mu);
    registry().kernels.push_back(&kernel);
  }
  ~Fakes() {
    std::lock_guard lock(registry().mu);
    auto& ks = registry().kernels;
    ks.erase(std::remove(ks.begin(), ks.end(), &kernel), ks.end());
  }
  FakeNvKernel kernel;
  PeerMemory memory;
  FakeNvGpu gpu;
  TwinExecutor executor;
  const nv::Device* device = nullptr;  // the device over these fakes, once created
};

// A code-less program that unregisters its twin when destroyed: 256 bytes of host memory give
// it a unique code address.
struct CodelessMemory {
  std::unique_ptr<uint8_t[]> bytes = std::make_unique<uint8_t[]>(2 * kCodelessBytes);
  uint64_t va() const {
    return (reinterpret_cast<uint64_t>(bytes.get()) + kCodelessBytes - 1) & ~(kCodelessBytes - 1);
  }
};
class MockProgram final : private CodelessMemory, public nv::Program {
 public:
  MockProgram(std::string name, int num_bufs, int num_vars, MockKernel k, uint32_t param_offset)
      : nv::Program(std::move(name), num_bufs, num_vars, CodelessMemory::va(), param_offset) {
    std::lock_guard lock(registry().twin_mu);
    registry().twins[code_va()] = std::move(k);
    registry().names[code_va()] = this->name();
  }
  ~MockProgram() override {
    std::lock_guard lock(registry().twin_mu);
    registry().twins.erase(code_va());
    registry().names.erase(code_va());
  }
};

}  // namespace

Result<std::unique_ptr<nv::Device>> open_mock_nv(nv::Generation generation,
                                                 nv::DeviceOptions options) {
  auto fakes = std::make_shared<Fakes>(generation);
  Fakes* f = fakes.get();
  f->kernel.on_channel(
      [f](const FakeNvChannel& c) {
        Status s = f->gpu.add_channel(
            {.ring_va = c.ring_va,
             .ring_entries = c.entries,
             .userd_va = c.userd_va,
             .engine = c.compute ? ChannelEngine::kCompute : ChannelEngine::kCopy,
             .token = c.token});
        CHECK(s.ok()) << s;
      },
      [f](const FakeNvChannel& c) { (void)f->gpu.remove_channel(c.token); });
  f->kernel.on_doorbell([f](int, uint32_t token) { f->gpu.ring(token); });
  // The GPU's fault interrupt: the fake kernel records it as RM would (notifiers, debugger).
  const FakeNvGpuConfig& cfg = f->kernel.config().gpus[0];
  f->gpu.on_fault([f, sms = cfg.tpcs * cfg.sm_per_tpc](const Fault& x) {
    BG_LOG(1) << "MOCK+NV: the fake GPU stopped a channel: " << x.to_string();
    std::optional<LaunchFailure> launch;
    if (x.kind == FaultKind::kLaunch) launch = f->executor.failure();
    Status s = f->kernel.raise_fault(x.token, rm_fault_for(x, launch, sms));
    if (!s.ok()) BG_LOG(0) << "MOCK+NV: " << s << " (" << x.to_string() << ")";
  });
  {
    std::lock_guard lock(registry().mu);
    registry().fakes.push_back(fakes);
  }
  // Every MOCK+NV GPU of the process runs: a queue may wait on another device's signal.
  f->kernel.on_progress([] {
    std::vector<std::shared_ptr<Fakes>> all;
    {
      std::lock_guard lock(registry().mu);
      auto& v = registry().fakes;
      std::erase_if(v, [](const std::weak_ptr<Fakes>& w) { return w.expired(); });
      for (const auto& w : v)
        if (auto p = w.lock()) all.push_back(std::move(p));
    }
    for (int pass = 0; pass < 2; pass++)
      for (const auto& x : all) {
        x->kernel.poll_doorbells();
        x->gpu.run_until_idle();
      }
  });
  if (options.name == nv::DeviceOptions{}.name) options.name = "MOCK+NV";
  options.peer_group = "MOCK+NV";
  // The device owns the fakes through its Os: they go after it.
  std::shared_ptr<hcq::Os> os(fakes, &f->kernel);
  ASSIGN_OR_RETURN(auto dev, nv::Device::create(std::move(os), 0, std::move(options)));
  f->executor.set_device(dev.get());
  f->device = dev.get();
  return dev;
}

FakeNvGpu* mock_nv_gpu(const nv::Device& dev) {
  std::lock_guard lock(registry().mu);
  for (const auto& w : registry().fakes)
    if (auto f = w.lock(); f && f->device == &dev) return &f->gpu;
  return nullptr;
}

Status TwinMemory::mmu_fault(uint64_t va, bool write, const std::string& what) {
  if (!fault_) fault_ = Fault{va, write};
  return internal("MMU fault (" + std::string(write ? "write" : "read") + ") at " + hex(va) + ": " +
                  what);
}

std::unique_ptr<nv::Program> mock_program(
    std::string name, int num_bufs, int num_vars, MockKernel kernel, uint32_t param_offset) {
  return std::make_unique<MockProgram>(std::move(name), num_bufs, num_vars, std::move(kernel),
                                       param_offset);
}

Result<std::shared_ptr<void>> register_mock_binary(const nv::Device& dev,
                                                   const std::string& binary_id,
                                                   MockKernel kernel) {
  std::shared_ptr<Fakes> fakes;
  {
    std::lock_guard lock(registry().mu);
    for (const auto& w : registry().fakes)
      if (auto f = w.lock(); f && f->device == &dev) fakes = f;
  }
  if (!fakes) return not_found(dev.name() + " is not a MOCK+NV device");
  fakes->executor.add_binary(binary_id, std::move(kernel));
  struct Registration {
    std::weak_ptr<Fakes> fakes;
    std::string id;
    ~Registration() {
      if (auto f = fakes.lock()) f->executor.remove_binary(id);
    }
  };
  return std::shared_ptr<void>(new Registration{fakes, binary_id});
}

std::shared_ptr<void> register_mock_kernel(uint64_t program_va, MockKernel kernel) {
  {
    std::lock_guard lock(registry().twin_mu);
    registry().twins[program_va] = std::move(kernel);
  }
  struct Registration {
    uint64_t va;
    ~Registration() {
      std::lock_guard lock(registry().twin_mu);
      registry().twins.erase(va);
    }
  };
  return std::shared_ptr<void>(new Registration{program_va});
}

}  // namespace baregrad::mock
