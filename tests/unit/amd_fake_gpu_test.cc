// The fake AMD GPU (drivers/mock/amdgpu) against the fake KFD and the real KFD interface: SDMA and
// AQL streams from drivers/amd's encoders and hand-written words, run through real KFD queues,
// checked by what lands in memory, in launches and in KFD events; faults and injection. PM4 is in
// amd_fake_gpu_pm4_test.cc; the rig in amd_fake_gpu_rig.h.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "drivers/amd/aql.h"
#include "drivers/amd/arch.h"
#include "drivers/amd/code_object.h"
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
