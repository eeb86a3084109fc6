// The fake NVIDIA GPU's faults and injections, its thread safety and its memory map (same
// method as nv_fake_gpu_test.cc: values checked in memory, never read back through an encoder).
#include "tests/unit/nv_fake_gpu_rig.h"

namespace baregrad::mock {
namespace {

using namespace fake_gpu_test;

// ---- faults --------------------------------------------------------------------------------

TEST(NvFakeGpu, AnUnmappedPushbufferIsAReadFaultAndTheChannelStaysDead) {
  Rig r(hopper());
  r.bind();
  r.publish(r.compute, 0x3a'0900'0000, 8);
  Fault f = r.only_fault();
  EXPECT_EQ(f.kind, FaultKind::kMmuFault);
  EXPECT_EQ(f.access, Access::kRead);
  EXPECT_EQ(f.address, 0x3a'0900'0000u);
  EXPECT_EQ(f.token, kComputeToken);
  EXPECT_EQ(f.method, Fault::kNoMethod);
  EXPECT_NE(f.what.find("pushbuffer segment: 32 bytes at 0x3a09000000"), std::string::npos)
      << f.what;
  EXPECT_NE(f.to_string().find("MMU fault (read) at 0x3a09000000 on channel 7"), std::string::npos)
      << f.to_string();
  EXPECT_TRUE(r.status(kComputeToken).dead);

  // Sticky: later work on the channel never runs; the other channel still does.
  CmdStream cs("pb", 16);
  PushBuffer pb(cs);
  ASSERT_TRUE(nv::emit_semaphore_release(pb, r.gpu_classes, r.sig.va(0), 1).ok());
  r.submit(r.compute, cs);
  EXPECT_FALSE(r.gpu.run_until_idle());
  EXPECT_EQ(r.sig.get<uint64_t>(0), 0u);
  CmdStream cc("pb", 16);
  PushBuffer pc(cc);
  ASSERT_TRUE(nv::emit_semaphore_release(pc, r.gpu_classes, r.sig.va(0x10), 1).ok());
  r.submit(r.copy, cc);
  EXPECT_EQ(r.sig.get<uint64_t>(0x10), 1u);
  EXPECT_EQ(r.gpu.faults().size(), 1u);
}

TEST(NvFakeGpu, AnUnmappedQmdIsAFaultOfTheLaunchMethod) {
  Rig r(hopper());
  r.bind();
  CmdStream cs("pb", 16);
  PushBuffer pb(cs);
  ASSERT_TRUE(nv::emit_launch(pb, 0x6a'0a00'0000).ok());
  uint64_t seg = r.submit(r.compute, cs);
  Fault f = r.only_fault();
  EXPECT_EQ(f.kind, FaultKind::kMmuFault);
  EXPECT_EQ(f.access, Access::kRead);
  EXPECT_EQ(f.address, 0x6a'0a00'0000u);
  EXPECT_EQ(f.qmd_va, 0x6a'0a00'0000u);
  EXPECT_EQ(f.cls, nv::kHopperComputeA);
  EXPECT_EQ(f.subchannel, 1u);
  EXPECT_EQ(f.method, 0x2c0u);          // SEND_SIGNALING_PCAS2_B
  EXPECT_EQ(f.pushbuffer_va, seg + 8);  // after SEND_PCAS_A's header and data word
  EXPECT_NE(f.to_string().find("HOPPER_COMPUTE_A (0xcbc0) subchannel 1 method 0x2c0 "
                               "(SEND_SIGNALING_PCAS2_B)"),
            std::string::npos)
      << f.to_string();
}

TEST(NvFakeGpu, AnUnmappedCopyDestinationIsAWriteFaultAtTheFirstUnmappedByte) {
  Rig r(hopper());
  r.bind();
  std::memset(r.data.host(), 0x11, 0x100);
  CmdStream cs("pb", 32);
  PushBuffer pb(cs);
  uint64_t dst = r.data.va(r.data.size() - 100);
  ASSERT_TRUE(nv::emit_copy(pb, r.gpu_classes, dst, r.data.va(0), 300).ok());
  r.submit(r.copy, cs);
  Fault f = r.only_fault();
  EXPECT_EQ(f.kind, FaultKind::kMmuFault);
  EXPECT_EQ(f.access, Access::kWrite);
  EXPECT_EQ(f.address, r.data.va(r.data.size()));
  EXPECT_EQ(f.cls, nv::kHopperDmaCopyA);
  EXPECT_EQ(f.subchannel, 4u);
  EXPECT_EQ(f.method, 0x300u);  // LAUNCH_DMA
  EXPECT_NE(f.what.find("copy destination"), std::string::npos) << f.what;
  EXPECT_EQ(r.data.host(r.data.size() - 100)[0], 0u);  // nothing copied
}

TEST(NvFakeGpu, AnUnknownMethodNamesTheClassSubchannelAndOffset) {
  Rig r(hopper());
  r.bind();
  CmdStream cs("pb", 16);
  PushBuffer pb(cs);
  pb.inc(Subchannel::kCompute, 0x0124, {1u});
  r.submit(r.compute, cs);
  Fault f = r.only_fault();
  EXPECT_EQ(f.kind, FaultKind::kIllegalMethod);
  EXPECT_EQ(f.cls, nv::kHopperComputeA);
  EXPECT_EQ(f.subchannel, 1u);
  EXPECT_EQ(f.method, 0x124u);
  EXPECT_NE(f.to_string().find("HOPPER_COMPUTE_A (0xcbc0) subchannel 1 method 0x124"),
            std::string::npos)
      << f.to_string();
}

TEST(NvFakeGpu, EngineMethodsNeedTheirClassBoundFirst) {
  Rig r(hopper());  // no bind()
  CmdStream cs("pb", 16);
  PushBuffer pb(cs);
  nv::emit_invalidate_shader_caches(pb);
  r.submit(r.compute, cs);
  Fault f = r.only_fault();
  EXPECT_EQ(f.kind, FaultKind::kIllegalMethod);
  EXPECT_EQ(f.method, nv::kInvalidateShaderCachesNoWfi);
  EXPECT_NE(f.what.find("before SET_OBJECT"), std::string::npos) << f.what;
}

TEST(NvFakeGpu, ClassesOfAnotherGenerationOrEngineAreRefused) {
  Rig r(hopper());
  CmdStream a("pb", 16), b("pb", 16);
  PushBuffer pa(a), pb(b);
  nv::emit_set_object(pa, Subchannel::kCompute, nv::kAmpereComputeB);
  nv::emit_set_object(pb, Subchannel::kCopy, nv::kHopperComputeA);
  r.submit(r.compute, a);
  r.submit(r.copy, b);
  auto faults = r.gpu.faults();
  ASSERT_EQ(faults.size(), 2u);
  EXPECT_EQ(faults[0].kind, FaultKind::kIllegalClass);
  EXPECT_EQ(faults[0].token, kComputeToken);
  EXPECT_NE(faults[0].what.find("AMPERE_COMPUTE_B"), std::string::npos) << faults[0].what;
  EXPECT_EQ(faults[1].kind, FaultKind::kIllegalClass);
  EXPECT_EQ(faults[1].token, kCopyToken);
}

TEST(NvFakeGpu, ALaunchOfAnUnknownProgramIsALaunchFault) {
  Rig r(hopper());
  r.bind();
  nv::QmdParams p;
  p.program_address = 0x96'7000'1200;
  p.constant_buffers = {{0, r.cb.va(0), 0x40}};
  auto q = nv::build_qmd(r.gpu_classes, p);
  ASSERT_TRUE(q.ok());
  std::memcpy(r.qmd.host(0x100), q->words().data(), q->size_bytes());
  CmdStream cs("pb", 16);
  PushBuffer pb(cs);
  ASSERT_TRUE(nv::emit_launch(pb, r.qmd.va(0x100)).ok());
  r.submit(r.compute, cs);
  Fault f = r.only_fault();
  EXPECT_EQ(f.kind, FaultKind::kLaunch);
  EXPECT_EQ(f.what, "launch of unknown program at 0x9670001200");
  EXPECT_EQ(f.qmd_va, r.qmd.va(0x100));
  EXPECT_EQ(f.address, r.qmd.va(0x100));
}

TEST(NvFakeGpu, AQmdOfAVersionTheGpuDoesNotRunIsRefused) {
  Rig r(classes(nv::kArchGa100, 2));  // Ampere runs V03_00 only
  r.bind();
  nv::QmdParams p;
  p.program_address = 0x96'7000'1200;
  auto q = nv::build_qmd(hopper(), p);  // V04_00
  ASSERT_TRUE(q.ok());
  std::memcpy(r.qmd.host(), q->words().data(), q->size_bytes());
  CmdStream cs("pb", 16);
  PushBuffer pb(cs);
  ASSERT_TRUE(nv::emit_launch(pb, r.qmd.va(0)).ok());
  r.submit(r.compute, cs);
  Fault f = r.only_fault();
  EXPECT_EQ(f.kind, FaultKind::kBadQmd);
  EXPECT_NE(f.what.find("QMD_MAJOR_VERSION 4"), std::string::npos) << f.what;
}

TEST(NvFakeGpu, TimestampReleasesMustBeSixteenByteAligned) {
  // dev_pbdma.ref: RELEASE_TIMESTAMP needs a 16-byte aligned semaphore. The encoder refuses a
  // constant address that is not; a symbolic one reaches the GPU, which catches it.
  Rig r(hopper());
  r.bind();
  CmdStream cs("pb", 16);
  PushBuffer pb(cs);
  ASSERT_TRUE(
      nv::emit_semaphore_release(pb, r.gpu_classes, hcq::Value::sym(0), 1, {.timestamp = true})
          .ok());
  cs.apply(std::vector<int64_t>{static_cast<int64_t>(r.sig.va(8))});
  r.submit(r.compute, cs);
  Fault f = r.only_fault();
  EXPECT_EQ(f.kind, FaultKind::kIllegalValue);
  EXPECT_EQ(f.method, nv::kSemExecute);
  EXPECT_EQ(r.sig.get<uint64_t>(8), 0u);
}

TEST(NvFakeGpu, AnInjectedMmuFaultStopsTheAccessThatCoversIt) {
  Rig r(hopper());
  r.bind();
  r.gpu.inject_mmu_fault_at(r.sig.va(0x24));
  CmdStream cs("pb", 32);
  PushBuffer pb(cs);
  ASSERT_TRUE(nv::emit_semaphore_release(pb, r.gpu_classes, r.sig.va(0x00), 1).ok());
  ASSERT_TRUE(nv::emit_semaphore_release(pb, r.gpu_classes, r.sig.va(0x20), 2).ok());
  ASSERT_TRUE(nv::emit_semaphore_release(pb, r.gpu_classes, r.sig.va(0x40), 3).ok());
  r.submit(r.compute, cs);
  EXPECT_EQ(r.sig.get<uint64_t>(0x00), 1u);
  EXPECT_EQ(r.sig.get<uint64_t>(0x20), 0u);
  EXPECT_EQ(r.sig.get<uint64_t>(0x40), 0u);
  Fault f = r.only_fault();
  EXPECT_EQ(f.kind, FaultKind::kMmuFault);
  EXPECT_EQ(f.access, Access::kWrite);
  EXPECT_EQ(f.address, r.sig.va(0x24));
  EXPECT_EQ(f.method, nv::kSemExecute);
}

TEST(NvFakeGpu, AnInjectedHangStopsAllProgressWithoutAFault) {
  Rig r(hopper());
  r.bind();
  r.gpu.inject_hang(kComputeToken);
  CmdStream cs("pb", 16), cc("pb", 16);
  PushBuffer pb(cs), pc(cc);
  ASSERT_TRUE(nv::emit_semaphore_release(pb, r.gpu_classes, r.sig.va(0), 1).ok());
  ASSERT_TRUE(nv::emit_semaphore_release(pc, r.gpu_classes, r.sig.va(0x10), 1).ok());
  r.submit(r.compute, cs);
  r.submit(r.copy, cc);
  EXPECT_FALSE(r.gpu.run_until_idle());
  EXPECT_EQ(r.sig.get<uint64_t>(0), 0u);
  EXPECT_EQ(r.sig.get<uint64_t>(0x10), 1u);
  ChannelStatus s = r.status(kComputeToken);
  EXPECT_TRUE(s.hung);
  EXPECT_FALSE(s.dead);
  EXPECT_EQ(s.gp_get, 1u);  // the bind entry only
  EXPECT_TRUE(r.gpu.faults().empty());
}

TEST(NvFakeGpu, ALostDoorbellIsPickedUpByTheNextDoorbellOrPump) {
  Rig r(hopper());
  r.bind();
  auto release = [&](size_t off, uint64_t v) {
    CmdStream cs("pb", 16);
    PushBuffer pb(cs);
    EXPECT_TRUE(nv::emit_semaphore_release(pb, r.gpu_classes, r.sig.va(off), v).ok());
    r.submit(r.compute, cs);
  };
  r.gpu.inject_lost_doorbell(1);
  release(0, 1);
  EXPECT_EQ(r.sig.get<uint64_t>(0), 0u);
  EXPECT_TRUE(r.gpu.run_until_idle());  // the pump
  EXPECT_EQ(r.sig.get<uint64_t>(0), 1u);
  r.gpu.inject_lost_doorbell(1);
  release(0x10, 2);
  EXPECT_EQ(r.sig.get<uint64_t>(0x10), 0u);
  release(0x20, 3);  // the next doorbell runs both
  EXPECT_EQ(r.sig.get<uint64_t>(0x10), 2u);
  EXPECT_EQ(r.sig.get<uint64_t>(0x20), 3u);
  EXPECT_EQ(r.gpu.counters().lost_doorbells, 2u);
  EXPECT_TRUE(r.gpu.faults().empty());
}

// ---- threads -------------------------------------------------------------------------------

TEST(NvFakeGpu, PumpsFromSeveralThreadsAndFromInsideALaunchAreSafe) {
  Rig r(hopper(), 8);
  r.bind();
  constexpr uint64_t kProgram = 0x96'7000'1200;
  int nested = 0;
  r.gpu.twins().add(kProgram, [&](auto, Dim3, Dim3) {
    nested += r.gpu.run_until_idle() ? 100 : 1;  // a nested pump returns at once
    nested += r.gpu.channel_status(kComputeToken).ok() ? 1 : 100;
    nested += static_cast<int>(r.gpu.faults().size());
  });
  nv::QmdParams p;
  p.program_address = kProgram;
  auto q = nv::build_qmd(r.gpu_classes, p);
  ASSERT_TRUE(q.ok());
  std::memcpy(r.qmd.host(), q->words().data(), q->size_bytes());

  std::atomic<bool> stop{false};
  std::vector<std::thread> pumps;
  for (int i = 0; i < 4; i++) {
    pumps.emplace_back([&] {
      while (!stop.load()) r.gpu.run_until_idle();
    });
  }
  constexpr uint64_t kSubmissions = 200;
  for (uint64_t i = 1; i <= kSubmissions; i++) {
    while (!r.compute.fifo.check_space(1, Rig::gp_get(r.compute)).ok()) {
      std::this_thread::yield();
    }
    CmdStream cs("pb", 32);
    PushBuffer pb(cs);
    if (i % 50 == 0) {
      ASSERT_TRUE(nv::emit_launch(pb, r.qmd.va(0)).ok());
    }
    ASSERT_TRUE(nv::emit_semaphore_release(pb, r.gpu_classes, r.sig.va(0), i).ok());
    r.submit(r.compute, cs, /*ring=*/i % 3 == 0);
  }
  r.gpu.ring(kComputeToken);
  while (r.sig.load64(0) != kSubmissions) std::this_thread::yield();
  stop = true;
  for (auto& t : pumps) t.join();
  EXPECT_EQ(nested, 4 * 2);
  EXPECT_EQ(r.gpu.counters().launches, 4u);
  EXPECT_TRUE(r.gpu.faults().empty());
}

// ---- memory --------------------------------------------------------------------------------

TEST(NvFakeGpuMemory, RangesResolveOnlyInsideOneMapping) {
  RangeMemory m;
  std::vector<uint8_t> a(0x100), b(0x100);
  ASSERT_TRUE(m.add(0x1000, a.data(), 0x100).ok());
  ASSERT_TRUE(m.add(0x1100, b.data(), 0x100).ok());
  EXPECT_FALSE(m.add(0x10ff, a.data(), 2).ok());  // overlaps both
  EXPECT_FALSE(m.add(0x2000, a.data(), 0).ok());
  EXPECT_EQ(m.resolve(0x1000, 0x100), std::optional<uint8_t*>(a.data()));
  EXPECT_EQ(m.resolve(0x1180, 0x80), std::optional<uint8_t*>(b.data() + 0x80));
  EXPECT_FALSE(m.resolve(0x10ff, 2).has_value());  // spans two mappings
  EXPECT_FALSE(m.resolve(0x1200, 1).has_value());
  EXPECT_FALSE(m.resolve(0xfff, 1).has_value());
  EXPECT_FALSE(m.resolve(~0ull, 2).has_value());
  ASSERT_TRUE(m.remove(0x1000).ok());
  EXPECT_FALSE(m.resolve(0x1000, 1).has_value());
  EXPECT_EQ(m.remove(0x1000).code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace baregrad::mock
