// The fake NVIDIA GPU against the drivers/nv encoders: command streams built with PushBuffer, the
// method builders, GpFifoRing and build_qmd run on FakeNvGpu, and each test checks what landed
// in memory (values written by hand here, never read back through an encoder). The GPU decodes
// with its own field tables, so a test fails when either side is wrong.
#include "tests/unit/nv_fake_gpu_rig.h"

namespace baregrad::mock {
namespace {

using namespace fake_gpu_test;

// ---- semaphores ----------------------------------------------------------------------------

TEST(NvFakeGpu, ReleasesWriteThePayloadAndTheTimestamp) {
  Rig r(hopper());
  r.bind();
  std::memset(r.sig.host(), 0xaa, 0x100);
  CmdStream cs("pb", 64);
  PushBuffer pb(cs);
  const auto& g = r.gpu_classes;
  ASSERT_TRUE(
      nv::emit_semaphore_release(pb, g, r.sig.va(0x00), 0x1122334455667788, {.timestamp = true})
          .ok());
  ASSERT_TRUE(nv::emit_semaphore_release(pb, g, r.sig.va(0x20), 0x0102030405060708).ok());
  ASSERT_TRUE(
      nv::emit_semaphore_release(pb, g, r.sig.va(0x40), 0xdeadbeef, {PayloadSize::k32}).ok());
  ASSERT_TRUE(
      nv::emit_semaphore_release(pb, g, r.sig.va(0x60), 0xcafef00d, {PayloadSize::k32, true}).ok());
  nv::emit_non_stall_interrupt(pb);
  uint64_t before = FakeNvGpu::timestamp_ns();
  r.submit(r.compute, cs);
  uint64_t after = FakeNvGpu::timestamp_ns();

  EXPECT_TRUE(r.gpu.faults().empty()) << r.gpu.faults()[0].to_string();
  EXPECT_EQ(r.sig.get<uint64_t>(0x00), 0x1122334455667788u);
  EXPECT_GE(r.sig.get<uint64_t>(0x08), before);
  EXPECT_LE(r.sig.get<uint64_t>(0x08), after);
  EXPECT_EQ(r.sig.get<uint64_t>(0x20), 0x0102030405060708u);
  EXPECT_EQ(r.sig.get<uint64_t>(0x28), 0xaaaaaaaaaaaaaaaau);  // no timestamp
  EXPECT_EQ(r.sig.get<uint32_t>(0x40), 0xdeadbeefu);
  EXPECT_EQ(r.sig.get<uint32_t>(0x44), 0xaaaaaaaau);  // a 32-bit release writes 4 bytes
  EXPECT_EQ(r.sig.get<uint32_t>(0x60), 0xcafef00du);
  EXPECT_EQ(r.sig.get<uint32_t>(0x64), 0u);  // the 16-byte structure: bytes 4..7 zero
  EXPECT_GE(r.sig.get<uint64_t>(0x68), before);
  EXPECT_LE(r.sig.get<uint64_t>(0x68), after);
  GpuCounters n = r.gpu.counters();
  EXPECT_EQ(n.semaphore_releases, 4u);
  EXPECT_EQ(n.non_stall_interrupts, 1u);
}

TEST(NvFakeGpu, AnAcquireBlocksTheChannelUntilTheHostWritesTheValue) {
  Rig r(hopper());
  r.bind();
  CmdStream cs("pb", 64);
  PushBuffer pb(cs);
  ASSERT_TRUE(nv::emit_semaphore_acquire(pb, r.gpu_classes, r.sig.va(0), 5).ok());
  ASSERT_TRUE(nv::emit_semaphore_release(pb, r.gpu_classes, r.sig.va(0x20), 1).ok());
  r.submit(r.compute, cs);
  ChannelStatus s = r.status(kComputeToken);
  EXPECT_TRUE(s.blocked);
  EXPECT_EQ(s.gp_get, 2u);  // GP entries are committed when they begin (NV_PPBDMA_GP_GET)
  EXPECT_EQ(r.sig.get<uint64_t>(0x20), 0u);

  r.sig.store64(0, 4);
  EXPECT_FALSE(r.gpu.run_until_idle());
  EXPECT_EQ(r.sig.get<uint64_t>(0x20), 0u);
  r.sig.store64(0, 5);
  EXPECT_TRUE(r.gpu.run_until_idle());
  EXPECT_EQ(r.sig.get<uint64_t>(0x20), 1u);
  EXPECT_FALSE(r.status(kComputeToken).blocked);
  GpuCounters n = r.gpu.counters();
  EXPECT_EQ(n.acquire_blocks, 1u);
  // 2 SET_OBJECTs and 5 + 5 semaphore methods: the blocked pumps re-ran only SEM_EXECUTE.
  EXPECT_EQ(n.methods, 12u);
  EXPECT_TRUE(r.gpu.faults().empty());
}

TEST(NvFakeGpu, AcquiresCompareCircularly) {
  Rig r(hopper());
  r.bind();
  // -6 >= 10 circularly is false, though 0xff..fa >= 10 unsigned; 5 >= 0xff..f0 circularly.
  r.sig.store64(0, 0xfffffffffffffffa);
  r.sig.store64(0x10, 5);
  CmdStream cs("pb", 64);
  PushBuffer pb(cs);
  ASSERT_TRUE(
      nv::emit_semaphore_acquire(pb, r.gpu_classes, r.sig.va(0x10), 0xfffffffffffffff0).ok());
  ASSERT_TRUE(nv::emit_semaphore_release(pb, r.gpu_classes, r.sig.va(0x20), 1).ok());
  ASSERT_TRUE(nv::emit_semaphore_acquire(pb, r.gpu_classes, r.sig.va(0), 10).ok());
  ASSERT_TRUE(nv::emit_semaphore_release(pb, r.gpu_classes, r.sig.va(0x20), 2).ok());
  r.submit(r.compute, cs);
  EXPECT_EQ(r.sig.get<uint64_t>(0x20), 1u);
  EXPECT_TRUE(r.status(kComputeToken).blocked);
  r.sig.store64(0, 10);
  r.gpu.run_until_idle();
  EXPECT_EQ(r.sig.get<uint64_t>(0x20), 2u);
}

// ---- copies --------------------------------------------------------------------------------

TEST(NvFakeGpu, CopiesOfOddSizesAreByteExact) {
  Rig r(hopper());
  r.bind();
  for (size_t i = 0; i < 0x40000; i++) r.data.host()[i] = static_cast<uint8_t>(i * 7 + 3);
  std::memset(r.data.host(0x40000), 0x5a, 0x40000);
  struct Piece {
    size_t dst, src, bytes;
  };
  const Piece pieces[] = {
      {0x40001, 0x3, 1}, {0x40010, 0x101, 3}, {0x41001, 0x2003, 4097}, {0x50001, 0x10001, 65537}};
  CmdStream cs("pb", 256);
  PushBuffer pb(cs);
  for (const Piece& p : pieces) {
    ASSERT_TRUE(nv::emit_copy(pb, r.gpu_classes, r.data.va(p.dst), r.data.va(p.src),
                              static_cast<int64_t>(p.bytes))
                    .ok());
  }
  ASSERT_TRUE(nv::emit_copy_semaphore_release(pb, r.gpu_classes, r.sig.va(0), 0x0000000900000001,
                                              {.timestamp = true})
                  .ok());
  ASSERT_TRUE(
      nv::emit_copy_semaphore_release(pb, r.gpu_classes, r.sig.va(0x40), 0x77, {PayloadSize::k32})
          .ok());
  uint64_t before = FakeNvGpu::timestamp_ns();
  r.submit(r.copy, cs);

  EXPECT_TRUE(r.gpu.faults().empty()) << r.gpu.faults()[0].to_string();
  uint64_t total = 0;
  for (const Piece& p : pieces) {
    for (size_t i = 0; i < p.bytes; i++) {
      ASSERT_EQ(r.data.host(p.dst)[i], static_cast<uint8_t>((p.src + i) * 7 + 3))
          << p.bytes << " bytes, byte " << i;
    }
    EXPECT_EQ(r.data.host(p.dst)[-1], 0x5a) << "before " << p.bytes << " bytes";
    EXPECT_EQ(r.data.host(p.dst)[p.bytes], 0x5a) << "after " << p.bytes << " bytes";
    total += p.bytes;
  }
  EXPECT_EQ(r.sig.get<uint64_t>(0), 0x0000000900000001u);
  EXPECT_GE(r.sig.get<uint64_t>(8), before);
  EXPECT_EQ(r.sig.get<uint32_t>(0x40), 0x77u);
  EXPECT_EQ(r.sig.get<uint32_t>(0x44), 0u);
  GpuCounters n = r.gpu.counters();
  EXPECT_EQ(n.copies, 4u);
  EXPECT_EQ(n.bytes_copied, total);
}

TEST(NvFakeGpu, AmpereDmaCopyAReleasesThirtyTwoBitsAndHasNoPayloadUpper) {
  Rig r(classes(nv::kArchGa100, nv::kImplGa100));
  r.bind();
  CmdStream cs("pb", 64);
  PushBuffer pb(cs);
  ASSERT_TRUE(
      nv::emit_copy_semaphore_release(pb, r.gpu_classes, r.sig.va(0), 0x1234, {PayloadSize::k32})
          .ok());
  EXPECT_FALSE(nv::emit_copy_semaphore_release(pb, r.gpu_classes, r.sig.va(8), 1).ok());
  pb.inc(Subchannel::kCopy, nv::kCopySetSemaphoreA + 0xc, {1u});  // SET_SEMAPHORE_PAYLOAD_UPPER
  r.submit(r.copy, cs);
  EXPECT_EQ(r.sig.get<uint32_t>(0), 0x1234u);
  Fault f = r.only_fault();
  EXPECT_EQ(f.kind, FaultKind::kIllegalMethod);
  EXPECT_EQ(f.cls, nv::kAmpereDmaCopyA);
  EXPECT_EQ(f.method, 0x24cu);
}

// ---- launches ------------------------------------------------------------------------------

struct LaunchCase {
  const char* name;
  uint32_t arch, impl;
  bool v3;  // Hopper running tinygrad's V03_00 layout
};

class NvFakeGpuLaunch : public testing::TestWithParam<LaunchCase> {
 protected:
  nv::GpuClasses gpu_classes() const {
    nv::GpuClasses c = classes(GetParam().arch, GetParam().impl);
    if (GetParam().v3) c.qmd = nv::QmdVersion::kV3;
    return c;
  }
  // A QMD for `program` with grid 0x40000007 x 0x8003 x 0x8002 (the top bit of each range),
  // block 32x4x2, 5000 bytes of shared memory (256-rounded by the builder), 40 registers and
  // constant bank 0 = `cb_bytes` at cb + `cb_off`.
  static nv::QmdParams params(const Rig& r,
                              uint64_t program,
                              size_t cb_off,
                              uint32_t cb_bytes = 0x158) {
    nv::QmdParams p;
    p.program_address = program;
    p.program_bytes = 0x1000;
    p.grid = {0x4000'0007, 0x8003, 0x8002};
    p.block = {32, 4, 2};
    p.shared_memory_bytes = 5000;
    p.registers = 40;
    p.constant_buffers = {{0, r.cb.va(cb_off), cb_bytes}};
    p.sass_version = 0x90;
    return p;
  }
  static void place(Rig& r, const nv::Qmd& q, size_t off) {
    std::memcpy(r.qmd.host(off), q.words().data(), q.size_bytes());
  }
};

struct Seen {
  Dim3 grid, block;
  std::vector<uint8_t> cbank0;
  uint64_t release_at_launch = ~0ull;
};

TEST_P(NvFakeGpuLaunch, TheTwinSeesTheQmdThenTheReleasesAreWritten) {
  Rig r(gpu_classes());
  r.bind();
  for (size_t i = 0; i < 0x200; i++) r.cb.host()[i] = static_cast<uint8_t>(i ^ 0x5c);
  constexpr uint64_t kProgram = 0x96'7000'1200;
  nv::QmdParams p = params(r, kProgram, 0);
  p.releases = {{r.sig.va(0), 0x1234567890, {}},
                {r.sig.va(0x10), 0x42, {PayloadSize::k32, true}},
                {r.sig.va(0x20), 0xfedcba9876543210, {PayloadSize::k64, true}}};
  auto q = nv::build_qmd(r.gpu_classes, p);
  ASSERT_TRUE(q.ok()) << q.status();
  place(r, *q, 0);
  std::vector<Seen> seen;
  r.gpu.twins().add(kProgram, [&](std::span<const uint8_t> cb, Dim3 grid, Dim3 block) {
    seen.push_back({grid, block, {cb.begin(), cb.end()}, r.sig.get<uint64_t>(0)});
  });
  CmdStream cs("pb", 64);
  PushBuffer pb(cs);
  ASSERT_TRUE(nv::emit_launch(pb, r.qmd.va(0)).ok());
  uint64_t before = FakeNvGpu::timestamp_ns();
  r.submit(r.compute, cs);

  ASSERT_TRUE(r.gpu.faults().empty()) << r.gpu.faults()[0].to_string();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].grid.x, 0x4000'0007u);
  EXPECT_EQ(seen[0].grid.y, 0x8003u);
  EXPECT_EQ(seen[0].grid.z, 0x8002u);
  EXPECT_EQ(seen[0].block.x, 32u);
  EXPECT_EQ(seen[0].block.y, 4u);
  EXPECT_EQ(seen[0].block.z, 2u);
  // 0x158 bytes round up to 0x160 (CONSTANT_BUFFER_SIZE_SHIFTED4 counts 16-byte units).
  ASSERT_EQ(seen[0].cbank0.size(), 0x160u);
  for (size_t i = 0; i < 0x160; i++) {
    ASSERT_EQ(seen[0].cbank0[i], static_cast<uint8_t>(i ^ 0x5c)) << "cbank0 byte " << i;
  }
  EXPECT_EQ(seen[0].release_at_launch, 0u);  // releases follow the grid
  EXPECT_EQ(r.sig.get<uint64_t>(0), 0x1234567890u);
  EXPECT_EQ(r.sig.get<uint32_t>(0x10), 0x42u);
  EXPECT_EQ(r.sig.get<uint32_t>(0x14), 0u);
  EXPECT_GE(r.sig.get<uint64_t>(0x18), before);
  EXPECT_EQ(r.sig.get<uint64_t>(0x20), 0xfedcba9876543210u);
  EXPECT_GE(r.sig.get<uint64_t>(0x28), before);
  EXPECT_EQ(r.gpu.counters().launches, 1u);
}

// A recording executor: every LaunchInfo field against what build_qmd was given.
TEST_P(NvFakeGpuLaunch, TheLaunchInfoCarriesTheQmdFields) {
  struct Recorder : KernelExecutor {
    std::vector<LaunchInfo> seen;
    Status launch(const LaunchInfo& li) override {
      seen.push_back(li);
      return {};
    }
  } rec;
  Rig r(gpu_classes());
  r.bind();
  r.gpu.set_executor(&rec);
  auto q = nv::build_qmd(r.gpu_classes, params(r, 0x96'7000'1200, 0, 0x10000));
  ASSERT_TRUE(q.ok()) << q.status();
  place(r, *q, 0x300);
  CmdStream cs("pb", 64);
  PushBuffer pb(cs);
  ASSERT_TRUE(nv::emit_launch(pb, r.qmd.va(0x300), nv::PcasAction::kInvalidateCopySchedule).ok());
  r.submit(r.compute, cs);
  ASSERT_TRUE(r.gpu.faults().empty()) << r.gpu.faults()[0].to_string();
  ASSERT_EQ(rec.seen.size(), 1u);
  const LaunchInfo& li = rec.seen[0];
  EXPECT_EQ(li.program_va, 0x96'7000'1200u);
  EXPECT_EQ(li.shared_memory_bytes, 5120u);  // 5000 rounded up to 256
  EXPECT_EQ(li.registers, 40u);
  EXPECT_EQ(li.cbank0_va, r.cb.va(0));
  EXPECT_EQ(li.cbank0.size(), 0x10000u);  // SIZE_SHIFTED4 0x1000: its top bit
  EXPECT_EQ(li.qmd_va, r.qmd.va(0x300));
  EXPECT_EQ(li.token, kComputeToken);
}

TEST_P(NvFakeGpuLaunch, ChainedQmdsRunInOrderFromOneLaunch) {
  Rig r(gpu_classes());
  r.bind();
  constexpr uint64_t kFirst = 0x96'7000'1000, kSecond = 0x96'7000'2000;
  auto a = nv::build_qmd(r.gpu_classes, params(r, kFirst, 0));
  nv::QmdParams pb_params = params(r, kSecond, 0x200);
  pb_params.releases = {{r.sig.va(0), 2, {}}};
  auto b = nv::build_qmd(r.gpu_classes, pb_params);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(nv::qmd_set_dependent(*a, r.qmd.va(0x400)).ok());
  place(r, *a, 0);
  place(r, *b, 0x400);
  std::vector<uint64_t> order;
  r.gpu.twins().add(kFirst, [&](auto, Dim3, Dim3) { order.push_back(kFirst); });
  r.gpu.twins().add(kSecond, [&](auto, Dim3, Dim3) {
    order.push_back(kSecond);
    EXPECT_EQ(r.sig.get<uint64_t>(0), 0u);
  });
  CmdStream cs("pb", 64);
  PushBuffer pb(cs);
  ASSERT_TRUE(nv::emit_launch(pb, r.qmd.va(0)).ok());
  r.submit(r.compute, cs);
  ASSERT_TRUE(r.gpu.faults().empty()) << r.gpu.faults()[0].to_string();
  EXPECT_EQ(order, (std::vector<uint64_t>{kFirst, kSecond}));
  EXPECT_EQ(r.sig.get<uint64_t>(0), 2u);
  EXPECT_EQ(r.gpu.counters().launches, 2u);
}

INSTANTIATE_TEST_SUITE_P(
    NvFakeGpu,
    NvFakeGpuLaunch,
    testing::Values(LaunchCase{"Ga100V3", nv::kArchGa100, nv::kImplGa100, false},
                    LaunchCase{"Ga102V3", nv::kArchGa100, 2, false},
                    LaunchCase{"Ad102V3", nv::kArchAd100, 2, false},
                    LaunchCase{"Gh100V4", nv::kArchGh100, 0, false},
                    LaunchCase{"Gh100V3", nv::kArchGh100, 0, true},
                    LaunchCase{"Gb100V5", nv::kArchGb100, 0, false},
                    LaunchCase{"Gb202V5", nv::kArchGb200, 2, false}),
    [](const testing::TestParamInfo<LaunchCase>& info) { return std::string(info.param.name); });

// ---- channel state -------------------------------------------------------------------------

TEST(NvFakeGpu, GpGetFollowsTheRingAndWraps) {
  Rig r(hopper(), 4);
  r.bind();  // entry 0 of each ring
  for (uint64_t i = 1; i <= 9; i++) {
    CmdStream cs("pb", 16);
    PushBuffer pb(cs);
    ASSERT_TRUE(nv::emit_semaphore_release(pb, r.gpu_classes, r.sig.va(0), i).ok());
    r.submit(r.compute, cs);
    EXPECT_EQ(r.sig.get<uint64_t>(0), i);
    EXPECT_EQ(r.compute.userd.get<uint32_t>(kUserdGpGetOffset), (i + 1) % 4) << "after " << i;
    EXPECT_EQ(r.status(kComputeToken).gp_get, (i + 1) % 4);
  }
  // A control entry (LENGTH 0, OPCODE NOP) is consumed and does nothing.
  uint32_t slot = r.compute.fifo.put();
  r.compute.ring.put<uint64_t>(slot * 8, 0);
  r.compute.userd.put<uint32_t>(nv::kUserdGpPut, (slot + 1) % 4);
  r.gpu.ring(kComputeToken);
  EXPECT_EQ(r.compute.userd.get<uint32_t>(kUserdGpGetOffset), (slot + 1) % 4);
  EXPECT_TRUE(r.gpu.faults().empty());
  EXPECT_EQ(r.gpu.counters().gp_entries, 2u + 9u + 1u);
}

TEST(NvFakeGpu, EveryHeaderFormDecodesAsTheManualSays) {
  Rig r(hopper());
  r.bind();
  CmdStream cs("pb", 64);
  PushBuffer pb(cs);
  pb.immd(Subchannel::kCompute, nv::kInvalidateShaderCachesNoWfi, 0x1011);  // IMMD_DATA_METHOD
  pb.non_inc(Subchannel::kHost, nv::kNonStallInterrupt, {0u, 0u, 0u});      // NON_INC_METHOD
  cs.emit(0);                                                               // NV_FIFO_DMA_NOP
  ASSERT_TRUE(nv::emit_shader_local_memory(pb, r.gpu_classes, 0x1'2345'6000, 0x48000).ok());
  ASSERT_TRUE(nv::emit_shader_memory_windows(pb, nv::kLocalMemoryWindow, 0x7295'0000'0000).ok());
  // ONE_INC: the first word to SET_SHADER_SHARED_MEMORY_WINDOW_A, the rest to _B (the last wins).
  cs.emit(nv::method_header(nv::SecOp::kOneInc, Subchannel::kCompute,
                            nv::kSetShaderSharedMemoryWindowA, 3));
  cs.emit(0x7294).emit(0x1).emit(0x00200000);
  cs.emit(0xe0000000);  // END_PB_SEGMENT: nothing after it runs
  cs.emit(0xffffffff);
  r.submit(r.compute, cs);

  ASSERT_TRUE(r.gpu.faults().empty()) << r.gpu.faults()[0].to_string();
  GpuCounters n = r.gpu.counters();
  EXPECT_EQ(n.shader_cache_invalidates, 1u);
  EXPECT_EQ(n.non_stall_interrupts, 3u);
  ChannelStatus s = r.status(kComputeToken);
  EXPECT_EQ(s.classes[1], nv::kHopperComputeA);
  EXPECT_EQ(s.local_memory_va, 0x1'2345'6000u);
  EXPECT_EQ(s.local_memory_bytes_per_tpc, 0x48000u);
  EXPECT_EQ(s.local_memory_max_sm_count, 0xffu);
  EXPECT_EQ(s.local_memory_window, 0x7293'0000'0000u);
  EXPECT_EQ(s.shared_memory_window, 0x7294'0020'0000u);
  EXPECT_FALSE(s.busy);
}

}  // namespace
}  // namespace baregrad::mock
