// Scratch on the AMD device: the buffer and COMPUTE_TMPRING_SIZE sized as tinygrad sizes them
// (worked by hand below), grown by a program that needs it, and handed to the dispatch: the
// base in COMPUTE_DISPATCH_SCRATCH_BASE (architected flat scratch) or in the private segment
// buffer V# (gfx90a), or on the AQL queue in amd_queue_t; the fake GPU refuses a scratch
// dispatch the CP could not run.
#include <gtest/gtest.h>

#include <cstring>

#include "compiler/target/lld.h"
#include "compiler/target/llvm_target.h"
#include "drivers/amd/device.h"
#include "drivers/amd/pm4.h"
#include "drivers/amd/program.h"
#include "drivers/amd/scratch.h"
#include "drivers/mock/amd/fake_kfd.h"
#include "drivers/mock/amdgpu/fake_gpu.h"

namespace baregrad::amd {
namespace {

using mock::FakeAmdGpuConfig;
using mock::FakeKfd;
using mock::FakeKfdConfig;

KfdNodeProperties props(uint32_t simds,
                        uint32_t simd_per_cu,
                        uint32_t arrays,
                        uint32_t per_engine) {
  KfdNodeProperties p;
  p.simd_count = simds;
  p.simd_per_cu = simd_per_cu;
  p.array_count = arrays;
  p.simd_arrays_per_engine = per_engine;
  p.max_slots_scratch_cu = 32;
  return p;
}

TEST(AmdScratch, LayoutFollowsTinygradsSizing) {
  // gfx1100, 96 CUs in 6 shader engines, 40 bytes per work-item: 256-byte granules give 4
  // bytes per lane, so 40; 40 * 64 lanes * 32 slots * 96 CUs = 7864320 bytes; a wave is
  // ceil(64 * 40 / 256) = 10 units; 7864320 / (10 * 256) / 6 engines = 512 waves.
  Result<ScratchLayout> l = scratch_layout(**arch_for_name("gfx1100"), props(192, 2, 12, 2), 40);
  ASSERT_TRUE(l.ok()) << l.status().to_string();
  EXPECT_EQ(l->bytes_per_lane, 40u);
  EXPECT_EQ(l->bytes, 7864320u);
  EXPECT_EQ(l->tmpring_size, 512u | 10u << 12);
  // gfx90a, 110 CUs: 1024-byte granules give 16 bytes per lane, so 48; 48 * 64 * 32 * 110 =
  // 10813440; a wave is ceil(64 * 48 / 1024) = 3 units; 10813440 / 3072 = 3520 waves (gfx9
  // does not divide by engines), within 110 CUs * 32 slots.
  l = scratch_layout(**arch_for_name("gfx90a"), props(440, 4, 8, 1), 40);
  ASSERT_TRUE(l.ok()) << l.status().to_string();
  EXPECT_EQ(l->bytes_per_lane, 48u);
  EXPECT_EQ(l->bytes, 10813440u);
  EXPECT_EQ(l->tmpring_size, 3520u | 3u << 12);
  // WAVESIZE is 13 bits on gfx9: 8192 units of 1024 bytes over 64 lanes is 131072 per lane.
  l = scratch_layout(**arch_for_name("gfx90a"), props(440, 4, 8, 1), 131072);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), StatusCode::kFailedPrecondition);
  KfdNodeProperties none = props(440, 4, 8, 1);
  none.max_slots_scratch_cu = 0;
  EXPECT_EQ(scratch_layout(**arch_for_name("gfx90a"), none, 16).status().code(),
            StatusCode::kFailedPrecondition);
  uint32_t v[4];
  private_segment_buffer(0x12345678abcd00ull, v);
  EXPECT_EQ(v[0], 0x78abcd00u);
  EXPECT_EQ(v[1], 0x123456u | 1u << 31);
  EXPECT_EQ(v[2], 0xffffffffu);
  EXPECT_EQ(v[3], 0x20c14000u);
}

// A kernel that indexes a private array with a run-time index: LLVM puts it in scratch.
// NOTE: on gfx90a (no architected flat scratch) such a kernel also asks for the flat scratch
// init SGPRs, which the PM4 dispatch does not provide: refused by name there (below); the AQL
// queue runs it.
Result<Binary> scratch_kernel(const std::string& gfx) {
  const std::string ir =
      "define amdgpu_kernel void @k(ptr addrspace(1) %out, ptr addrspace(1) %in) {\n"
      "  %a = alloca [32 x i32], align 4, addrspace(5)\n"
      "  %t = call i32 @llvm.amdgcn.workitem.id.x()\n"
      "  %ip = getelementptr i32, ptr addrspace(1) %in, i32 %t\n"
      "  %i = load i32, ptr addrspace(1) %ip\n"
      "  %j = and i32 %i, 31\n"
      "  %p = getelementptr [32 x i32], ptr addrspace(5) %a, i32 0, i32 %j\n"
      "  store volatile i32 %t, ptr addrspace(5) %p\n"
      "  %k = xor i32 %j, 1\n"
      "  %q = getelementptr [32 x i32], ptr addrspace(5) %a, i32 0, i32 %k\n"
      "  %v = load volatile i32, ptr addrspace(5) %q\n"
      "  %op = getelementptr i32, ptr addrspace(1) %out, i32 %t\n"
      "  store i32 %v, ptr addrspace(1) %op\n"
      "  ret void\n}\n"
      "declare i32 @llvm.amdgcn.workitem.id.x()\n";
  bool gfx9 = gfx.starts_with("gfx9");
  compiler::LlvmCompiler llvm("amdgcn-amd-amdhsa", gfx, gfx9 ? "" : "+wavefrontsize32");
  ASSIGN_OR_RETURN(std::string obj, llvm.compile(ir, "k"));
  ASSIGN_OR_RETURN(compiler::LdLld lld, compiler::LdLld::find());
  Binary b;
  b.format = BinaryFormat::kAmdHsa;
  b.arch = gfx;
  b.entry = "k";
  b.num_bufs = 2;
  b.buf_bytes = {256, 256};
  ASSIGN_OR_RETURN(b.code, lld.link(obj, "k"));
  b.id = "scratch-" + gfx;
  return b;
}

// Loads the scratch kernel on a fake `gfx` with `xccs` XCCs and the compute queue `mode`, checks
// the scratch it grew, and runs it: the fake GPU checks the dispatch's scratch (from the PM4
// registers, or from the AQL queue's amd_queue_t), the twin does the kernel's work.
// With `unset_tmpring`, the AQL queue's compute_tmpring_size is zeroed first (a driver that forgot
// it): the fake GPU must refuse the dispatch by name.
void run_scratch_kernel(const std::string& gfx,
                        ComputeQueueMode mode,
                        uint32_t xccs = 1,
                        bool unset_tmpring = false) {
  FakeAmdGpuConfig cfg = FakeAmdGpuConfig::preset(gfx);
  cfg.num_xcc = xccs;
  cfg.simd_count *= xccs;  // KFD counts SIMDs and arrays over every XCC
  cfg.array_count *= xccs;
  auto kfd = std::make_shared<FakeKfd>(FakeKfdConfig{.gpus = {cfg}});
  DeviceOptions o;
  o.compute = mode;
  o.compute_ring_bytes = o.copy_ring_bytes = 64 << 10;
  o.timeout = std::chrono::milliseconds(2000);
  Result<std::unique_ptr<Device>> dev = Device::create(kfd, 0, o);
  ASSERT_TRUE(dev.ok()) << dev.status().to_string();
  mock::FakeAmdGpu gpu(*kfd);
  EXPECT_EQ((*dev)->scratch().va, 0u) << "no scratch before a program needs it";
  Result<Binary> b = scratch_kernel(gfx);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  Result<std::unique_ptr<hcq::Program>> p = (*dev)->load_program(*b);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  const auto& prg = static_cast<const Program&>(**p);
  ASSERT_GT(prg.scratch_bytes(), 0u) << "LLVM put the array in registers after all";
  Device::Scratch s = (*dev)->scratch();
  ASSERT_NE(s.va, 0u);
  Result<ScratchLayout> want =
      scratch_layout((*dev)->arch(), (*dev)->kfd().node().props, prg.scratch_bytes());
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(s.tmpring_size, want->tmpring_size);
  ASSERT_TRUE(kfd->resolve(s.va, want->bytes).has_value()) << "the scratch is mapped whole";
  if ((*dev)->aql()) {
    // amd_queue_t (LLVM device-libs amd_hsa_queue.h): KFD got &read_dispatch_id (offset 128);
    // compute_tmpring_size at 140, the V# at 144, the backing memory at 160 and its bytes (one
    // XCC's share) at 168, the bytes per lane at 176.
    const mock::FakeKfdQueue q = kfd->queues()[0];
    ASSERT_EQ(q.type, 2u) << "KFD_IOC_QUEUE_TYPE_COMPUTE_AQL";
    uint8_t* amdq = *kfd->resolve(q.read_pointer_address - 128, 256);
    auto u32 = [&](size_t at) {
      uint32_t v;
      std::memcpy(&v, amdq + at, 4);
      return v;
    };
    auto u64 = [&](size_t at) {
      uint64_t v;
      std::memcpy(&v, amdq + at, 8);
      return v;
    };
    EXPECT_EQ(q.write_pointer_address, q.read_pointer_address - 128 + 56);
    EXPECT_EQ(u32(136), 128u);
    EXPECT_EQ(u32(140), want->tmpring_size);
    EXPECT_EQ(u32(144), static_cast<uint32_t>(s.va));
    EXPECT_EQ(u64(160), s.va);
    EXPECT_EQ(u64(168), want->bytes / xccs);
    EXPECT_EQ(u32(176), want->bytes_per_lane);
    if (unset_tmpring) std::memset(amdq + 140, 0, 4);
  }
  std::vector<int32_t> host_out;
  gpu.twins().add(
      prg.code_va(),
      [&](std::span<const uint8_t> ka, hcq::Dim3, hcq::Dim3 block) {
        uint64_t out, in;
        std::memcpy(&out, ka.data(), 8);
        std::memcpy(&in, ka.data() + 8, 8);
        auto* o = reinterpret_cast<int32_t*>(*kfd->resolve(out, 256));
        auto* i = reinterpret_cast<int32_t*>(*kfd->resolve(in, 256));
        for (uint32_t t = 0; t < block.x; t++) o[t] = (i[t] & 1) ? static_cast<int32_t>(t) : -1;
      },
      prg.private_segment_buffer() ? 4 : 0);
  Result<hcq::Buffer> in = (*dev)->allocator().alloc(256, {.cpu_access = true});
  Result<hcq::Buffer> out = (*dev)->allocator().alloc(256, {.cpu_access = true});
  Result<hcq::Buffer> args = (*dev)->allocator().alloc(64, {.host = true, .cpu_access = true});
  ASSERT_TRUE(in.ok() && out.ok() && args.ok());
  hcq::ArgsState a(*args, 0, 2, 0);
  a.set_buf(0, static_cast<int64_t>(out->va));
  a.set_buf(1, static_cast<int64_t>(in->va));
  Result<std::unique_ptr<hcq::Signal>> sig = (*dev)->new_signal("done");
  ASSERT_TRUE(sig.ok());
  std::unique_ptr<hcq::HwQueue> q = (*dev)->compute_queue();
  q->exec(prg, a, {1, 1, 1}, {64, 1, 1}).signal(**sig, 1);
  ASSERT_TRUE(q->submit().ok());
  if (unset_tmpring) {
    EXPECT_FALSE((*sig)->wait(1, std::chrono::milliseconds(300)).ok());
    ASSERT_EQ(gpu.faults().size(), 1u);
    EXPECT_NE(gpu.faults()[0].to_string().find("amd_queue_t has compute_tmpring_size 0x0"),
              std::string::npos)
        << gpu.faults()[0].to_string();
    EXPECT_EQ(gpu.counters().dispatches, 0u);
    return;
  }
  ASSERT_TRUE((*sig)->wait(1, std::chrono::milliseconds(2000)).ok()) << (*dev)->describe_hang();
  EXPECT_TRUE(gpu.faults().empty()) << gpu.faults()[0].to_string();
  EXPECT_EQ(gpu.counters().dispatches, 1u);
}

TEST(AmdScratch, AProgramThatNeedsScratchGrowsItAndItsDispatchNamesIt) {
  if (!compiler::LdLld::find().ok()) GTEST_SKIP() << "needs ld.lld";
  for (const char* gfx : {"gfx1100", "gfx1201"}) {
    SCOPED_TRACE(gfx);
    run_scratch_kernel(gfx, ComputeQueueMode::kPm4);
  }
}

// On the AQL queue the CP finds the scratch in amd_queue_t and sets up every user SGPR the
// descriptor asks for: gfx90a kernels wanting the flat scratch init run, and a GPU with several
// XCCs gets scratch (one share per XCC).
TEST(AmdScratch, TheAqlQueueDescribesScratchInAmdQueueT) {
  if (!compiler::LdLld::find().ok()) GTEST_SKIP() << "needs ld.lld";
  for (const char* gfx : {"gfx90a", "gfx1100"}) {
    SCOPED_TRACE(gfx);
    run_scratch_kernel(gfx, ComputeQueueMode::kAql);
  }
  SCOPED_TRACE("gfx942 with 4 XCCs");
  run_scratch_kernel("gfx942", ComputeQueueMode::kAuto, 4);
  SCOPED_TRACE("amd_queue_t without the scratch ring size");
  run_scratch_kernel("gfx1100", ComputeQueueMode::kAql, 1, true);
}

TEST(AmdScratch, Gfx90aKernelsThatWantFlatScratchInitAreRefusedByName) {
  if (!compiler::LdLld::find().ok()) GTEST_SKIP() << "needs ld.lld";
  auto kfd = std::make_shared<FakeKfd>(FakeKfdConfig{.gpus = {FakeAmdGpuConfig::preset("gfx90a")}});
  DeviceOptions o;
  o.compute = ComputeQueueMode::kPm4;
  Result<std::unique_ptr<Device>> dev = Device::create(kfd, 0, o);
  ASSERT_TRUE(dev.ok()) << dev.status().to_string();
  Result<Binary> b = scratch_kernel("gfx90a");
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  Result<std::unique_ptr<hcq::Program>> p = (*dev)->load_program(*b);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("ENABLE_SGPR_FLAT_SCRATCH_INIT"), std::string::npos)
      << p.status().message();
  EXPECT_NE(p.status().message().find("AMD_AQL=1"), std::string::npos) << p.status().message();
}

}  // namespace
}  // namespace baregrad::amd
