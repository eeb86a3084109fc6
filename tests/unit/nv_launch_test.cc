// What a launch on the NVIDIA device hands the GPU besides the kernel's own parameters: the
// driver's words in constant bank 0 (shared and local memory windows, stack top), checked on the
// fake GPU for each generation's layout; and local memory grown for a kernel whose stack needs
// more than the device provides.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "compiler/target/ptxas.h"
#include "drivers/mock/nv_device/mock_nv.h"
#include "drivers/mock/nvgpu/fake_gpu.h"
#include "drivers/nv/methods.h"

namespace baregrad::nv {
namespace {

using std::chrono::milliseconds;

struct Case {
  Generation gen;
  uint32_t param_offset;
  // 32-bit word index -> expected value (words not listed are not checked).
  std::vector<std::pair<size_t, uint32_t>> words;
};

class NvLaunch : public ::testing::TestWithParam<Case> {};

TEST_P(NvLaunch, ConstantBankZeroCarriesTheDriverWords) {
  const Case& c = GetParam();
  auto dev = mock::open_mock_nv(c.gen);
  ASSERT_TRUE(dev.ok()) << dev.status();
  std::vector<uint8_t> seen;
  auto prg = mock::mock_program(
      "probe", 0, 0,
      [&](const mock::LaunchInfo& li, hcq::Device&, auto&) {
        seen.assign(li.cbank0.begin(), li.cbank0.end());
        return Status();
      },
      c.param_offset);
  ASSERT_EQ(prg->args_prefix(), c.param_offset);
  auto mem = (*dev)->allocator().alloc(c.param_offset + 64, {.host = true, .cpu_access = true});
  ASSERT_TRUE(mem.ok()) << mem.status();
  std::memset(mem->cpu, 0xab, mem->size);  // what a reused argument block may hold
  {
    hcq::ArgsState args(*mem, c.param_offset, 0, 0);
    auto q = (*dev)->compute_queue();
    auto done = (*dev)->new_signal("done");
    ASSERT_TRUE(done.ok());
    q->exec(*prg, args, {1, 1, 1}, {1, 1, 1}).signal(**done, 1);
    ASSERT_TRUE(q->submit().ok());
    ASSERT_TRUE((*done)->wait(1, milliseconds(5000)).ok());
  }
  ASSERT_GE(seen.size(), c.param_offset);
  for (auto [word, want] : c.words) {
    uint32_t got;
    std::memcpy(&got, seen.data() + word * 4, 4);
    EXPECT_EQ(got, want) << "word " << word;
  }
  (*dev)->allocator().free(*mem);
}

// The windows drivers/nv sets up (kSharedMemoryWindow 0x729400000000, kLocalMemoryWindow
// 0x729300000000) and the stack top 0xfffdc0, little-endian 64-bit values in 32-bit words.
INSTANTIATE_TEST_SUITE_P(
    Generations,
    NvLaunch,
    ::testing::Values(
        Case{Generation::kHopper,
             0x210,
             {{6, 0x00000000}, {7, 0x7294}, {8, 0x00000000}, {9, 0x7293}, {10, 0xfffdc0}, {11, 0}}},
        Case{Generation::kAmpere,
             0x160,
             {{6, 0}, {7, 0x7294}, {8, 0}, {9, 0x7293}, {10, 0xfffdc0}, {11, 0}}},
        Case{Generation::kBlackwell,
             0x380,
             {{188, 0}, {189, 0x7294}, {190, 0}, {191, 0x7293}, {223, 0xfffdc0}}}),
    [](const auto& info) { return std::string(generation_name(info.param.gen)); });

// A kernel with a 4 KiB local array indexed by a parameter, so that ptxas keeps it on the stack.
constexpr const char* kStackPtx = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry stack4k(.param .u64 out, .param .u32 idx)
{
  .local .align 4 .b8 buf[4096];
  .reg .b64 %rd<6>;
  .reg .b32 %r<3>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [idx];
  mov.u64 %rd2, buf;
  mul.wide.u32 %rd3, %r1, 4;
  add.u64 %rd4, %rd2, %rd3;
  st.local.u32 [%rd4], %r1;
  ld.local.u32 %r2, [%rd2+8];
  cvta.to.global.u64 %rd5, %rd1;
  st.global.u32 [%rd5], %r2;
  ret;
}
)";

TEST(NvLocalMemory, GrowsBeforeTheFirstLaunchThatNeedsMore) {
  auto ptxas = compiler::Ptxas::find();
  if (!ptxas.ok()) GTEST_SKIP() << ptxas.status();
  auto cubin = ptxas->assemble(kStackPtx, 90, "stack4k");
  ASSERT_TRUE(cubin.ok()) << cubin.status();
  ASSERT_GE(cubin->report.stack_bytes, 4096) << cubin->log;
  auto dev = mock::open_mock_nv(Generation::kHopper);
  ASSERT_TRUE(dev.ok()) << dev.status();
  mock::FakeNvGpu* gpu = mock::mock_nv_gpu(**dev);
  ASSERT_NE(gpu, nullptr);
  const uint32_t token = (*dev)->info().compute.work_submit_token;
  auto before = gpu->channel_status(token);
  ASSERT_TRUE(before.ok());
  EXPECT_EQ((*dev)->local_bytes_per_thread(), kLocalReserveBytes);

  auto elf = std::span(reinterpret_cast<const uint8_t*>(cubin->cubin.data()), cubin->cubin.size());
  auto prg = Program::load(**dev, elf, "stack4k", 1, 1);
  ASSERT_TRUE(prg.ok()) << prg.status();
  const uint32_t need = static_cast<uint32_t>(cubin->report.stack_bytes) + kLocalReserveBytes;
  EXPECT_EQ((*prg)->local_bytes(), need);
  bool ran = false;
  auto twin = mock::register_mock_kernel((*prg)->code_va(),
                                         [&](const mock::LaunchInfo&, hcq::Device&, auto&) {
                                           ran = true;
                                           return Status();
                                         });
  auto mem = (*dev)->allocator().alloc(0x400, {.host = true, .cpu_access = true});
  ASSERT_TRUE(mem.ok());
  {
    hcq::ArgsState args(*mem, (*prg)->args_prefix(), 1, 1);
    args.set_buf(0, static_cast<int64_t>(mem->va + 0x3f0));
    args.set_var(0, 3);
    auto q = (*dev)->compute_queue();
    auto done = (*dev)->new_signal("done");
    ASSERT_TRUE(done.ok());
    q->exec(**prg, args, {1, 1, 1}, {32, 1, 1}).signal(**done, 1);
    ASSERT_TRUE(q->submit().ok());
    ASSERT_TRUE((*done)->wait(1, milliseconds(5000)).ok());
  }
  EXPECT_TRUE(ran);
  // The device provides the rounded need, and the GPU got a new store sized as tinygrad sizes
  // it: per thread x 32 lanes (to 0x200) x warps per SM x SMs per TPC (to 0x8000), per TPC.
  uint32_t per_thread = (need + 31) / 32 * 32;
  EXPECT_EQ((*dev)->local_bytes_per_thread(), per_thread);
  const auto& gr = (*dev)->info().gr;
  uint64_t lanes = (uint64_t{per_thread} * 32 + 0x1ff) / 0x200 * 0x200;
  uint64_t per_tpc = (lanes * gr.max_warps_per_sm * gr.sm_per_tpc + 0x7fff) / 0x8000 * 0x8000;
  auto after = gpu->channel_status(token);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->local_memory_bytes_per_tpc, per_tpc);
  EXPECT_NE(after->local_memory_va, before->local_memory_va);
  auto store = (*dev)->allocator().find(after->local_memory_va);
  ASSERT_TRUE(store.has_value());
  EXPECT_GE(store->size, per_tpc * gr.tpcs);
  prg->reset();
  (*dev)->allocator().free(*mem);
}

}  // namespace
}  // namespace baregrad::nv
