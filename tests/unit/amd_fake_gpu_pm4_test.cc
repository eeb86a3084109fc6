// The fake AMD GPU's PM4 (drivers/mock/amdgpu/pm4_exec.cc) against the fake KFD and the real KFD
// interface: streams from drivers/amd's encoders (an encoder -> decoder round trip) and
// hand-written words, run through real KFD queues, checked by what lands in memory, in launches
// and in KFD events. The rig: amd_fake_gpu_rig.h.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/format.h"
#include "drivers/amd/arch.h"
#include "drivers/amd/iface_kfd.h"
#include "drivers/amd/pm4.h"
#include "drivers/amd/sdma.h"
#include "drivers/mock/amd/fake_kfd.h"
#include "drivers/mock/amdgpu/fake_gpu.h"
#include "tests/unit/amd_fake_gpu_rig.h"

namespace baregrad::mock {
namespace {

using namespace amd_fake_gpu_test;  // NOLINT: the rig is this file's vocabulary
using ::testing::HasSubstr;

// ---- PM4 ---------------------------------------------------------------------------------

class Pm4Dispatch : public ::testing::TestWithParam<const char*> {};

TEST_P(Pm4Dispatch, SetShRegAndDispatchDirectLaunchWithTheRegisters) {
  Rig rig(GetParam());
  const amd::ArchInfo& a = rig.arch();
  Queue q(rig, KfdQueueType::kCompute);
  KfdMemory args = rig.alloc(4096);
  for (uint32_t i = 0; i < 64; i++) at<uint32_t>(args, 4 * i).store(0x1000 + i);
  const uint64_t code = 0x7f1234567800;  // 256-aligned; never read
  Recorder rec;
  rig.gpu->set_executor(&rec);
  auto cs = stream();
  amd::emit_acquire_mem(cs, a);
  amd::emit_set_sh_reg(cs, a.regs.compute_pgm_lo, {uint32_t(code >> 8), uint32_t(code >> 40)});
  amd::emit_set_sh_reg(cs, a.regs.compute_pgm_rsrc2, {3u << 15});
  amd::emit_set_sh_reg(cs, a.regs.compute_user_data_0,
                       {uint32_t(args.va() + 64), uint32_t((args.va() + 64) >> 32)});
  amd::emit_set_sh_reg(cs, a.regs.compute_start_x, {0u, 0u, 0u, 64u, 2u, 1u});
  amd::emit_dispatch_direct(cs, a, 4, 3, 2, a.default_wave_size);
  amd::emit_cs_partial_flush(cs);
  q.submit(cs);
  ASSERT_TRUE(rig.gpu->faults().empty()) << rig.gpu->faults()[0].to_string();
  ASSERT_EQ(rec.launches.size(), 1u);
  const AmdLaunch& l = rec.launches[0];
  EXPECT_EQ(l.code_va, code);
  EXPECT_EQ(l.kernarg_va, args.va() + 64);
  EXPECT_EQ(l.kernargs.size(), 256u);
  EXPECT_EQ(rec.kernargs[0][0], 0x10);  // word 16 of the page: 0x1010
  EXPECT_EQ(rec.kernargs[0][1], 0x10);
  EXPECT_EQ((std::vector<uint32_t>{l.grid.x, l.grid.y, l.grid.z}),
            (std::vector<uint32_t>{4, 3, 2}));
  EXPECT_EQ((std::vector<uint32_t>{l.block.x, l.block.y, l.block.z}),
            (std::vector<uint32_t>{64, 2, 1}));
  EXPECT_EQ(l.lds_bytes, 3u * 512);
  EXPECT_EQ(l.queue_id, q.id());
  EXPECT_EQ(q.rptr(), q.put);
  EXPECT_EQ(rig.gpu->counters().dispatches, 1u);
  EXPECT_EQ(rig.gpu->counters().packets, 7u);
}

INSTANTIATE_TEST_SUITE_P(Archs,
                         Pm4Dispatch,
                         ::testing::Values("gfx90a", "gfx942", "gfx1100", "gfx1201"));

TEST(AmdFakeGpuPm4, HandWrittenDispatchRunsTheTwinWithKernargsUpToTheAllocationEnd) {
  Rig rig("gfx1100");
  Queue q(rig, KfdQueueType::kCompute);
  KfdMemory args = rig.alloc(4096);
  at<uint64_t>(args, 4096 - 16).store(0xabcdef);
  const uint64_t kva = args.va() + 4096 - 16;  // 16 bytes before the allocation ends
  std::vector<uint8_t> seen;
  hcq::Dim3 grid, block;
  rig.gpu->twins().add(0x100000, [&](std::span<const uint8_t> k, hcq::Dim3 g, hcq::Dim3 b) {
    seen.assign(k.begin(), k.end());
    grid = g, block = b;
  });
  // gfx10+ registers (gc_11_0_0_offset.h + GC segment 0 base 0x1260): COMPUTE_PGM_LO 0x2e0c,
  // COMPUTE_USER_DATA_0 0x2e40, COMPUTE_NUM_THREAD_X 0x2e07.
  const uint32_t words[] = {
      0xC0027600,
      0x020c,
      0x1000,
      0,  // SET_SH_REG PGM_LO/HI
      0xC0027600,
      0x0240,
      uint32_t(kva),
      uint32_t(kva >> 32),  // USER_DATA_0/1
      0xC0037600,
      0x0207,
      32,
      1,
      1,  // NUM_THREAD_X/Y/Z
      0xC0031500,
      7,
      1,
      1,
      1,                         // DISPATCH_DIRECT 7x1x1
      0xC0001000 | 0x3fff0000u,  // the one-dword NOP
  };
  q.submit(words);
  ASSERT_TRUE(rig.gpu->faults().empty()) << rig.gpu->faults()[0].to_string();
  ASSERT_EQ(seen.size(), 16u);
  EXPECT_EQ(seen[0], 0xef);
  EXPECT_EQ(grid.x, 7u);
  EXPECT_EQ(block.x, 32u);
  EXPECT_EQ(q.rptr(), std::size(words));
}

TEST(AmdFakeGpuPm4, UnknownCodeIsALaunchFault) {
  Rig rig;
  Queue q(rig, KfdQueueType::kCompute);
  auto cs = stream();
  const amd::ArchInfo& a = rig.arch();
  amd::emit_set_sh_reg(cs, a.regs.compute_pgm_lo, {0x4242u, 0u});
  amd::emit_set_sh_reg(cs, a.regs.compute_num_thread_x, {1u, 1u, 1u});
  amd::emit_dispatch_direct(cs, a, 1, 1, 1, 32);
  q.submit(cs);
  auto f = rig.gpu->faults();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].kind, Kind::kLaunch);
  EXPECT_THAT(f[0].what, HasSubstr("unknown kernel code at 0x424200"));
}

// COMPUTE_PGM_RSRC2.SCRATCH_EN: the CP needs COMPUTE_TMPRING_SIZE and a mapped base.
TEST(AmdFakeGpuPm4, AScratchDispatchNeedsTmpringSizeAndAMappedBase) {
  Rig rig;
  const amd::ArchInfo& a = rig.arch();
  KfdMemory scratch = rig.alloc(1 << 20, KfdMemKind::kVram);
  auto dispatch = [&](uint32_t tmpring, uint64_t base) {
    Queue q(rig, KfdQueueType::kCompute);
    rig.gpu->twins().add(0x424200, [](std::span<const uint8_t>, hcq::Dim3, hcq::Dim3) {});
    auto cs = stream();
    amd::emit_set_sh_reg(cs, a.regs.compute_pgm_lo, {0x4242u, 0u});
    amd::emit_set_sh_reg(cs, a.regs.compute_pgm_rsrc2, {1u});  // SCRATCH_EN
    amd::emit_set_sh_reg(cs, a.regs.compute_tmpring_size, {tmpring});
    amd::emit_set_sh_reg(cs, a.regs.compute_dispatch_scratch_base_lo,
                         {static_cast<uint32_t>(base >> 8), static_cast<uint32_t>(base >> 40)});
    amd::emit_set_sh_reg(cs, a.regs.compute_num_thread_x, {1u, 1u, 1u});
    amd::emit_dispatch_direct(cs, a, 1, 1, 1, 32);
    q.submit(cs);
    return rig.gpu->faults();
  };
  EXPECT_TRUE(dispatch(1 | 4 << 12, scratch.va()).empty());
  auto f = dispatch(0, scratch.va());
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].kind, Kind::kBadPacket);
  EXPECT_THAT(f[0].what, HasSubstr("COMPUTE_TMPRING_SIZE (0x0) has no WAVESIZE"));
  f = dispatch(1 | 4 << 12, 0x100000);  // nothing mapped there
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[1].kind, Kind::kVmFault);
  EXPECT_THAT(f[1].what, HasSubstr("scratch of a wave (1024 bytes)"));
}

TEST(AmdFakeGpuPm4, ReleaseMemWrites32BitLow64BitAndTheClock) {
  Rig rig("gfx942");
  const amd::ArchInfo& a = rig.arch();
  Queue q(rig, KfdQueueType::kCompute);
  KfdMemory m = rig.alloc(4096);
  at<uint64_t>(m, 0).store(~0ull);
  auto cs = stream();
  amd::emit_release_mem(cs, a,
                        {.addr = val(m.va()),
                         .data = val(0x1122334455667788),
                         .data_sel = amd::DataSel::k32BitLow,
                         .cache_flush = true});
  amd::emit_release_mem(cs, a,
                        {.addr = val(m.va() + 8),
                         .data = val(0x1122334455667788),
                         .data_sel = amd::DataSel::k64BitData});
  amd::emit_release_mem(cs, a,
                        {.addr = val(m.va() + 16), .data_sel = amd::DataSel::kGpuClockCounter});
  uint64_t t0 = FakeAmdGpu::timestamp_ns();
  q.submit(cs);
  uint64_t t1 = FakeAmdGpu::timestamp_ns();
  EXPECT_EQ(at<uint64_t>(m, 0).load(), 0xffffffff55667788ull);  // only the low word
  EXPECT_EQ(at<uint64_t>(m, 8).load(), 0x1122334455667788ull);
  uint64_t ts = at<uint64_t>(m, 16).load();
  EXPECT_GE(ts, t0);
  EXPECT_LE(ts, t1);
  EXPECT_EQ(rig.gpu->counters().signals, 3u);
}

TEST(AmdFakeGpuPm4, WaitRegMemBlocksUntilTheTestOrAnotherQueueWrites) {
  Rig rig;
  const amd::ArchInfo& a = rig.arch();
  Queue q(rig, KfdQueueType::kCompute);
  Queue sdma(rig, KfdQueueType::kSdma);
  KfdMemory m = rig.alloc(4096);
  auto cs = stream();
  amd::emit_wait_reg_mem(cs, val(m.va()), 5, 0xffffffff, amd::CompareFunc::kGreaterEqual);
  release32(cs, a, m.va() + 8, 1);
  amd::emit_wait_reg_mem(cs, val(m.va()), 9, 0xff, amd::CompareFunc::kEqual);
  release32(cs, a, m.va() + 8, 2);
  q.submit(cs);
  EXPECT_EQ(at<uint32_t>(m, 8).load(), 0u);
  EXPECT_EQ(rig.gpu->counters().waits_blocked, 1u);
  rig.kfd->progress();  // re-checked, still blocked: not counted again
  EXPECT_EQ(rig.gpu->counters().waits_blocked, 1u);
  at<uint32_t>(m).store(5);  // the test's own write
  EXPECT_TRUE(rig.gpu->run_until_idle());
  EXPECT_EQ(at<uint32_t>(m, 8).load(), 1u);
  auto fence = stream();  // another queue's signal: 0x109 & 0xff == 9
  amd::emit_sdma_fence(fence, rig.arch().sdma, val(m.va()), 0x109);
  sdma.submit(fence);
  EXPECT_EQ(at<uint32_t>(m, 8).load(), 2u);
  EXPECT_EQ(q.rptr(), q.put);
  EXPECT_TRUE(rig.gpu->faults().empty());
}

TEST(AmdFakeGpuPm4, WaitRegMem64AndTheHdpFlushPair) {
  Rig rig("gfx1201");
  const amd::ArchInfo& a = rig.arch();
  Queue q(rig, KfdQueueType::kCompute);
  KfdMemory m = rig.alloc(4096);
  auto cs = stream();
  amd::emit_wait_reg_mem_write_wait(cs, 0x1234, 0x1235, 0xffffffff, 0xffffffff,
                                    amd::CompareFunc::kEqual);
  amd::emit_wait_reg_mem64(cs, a, val(m.va()), val(0x500000000), ~0ull,
                           amd::CompareFunc::kGreaterEqual);
  release32(cs, a, m.va() + 8, 1);
  q.submit(cs);
  EXPECT_EQ(at<uint32_t>(m, 8).load(), 0u);
  at<uint64_t>(m).store(0x4ffffffff);
  rig.gpu->run_until_idle();
  EXPECT_EQ(at<uint32_t>(m, 8).load(), 0u);
  at<uint64_t>(m).store(0x500000000);
  rig.gpu->run_until_idle();
  EXPECT_EQ(at<uint32_t>(m, 8).load(), 1u);
}

TEST(AmdFakeGpuPm4, ReleaseMemInterruptSignalsTheKfdEventAWaitSees) {
  Rig rig;
  Queue q(rig, KfdQueueType::kCompute);
  auto ev = rig.iface->create_event(KfdEventType::kSignal, true);
  ASSERT_TRUE(ev.ok()) << ev.status();
  const KfdEvent* events[] = {&*ev};
  auto idle = rig.iface->wait(events, 5);
  ASSERT_TRUE(idle.ok());
  EXPECT_TRUE(idle->timed_out);
  auto cs = stream();  // tinygrad's timeline signal: event id to the mailbox, ctxid = event id
  amd::emit_release_mem(cs, rig.arch(),
                        {.addr = val(ev->mailbox_va()),
                         .data = ev->id(),
                         .data_sel = amd::DataSel::k32BitLow,
                         .int_sel = amd::IntSel::kSendInterruptAfterWriteConfirm,
                         .ctxid = ev->id()});
  q.push(cs.words());
  q.commit();  // no pump: the wait's own progress() runs the GPU
  auto r = rig.iface->wait(events, 1000);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(rig.gpu->counters().interrupts, 1u);
}

TEST(AmdFakeGpuPm4, IndirectBuffersRunThenTheRingContinuesAndMayBlockInside) {
  Rig rig;
  const amd::ArchInfo& a = rig.arch();
  Queue q(rig, KfdQueueType::kCompute);
  KfdMemory m = rig.alloc(4096), ib = rig.alloc(4096), ib2 = rig.alloc(4096);
  hcq::CmdStream inner("inner", 64), outer("outer", 64);
  release32(inner, a, m.va() + 4, 2);
  inner.rebind({static_cast<uint32_t*>(ib2.cpu()), 1024});
  release32(outer, a, m.va(), 1);
  amd::emit_wait_reg_mem(outer, val(m.va() + 32), 1, 1, amd::CompareFunc::kEqual);
  amd::emit_indirect_buffer(outer, val(ib2.va()), static_cast<uint32_t>(inner.size()));
  outer.rebind({static_cast<uint32_t*>(ib.cpu()), 1024});
  auto cs = stream();
  amd::emit_indirect_buffer(cs, val(ib.va()), static_cast<uint32_t>(outer.size()));
  release32(cs, a, m.va() + 8, 3);
  q.submit(cs);
  EXPECT_EQ(at<uint32_t>(m, 0).load(), 1u);  // the IB ran up to its wait
  EXPECT_EQ(at<uint32_t>(m, 4).load(), 0u);
  EXPECT_EQ(at<uint32_t>(m, 8).load(), 0u);
  at<uint32_t>(m, 32).store(1);
  rig.gpu->run_until_idle();
  EXPECT_EQ(at<uint32_t>(m, 4).load(), 2u);  // the nested IB
  EXPECT_EQ(at<uint32_t>(m, 8).load(), 3u);  // then the ring
  EXPECT_TRUE(rig.gpu->faults().empty());
}

TEST(AmdFakeGpuPm4, IndirectBufferNestingIsBounded) {
  Rig rig;
  Queue q(rig, KfdQueueType::kCompute);
  KfdMemory ib = rig.alloc(4096);
  auto self = amd::indirect_buffer_packet(ib.va(), 4);  // an IB that calls itself
  std::memcpy(ib.cpu(), self.data(), sizeof(self));
  q.submit(self);
  auto f = rig.gpu->faults();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].kind, Kind::kBadPacket);
  EXPECT_THAT(f[0].what, HasSubstr("INDIRECT_BUFFER nested 5 deep"));
}

TEST(AmdFakeGpuPm4, PredExecRunsWhatXcc0IsSelectedFor) {
  Rig rig("gfx942");
  const amd::ArchInfo& a = rig.arch();
  Queue q(rig, KfdQueueType::kCompute);
  KfdMemory m = rig.alloc(4096);
  auto cs = stream();
  amd::emit_pred_exec(cs, 0b10, 8);  // XCC 1 only: skipped
  release32(cs, a, m.va(), 1);
  amd::emit_pred_exec(cs, 0b11, 8);
  release32(cs, a, m.va() + 4, 2);
  q.submit(cs);
  EXPECT_EQ(at<uint32_t>(m, 0).load(), 0u);
  EXPECT_EQ(at<uint32_t>(m, 4).load(), 2u);
  EXPECT_EQ(q.rptr(), q.put);
}

TEST(AmdFakeGpuPm4, CopyDataFromImmediateMemoryAndTheClock) {
  Rig rig;
  Queue q(rig, KfdQueueType::kCompute);
  KfdMemory m = rig.alloc(4096);
  at<uint64_t>(m, 0).store(0x0102030405060708);
  auto cs = stream();
  using amd::CopyDataDst, amd::CopyDataSrc;
  amd::emit_copy_data(cs, {CopyDataSrc::kImmediateData, CopyDataDst::kTcL2}, 0xcafe,
                      val(m.va() + 8));
  amd::emit_copy_data(cs, {CopyDataSrc::kTcL2, CopyDataDst::kTcL2, true}, val(m.va()),
                      val(m.va() + 16));
  amd::emit_copy_data(cs, {CopyDataSrc::kGpuClockCount, CopyDataDst::kTcL2, true}, 0,
                      val(m.va() + 24));
  q.submit(cs);
  EXPECT_EQ(at<uint32_t>(m, 8).load(), 0xcafeu);
  EXPECT_EQ(at<uint64_t>(m, 16).load(), 0x0102030405060708u);
  EXPECT_NE(at<uint64_t>(m, 24).load(), 0u);
}

// DMA_DATA, hand-written from nvd.h's layout: memory to memory through L2 with CP_SYNC copies;
// a register destination (COMMAND DAS, bit 27) is a bad packet.
TEST(AmdFakeGpuPm4, DmaDataCopiesMemoryAndRefusesRegisters) {
  Rig rig;
  Queue q(rig, KfdQueueType::kCompute);
  KfdMemory m = rig.alloc(4096);
  for (uint32_t i = 0; i < 16; i++) at<uint32_t>(m, 4 * i).store(0x11111111u * i);
  const uint64_t src = m.va(), dst = m.va() + 1024;
  const uint32_t ok[] = {0xc0055000,
                         3u << 29 | 3u << 20 | 1u << 31,
                         static_cast<uint32_t>(src),
                         static_cast<uint32_t>(src >> 32),
                         static_cast<uint32_t>(dst),
                         static_cast<uint32_t>(dst >> 32),
                         64};
  q.submit(ok);
  for (uint32_t i = 0; i < 16; i++)
    EXPECT_EQ(at<uint32_t>(m, 1024 + 4 * i).load(), 0x11111111u * i);
  EXPECT_EQ(rig.gpu->counters().copies, 1u);
  uint32_t reg[7];
  std::copy(std::begin(ok), std::end(ok), reg);
  reg[6] = 64 | 1u << 27;
  q.submit(reg);
  auto f = rig.gpu->faults();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_THAT(f[0].to_string(), HasSubstr("DMA_DATA CONTROL 0xe0300000 COMMAND 0x8000040"));
}

TEST(AmdFakeGpuPm4, APacketWrappingTheRingEndRuns) {
  Rig rig;
  const amd::ArchInfo& a = rig.arch();
  Queue q(rig, KfdQueueType::kCompute, 4096);  // 1024 dwords
  KfdMemory m = rig.alloc(4096);
  auto pad = stream();
  amd::emit_nop(pad, 1020);
  q.submit(pad);
  auto cs = stream();
  release32(cs, a, m.va(), 0x77);  // 8 dwords: 4 at the end, 4 at the start
  q.submit(cs);
  EXPECT_EQ(at<uint32_t>(m).load(), 0x77u);
  EXPECT_EQ(q.rptr(), 1028u);
  EXPECT_TRUE(rig.gpu->faults().empty());
}

TEST(AmdFakeGpuPm4, UnknownOpcodeAndMalformedHeaderAreBadPackets) {
  Rig rig;
  Queue q(rig, KfdQueueType::kCompute);
  const uint32_t unknown[] = {0xC0019900, 1, 2};  // PACKET3(0x99, 1)
  q.submit(unknown);
  Queue q2(rig, KfdQueueType::kCompute);
  const uint32_t type0[] = {0x00001234};
  q2.submit(type0);
  auto f = rig.gpu->faults();
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].kind, Kind::kBadPacket);
  EXPECT_EQ(f[0].packet_va, q.ring.va());
  EXPECT_THAT(f[0].what, HasSubstr("unknown PM4 opcode 0x99"));
  EXPECT_THAT(f[0].to_string(), HasSubstr("bad packet at " + hex(q.ring.va())));
  EXPECT_THAT(f[1].what, HasSubstr("malformed PM4 header 0x1234"));
  // Sticky: a good packet after the fault does not run.
  KfdMemory m = rig.alloc(4096);
  auto cs = stream();
  release32(cs, rig.arch(), m.va(), 1);
  q.submit(cs);
  EXPECT_EQ(at<uint32_t>(m).load(), 0u);
  EXPECT_EQ(q.rptr(), 0u);
}

}  // namespace
}  // namespace baregrad::mock
