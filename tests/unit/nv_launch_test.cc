// What a launch on the NVIDIA device hands the GPU besides the kernel's own parameters: the
// driver's words in constant bank 0 (shared and local memory windows, stack top), checked on the
// fake GPU for each generation's layout.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "drivers/mock/nv_device/mock_nv.h"
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

}  // namespace
}  // namespace baregrad::nv
