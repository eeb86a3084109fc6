// The NVIDIA device's fault reports on MOCK+NV: each fault the fake GPU can produce is raised in
// the fake kernel as RM reports it (error notifiers, debugger state), and the device reads it
// back through the same path as on hardware. Each test checks the report against the address,
// buffer, channel and kernel it made fault, that the error is sticky, and that nothing hangs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <vector>

#include "base/check.h"
#include "base/format.h"
#include "drivers/mock/nv_device/mock_nv.h"
#include "drivers/mock/nvgpu/fake_gpu.h"
#include "drivers/nv/device.h"
#include "drivers/nv/pushbuf.h"

namespace baregrad::nv {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using ::testing::Not;
using Clock = std::chrono::steady_clock;

// A program whose code nobody placed: 256 bytes of host memory give it a unique address, and no
// twin is registered for it, so the fake GPU cannot run it.
class Ghost final : public Program {
 public:
  explicit Ghost(std::string name)
      : Program(std::move(name),
                0,
                0,
                (reinterpret_cast<uint64_t>(mem_) + 255) & ~uint64_t{255},
                0x210) {}

 private:
  static inline uint8_t mem_[512];
};

constexpr milliseconds kWait{5000};      // a fault fails a wait at once; this only bounds a bug
constexpr uint64_t kUnmapped = 0xdead0;  // below every VA range: in no allocation

// A MOCK+NV device, its fake GPU, and the buffers and argument blocks a test made on it.
struct Rig {
  Rig() {
    auto d = mock::open_mock_nv();
    CHECK(d.ok()) << d.status();
    dev = std::move(d).value();
    gpu = mock::mock_nv_gpu(*dev);
    CHECK(gpu != nullptr);
  }
  ~Rig() {
    args.clear();
    for (const hcq::Buffer& b : bufs) dev->allocator().free(b);
  }
  hcq::Buffer alloc(size_t bytes, hcq::BufferSpec spec = {.nolru = true}) {
    auto b = dev->allocator().alloc(bytes, spec);
    CHECK(b.ok()) << b.status();
    bufs.push_back(*b);
    return *b;
  }
  hcq::ArgsState& args_for(const hcq::Program& p) {
    size_t bytes = p.args_prefix() + 8 * static_cast<size_t>(p.num_bufs() + p.num_vars());
    return args.emplace_back(alloc(bytes, {.host = true, .cpu_access = true, .nolru = true}),
                             p.args_prefix(), p.num_bufs(), p.num_vars());
  }
  // Submits `body` on `q` and waits; returns the error the wait ended with.
  Status run(hcq::HwQueue& q,
             const std::function<void(hcq::HwQueue&)>& body,
             std::vector<int64_t> vars = {}) {
    auto v = dev->submit_on_timeline(q, body, vars);
    if (!v.ok()) return v.status();
    return dev->synchronize(kWait);
  }
  // Checks that every later use of the device fails with `err`.
  void expect_sticky(const Status& err) {
    EXPECT_EQ(dev->error().message(), err.message());
    auto q = dev->compute_queue();
    auto v = dev->submit_on_timeline(*q, [](hcq::HwQueue&) {});
    ASSERT_FALSE(v.ok());
    EXPECT_EQ(v.status().message(), err.message());
    EXPECT_EQ(dev->synchronize(kWait).message(), err.message());
  }
  std::unique_ptr<Device> dev;
  mock::FakeNvGpu* gpu = nullptr;
  std::vector<hcq::Buffer> bufs;
  std::deque<hcq::ArgsState> args;
};

// A twin that reads buffer 0 (4 bytes), reporting an MMU fault where the GPU cannot reach it.
mock::MockKernel reads_buffer0(const hcq::Program*& self) {
  return [&self](const mock::LaunchInfo& li, hcq::Device&, mock::TwinMemory& mem) -> Status {
    uint64_t va;
    std::memcpy(&va, li.cbank0.data() + self->args_prefix(), 8);
    if (!mem.resolve(va, 4)) return mem.mmu_fault(va, false, "buffer 0");
    return Status();
  };
}

TEST(NvFault, ACopyFromAnUnmappedAddressReportsTheAddressAndTheCopyQueue) {
  Rig r;
  hcq::Buffer dst = r.alloc(256);
  auto q = r.dev->copy_queue();
  auto t0 = Clock::now();
  Status err = r.run(*q, [&](hcq::HwQueue& hq) { hq.copy(dst.va, hcq::Value::sym(0), 64); },
                     {static_cast<int64_t>(kUnmapped)});
  EXPECT_LT(Clock::now() - t0, milliseconds(2000));
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.code(), StatusCode::kInternal);
  EXPECT_THAT(err.message(), HasSubstr("ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT (31): MMU fault"));
  EXPECT_THAT(err.message(), HasSubstr("engine COPY0"));
  EXPECT_THAT(err.message(), HasSubstr("copy queue of MOCK+NV"));
  EXPECT_THAT(err.message(), HasSubstr("MMU fault at " + hex(kUnmapped) +
                                       " (PTE, VIRT_READ), which is in no allocation"));
  EXPECT_THAT(err.message(), Not(HasSubstr("kernel '")));
  r.expect_sticky(err);
}

TEST(NvFault, AnInjectedMmuFaultNamesTheBufferThatOwnsTheAddress) {
  Rig r;
  hcq::Buffer src = r.alloc(4096), dst = r.alloc(8192);
  uint64_t bad = dst.va + 0x1040;
  r.gpu->inject_mmu_fault_at(bad);
  auto q = r.dev->compute_queue();  // its copies run on the compute channel's copy subchannel
  Status err = r.run(*q, [&](hcq::HwQueue& hq) { hq.copy(dst.va + 0x1000, src.va, 256); });
  ASSERT_FALSE(err.ok());
  EXPECT_THAT(err.message(), HasSubstr("MMU fault at " + hex(bad) + " (PTE, VIRT_WRITE)"));
  EXPECT_THAT(err.message(), HasSubstr("in the buffer at " + hex(dst.va) + " (8192 bytes)"));
  EXPECT_THAT(err.message(), HasSubstr("compute queue of MOCK+NV"));
  EXPECT_THAT(err.message(), HasSubstr("engine COPY0"));
  r.expect_sticky(err);
}

TEST(NvFault, AKernelReadingAnUnmappedAddressIsNamedByItsPc) {
  Rig r;
  const hcq::Program* self = nullptr;
  auto prg = mock::mock_program("reads_unmapped", 1, 0, reads_buffer0(self));
  self = prg.get();
  hcq::ArgsState& args = r.args_for(*prg);
  args.set_buf(0, hcq::Value(static_cast<int64_t>(kUnmapped)));
  auto q = r.dev->compute_queue();
  Status err = r.run(*q, [&](hcq::HwQueue& hq) { hq.exec(*prg, args, {1, 1, 1}, {1, 1, 1}); });
  ASSERT_FALSE(err.ok());
  EXPECT_THAT(err.message(), HasSubstr("ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT (31)"));
  EXPECT_THAT(err.message(), HasSubstr("compute queue of MOCK+NV"));
  EXPECT_THAT(err.message(), HasSubstr("engine GR0"));
  EXPECT_THAT(err.message(), HasSubstr("MMU fault at " + hex(kUnmapped) +
                                       " (PTE, VIRT_READ), which is in no allocation"));
  // The fake reports the fault on the H200's last SM, with the program's address as the PC.
  EXPECT_THAT(err.message(), HasSubstr("SM 131: "));
  EXPECT_THAT(err.message(), HasSubstr("PC " + hex(prg->code_va())));
  EXPECT_THAT(err.message(), HasSubstr("kernel 'reads_unmapped' (its code holds the PC)"));
  r.expect_sticky(err);
}

TEST(NvFault, AKernelReadingInsideABufferDoesNotFault) {
  Rig r;
  const hcq::Program* self = nullptr;
  auto prg = mock::mock_program("reads_mapped", 1, 0, reads_buffer0(self));
  self = prg.get();
  hcq::Buffer buf = r.alloc(64);
  hcq::ArgsState& args = r.args_for(*prg);
  args.set_buf(0, hcq::Value(static_cast<int64_t>(buf.va)));
  auto q = r.dev->compute_queue();
  EXPECT_TRUE(r.run(*q, [&](hcq::HwQueue& hq) { hq.exec(*prg, args, {1, 1, 1}, {1, 1, 1}); }).ok());
  EXPECT_TRUE(r.dev->error().ok());
}

TEST(NvFault, AFailingKernelIsAGraphicsExceptionWithItsSmErrorState) {
  Rig r;
  auto prg = mock::mock_program(
      "traps", 0, 0,
      [](const mock::LaunchInfo&, hcq::Device&, mock::TwinMemory&) { return internal("trap"); });
  hcq::ArgsState& args = r.args_for(*prg);
  auto q = r.dev->compute_queue();
  Status err = r.run(*q, [&](hcq::HwQueue& hq) { hq.exec(*prg, args, {1, 1, 1}, {1, 1, 1}); });
  ASSERT_FALSE(err.ok());
  EXPECT_THAT(err.message(), HasSubstr("ROBUST_CHANNEL_GR_EXCEPTION (13)"));
  EXPECT_THAT(err.message(), HasSubstr("on the compute queue of MOCK+NV:"));
  EXPECT_THAT(err.message(), HasSubstr("warp ESR 0x1"));
  EXPECT_THAT(err.message(), HasSubstr("kernel 'traps' (its code holds the PC)"));
  EXPECT_THAT(err.message(), Not(HasSubstr("MMU fault at")));
  r.expect_sticky(err);
}

TEST(NvFault, ALaunchOfAnUnknownProgramIsNamedByTheQmdOfTheFaultingSubmission) {
  Rig r;
  Ghost ghost("ghost");
  hcq::ArgsState& args = r.args_for(ghost);
  auto q = r.dev->compute_queue();
  Status err = r.run(*q, [&](hcq::HwQueue& hq) { hq.exec(ghost, args, {1, 1, 1}, {1, 1, 1}); });
  ASSERT_FALSE(err.ok());
  EXPECT_THAT(err.message(), HasSubstr("ROBUST_CHANNEL_GR_EXCEPTION (13)"));
  EXPECT_THAT(err.message(), HasSubstr("PC " + hex(ghost.code_va())));
  EXPECT_THAT(err.message(),
              HasSubstr("kernel 'ghost' (launched by the submission the channel was executing)"));
  r.expect_sticky(err);
}

TEST(NvFault, AnUnknownMethodIsAClassErrorOnItsChannelOnly) {
  Rig r;
  hcq::CmdStream cs("bad", 8);
  PushBuffer(cs).inc(Subchannel::kCompute, 0x0124, {1u});  // no such HOPPER_COMPUTE_A method
  ASSERT_TRUE(r.dev->submit_words(hcq::Engine::kCompute, cs.words()).ok());
  Status err = r.dev->synchronize(kWait);
  ASSERT_FALSE(err.ok());
  EXPECT_THAT(err.message(),
              HasSubstr("on the compute queue of MOCK+NV: ROBUST_CHANNEL_GR_CLASS_ERROR (69)"));
  EXPECT_THAT(err.message(), HasSubstr("engine GR0"));
  EXPECT_THAT(err.message(), Not(HasSubstr("copy queue")));
  EXPECT_THAT(err.message(), Not(HasSubstr("MMU fault at")));
  r.expect_sticky(err);
}

TEST(NvFault, AnUnknownCopyMethodIsACopyEngineError) {
  Rig r;
  hcq::CmdStream cs("bad", 8);
  PushBuffer(cs).inc(Subchannel::kCopy, 0x0124, {1u});
  ASSERT_TRUE(r.dev->submit_words(hcq::Engine::kCopy, cs.words()).ok());
  Status err = r.dev->synchronize(kWait);
  ASSERT_FALSE(err.ok());
  EXPECT_THAT(err.message(),
              HasSubstr("on the copy queue of MOCK+NV: ROBUST_CHANNEL_CE0_ERROR (39)"));
  EXPECT_THAT(err.message(), HasSubstr("engine COPY0"));
  r.expect_sticky(err);
}

TEST(NvFault, AHungChannelEndsInATimeoutErrorNotAFrozenProcess) {
  Rig r;
  r.gpu->inject_hang(r.dev->info().compute.work_submit_token);
  auto q = r.dev->compute_queue();
  ASSERT_TRUE(r.dev->submit_on_timeline(*q, [](hcq::HwQueue&) {}).ok());
  auto t0 = Clock::now();
  Status err = r.dev->synchronize(milliseconds(200));
  EXPECT_LT(Clock::now() - t0, milliseconds(3000));
  EXPECT_EQ(err.code(), StatusCode::kDeadlineExceeded) << err;
  EXPECT_THAT(err.message(), HasSubstr("MOCK+NV"));
  EXPECT_THAT(err.message(), Not(HasSubstr("ROBUST_CHANNEL")));  // no notifier was written
  r.expect_sticky(err);
}

TEST(NvFault, ATimeoutNamesTheSemaphoreTheQueueWaitsForAndItsKernels) {
  Rig r;
  auto never = r.dev->new_signal("never");
  ASSERT_TRUE(never.ok()) << never.status();
  const hcq::Program* self = nullptr;
  auto prg = mock::mock_program("after_the_wait", 1, 0, reads_buffer0(self));
  self = prg.get();
  hcq::Buffer buf = r.alloc(64);
  hcq::ArgsState& args = r.args_for(*prg);
  args.set_buf(0, static_cast<int64_t>(buf.va));
  auto q = r.dev->compute_queue();
  ASSERT_TRUE(r.dev
                  ->submit_on_timeline(*q,
                                       [&](hcq::HwQueue& hq) {
                                         hq.wait(**never, 5);
                                         hq.exec(*prg, args, {1, 1, 1}, {1, 1, 1});
                                       })
                  .ok());
  Status err = r.dev->synchronize(milliseconds(200));
  EXPECT_EQ(err.code(), StatusCode::kDeadlineExceeded) << err;
  EXPECT_THAT(err.message(), HasSubstr("; compute queue of MOCK+NV: GP entry "));
  EXPECT_THAT(err.message(), HasSubstr("its last begun submission waits for the semaphore at " +
                                       hex((*never)->va()) + " to reach 5 (it holds 0)"));
  EXPECT_THAT(err.message(), HasSubstr("that submission launches 'after_the_wait'"));
  EXPECT_THAT(err.message(), Not(HasSubstr("copy queue")));  // idle: not described
  r.expect_sticky(err);
  (*never)->set(5);  // the GPU finishes before teardown
}

TEST(NvFault, TheProgramRegistryMapsAPcToTheKernelWhoseCodeHoldsIt) {
  Rig r;
  r.dev->register_program(0x1000, 0x100, "a");
  r.dev->register_program(0x1100, 0x80, "b");
  EXPECT_EQ(r.dev->program_at(0xfff), "");
  EXPECT_EQ(r.dev->program_at(0x1000), "a");
  EXPECT_EQ(r.dev->program_at(0x10ff), "a");
  EXPECT_EQ(r.dev->program_at(0x1100), "b");
  EXPECT_EQ(r.dev->program_at(0x1180), "");
  r.dev->unregister_program(0x1000);
  EXPECT_EQ(r.dev->program_at(0x1000), "");
  EXPECT_TRUE(r.dev->error().ok());
}

}  // namespace
}  // namespace baregrad::nv
