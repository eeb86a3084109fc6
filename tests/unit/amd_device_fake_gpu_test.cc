// The AMD HCQ device end to end with the fake GPU (drivers/mock/amdgpu): signals, SDMA and
// DMA_DATA copies, a compiled kernel run as its host twin against the float64 reference, a VM
// fault becoming the sticky error and an injected hang timing out. The compile tests skip
// (saying why) without ld.lld (Debian's lld-19).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/format.h"
#include "compiler/render/llvm_ir.h"
#include "compiler/target/amd_target.h"
#include "drivers/amd/compute_queue.h"
#include "drivers/amd/device.h"
#include "drivers/amd/pm4.h"
#include "drivers/amd/sdma.h"
#include "drivers/cpu/iface_host.h"
#include "drivers/mock/amd/fake_kfd.h"
#include "drivers/mock/amdgpu/fake_gpu.h"
#include "drivers/mock/twin/twin_runner.h"
#include "tests/kernels/reference.h"
#include "tests/unit/amd_device_rig.h"
#include "tests/unit/gpu_cases.h"

namespace baregrad::amd {
namespace {

using namespace device_test;  // NOLINT: the shared helpers are these files' vocabulary
using ::testing::HasSubstr;

// ---- end to end with the fake GPU ------------------------------------------------------------

// A device with the fake GPU behind its fake KFD.
struct Rig {
  std::shared_ptr<FakeKfd> kfd;
  std::unique_ptr<mock::FakeAmdGpu> gpu;
  std::unique_ptr<Device> dev;
  explicit Rig(const std::string& gfx = "gfx1100", DeviceOptions o = small())
      : kfd(fake_kfd(gfx)), gpu(std::make_unique<mock::FakeAmdGpu>(*kfd)), dev(open(kfd, o)) {}
  ~Rig() {
    dev.reset();
    gpu.reset();
  }
  std::string faults() const {
    std::string out;
    for (const mock::AmdGpuFault& f : gpu->faults()) out += f.to_string() + "\n";
    return out;
  }
};

TEST(AmdDeviceOnFakeGpu, SignalsAreWrittenAndWaitedOnTheHostFromBothQueues) {
  for (const char* gfx : kTargets) {
    SCOPED_TRACE(gfx);
    Rig rig(gfx);
    Device& dev = *rig.dev;
    Result<std::unique_ptr<hcq::Signal>> s = dev.new_signal("s");
    ASSERT_TRUE(s.ok());
    std::unique_ptr<hcq::HwQueue> cq = dev.compute_queue(), xq = dev.copy_queue();
    Result<uint64_t> v =
        dev.submit_on_timeline(*cq, [&](hcq::HwQueue& q) { q.signal(**s, 42).memory_barrier(); });
    ASSERT_TRUE(v.ok()) << v.status().to_string();
    ASSERT_TRUE((*s)->wait(42, std::chrono::milliseconds(2000)).ok()) << rig.faults();
    EXPECT_EQ((*s)->value(), 42u);
    // The copy queue waits for 42, then writes a 64-bit value (two FENCEs) and a timestamp.
    constexpr uint64_t kBig = (uint64_t{1} << 33) + 5;
    v = dev.submit_on_timeline(*xq, [&](hcq::HwQueue& q) {
      q.wait(**s, 42).signal(**s, static_cast<int64_t>(kBig)).timestamp(**s);
    });
    ASSERT_TRUE(v.ok()) << v.status().to_string();
    ASSERT_TRUE(dev.synchronize(std::chrono::milliseconds(2000)).ok()) << rig.faults();
    EXPECT_EQ((*s)->value(), kBig);
    EXPECT_NE((*s)->timestamp_ns(), 0u);
    EXPECT_EQ(dev.timeline().value(), dev.timeline_value() - 1);
    EXPECT_GE(rig.gpu->counters().interrupts, 2u) << "every signal interrupts";
    EXPECT_EQ(rig.faults(), "");
  }
}

TEST(AmdDeviceOnFakeGpu, CopiesThroughSdmaAndPadsSubmissionsAtTheRingEnd) {
  DeviceOptions o = small();
  o.copy_ring_bytes = 4096;  // 1024 words: the submissions below wrap it many times
  Rig rig("gfx90a", o);
  Device& dev = *rig.dev;
  std::vector<uint8_t> data(5 << 20);  // over one staging chunk and one SDMA 4 packet
  for (size_t i = 0; i < data.size(); i++) data[i] = static_cast<uint8_t>(i * 131 + (i >> 12));
  Result<hcq::Buffer> a = dev.allocator().alloc(data.size()),
                      b = dev.allocator().alloc(data.size());
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(dev.allocator().copy_in(*a, data.data(), data.size()).ok()) << rig.faults();
  std::unique_ptr<hcq::HwQueue> xq = dev.copy_queue();
  for (int i = 0; i < 100; i++) {  // 37-word submissions: some must straddle the end
    uint64_t off = static_cast<uint64_t>(i) * 4096;
    Result<uint64_t> v = dev.submit_on_timeline(*xq, [&](hcq::HwQueue& q) {
      q.copy(static_cast<int64_t>(b->va + off), static_cast<int64_t>(a->va + off), 4096);
    });
    ASSERT_TRUE(v.ok()) << v.status().to_string();
  }
  Result<uint64_t> v = dev.submit_on_timeline(*xq, [&](hcq::HwQueue& q) {
    q.copy(static_cast<int64_t>(b->va + 409600), static_cast<int64_t>(a->va + 409600),
           static_cast<int64_t>(data.size() - 409600));
  });
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  std::vector<uint8_t> back(data.size());
  ASSERT_TRUE(dev.allocator().copy_out(back.data(), *b, back.size()).ok()) << rig.faults();
  EXPECT_TRUE(back == data);
  EXPECT_EQ(rig.faults(), "");
  EXPECT_GE(rig.gpu->counters().copies, 102u);
  dev.allocator().free(*a);
  dev.allocator().free(*b);
}

// The compute queue's DMA_DATA copies, on both compute queues: a constant copy over one packet's
// largest (split), a symbolic count and addresses patched at submit; the bytes checked.
TEST(AmdDeviceOnFakeGpu, TheComputeQueueCopiesWithDmaData) {
  for (ComputeQueueMode mode : {ComputeQueueMode::kPm4, ComputeQueueMode::kAql}) {
    SCOPED_TRACE(mode == ComputeQueueMode::kAql ? "AQL" : "PM4");
    DeviceOptions o = small();
    o.compute = mode;
    Rig rig("gfx1100", o);
    Device& dev = *rig.dev;
    const size_t n = kDmaDataMaxBytes + 4096 + 3;
    std::vector<uint8_t> data(n);
    for (size_t i = 0; i < n; i++) data[i] = static_cast<uint8_t>(i * 37 + (i >> 13));
    Result<hcq::Buffer> a = dev.allocator().alloc(n), b = dev.allocator().alloc(n);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_TRUE(dev.allocator().copy_in(*a, data.data(), n).ok());
    std::unique_ptr<hcq::HwQueue> cq = dev.compute_queue();
    const uint64_t copies = rig.gpu->counters().copies;  // copy_in's staging copies before
    Result<uint64_t> v = dev.submit_on_timeline(*cq, [&](hcq::HwQueue& q) {
      q.copy(static_cast<int64_t>(b->va), static_cast<int64_t>(a->va), static_cast<int64_t>(n));
    });
    ASSERT_TRUE(v.ok()) << v.status().to_string();
    ASSERT_TRUE(dev.synchronize(std::chrono::milliseconds(5000)).ok()) << rig.faults();
    EXPECT_EQ(rig.gpu->counters().copies - copies, 2u) << "split into two DMA_DATA packets";
    std::vector<uint8_t> back(n);
    ASSERT_TRUE(dev.allocator().copy_out(back.data(), *b, n).ok()) << rig.faults();
    EXPECT_TRUE(back == data);
    // Symbolic: 100 bytes from a + 5 to b + 7, the count and the source patched.
    std::vector<uint8_t> zeros(256, 0);
    ASSERT_TRUE(dev.allocator().copy_in(*b, zeros.data(), zeros.size()).ok());
    v = dev.submit_on_timeline(
        *cq,
        [&](hcq::HwQueue& q) {
          q.copy(static_cast<int64_t>(b->va + 7), hcq::Value::sym(0), hcq::Value::sym(1));
        },
        std::vector<int64_t>{static_cast<int64_t>(a->va + 5), 100});
    ASSERT_TRUE(v.ok()) << v.status().to_string();
    ASSERT_TRUE(dev.allocator().copy_out(back.data(), *b, 256).ok()) << rig.faults();
    for (size_t i = 0; i < 256; i++) {
      uint8_t want = i >= 7 && i < 107 ? data[i - 7 + 5] : 0;
      ASSERT_EQ(back[i], want) << i;
    }
    EXPECT_EQ(rig.faults(), "");
    dev.allocator().free(*a);
    dev.allocator().free(*b);
  }
}

// Runs case `c` compiled for `gfx` on the fake GPU, its host twin registered at the program's
// code address; returns every buffer afterwards.
std::vector<std::vector<double>> run_on_fake_gpu(const std::string& gfx, const Case& c, bool bind) {
  Rig rig(gfx);
  Device& dev = *rig.dev;
  compiler::CompiledKernel k = compile(gfx, c);
  Result<std::unique_ptr<hcq::Program>> p = dev.load_program(k.binary);
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  if (!p.ok()) return {};
  const auto& prg = static_cast<const Program&>(**p);

  static cpu::ObjectLoader* loader = new cpu::ObjectLoader();
  std::string sym = compiler::twin_symbol(k.spec.name);
  Result<std::string> obj = compiler::LlvmCompiler().compile(
      compiler::LlvmIrRenderer(compiler::LlvmAbi::kHostTwin).render(k.spec), sym);
  EXPECT_TRUE(obj.ok()) << obj.status().to_string();
  Result<cpu::LoadedKernel> fn = loader->load(*obj, sym);
  EXPECT_TRUE(fn.ok()) << fn.status().to_string();
  if (!obj.ok() || !fn.ok()) return {};

  std::vector<hcq::Buffer> bufs;
  for (size_t s = 0; s < c.types.size(); s++) {
    std::vector<uint8_t> bytes = compiler::gpu_cases::encode(c.types[s], c.data[s]);
    Result<hcq::Buffer> b = dev.allocator().alloc(bytes.size());
    EXPECT_TRUE(b.ok());
    EXPECT_TRUE(dev.allocator().copy_in(*b, bytes.data(), bytes.size()).ok()) << rig.faults();
    bufs.push_back(*b);
  }
  // The twin reads the kernarg segment the GPU decoded; buffer addresses are GPU VAs, which
  // the fake KFD resolves to its host memory.
  int nb = k.binary.num_bufs, nv = static_cast<int>(k.spec.vars.size());
  bool per_thread = compiler::twin_is_per_thread(k.spec);
  int64_t smem = compiler::twin_shared_bytes(k.spec);
  auto* kfd = rig.kfd.get();
  rig.gpu->twins().add(
      prg.code_va(),
      [=](std::span<const uint8_t> ka, hcq::Dim3 g, hcq::Dim3 b) {
        std::vector<uint8_t> params(8 * (nb + nv));
        CHECK_GE(ka.size(), params.size());
        std::memcpy(params.data(), ka.data(), params.size());
        for (int s = 0; s < nb; s++) {
          uint64_t va;
          std::memcpy(&va, &params[8 * s], 8);
          uint64_t host = reinterpret_cast<uint64_t>(*kfd->resolve(va, 1));
          std::memcpy(&params[8 * s], &host, 8);
        }
        uint32_t grid[3] = {g.x, g.y, g.z}, block[3] = {b.x, b.y, b.z};
        mock::run_twin(reinterpret_cast<void (*)()>(fn->fn), per_thread, smem, params.data(), grid,
                       block);
      },
      prg.private_segment_buffer() ? 4 : 0);

  Result<hcq::Buffer> mem =
      dev.allocator().alloc(8 * (nb + nv), {.host = true, .cpu_access = true});
  EXPECT_TRUE(mem.ok());
  hcq::ArgsState args(*mem, prg.args_prefix(), nb, nv);
  for (int s = 0; s < nb; s++) args.set_buf(s, hcq::Value::sym(s));  // patched at submit
  for (int i = 0; i < nv; i++) {
    int64_t v = 0;
    for (auto& [node, value] : c.vars)
      if (node->arg_as<compiler::VarArg>().name == k.spec.vars[i].name) v = value;
    args.set_var(i, v);
  }
  std::vector<int64_t> vars;
  for (const hcq::Buffer& b : bufs) vars.push_back(static_cast<int64_t>(b.va));
  hcq::Dim3 grid{k.binary.grid[0], k.binary.grid[1], k.binary.grid[2]};
  hcq::Dim3 block{k.binary.block[0], k.binary.block[1], k.binary.block[2]};
  std::unique_ptr<hcq::HwQueue> cq = dev.compute_queue();
  if (bind) {  // recorded once, bound, submitted as an INDIRECT_BUFFER on the timeline
    uint64_t v = dev.timeline_value();
    cq->wait(dev.timeline(), static_cast<int64_t>(v - 1)).memory_barrier();
    cq->exec(prg, args, grid, block).signal(dev.timeline(), static_cast<int64_t>(v));
    EXPECT_TRUE(cq->bind().ok());
    Result<uint64_t> got = dev.submit_with_timeline([&](uint64_t) { return cq->submit(vars); });
    EXPECT_TRUE(got.ok()) << got.status().to_string();
  } else {
    Result<uint64_t> got =
        dev.submit_on_timeline(*cq, [&](hcq::HwQueue& q) { q.exec(prg, args, grid, block); }, vars);
    EXPECT_TRUE(got.ok()) << got.status().to_string();
  }
  Status s = dev.synchronize(std::chrono::milliseconds(5000));
  EXPECT_TRUE(s.ok()) << s.to_string() << "\n" << rig.faults();
  EXPECT_EQ(rig.gpu->counters().dispatches, 1u);
  std::vector<std::vector<double>> out;
  for (size_t i = 0; i < bufs.size(); i++) {
    std::vector<uint8_t> bytes(bufs[i].size);
    EXPECT_TRUE(dev.allocator().copy_out(bytes.data(), bufs[i], bytes.size()).ok());
    out.push_back(compiler::gpu_cases::decode(c.types[i], bytes));
  }
  cq.reset();
  for (const hcq::Buffer& b : bufs) dev.allocator().free(b);
  dev.allocator().free(*mem);
  return out;
}

std::vector<std::vector<double>> reference(const Case& c) {
  std::vector<std::pair<compiler::UOpPtr, compiler::UOpPtr>> repl;
  for (auto& [node, value] : c.vars) repl.push_back({node, compiler::UOp::index_const(value)});
  std::vector<std::vector<double>> want = c.data;
  testing::reference_run(repl.empty() ? c.ast : c.ast->substitute(repl), want);
  return want;
}

void expect_close(const std::vector<std::vector<double>>& got,
                  const std::vector<std::vector<double>>& want,
                  double rtol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t b = 0; b < want.size(); b++)
    for (size_t i = 0; i < want[b].size(); i++)
      ASSERT_NEAR(got[b][i], want[b][i], rtol * std::max(1.0, std::fabs(want[b][i])))
          << "buffer " << b << " element " << i;
}

TEST(AmdDeviceOnFakeGpu, ACompiledKernelRunsAsItsHostTwinAndMatchesTheFloat64Reference) {
  REQUIRE_LLD();
  const Case* reduce = nullptr;
  for (const Case& c : compiler::gpu_cases::cases())
    if (c.what == "max_all") reduce = new Case(c);  // LDS and barriers
  ASSERT_NE(reduce, nullptr);
  // gfx90a kernels take the kernarg pointer in user SGPRs 4-5, after the private segment buffer.
  for (const char* gfx : kTargets) {
    SCOPED_TRACE(gfx);
    const Case& c = scale_case();
    expect_close(run_on_fake_gpu(gfx, c, false), reference(c), c.rtol);
    expect_close(run_on_fake_gpu(gfx, *reduce, true), reference(*reduce), reduce->rtol);
  }
  delete reduce;
}

TEST(AmdDeviceOnFakeGpu, AVmFaultBecomesTheStickyErrorNamingTheAddressAndBuffer) {
  Rig rig("gfx1100");
  Device& dev = *rig.dev;
  Result<hcq::Buffer> a = dev.allocator().alloc(4096), b = dev.allocator().alloc(8192);
  ASSERT_TRUE(a.ok() && b.ok());
  rig.gpu->inject_vm_fault_at(b->va + 0x1000);
  std::unique_ptr<hcq::HwQueue> xq = dev.copy_queue();
  Result<uint64_t> v = dev.submit_on_timeline(*xq, [&](hcq::HwQueue& q) {
    q.copy(static_cast<int64_t>(b->va + 0x800), static_cast<int64_t>(a->va), 4096);
  });
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  Status s = dev.synchronize(std::chrono::milliseconds(2000));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInternal) << s.to_string();
  EXPECT_THAT(s.message(), HasSubstr("GPU memory fault at " + hex(b->va + 0x1000)));
  EXPECT_THAT(s.message(),
              HasSubstr("in the buffer at " + hex(b->va) + " (8192 bytes) at offset 4096"));
  EXPECT_THAT(s.message(), HasSubstr("the copy queue (SDMA) of AMD was executing submission"));
  EXPECT_TRUE(dev.failed());
  EXPECT_EQ(dev.error().message(), s.message()) << "sticky";
  std::unique_ptr<hcq::HwQueue> cq = dev.compute_queue();
  Result<uint64_t> later = dev.submit_on_timeline(*cq, [](hcq::HwQueue&) {});
  EXPECT_FALSE(later.ok());
}

TEST(AmdDeviceOnFakeGpu, AnInjectedHangTimesOutWithAReportInsteadOfFreezing) {
  // On either compute queue (AQL: the wait is in a PM4-IB packet's words).
  for (ComputeQueueMode mode : {ComputeQueueMode::kPm4, ComputeQueueMode::kAql}) {
    SCOPED_TRACE(mode == ComputeQueueMode::kAql ? "AQL" : "PM4");
    DeviceOptions o = small(std::chrono::milliseconds(300));
    o.compute = mode;
    Rig rig("gfx1100", o);
    Device& dev = *rig.dev;
    Result<std::unique_ptr<hcq::Signal>> gate = dev.new_signal("gate");
    ASSERT_TRUE(gate.ok());
    std::unique_ptr<hcq::HwQueue> cq = dev.compute_queue();
    // First a submission stuck in a wait the CPU never satisfies, then a hung queue.
    Result<uint64_t> v = dev.submit_on_timeline(*cq, [&](hcq::HwQueue& q) { q.wait(**gate, 7); });
    ASSERT_TRUE(v.ok());
    auto t0 = std::chrono::steady_clock::now();
    Status s = dev.synchronize(std::chrono::milliseconds(300));
    auto waited = std::chrono::steady_clock::now() - t0;
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.to_string();
    EXPECT_LT(waited, std::chrono::seconds(5));
    EXPECT_THAT(s.message(), HasSubstr("host wait on signal 'timeline'"));
    EXPECT_THAT(s.message(), HasSubstr("compute queue of AMD: submissions"));
    EXPECT_THAT(s.message(), HasSubstr("it waits for signal 'gate' at " + hex((*gate)->va()) +
                                       " to reach 7 (it holds 0)"));
    EXPECT_TRUE(dev.failed());
  }

  Rig hung("gfx1100", small(std::chrono::milliseconds(300)));
  hung.gpu->inject_hang(hung.kfd->queues()[0].id);
  std::unique_ptr<hcq::HwQueue> q2 = hung.dev->compute_queue();
  ASSERT_TRUE(hung.dev->submit_on_timeline(*q2, [](hcq::HwQueue&) {}).ok());
  Status s = hung.dev->synchronize(std::chrono::milliseconds(300));
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.to_string();
  EXPECT_THAT(s.message(), HasSubstr("submissions 0 of 1 done"));
}

}  // namespace
}  // namespace baregrad::amd
