// The AMD HCQ device (drivers/amd/device, queues, program) over the fake KFD alone: bring-up on
// every supported target and its named errors, memory, code-object loading and its refusals, the
// PM4 and AQL words a compute queue publishes, the copy queue's records. End to end with the fake
// GPU: amd_device_fake_gpu_test.cc. The compile tests skip (saying why) without ld.lld.
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

// The words from `begin` (dwords, monotonic) to `end` of ring `q`, read through the fake KFD.
std::vector<uint32_t> ring_words(FakeKfd& kfd, const mock::FakeKfdQueue& q, uint64_t end) {
  std::optional<uint8_t*> p = kfd.resolve(q.ring_va, q.ring_size);
  CHECK(p.has_value());
  std::vector<uint32_t> out(end);
  for (uint64_t i = 0; i < end; i++) std::memcpy(&out[i], *p + (i % (q.ring_size / 4)) * 4, 4);
  return out;
}

// The type-3 packets of PM4 words: opcode and body.
std::vector<std::pair<uint32_t, std::vector<uint32_t>>> pm4_packets(
    const std::vector<uint32_t>& w) {
  std::vector<std::pair<uint32_t, std::vector<uint32_t>>> out;
  for (size_t i = 0; i < w.size();) {
    uint32_t h = w[i];
    EXPECT_EQ(h >> 30, 3u) << "word " << i << " " << hex(h);
    if (h >> 30 != 3) break;
    size_t n = ((h >> 16) & 0x3fff) + 1;
    out.push_back(
        {(h >> 8) & 0xff, std::vector<uint32_t>(w.begin() + i + 1, w.begin() + i + 1 + n)});
    i += 1 + n;
  }
  return out;
}

// ---- against the fake KFD alone --------------------------------------------------------------

TEST(AmdDevice, BringsUpEveryTargetWithAComputeAndAnSdmaQueueAndReleasesEverything) {
  for (const char* gfx : kTargets) {
    SCOPED_TRACE(gfx);
    auto kfd = fake_kfd(gfx);
    {
      std::unique_ptr<Device> dev = open(kfd);
      EXPECT_EQ(dev->name(), "AMD");
      EXPECT_EQ(dev->arch().name, gfx);
      EXPECT_FALSE(dev->host_addressable());
      std::vector<mock::FakeKfdQueue> qs = kfd->queues();
      ASSERT_EQ(qs.size(), 2u);
      // gfx942's preset has 8 XCCs: the default compute queue there is AQL.
      bool aql = std::string(gfx) == "gfx942";
      EXPECT_EQ(dev->aql(), aql);
      EXPECT_EQ(qs[0].type, aql ? kKfdIocQueueTypeComputeAql : kKfdIocQueueTypeCompute);
      EXPECT_EQ(qs[0].ring_size, 64u << 10);
      EXPECT_EQ(qs[0].eop_buffer_size, 0x1000u);  // RELEASE_MEM needs an EOP buffer
      CwsrSizes cwsr = cwsr_sizes(dev->kfd().node().props);
      EXPECT_EQ(qs[0].ctx_save_restore_size, cwsr.ctx_save_restore_size);
      EXPECT_EQ(qs[0].ctl_stack_size, cwsr.ctl_stack_size);
      EXPECT_NE(qs[0].ctx_save_restore_address, 0u);
      // PM4: the write pointer after the read pointer; AQL: amd_queue_t's write_dispatch_id (56)
      // and read_dispatch_id (128).
      EXPECT_EQ(qs[0].write_pointer_address,
                aql ? qs[0].read_pointer_address - 128 + 56 : qs[0].read_pointer_address + 8);
      EXPECT_EQ(qs[1].type, kKfdIocQueueTypeSdma);
      EXPECT_EQ(kfd->events().size(), 3u);  // signal, memory and HW exception
      EXPECT_EQ(dev->timeline_value(), 1u);
    }
    EXPECT_EQ(kfd->live(), mock::kProcessKept) << "everything is released";
    // Reopened in the same process: KFD (and the fake) answer EBUSY to ACQUIRE_VM from another
    // render-node file, so the device must use the one it kept.
    std::unique_ptr<Device> again = open(kfd);
    EXPECT_EQ(again->arch().name, gfx);
  }
}

TEST(AmdDevice, CwsrSizesFollowKfdQueueC) {
  // gfx1100 preset: 96 CUs (192 SIMDs / 2), 32 waves each.
  KfdNodeProperties p{.gfx_target_version = 110000,
                      .simd_count = 192,
                      .array_count = 12,
                      .simd_arrays_per_engine = 2,
                      .simd_per_cu = 2};
  CwsrSizes s = cwsr_sizes(p);
  EXPECT_EQ(s.ctl_stack_size, 0xa000u);  // 40 + 96 * 32 * 12 + 8 = 36912, page-rounded
  EXPECT_EQ(s.ctx_save_restore_size, 0xa000u + 96u * (0x60000 + 0x4000 + 0x10000 + 0x1000));
  EXPECT_EQ(s.debug_memory_size, 96u * 32 * 32);
}

TEST(AmdDevice, NamesFollowTheIndexAndTheOptions) {
  auto kfd = std::make_shared<FakeKfd>(FakeKfdConfig{
      .gpus = {FakeAmdGpuConfig::preset("gfx1100"), FakeAmdGpuConfig::preset("gfx90a")}});
  Result<std::unique_ptr<Device>> d1 = Device::create(kfd, 1, small());
  ASSERT_TRUE(d1.ok()) << d1.status().to_string();
  EXPECT_EQ((*d1)->name(), "AMD:1");
  EXPECT_EQ((*d1)->arch().name, "gfx90a");
  DeviceOptions o = small();
  o.name = "MOCK+AMD";
  Result<std::unique_ptr<Device>> d0 = Device::create(fake_kfd(), 0, o);
  ASSERT_TRUE(d0.ok()) << d0.status().to_string();
  EXPECT_EQ((*d0)->name(), "MOCK+AMD");
}

TEST(AmdDevice, RefusesAnUnsupportedGpuAndBadOptionsByName) {
  FakeAmdGpuConfig navi21 = FakeAmdGpuConfig::preset("gfx1100");
  navi21.name = "gfx1030";
  navi21.gfx_target_version = 100300;
  auto kfd = std::make_shared<FakeKfd>(FakeKfdConfig{.gpus = {navi21}});
  Result<std::unique_ptr<Device>> d = Device::create(kfd, 0, small());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(d.status().message(),
            "AMD GPU 0 is gfx1030, which baregrad does not support (gfx90a, gfx942, gfx1100, "
            "gfx1201)");
  EXPECT_EQ(kfd->live(), mock::FakeKfdCounts{.fds = 1}) << "the render node (pinned at ACQUIRE_VM)";

  DeviceOptions o = small();
  o.compute_ring_bytes = 3000;
  d = Device::create(fake_kfd(), 0, o);
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("a compute ring of 3000 bytes (a power of two"));

  auto none =
      std::make_shared<FakeKfd>(FakeKfdConfig{.gpus = {FakeAmdGpuConfig::preset("gfx1100")}});
  d = Device::create(none, 3, small());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kNotFound) << d.status().to_string();
}

TEST(AmdDevice, AllocatesVramAndGttAndFreesThem) {
  auto kfd = fake_kfd();
  std::unique_ptr<Device> dev = open(kfd);
  size_t before = kfd->allocations().size();
  hcq::Allocator& a = dev->allocator();
  Result<hcq::Buffer> vram = a.alloc(1000, {.nolru = true});
  Result<hcq::Buffer> visible = a.alloc(5000, {.cpu_access = true, .nolru = true});
  Result<hcq::Buffer> host = a.alloc(64, {.host = true, .cpu_access = true, .nolru = true});
  ASSERT_TRUE(vram.ok() && visible.ok() && host.ok());
  EXPECT_EQ(vram->cpu, nullptr);
  EXPECT_EQ(vram->size, 1000u);
  EXPECT_EQ(vram->va % 4096, 0u);  // KFD gives pages: beyond the target's 16-byte alignment
  ASSERT_NE(visible->cpu, nullptr);
  EXPECT_EQ(reinterpret_cast<uint64_t>(visible->cpu), visible->va);  // GPU VA == CPU VA
  std::memset(visible->cpu, 0x5a, 5000);
  ASSERT_NE(host->cpu, nullptr);
  std::map<uint64_t, uint32_t> flags;
  for (const mock::FakeKfdAllocation& m : kfd->allocations()) flags[m.va] = m.flags;
  EXPECT_TRUE(flags.at(vram->va) & kKfdIocAllocMemFlagsVram);
  EXPECT_FALSE(flags.at(vram->va) & kKfdIocAllocMemFlagsPublic);
  EXPECT_TRUE(flags.at(visible->va) & kKfdIocAllocMemFlagsPublic);
  EXPECT_TRUE(flags.at(host->va) & kKfdIocAllocMemFlagsGtt);
  EXPECT_EQ(a.find(visible->va + 4999)->va, visible->va);
  a.free(*vram);
  a.free(*visible);
  a.free(*host);
  EXPECT_EQ(kfd->allocations().size(), before);
}

TEST(AmdDevice, LoadsACompiledCodeObjectAndRefusesOtherFormatsArchsAndCorruptObjects) {
  REQUIRE_LLD();
  auto kfd = fake_kfd();
  std::unique_ptr<Device> dev = open(kfd);
  compiler::CompiledKernel k = compile("gfx1100");
  Result<std::unique_ptr<hcq::Program>> p = dev->load_program(k.binary);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  const auto& prg = static_cast<const Program&>(**p);
  EXPECT_EQ(prg.code_va() % 256, 0u);
  EXPECT_EQ(prg.code_va(), prg.descriptor_va() + prg.descriptor().kernel_code_entry_byte_offset);
  EXPECT_EQ(prg.wave_size(), 32u);
  EXPECT_TRUE(prg.kernarg_ptr());
  EXPECT_FALSE(prg.private_segment_buffer());
  EXPECT_EQ(prg.args_prefix(), 0u);
  EXPECT_EQ(prg.rsrc1(), prg.descriptor().compute_pgm_rsrc1 | 1u << 20);  // gfx11 PRIV
  EXPECT_EQ(dev->program_at(prg.code_va() + 4), k.spec.name);
  EXPECT_EQ(dev->binary_at(prg.code_va()), k.binary.id);
  // The descriptor in GPU memory is the one the loader read.
  std::optional<uint8_t*> kd = kfd->resolve(prg.descriptor_va(), 64);
  ASSERT_TRUE(kd.has_value());
  EXPECT_EQ(std::memcmp(*kd, &prg.descriptor(), 64), 0);
  EXPECT_TRUE(prg.check_launch({1, 1, 1}, {1024, 1, 1}).ok());
  Status big = prg.check_launch({1, 1, 1}, {32, 33, 1});
  EXPECT_THAT(big.message(), HasSubstr("over 1024 threads per work-group"));

  Binary cubin = k.binary;
  cubin.format = BinaryFormat::kCubin;
  cubin.arch = "sm_90";
  Result<std::unique_ptr<hcq::Program>> r = dev->load_program(cubin);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "load " + k.binary.entry +
                " on AMD (gfx1100): a cubin binary for sm_90 (this device runs amdhsa code "
                "objects for gfx1100)");

  compiler::CompiledKernel k90 = compile("gfx90a");
  r = dev->load_program(k90.binary);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("an amdhsa binary for gfx90a"));
  Binary lying = k90.binary;
  lying.arch = "gfx1100";  // the Binary says gfx1100, the object's e_flags gfx90a
  r = dev->load_program(lying);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("the code object's e_flags say gfx90a"));

  Binary corrupt = k.binary;
  corrupt.code.resize(100);
  r = dev->load_program(corrupt);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("load " + k.binary.entry + " on AMD (gfx1100): "));
  Binary fewer = k.binary;
  fewer.num_vars = 0;  // the kernarg segment is larger than this argument block
  r = dev->load_program(fewer);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("kernarg segment of 32 bytes"));
}

// A compute queue of a device on a fake `gfx` KFD (no GPU: drains give up after 50 ms) that
// recorded and submitted wait(s, 5), exec of the scale kernel on a 7x2x1 grid of 64x1x1, and
// signal(s, 6); the fake KFD has read the doorbells.
struct Recorded {
  std::shared_ptr<FakeKfd> kfd;
  std::unique_ptr<Device> dev;
  std::unique_ptr<hcq::Program> prg;
  hcq::Buffer mem;  // the argument block (32 bytes of host memory)
  std::unique_ptr<hcq::ArgsState> args;
  std::unique_ptr<hcq::Signal> sig;
  std::unique_ptr<hcq::HwQueue> q;

  Recorded(const std::string& gfx, ComputeQueueMode mode) : kfd(fake_kfd(gfx)) {
    DeviceOptions o = small(std::chrono::milliseconds(50));
    o.compute = mode;
    dev = open(kfd, o);
    compiler::CompiledKernel k = compile(gfx);
    Result<std::unique_ptr<hcq::Program>> p = dev->load_program(k.binary);
    CHECK(p.ok()) << p.status().to_string();
    prg = std::move(*p);
    Result<hcq::Buffer> m = dev->allocator().alloc(32, {.host = true, .cpu_access = true});
    CHECK(m.ok());
    mem = *m;
    args = std::make_unique<hcq::ArgsState>(mem, 0, 2, 2);
    Result<std::unique_ptr<hcq::Signal>> s = dev->new_signal("s");
    CHECK(s.ok());
    sig = std::move(*s);
    q = dev->compute_queue();
    q->wait(*sig, 5).exec(program(), *args, {7, 2, 1}, {64, 1, 1}).signal(*sig, 6);
    Status st = q->submit();
    CHECK(st.ok()) << st.to_string();
    kfd->progress();
  }
  const Program& program() const { return static_cast<const Program&>(*prg); }
};

TEST(AmdDevice, TheComputeQueuePublishesPm4WordsThenTheWritePointerThenTheDoorbell) {
  REQUIRE_LLD();
  for (const char* gfx : {"gfx90a", "gfx1100"}) {
    SCOPED_TRACE(gfx);
    Recorded rec(gfx, ComputeQueueMode::kPm4);
    FakeKfd* kfd = rec.kfd.get();
    Device* dev = rec.dev.get();
    const ArchInfo& arch = dev->arch();
    const Program& prg = rec.program();
    const hcq::Buffer* mem = &rec.mem;
    hcq::ArgsState& args = *rec.args;
    std::unique_ptr<hcq::Signal>* sig = &rec.sig;
    hcq::HwQueue* q = rec.q.get();

    mock::FakeKfdQueue cq = kfd->queues()[0];
    std::vector<uint64_t> bells = kfd->doorbell_writes(cq.id);
    ASSERT_EQ(bells.size(), 1u);
    uint64_t wptr;
    std::memcpy(&wptr, *kfd->resolve(cq.write_pointer_address, 8), 8);
    EXPECT_EQ(wptr, bells[0]) << "the doorbell carries the write pointer (dwords)";
    auto pkts = pm4_packets(ring_words(*kfd, cq, wptr));
    std::vector<uint32_t> ops;
    for (auto& [op, body] : pkts) ops.push_back(op);
    // wait; acquire, 8 register writes, dispatch, partial flush; two releases (value, event);
    // the ring's completion release.
    std::vector<uint32_t> want = {kPacket3WaitRegMem, kPacket3AcquireMem};
    int regs = 8;
    for (int i = 0; i < regs; i++) want.push_back(kPacket3SetShReg);
    for (uint32_t op : {kPacket3DispatchDirect, kPacket3EventWrite, kPacket3ReleaseMem,
                        kPacket3ReleaseMem, kPacket3ReleaseMem})
      want.push_back(op);
    EXPECT_EQ(ops, want);
    // WAIT_REG_MEM: memory, GEQ, the signal's address and the low word of 5.
    const auto& w = pkts[0].second;
    EXPECT_EQ(w[0], 5u | 1u << 4);
    EXPECT_EQ(w[1] | uint64_t{w[2]} << 32, (*sig)->va());
    EXPECT_EQ(w[3], 5u);
    std::map<uint32_t, std::vector<uint32_t>> sh;  // register -> values
    for (auto& [op, body] : pkts)
      if (op == kPacket3SetShReg) sh[body[0] + kSetShRegStart] = {body.begin() + 1, body.end()};
    const ComputeRegs& r = arch.regs;
    EXPECT_EQ(sh[r.compute_pgm_lo],
              (std::vector<uint32_t>{static_cast<uint32_t>(prg.code_va() >> 8),
                                     static_cast<uint32_t>(prg.code_va() >> 40)}));
    EXPECT_EQ(sh[r.compute_pgm_rsrc1], (std::vector<uint32_t>{prg.rsrc1(), prg.rsrc2()}));
    EXPECT_EQ(sh[r.compute_pgm_rsrc3], std::vector<uint32_t>{prg.rsrc3()});
    // gfx90a kernels take a private segment buffer V# (4 user SGPRs) before the kernarg pointer.
    std::vector<uint32_t> user = sh[r.compute_user_data_0];
    ASSERT_EQ(user.size(), prg.private_segment_buffer() ? 6u : 2u);
    EXPECT_EQ(prg.private_segment_buffer(), arch.name == "gfx90a");
    EXPECT_EQ(user[user.size() - 2], static_cast<uint32_t>(mem->va));
    EXPECT_EQ(user.back(), static_cast<uint32_t>(mem->va >> 32));
    EXPECT_EQ(sh[r.compute_start_x], (std::vector<uint32_t>{0, 0, 0, 64, 1, 1}));
    EXPECT_EQ(sh[r.compute_restart_x], (std::vector<uint32_t>{0, 0, 0}));
    const auto& dd = pkts[2 + regs].second;
    EXPECT_EQ(dd[0], 7u);
    EXPECT_EQ(dd[1], 2u);
    EXPECT_EQ(dd[2], 1u);
    EXPECT_EQ(dd[3], dispatch_initiator(arch, prg.wave_size()));
    EXPECT_EQ((dd[3] >> 15) & 1, arch.pm4 == Pm4Family::kNv ? 1u : 0u) << "CS_W32_EN";
    // signal: the 64-bit value (DATA_SEL 2), then the event mailbox with an interrupt.
    const auto& rel = pkts[pkts.size() - 3].second;
    EXPECT_EQ(rel[1] >> 29, 2u);
    EXPECT_EQ(rel[2] | uint64_t{rel[3]} << 32, (*sig)->va());
    EXPECT_EQ(rel[4], 6u);
    EXPECT_EQ(rel[5], 0u);
    const auto& ev = pkts[pkts.size() - 2].second;
    EXPECT_EQ((ev[1] >> 24) & 7, 2u) << "INT_SEL send interrupt after write confirm";
    EXPECT_EQ(ev[2] | uint64_t{ev[3]} << 32, dev->signal_event().mailbox_va());
    EXPECT_EQ(ev[4], dev->signal_event().id());
    EXPECT_EQ(ev[6], dev->signal_event().id()) << "INT_CTXID";
    // The kernel arguments were written where USER_DATA_0/1 point.
    args.set_buf(0, 0x1000);
    EXPECT_EQ(static_cast<uint64_t*>(mem->cpu)[0], 0x1000u);

    // A 64-bit constant a 32-bit wait cannot compare is refused when recorded.
    q->reset();
    q->wait(**sig, int64_t{1} << 33);
    EXPECT_THAT(q->refusal().message(), HasSubstr("compare 32-bit values"));
  }
}

// The AQL compute queue: the PM4 around a dispatch goes out as PM4-IB packets calling copies of
// those words, the dispatch as an HSA kernel dispatch packet; then the ring's completion release
// (PM4-IB); free slots keep an INVALID header; the write pointer is write_dispatch_id (packets)
// and the doorbell gets the last packet's index. Offsets from ROCR's hsa.h and amd_queue_t.
TEST(AmdDevice, TheAqlComputeQueuePublishesPacketsThenWriteDispatchIdThenTheDoorbell) {
  REQUIRE_LLD();
  for (const char* gfx : {"gfx90a", "gfx1100"}) {
    SCOPED_TRACE(gfx);
    Recorded rec(gfx, ComputeQueueMode::kAql);
    FakeKfd* kfd = rec.kfd.get();
    const Program& prg = rec.program();
    const hcq::Buffer* mem = &rec.mem;

    mock::FakeKfdQueue cq = kfd->queues()[0];
    ASSERT_EQ(cq.type, kKfdIocQueueTypeComputeAql);
    uint64_t wptr;
    std::memcpy(&wptr, *kfd->resolve(cq.write_pointer_address, 8), 8);
    EXPECT_EQ(wptr, 4u) << "wait, dispatch, signal, completion release";
    EXPECT_EQ(kfd->doorbell_writes(cq.id), std::vector<uint64_t>{3}) << "the last packet's index";
    std::vector<uint32_t> w = ring_words(*kfd, cq, 16 * 5);
    auto packet = [&](int i) {
      return std::vector<uint32_t>(w.begin() + 16 * i, w.begin() + 16 * i + 16);
    };
    // The PM4 words a PM4-IB packet calls: dword 1 is INDIRECT_BUFFER (type 3, opcode 0x3f,
    // count 2), then the address, then the size with VALID (bit 23); dword 5 dw_count_remain 10.
    auto ib_words = [&](const std::vector<uint32_t>& pk) {
      EXPECT_EQ(pk[0], 0x1500u | 1u << 16) << "vendor-specific, barrier, system scopes, PM4-IB";
      EXPECT_EQ(pk[1], 3u << 30 | 2u << 16 | 0x3fu << 8);
      EXPECT_EQ(pk[5], 10u);
      uint64_t va = pk[2] | uint64_t{pk[3]} << 32;
      uint32_t n = pk[4] & 0xfffff;
      EXPECT_EQ(pk[4] >> 23 & 1, 1u);
      std::vector<uint32_t> out(n);
      std::optional<uint8_t*> h = kfd->resolve(va, 4 * n);
      EXPECT_TRUE(h.has_value()) << "the IB is GPU memory";
      if (h) std::memcpy(out.data(), *h, 4 * n);
      return out;
    };
    auto ops = [](const std::vector<uint32_t>& words) {
      std::vector<uint32_t> out;
      for (auto& [op, body] : pm4_packets(words)) out.push_back(op);
      return out;
    };
    EXPECT_EQ(ops(ib_words(packet(0))), std::vector<uint32_t>{kPacket3WaitRegMem});
    // hsa_kernel_dispatch_packet_t: header type 2 | barrier | system scopes, setup 3 dims;
    // workgroup 64x1x1; grid in work-items 448x2x1; private and group segment sizes; the
    // kernel descriptor; the kernarg segment; no completion signal.
    std::vector<uint32_t> d = packet(1);
    EXPECT_EQ(d[0], 0x1502u | 3u << 16);
    EXPECT_EQ(d[1], 64u | 1u << 16);
    EXPECT_EQ(d[2], 1u);
    EXPECT_EQ((std::vector<uint32_t>{d[3], d[4], d[5]}), (std::vector<uint32_t>{448, 2, 1}));
    EXPECT_EQ(d[6], prg.scratch_bytes());
    EXPECT_EQ(d[7], prg.lds_bytes());
    EXPECT_EQ(d[8] | uint64_t{d[9]} << 32, prg.descriptor_va());
    EXPECT_EQ(d[10] | uint64_t{d[11]} << 32, mem->va);
    EXPECT_EQ(d[14] | uint64_t{d[15]} << 32, 0u);
    EXPECT_EQ(ops(ib_words(packet(2))),
              (std::vector<uint32_t>{kPacket3ReleaseMem, kPacket3ReleaseMem}));
    EXPECT_EQ(ops(ib_words(packet(3))), std::vector<uint32_t>{kPacket3ReleaseMem});
    EXPECT_EQ(packet(4)[0], 1u) << "a free slot's header is INVALID";
    // amd_queue_t around the pointers: read_dispatch_id_field_base_byte_offset and the flags.
    uint8_t* amdq = *kfd->resolve(cq.read_pointer_address - 128, 256);
    uint32_t field, props;
    std::memcpy(&field, amdq + 136, 4);
    std::memcpy(&props, amdq + 180, 4);
    EXPECT_EQ(field, 128u);
    EXPECT_EQ(props, 1u << 1 | 1u << 3) << "IS_PTR64 | ENABLE_PROFILING";
  }
}

// A GPU with several XCCs gets the AQL queue by default; a PM4 queue there is refused by name.
TEST(AmdDevice, SeveralXccsGetTheAqlQueueAndPm4IsRefusedThere) {
  FakeAmdGpuConfig cfg = FakeAmdGpuConfig::preset("gfx942");
  ASSERT_GT(cfg.num_xcc, 1u);
  auto kfd = std::make_shared<FakeKfd>(FakeKfdConfig{.gpus = {cfg}});
  DeviceOptions o = small();
  o.compute = ComputeQueueMode::kPm4;
  Result<std::unique_ptr<Device>> d = Device::create(kfd, 0, o);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(d.status().message(), HasSubstr("has " + std::to_string(cfg.num_xcc) + " XCCs"));
  EXPECT_THAT(d.status().message(), HasSubstr("PRED_EXEC"));
  EXPECT_THAT(d.status().message(), HasSubstr("AMD_AQL=1"));
  EXPECT_EQ(kfd->live(), mock::FakeKfdCounts{.fds = 1}) << "the render node alone";
  // The same KFD again: the device reuses the render node whose file ACQUIRE_VM pinned.
  std::unique_ptr<Device> dev = open(kfd);
  EXPECT_TRUE(dev->aql());
  // On one XCC the default is PM4, and AMD_AQL's values parse.
  EXPECT_FALSE(open(fake_kfd("gfx1100"))->aql());
  EXPECT_EQ(*compute_queue_mode(""), ComputeQueueMode::kAuto);
  EXPECT_EQ(*compute_queue_mode("0"), ComputeQueueMode::kPm4);
  EXPECT_EQ(*compute_queue_mode("1"), ComputeQueueMode::kAql);
  EXPECT_THAT(compute_queue_mode("yes").status().message(), HasSubstr("AMD_AQL=yes: must be 1"));
}

TEST(AmdDevice, CopyQueueRecordsSdmaAndRefusesWhatItCannotDo) {
  auto kfd = fake_kfd("gfx90a");  // SDMA 4: COPY_LINEAR moves at most 4 MiB
  // No GPU runs the words: the queues' drains give up after the short timeout.
  std::unique_ptr<Device> dev = open(kfd, small(std::chrono::milliseconds(50)));
  Result<hcq::Buffer> a = dev->allocator().alloc(9 << 20), b = dev->allocator().alloc(9 << 20);
  ASSERT_TRUE(a.ok() && b.ok());
  Result<std::unique_ptr<hcq::Signal>> sig = dev->new_signal("s");
  ASSERT_TRUE(sig.ok());
  std::unique_ptr<hcq::HwQueue> q = dev->copy_queue();
  q->copy(static_cast<int64_t>(b->va), static_cast<int64_t>(a->va), 9 << 20).signal(**sig, 1);
  ASSERT_TRUE(q->submit().ok());
  kfd->progress();
  mock::FakeKfdQueue sq = kfd->queues()[1];
  std::vector<uint64_t> bells = kfd->doorbell_writes(sq.id);
  ASSERT_EQ(bells.size(), 1u);
  EXPECT_EQ(bells[0] % 4, 0u) << "the SDMA write pointer counts bytes";
  std::vector<uint32_t> w = ring_words(*kfd, sq, bells[0] / 4);
  // 3 COPY_LINEARs (4 + 4 + 1 MiB), FENCE lo, FENCE hi, mailbox FENCE, TRAP, completion FENCE.
  ASSERT_EQ(w.size(), 3 * 7 + 4 + 4 + 4 + 2 + 4u);
  EXPECT_EQ(w[0], kSdmaOpCopy);
  EXPECT_EQ(w[1], (4u << 20) - 1);
  EXPECT_EQ(w[14 + 1], (1u << 20) - 1);
  EXPECT_EQ(w[21] & 0xff, kSdmaOpFence);
  EXPECT_EQ(w[21 + 3], 1u);
  EXPECT_EQ(w[25 + 1], static_cast<uint32_t>((*sig)->va() + 4));
  EXPECT_EQ(w[33], kSdmaOpTrap);
  EXPECT_EQ(w[34], dev->signal_event().id());

  // A symbolic byte count: one COPY_LINEAR, its COUNT patched to bytes - 1; submit refuses a
  // count outside 1..the packet's largest before patching anything.
  q->reset();
  q->copy(static_cast<int64_t>(b->va), static_cast<int64_t>(a->va), hcq::Value::sym(0));
  EXPECT_TRUE(q->refusal().ok()) << q->refusal().to_string();
  const int64_t max = static_cast<int64_t>(copy_linear_max_bytes(dev->arch().sdma));
  for (int64_t bad : {int64_t{0}, max + 1}) {
    Status st = q->submit(std::vector<int64_t>{bad});
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
    EXPECT_THAT(st.message(), HasSubstr("a symbolic byte count (one SDMA COPY_LINEAR holds 1 to " +
                                        std::to_string(max) + " bytes): " + std::to_string(bad) +
                                        " (variable 0) is outside 1.." + std::to_string(max)));
  }
  EXPECT_THAT(q->submit().message(), HasSubstr("variable 0 of 0 submitted"));
  q->reset();
  q->copy(static_cast<int64_t>(b->va), static_cast<int64_t>(a->va), (9 << 20) + 1);
  EXPECT_THAT(q->refusal().message(), HasSubstr("runs past the end"));
  q->reset();
  // The compute queue copies with DMA_DATA: a symbolic count is bounded at submit, and a large
  // copy between symbolic addresses (which cannot be split) is refused when recorded.
  std::unique_ptr<hcq::HwQueue> cq = dev->compute_queue();
  cq->copy(static_cast<int64_t>(b->va), static_cast<int64_t>(a->va), hcq::Value::sym(0));
  EXPECT_TRUE(cq->refusal().ok()) << cq->refusal().to_string();
  Status st = cq->submit(std::vector<int64_t>{int64_t{kDmaDataMaxBytes} + 1});
  EXPECT_THAT(st.message(), HasSubstr("a symbolic byte count (one DMA_DATA holds 1 to 33554432 "
                                      "bytes): 33554433 (variable 0) is outside 1..33554432"));
  cq->reset();
  cq->copy(hcq::Value::sym(0), static_cast<int64_t>(a->va), int64_t{kDmaDataMaxBytes} + 1);
  EXPECT_THAT(cq->refusal().message(), HasSubstr("between symbolic addresses: over the 33554432"));
}

}  // namespace
}  // namespace baregrad::amd
