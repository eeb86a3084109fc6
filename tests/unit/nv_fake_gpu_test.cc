// The fake NVIDIA GPU against the drivers/nv encoders: command streams built with PushBuffer, the
// method builders, GpFifoRing and build_qmd run on FakeNvGpu, and each test checks what landed
// in memory (values written by hand here, never read back through an encoder). The GPU decodes
// with its own field tables, so a test fails when either side is wrong.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "drivers/mock/nvgpu/fake_gpu.h"
#include "drivers/nv/classes.h"
#include "drivers/nv/gpfifo.h"
#include "drivers/nv/methods.h"
#include "drivers/nv/pushbuf.h"
#include "drivers/nv/qmd.h"
#include "hcq/cmdstream.h"

namespace baregrad::mock {
namespace {

using hcq::CmdStream;
using hcq::Dim3;
using nv::PayloadSize;
using nv::PushBuffer;
using nv::Release;
using nv::Subchannel;

constexpr uint32_t kComputeToken = 7, kCopyToken = 9;
constexpr uint32_t kUserdGpGetOffset = 0x88;  // Nvc56fControl.GPGet (clc56f.h)

nv::GpuClasses classes(uint32_t arch, uint32_t impl = 0) {
  auto r = nv::select_classes(arch, impl);
  EXPECT_TRUE(r.ok()) << r.status();
  return *r;
}
nv::GpuClasses hopper() { return classes(nv::kArchGh100); }

// Host memory mapped at a fixed GPU VA below 2^40 (what GP entries and QMD pointers hold).
class Region {
 public:
  Region(RangeMemory& mem, uint64_t va, size_t bytes) : va_(va), words_((bytes + 7) / 8) {
    EXPECT_TRUE(mem.add(va, words_.data(), bytes).ok());
  }
  uint64_t va(size_t off = 0) const { return va_ + off; }
  size_t size() const { return words_.size() * 8; }
  uint8_t* host(size_t off = 0) { return reinterpret_cast<uint8_t*>(words_.data()) + off; }
  template <class T>
  T get(size_t off) {
    T v;
    std::memcpy(&v, host(off), sizeof v);
    return v;
  }
  template <class T>
  void put(size_t off, T v) {
    std::memcpy(host(off), &v, sizeof v);
  }
  uint64_t load64(size_t off) {
    return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(host(off))).load();
  }
  void store64(size_t off, uint64_t v) {
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(host(off))).store(v);
  }

 private:
  uint64_t va_;
  std::vector<uint64_t> words_;  // 8-byte aligned host memory, zeroed
};

// A channel as the driver sees it: ring, USERD and the ring bookkeeping.
struct TestChannel {
  Region ring, userd;
  nv::GpFifoRing fifo;
};

// A fake GPU with a compute and a copy channel, and regions for pushbuffers, semaphores, QMDs,
// constant banks and data. Nothing is mapped between or after the regions.
class Rig {
 public:
  explicit Rig(nv::GpuClasses c, uint32_t ring_entries = 16)
      : gpu_classes(c),
        gpu(mem, c.generation),
        compute{Region(mem, 0x11'0100'0000, ring_entries * 8), Region(mem, 0x11'0101'0000, 0x200),
                nv::GpFifoRing(ring_entries, kComputeToken)},
        copy{Region(mem, 0x11'0102'0000, ring_entries * 8), Region(mem, 0x11'0103'0000, 0x200),
             nv::GpFifoRing(ring_entries, kCopyToken)} {
    EXPECT_TRUE(gpu.add_channel({.ring_va = compute.ring.va(),
                                 .ring_entries = ring_entries,
                                 .userd_va = compute.userd.va(),
                                 .engine = ChannelEngine::kCompute,
                                 .token = kComputeToken})
                    .ok());
    EXPECT_TRUE(gpu.add_channel({.ring_va = copy.ring.va(),
                                 .ring_entries = ring_entries,
                                 .userd_va = copy.userd.va(),
                                 .engine = ChannelEngine::kCopy,
                                 .token = kCopyToken})
                    .ok());
  }

  // SET_OBJECT of the compute class on subchannel 1 and the copy class on 4.
  void bind() {
    CmdStream a("bind", 8), b("bind", 8);
    PushBuffer pa(a), pb(b);
    nv::emit_set_object(pa, Subchannel::kCompute, gpu_classes.compute);
    nv::emit_set_object(pb, Subchannel::kCopy, gpu_classes.copy);
    submit(compute, a);
    submit(copy, b);
  }

  // What submit() does: the segment into pushbuffer memory, then publish(). Returns its VA.
  uint64_t submit(TestChannel& ch, const CmdStream& cs, bool ring = true) {
    auto w = cs.words();
    uint64_t va = pb.va(pb_used_);
    std::memcpy(pb.host(pb_used_), w.data(), w.size() * 4);
    pb_used_ += (w.size() * 4 + 15) / 16 * 16;
    publish(ch, va, static_cast<uint32_t>(w.size()), ring);
    return va;
  }

  // ring[slot] = entry, USERD GPPut, then the doorbell (unless `ring` is false).
  void publish(TestChannel& ch, uint64_t va, uint32_t words, bool ring = true) {
    auto s = ch.fifo.push(va, words, gp_get(ch));
    ASSERT_TRUE(s.ok()) << s.status();
    ch.ring.put<uint64_t>(s->slot * 8, s->entry);
    userd_word(ch, nv::kUserdGpPut).store(s->gp_put, std::memory_order_release);
    if (ring) gpu.ring(s->doorbell);
  }

  static std::atomic_ref<uint32_t> userd_word(TestChannel& ch, uint32_t off) {
    return std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(ch.userd.host(off)));
  }
  // USERD GPGet as the GPU last wrote it.
  static uint32_t gp_get(TestChannel& ch) {
    return userd_word(ch, nv::kUserdGpGet).load(std::memory_order_acquire);
  }

  ChannelStatus status(uint32_t token) {
    auto s = gpu.channel_status(token);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : ChannelStatus{};
  }

  Fault only_fault() {
    auto f = gpu.faults();
    EXPECT_EQ(f.size(), 1u);
    return f.empty() ? Fault{} : f[0];
  }

  RangeMemory mem;
  nv::GpuClasses gpu_classes;
  FakeNvGpu gpu;
  TestChannel compute, copy;
  Region pb{mem, 0xb1'1000'0000, 1 << 20};
  Region sig{mem, 0x52'2000'0000, 0x1000};
  Region qmd{mem, 0x63'3000'0000, 0x10000};
  Region cb{mem, 0x74'4000'0000, 0x10000};
  Region data{mem, 0x85'5000'0000, 1 << 19};

 private:
  size_t pb_used_ = 0;
};

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
  // dev_pbdma.ref: RELEASE_TIMESTAMP needs a 16-byte aligned semaphore. The encoder checks
  // 8-byte alignment only, so the GPU is what catches this.
  Rig r(hopper());
  r.bind();
  CmdStream cs("pb", 16);
  PushBuffer pb(cs);
  ASSERT_TRUE(
      nv::emit_semaphore_release(pb, r.gpu_classes, r.sig.va(8), 1, {.timestamp = true}).ok());
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
