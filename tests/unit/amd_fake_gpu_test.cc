// The fake AMD GPU (drivers/mock/amdgpu) against the fake KFD and the real KFD interface: streams
// from drivers/amd's encoders (an encoder -> decoder round trip) and hand-written words, run
// through real KFD queues, checked by what lands in memory, in launches and in KFD events.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/format.h"
#include "drivers/amd/aql.h"
#include "drivers/amd/arch.h"
#include "drivers/amd/code_object.h"
#include "drivers/amd/iface_kfd.h"
#include "drivers/amd/pm4.h"
#include "drivers/amd/sdma.h"
#include "drivers/mock/amd/fake_kfd.h"
#include "drivers/mock/amdgpu/fake_gpu.h"

namespace baregrad::mock {
namespace {

using amd::KfdEvent;
using amd::KfdEventType;
using amd::KfdIface;
using amd::KfdMemKind;
using amd::KfdMemory;
using amd::KfdQueue;
using amd::KfdQueueType;
using ::testing::HasSubstr;
using Kind = AmdGpuFault::Kind;

// ---- the rig: a fake KFD with one GPU, the fake GPU on it, KfdIface for memory and queues ---

struct Rig {
  explicit Rig(const char* target = "gfx1100")
      : kfd(std::make_shared<FakeKfd>(FakeKfdConfig{1, 17, {FakeAmdGpuConfig::preset(target)}})),
        gpu(std::make_unique<FakeAmdGpu>(*kfd, 0)),
        iface(std::move(KfdIface::open(kfd, 0).value())) {}
  KfdMemory alloc(uint64_t bytes, KfdMemKind kind = KfdMemKind::kGtt) {
    return std::move(iface->alloc(bytes, kind, true).value());
  }
  const amd::ArchInfo& arch() const { return gpu->arch(); }

  std::shared_ptr<FakeKfd> kfd;
  std::unique_ptr<FakeAmdGpu> gpu;
  std::unique_ptr<KfdIface> iface;
};

template <class T>
std::atomic_ref<T> at(const KfdMemory& m, size_t offset = 0) {
  return std::atomic_ref<T>(*reinterpret_cast<T*>(static_cast<uint8_t*>(m.cpu()) + offset));
}
hcq::Value val(uint64_t va) { return hcq::Value(static_cast<int64_t>(va)); }

// A KFD queue and the driver's side of its protocol: words into the ring, the write pointer, then
// the doorbell (PM4 dwords, SDMA bytes, AQL packets with the doorbell at the last index).
class Queue {
 public:
  Queue(Rig& rig, KfdQueueType type, uint64_t ring_bytes = 0x10000) : rig_(rig), type_(type) {
    ring = rig.alloc(ring_bytes);
    gart = rig.alloc(4096);
    amd::KfdQueueRequest r;
    r.type = type;
    r.ring = &ring;
    r.read_pointer_address = gart.va();
    r.write_pointer_address = gart.va() + 8;
    if (type != KfdQueueType::kSdma) {
      eop = rig.alloc(4096, KfdMemKind::kVram);
      r.eop = &eop;
    }
    q = std::move(rig.iface->create_queue(r).value());
    if (type == KfdQueueType::kComputeAql) {  // every slot starts INVALID, as ROCR sets them
      for (uint64_t i = 0; i < ring_bytes / 64; i++) at<uint32_t>(ring, i * 64).store(1);
    }
  }
  uint32_t id() const { return q.id(); }
  uint64_t rptr() const { return at<uint64_t>(gart).load(); }
  uint64_t slot_va(uint64_t index) const { return ring.va() + (index % (ring.size() / 64)) * 64; }

  void push(std::span<const uint32_t> words) {
    auto* r = static_cast<uint32_t*>(ring.cpu());
    const uint64_t n = ring.size() / 4;
    if (type_ == KfdQueueType::kComputeAql) {
      ASSERT_EQ(words.size() % 16, 0u);
      for (size_t p = 0; p < words.size(); p += 16) {
        uint32_t* slot = r + (put % (n / 16)) * 16;
        std::memcpy(slot + 1, words.data() + p + 1, 15 * 4);
        std::atomic_ref<uint32_t>(slot[0]).store(words[p], std::memory_order_release);
        put++;
      }
      return;
    }
    for (uint32_t w : words) {
      if (type_ == KfdQueueType::kSdma) {
        r[(put / 4) % n] = w;
        put += 4;
      } else {
        r[put % n] = w;
        put++;
      }
    }
  }
  void commit() {
    at<uint64_t>(gart, 8).store(put, std::memory_order_release);
    q.doorbell().ring(type_ == KfdQueueType::kComputeAql ? put - 1 : put);
  }
  // push + commit + the pump a driver's wait would run.
  void submit(std::span<const uint32_t> words) {
    push(words);
    commit();
    rig_.kfd->progress();
  }
  void submit(const hcq::CmdStream& cs) { submit(cs.words()); }

  KfdMemory ring, gart, eop;
  KfdQueue q;
  uint64_t put = 0;

 private:
  Rig& rig_;
  KfdQueueType type_;
};

// Records each launch (an executor the test installs instead of the twins).
struct Recorder final : AmdKernelExecutor {
  Status launch(const AmdLaunch& l) override {
    launches.push_back(l);
    kernargs.emplace_back(l.kernargs.begin(), l.kernargs.end());
    return {};
  }
  std::vector<AmdLaunch> launches;
  std::vector<std::vector<uint8_t>> kernargs;
};

hcq::CmdStream stream() { return hcq::CmdStream("test", 1 << 16); }

void release32(hcq::CmdStream& cs, const amd::ArchInfo& a, uint64_t addr, uint32_t v) {
  amd::emit_release_mem(cs, a, {.addr = val(addr), .data = v, .data_sel = amd::DataSel::k32BitLow});
}

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

// ---- SDMA --------------------------------------------------------------------------------

TEST(AmdFakeGpuSdma, CopyFenceWriteTimestampAndNop) {
  Rig rig;
  const amd::SdmaVersion v = rig.arch().sdma;
  Queue q(rig, KfdQueueType::kSdma);
  KfdMemory src = rig.alloc(8192, KfdMemKind::kVram), dst = rig.alloc(8192), m = rig.alloc(4096);
  for (int i = 0; i < 8192; i++) static_cast<uint8_t*>(src.cpu())[i] = uint8_t(i * 7);
  auto cs = stream();
  ASSERT_TRUE(amd::emit_sdma_copy_linear(cs, v, val(dst.va() + 1), val(src.va()), 5000).ok());
  amd::emit_sdma_nop(cs, 3);
  amd::emit_sdma_fence(cs, v, val(m.va()), 0xfeed);
  amd::emit_sdma_write(cs, val(m.va() + 16), {1, 2, 3});
  amd::emit_sdma_timestamp(cs, val(m.va() + 32));
  const uint32_t nop2[] = {2u << 16, 0xdead, 0xbeef};  // NOP with COUNT 2: skips two dwords
  q.push(cs.words());
  q.submit(nop2);
  EXPECT_TRUE(rig.gpu->faults().empty()) << rig.gpu->faults()[0].to_string();
  EXPECT_EQ(std::memcmp(static_cast<uint8_t*>(dst.cpu()) + 1, src.cpu(), 5000), 0);
  EXPECT_EQ(static_cast<uint8_t*>(dst.cpu())[0], 0);
  EXPECT_EQ(at<uint32_t>(m).load(), 0xfeedu);
  EXPECT_EQ(at<uint32_t>(m, 20).load(), 2u);
  EXPECT_NE(at<uint64_t>(m, 32).load(), 0u);
  EXPECT_EQ(q.rptr(), q.put);
  EXPECT_EQ(rig.gpu->counters().bytes_copied, 5000u);
}

TEST(AmdFakeGpuSdma, BigCopySplitIntoPacketsOfTheVersionsMaximum) {
  Rig rig("gfx90a");  // SDMA 4: 4 MiB per COPY_LINEAR
  Queue q(rig, KfdQueueType::kSdma);
  const uint64_t n = (9ull << 20) + 12;
  KfdMemory src = rig.alloc(10 << 20, KfdMemKind::kVram), dst = rig.alloc(10 << 20);
  auto* s = static_cast<uint32_t*>(src.cpu());
  for (uint64_t i = 0; i < n / 4; i++) s[i] = uint32_t(i * 2654435761u);
  auto cs = stream();
  ASSERT_TRUE(
      amd::emit_sdma_copy_linear(cs, rig.arch().sdma, val(dst.va()), val(src.va()), n).ok());
  ASSERT_EQ(cs.size(), 3u * 7);
  q.submit(cs);
  EXPECT_EQ(std::memcmp(dst.cpu(), src.cpu(), n), 0);
  EXPECT_EQ(rig.gpu->counters().copies, 3u);
  EXPECT_EQ(rig.gpu->counters().bytes_copied, n);
}

TEST(AmdFakeGpuSdma, PollBlocksAndTrapSignalsTheEvent) {
  Rig rig("gfx1201");
  Queue q(rig, KfdQueueType::kSdma);
  KfdMemory m = rig.alloc(4096);
  auto ev = rig.iface->create_event(KfdEventType::kSignal, true);
  ASSERT_TRUE(ev.ok());
  auto cs = stream();
  amd::emit_sdma_poll_regmem(cs, val(m.va()), 3, 0xffffffff, amd::CompareFunc::kGreaterEqual);
  amd::emit_sdma_fence(cs, rig.arch().sdma, val(ev->mailbox_va()), ev->id());
  amd::emit_sdma_trap(cs, ev->id());
  q.submit(cs);
  const KfdEvent* events[] = {&*ev};
  auto r = rig.iface->wait(events, 20);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->timed_out);  // blocked in the poll
  at<uint32_t>(m).store(3);
  r = rig.iface->wait(events, 1000);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->timed_out);
  uint64_t mailbox = rig.iface->event_page_va() + ev->slot_index() * 8;
  EXPECT_EQ(std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(mailbox)).load(), ev->id());
}

TEST(AmdFakeGpuSdma, PaddedRingWrapAndUnknownOp) {
  Rig rig;
  Queue q(rig, KfdQueueType::kSdma, 4096);
  KfdMemory m = rig.alloc(4096);
  auto cs = stream();
  amd::emit_sdma_nop(cs, 1022);  // the driver pads: the FENCE does not fit in the last 2 dwords
  amd::emit_sdma_nop(cs, 2);
  amd::emit_sdma_fence(cs, rig.arch().sdma, val(m.va()), 9);  // at offset 0
  q.submit(cs.words().first(1024));  // the ring is full: the GPU consumes it first
  q.submit(cs.words().subspan(1024));
  EXPECT_EQ(at<uint32_t>(m).load(), 9u);
  EXPECT_EQ(q.rptr(), 4096u + 16);
  const uint32_t bad[] = {3};  // SDMA_OP 3 does not exist
  q.submit(bad);
  auto f = rig.gpu->faults();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_THAT(f[0].what, HasSubstr("unknown SDMA op 3"));
  EXPECT_EQ(f[0].packet_va, q.ring.va() + 16);
}

// ---- AQL ---------------------------------------------------------------------------------

struct AqlRig {
  explicit AqlRig(uint64_t ring_bytes = 0x10000) : q(rig, KfdQueueType::kComputeAql, ring_bytes) {}
  std::vector<uint32_t> packet(auto encode) {
    std::vector<uint32_t> w(16);
    w[0] = encode(amd::AqlSlot(w.data(), 16));
    return w;
  }
  Rig rig;
  Queue q;
};

TEST(AmdFakeGpuAql, DispatchBarrierAndPm4IbWithCompletionSignals) {
  AqlRig t;
  Rig& rig = t.rig;
  KfdMemory code = rig.alloc(4096), args = rig.alloc(4096), sig = rig.alloc(4096);
  KfdMemory m = rig.alloc(4096), ib = rig.alloc(4096);
  auto ev = rig.iface->create_event(KfdEventType::kSignal, true);
  ASSERT_TRUE(ev.ok());
  amd::KernelDescriptor kd{};
  kd.kernarg_size = 24;
  kd.group_segment_fixed_size = 1024;
  kd.kernel_code_entry_byte_offset = 256;
  std::memcpy(code.cpu(), &kd, sizeof(kd));
  at<uint64_t>(args, 16).store(0x5150);
  // Signals: 0 the dispatch's completion (with the event), 64 the barrier's dependency.
  at<int64_t>(sig, 8).store(1);
  at<uint64_t>(sig, 16).store(ev->mailbox_va());
  at<uint32_t>(sig, 24).store(ev->id());
  at<int64_t>(sig, 64 + 8).store(1);
  std::vector<uint8_t> seen;
  hcq::Dim3 grid, block;
  rig.gpu->twins().add(code.va() + 256, [&](std::span<const uint8_t> k, hcq::Dim3 g, hcq::Dim3 b) {
    seen.assign(k.begin(), k.end());
    grid = g, block = b;
  });
  hcq::CmdStream pm4("ib", 64);
  release32(pm4, rig.arch(), m.va(), 0x99);
  pm4.rebind({static_cast<uint32_t*>(ib.cpu()), 1024});
  std::vector<uint32_t> words;
  auto add = [&](std::vector<uint32_t> p) { words.insert(words.end(), p.begin(), p.end()); };
  add(t.packet([&](amd::AqlSlot s) {
    return amd::encode_kernel_dispatch(s, {.workgroup_size = {64, 2, 1},
                                           .grid_size = {256, 4, 3},
                                           .group_segment_size = 1024,
                                           .kernel_object = code.va(),
                                           .kernarg_address = args.va(),
                                           .completion_signal = sig.va()});
  }));
  add(t.packet(
      [&](amd::AqlSlot s) { return amd::encode_barrier_and(s, {0, sig.va() + 64, 0, 0, 0}, 0); }));
  add(t.packet([&](amd::AqlSlot s) {
    return amd::encode_pm4_ib(s, ib.va(), static_cast<uint32_t>(pm4.size()), 0);
  }));
  t.q.submit(words);
  ASSERT_TRUE(rig.gpu->faults().empty()) << rig.gpu->faults()[0].to_string();
  ASSERT_EQ(seen.size(), 24u);
  EXPECT_EQ(seen[16], 0x50);
  EXPECT_EQ((std::vector<uint32_t>{grid.x, grid.y, grid.z}), (std::vector<uint32_t>{4, 2, 3}));
  EXPECT_EQ((std::vector<uint32_t>{block.x, block.y, block.z}), (std::vector<uint32_t>{64, 2, 1}));
  EXPECT_EQ(at<int64_t>(sig, 8).load(), 0);
  const KfdEvent* events[] = {&*ev};
  auto r = rig.iface->wait(events, 1000);
  ASSERT_TRUE(r.ok() && !r->timed_out);
  EXPECT_EQ(t.q.rptr(), 1u);  // blocked at the barrier
  EXPECT_EQ(at<uint32_t>(m).load(), 0u);
  EXPECT_EQ(at<uint16_t>(t.q.ring, 0).load() & 0xff, 1u);  // the dispatch slot is INVALID again
  at<int64_t>(sig, 64 + 8).store(0);
  rig.gpu->run_until_idle();
  EXPECT_EQ(at<uint32_t>(m).load(), 0x99u);
  EXPECT_EQ(t.q.rptr(), 3u);
}

TEST(AmdFakeGpuAql, AnInvalidHeaderIsNotReadyAndTheRingWraps) {
  AqlRig t(4096);  // 64 packets
  Rig& rig = t.rig;
  KfdMemory sig = rig.alloc(4096);
  at<int64_t>(sig, 8).store(70);
  auto barrier = t.packet([&](amd::AqlSlot s) { return amd::encode_barrier_and(s, {}, sig.va()); });
  // The write pointer moves first; the slot's header stays INVALID: the CP waits at it.
  t.q.put = 1;
  t.q.commit();
  rig.kfd->progress();
  EXPECT_EQ(t.q.rptr(), 0u);
  t.q.put = 0;
  std::vector<uint32_t> words;
  for (int i = 0; i < 70; i++) words.insert(words.end(), barrier.begin(), barrier.end());
  t.q.push(std::span(words).first(64 * 16));  // every slot of the ring
  t.q.commit();
  rig.kfd->progress();
  EXPECT_EQ(t.q.rptr(), 64u);
  t.q.submit(std::span(words).subspan(64 * 16));
  EXPECT_EQ(t.q.rptr(), 70u);
  EXPECT_EQ(at<int64_t>(sig, 8).load(), 0);
  EXPECT_TRUE(rig.gpu->faults().empty());
}

// ---- faults and injection ----------------------------------------------------------------

TEST(AmdFakeGpuFaults, VmFaultIsRecordedAndRaisedAsAKfdMemoryException) {
  Rig rig;
  Queue q(rig, KfdQueueType::kCompute);
  auto mem_ev = rig.iface->create_event(KfdEventType::kMemory, false);
  ASSERT_TRUE(mem_ev.ok());
  std::vector<AmdGpuFault> hooked;
  rig.gpu->on_fault([&](const AmdGpuFault& f) { hooked.push_back(f); });
  auto cs = stream();
  release32(cs, rig.arch(), 0x10000, 1);  // nothing is mapped there
  q.submit(cs);
  auto f = rig.gpu->faults();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].kind, Kind::kVmFault);
  EXPECT_EQ(f[0].address, 0x10000u);
  EXPECT_EQ(f[0].packet_va, q.ring.va());
  EXPECT_EQ(f[0].queue_id, q.id());
  EXPECT_THAT(f[0].to_string(), HasSubstr("VM fault at 0x10000"));
  EXPECT_EQ(hooked.size(), 1u);
  const KfdEvent* events[] = {&*mem_ev};
  auto r = rig.iface->wait(events, 1000);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->memory.has_value());
  EXPECT_EQ(r->memory->va, 0x10000u);
  EXPECT_TRUE(r->memory->not_present);
}

TEST(AmdFakeGpuFaults, InjectedVmFaultAndTheFirstUnmappedByte) {
  Rig rig;
  Queue q(rig, KfdQueueType::kSdma), q2(rig, KfdQueueType::kSdma);
  KfdMemory a = rig.alloc(4096), b = rig.alloc(4096);
  rig.gpu->inject_vm_fault_at(a.va() + 100);
  auto cs = stream();
  amd::emit_sdma_fence(cs, rig.arch().sdma, val(a.va() + 100), 1);
  q.submit(cs);
  auto cs2 = stream();  // runs 8 bytes past b's end
  ASSERT_TRUE(
      amd::emit_sdma_copy_linear(cs2, rig.arch().sdma, val(b.va() + 4096 - 8), val(a.va()), 16)
          .ok());
  q2.submit(cs2);
  auto f = rig.gpu->faults();
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].address, a.va() + 100);
  EXPECT_EQ(f[1].kind, Kind::kVmFault);
  EXPECT_EQ(f[1].address, b.va() + 4096);
  EXPECT_EQ(at<uint32_t>(a, 100).load(), 0u);
}

TEST(AmdFakeGpuFaults, AHungQueueMakesAWaitTimeOut) {
  Rig rig;
  Queue q(rig, KfdQueueType::kCompute);
  auto ev = rig.iface->create_event(KfdEventType::kSignal, true);
  ASSERT_TRUE(ev.ok());
  rig.gpu->inject_hang(q.id());
  auto cs = stream();
  amd::emit_release_mem(cs, rig.arch(),
                        {.addr = val(ev->mailbox_va()),
                         .data = ev->id(),
                         .data_sel = amd::DataSel::k32BitLow,
                         .int_sel = amd::IntSel::kSendInterruptAfterWriteConfirm,
                         .ctxid = ev->id()});
  q.submit(cs);
  const KfdEvent* events[] = {&*ev};
  auto r = rig.iface->wait(events, 30);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(q.rptr(), 0u);
  EXPECT_TRUE(rig.gpu->faults().empty());
}

TEST(AmdFakeGpuFaults, ALostDoorbellRunsAtTheNextPump) {
  Rig rig;
  Queue q(rig, KfdQueueType::kCompute);
  KfdMemory m = rig.alloc(4096);
  rig.gpu->inject_lost_doorbell(1);
  auto cs = stream();
  release32(cs, rig.arch(), m.va(), 5);
  q.push(cs.words());
  q.commit();
  EXPECT_EQ(rig.kfd->poll_doorbells(), 1);  // the doorbell arrives and is dropped
  EXPECT_EQ(at<uint32_t>(m).load(), 0u);
  AmdGpuCounters c = rig.gpu->counters();
  EXPECT_EQ(c.doorbells, 1u);
  EXPECT_EQ(c.lost_doorbells, 1u);
  rig.kfd->progress();
  EXPECT_EQ(at<uint32_t>(m).load(), 5u);
}

// Random packets (plausible headers with random bodies, addresses into a scratch buffer, pure
// noise) into each kind of ring never crash the host and always leave the pump idle.
TEST(AmdFakeGpuFaults, RandomGarbageNeverCrashes) {
  for (const char* target : {"gfx90a", "gfx1100"}) {
    Rig rig(target);
    KfdMemory scratch = rig.alloc(1 << 16);
    std::mt19937_64 rng(1234);
    // PM4 opcodes with their usual body sizes; SDMA ops (op | sub_op << 8) with their sizes.
    const std::pair<uint32_t, uint32_t> pm4[] = {{0x10, 3}, {0x15, 4}, {0x23, 1}, {0x3c, 6},
                                                 {0x3f, 3}, {0x40, 5}, {0x46, 1}, {0x49, 7},
                                                 {0x58, 7}, {0x76, 4}, {0x79, 2}, {0x93, 8}};
    const std::pair<uint32_t, uint32_t> sdma[] = {{0, 1}, {1, 7},     {2, 6},  {5, 4}, {6, 2},
                                                  {8, 6}, {0x20d, 3}, {17, 5}, {32, 2}};
    auto body = [&](std::vector<uint32_t>& w, size_t n) {
      while (n > 0) {
        uint64_t r = rng() % 6;
        if (r < 2 && n >= 2) {  // an address pair into the scratch buffer
          uint64_t a = scratch.va() + (rng() % (1 << 16) & ~uint64_t{7});
          w.push_back(uint32_t(a)), w.push_back(uint32_t(a >> 32)), n -= 2;
          continue;
        }
        w.push_back(r == 2 ? 0 : r == 3 ? uint32_t(rng() % 16) : uint32_t(rng())), n--;
      }
    };
    uint64_t packets = 0;
    for (int iter = 0; iter < 300; iter++) {
      KfdQueueType type = static_cast<KfdQueueType>(iter % 3);
      Queue q(rig, type, 4096);
      std::vector<uint32_t> words;
      for (int p = 0, n = 1 + int(rng() % 12); p < n; p++) {
        if (type == KfdQueueType::kComputeAql) {
          words.push_back(uint32_t(rng() % 6) | uint32_t(rng() % 4) << 16);
          body(words, 15);
        } else if (rng() % 8 == 0) {
          body(words, 1 + rng() % 8);  // noise
        } else if (type == KfdQueueType::kCompute) {
          auto [op, n_body] = pm4[rng() % std::size(pm4)];
          if (rng() % 4 == 0) n_body = 1 + uint32_t(rng() % 9);
          words.push_back(3u << 30 | (n_body - 1) << 16 | op << 8);
          body(words, n_body);
        } else {
          auto [op, size] = sdma[rng() % std::size(sdma)];
          words.push_back(op | (op == 1 && rng() % 2 ? uint32_t(rng() % 64) : 0));
          body(words, size - 1);
          if (op == 1) words[words.size() - 6] %= 1 << 12;  // mostly in-bounds copies
          if (op == 2) words[words.size() - 2] = 1;         // WRITE of 2 words
        }
      }
      if (words.size() > 1000) words.resize(1000);
      if (type == KfdQueueType::kComputeAql) words.resize(words.size() / 16 * 16);
      q.push(words);
      if (rng() % 8 == 0) q.put = rng() % 4096;  // sometimes a nonsense write pointer
      q.commit();
      rig.kfd->progress();
      EXPECT_FALSE(rig.gpu->run_until_idle());  // settled: nothing left that can progress
      packets = rig.gpu->counters().packets;
    }
    std::map<Kind, int> kinds;
    for (const AmdGpuFault& f : rig.gpu->faults()) kinds[f.kind]++;
    EXPECT_GT(packets, 50u) << target;  // the decoders ran, not only the header checks
    EXPECT_GT(kinds[Kind::kVmFault], 0) << target;
    EXPECT_GT(kinds[Kind::kBadPacket], 0) << target;
  }
}

}  // namespace
}  // namespace baregrad::mock
