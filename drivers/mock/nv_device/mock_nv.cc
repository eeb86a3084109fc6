#include "drivers/mock/nv_device/mock_nv.h"

#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "drivers/mock/nv/fake_nv_kernel.h"
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

class TwinExecutor final : public KernelExecutor {
 public:
  explicit TwinExecutor(GpuMemory& mem) : mem_(mem) {}
  void set_device(hcq::Device* d) { dev_ = d; }
  Status launch(const LaunchInfo& li) override {
    MockKernel k;
    {
      Registry& r = registry();
      std::lock_guard lock(r.twin_mu);
      auto it = r.twins.find(li.program_va);
      if (it == r.twins.end())
        return not_found("launch of unknown program at " + nv::hex_string(li.program_va));
      k = it->second;
    }
    return k(li, *dev_, mem_);
  }

 private:
  GpuMemory& mem_;
  hcq::Device* dev_ = nullptr;
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
};

// A code-less program that unregisters its twin when destroyed.
class MockProgram final : public nv::Program {
 public:
  MockProgram(std::string name, int num_bufs, int num_vars, MockKernel k)
      : nv::Program(std::move(name), num_bufs, num_vars) {
    std::lock_guard lock(registry().twin_mu);
    registry().twins[code_va()] = std::move(k);
  }
  ~MockProgram() override {
    std::lock_guard lock(registry().twin_mu);
    registry().twins.erase(code_va());
  }
};

}  // namespace

Result<std::unique_ptr<nv::Device>> open_mock_nv(nv::Generation generation) {
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
  auto hooks = std::make_unique<nv::MockHooks>();
  {
    std::lock_guard lock(registry().mu);
    registry().fakes.push_back(fakes);
  }
  // Every MOCK+NV GPU of the process runs: a queue may wait on another device's signal.
  hooks->pump = [] {
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
  };
  hooks->faults = [f] {
    std::vector<nv::GpuFault> out;
    for (const Fault& x : f->gpu.faults())
      out.push_back({.line = x.to_string(),
                     .address = x.address,
                     .token = x.token,
                     .qmd_va = x.qmd_va,
                     .mmu = x.kind == FaultKind::kMmuFault});
    return out;
  };
  hooks->keepalive = fakes;
  ASSIGN_OR_RETURN(auto dev, nv::Device::create(f->kernel, 0, std::move(hooks)));
  f->executor.set_device(dev.get());
  return dev;
}

std::unique_ptr<nv::Program> mock_program(std::string name,
                                          int num_bufs,
                                          int num_vars,
                                          MockKernel kernel) {
  return std::make_unique<MockProgram>(std::move(name), num_bufs, num_vars, std::move(kernel));
}

}  // namespace baregrad::mock
