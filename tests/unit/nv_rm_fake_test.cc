// The fake RM/UVM kernel's own contract (the hooks the fake GPU uses, teardown), the ioctl
// transcript recorder and the VA range allocator.
#include "tests/unit/nv_rm_rig.h"

namespace baregrad::nv {
namespace {

using namespace rm_test;

// ---- the fake's hooks for the fake GPU -------------------------------------------------------

TEST(NvRmFake, ChannelsReachTheGpuHooks) {
  Rig rig;
  std::vector<mock::FakeNvChannel> added, removed;
  rig.fake.on_channel([&](const mock::FakeNvChannel& c) { added.push_back(c); },
                      [&](const mock::FakeNvChannel& c) { removed.push_back(c); });
  Up up = bring_up_or_die(rig);
  ASSERT_NE(up.gpu, nullptr);
  const BringUp& b = up.gpu->info();
  ASSERT_EQ(added.size(), 2u);
  EXPECT_TRUE(added[0].compute);
  EXPECT_EQ(added[0].token, b.compute.work_submit_token);
  EXPECT_EQ(added[0].ring_va, b.compute.ring_va);
  EXPECT_EQ(added[0].userd_va, b.compute.userd_va);
  EXPECT_EQ(added[0].entries, b.compute.entries);
  EXPECT_EQ(added[0].engine_class, kHopperComputeA);
  EXPECT_FALSE(added[1].compute);
  EXPECT_EQ(added[1].token, b.copy.work_submit_token);
  EXPECT_EQ(added[1].engine_class, kHopperDmaCopyA);
  // The rings and USERD are where the GPU can read them, and are the CPU's memory there.
  std::optional<uint8_t*> userd = rig.fake.resolve(b.compute.userd_va, kUserdBytes);
  ASSERT_TRUE(userd.has_value());
  reinterpret_cast<uint32_t*>(b.compute.userd_va)[kUserdGpPut / 4] = 7;
  uint32_t gp_put;
  std::memcpy(&gp_put, *userd + kUserdGpPut, 4);
  EXPECT_EQ(gp_put, 7u);
  for (const mock::FakeNvChannel& c : rig.fake.channels()) EXPECT_TRUE(c.scheduled);
  up.gpu.reset();
  EXPECT_EQ(removed.size(), 2u);
  EXPECT_TRUE(rig.fake.channels().empty());
}

TEST(NvRmFake, DoorbellsArePolledFromTheUsermodePage) {
  Rig rig;
  std::vector<std::pair<int, uint32_t>> rung;
  rig.fake.on_doorbell([&](int gpu, uint32_t token) { rung.emplace_back(gpu, token); });
  Up up = bring_up_or_die(rig);
  ASSERT_NE(up.gpu, nullptr);
  const BringUp& b = up.gpu->info();
  EXPECT_EQ(rig.fake.poll_doorbells(), 0);
  hcq::Doorbell bell(hcq::Mmio(b.usermode_page, kUsermodeBytes), kDoorbellOffset, 32);
  bell.ring(b.copy.work_submit_token);
  EXPECT_EQ(rig.fake.poll_doorbells(), 1);
  EXPECT_EQ(rig.fake.poll_doorbells(), 0);
  ASSERT_EQ(rung.size(), 1u);
  EXPECT_EQ(rung[0], std::make_pair(0, b.copy.work_submit_token));
  // The driver's mapping and the fake's page are the same memory.
  EXPECT_NE(b.usermode_page, rig.fake.usermode_page(0));
  static_cast<uint8_t*>(b.usermode_page)[0x100] = 0x77;
  EXPECT_EQ(rig.fake.usermode_page(0)[0x100], 0x77);
}

TEST(NvRmFake, TeardownFreesEveryObject) {
  Rig rig;
  {
    Up up = bring_up_or_die(rig);
    ASSERT_NE(up.gpu, nullptr);
    auto a = up.gpu->alloc_memory({4096, RmMemoryKind::kHost});
    ASSERT_TRUE(a.ok());
    ASSERT_TRUE(up.gpu->free_memory(*a).ok());
    EXPECT_EQ(rig.fake.allocations().size(), 3u);  // GPFIFO area and two error notifiers
  }
  EXPECT_TRUE(rig.fake.allocations().empty());
  EXPECT_TRUE(rig.fake.channels().empty());
  Transcript t = rig.os.transcript();
  std::vector<Call> c = calls(t);
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c.back().name, "NV_ESC_RM_FREE");  // the root client, last
  for (const TranscriptEntry& e : t.ioctls()) EXPECT_EQ(e.rm_status, kNvOk) << e.what;
}

// ---- the recorder --------------------------------------------------------------------------

TEST(NvRmRecording, TranscriptRoundTripsThroughText) {
  Rig rig;
  Up up = bring_up_or_die(rig);
  ASSERT_NE(up.gpu, nullptr);
  Transcript t = rig.os.transcript();
  std::string text = t.serialize();
  EXPECT_TRUE(text.starts_with("# baregrad NV transcript v1\nopen path=\"/dev/nvidiactl\" fd="));
  EXPECT_THAT(text, HasSubstr(" request=0xc04846d2 what=\"NV_ESC_CHECK_VERSION_STR (query)\" "));
  auto back = Transcript::parse(text);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->entries.size(), t.entries.size());
  for (size_t i = 0; i < t.entries.size(); ++i) ASSERT_EQ(back->entries[i], t.entries[i]) << i;
  auto bad = Transcript::parse("ioctl path=\"x\" fd=1\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "transcript line 1: no field request");
}

TEST(NvRmRecording, ControlParametersAreRecorded) {
  Rig rig;
  Up up = bring_up_or_die(rig);
  ASSERT_NE(up.gpu, nullptr);
  for (const TranscriptEntry& e : rig.os.transcript().ioctls()) {
    if (e.what.find("NV2080_CTRL_CMD_MC_GET_ARCH_INFO") == std::string::npos) continue;
    ASSERT_EQ(e.params_out.size(), 16u);
    Nv2080CtrlMcGetArchInfoParams p;
    std::memcpy(&p, e.params_out.data(), sizeof(p));
    EXPECT_EQ(p.architecture, kArchGh100);
    return;
  }
  FAIL() << "no NV2080_CTRL_CMD_MC_GET_ARCH_INFO in the transcript";
}

TEST(NvRmRecording, WrapsTheRealOs) {
  RecordingOs os(hcq::linux_os());
  auto text = os.read_file("/proc/self/stat");
  ASSERT_TRUE(text.ok()) << text.status();
  auto fd = os.open("/dev/null", 0);
  ASSERT_TRUE(fd.ok()) << fd.status();
  uint32_t arg = 0;
  Status s = os.ioctl(*fd, nv_ioctl_request(kNvEscRegisterFd, 4), &arg, "NV_ESC_REGISTER_FD");
  EXPECT_FALSE(s.ok());  // /dev/null knows no NV escapes
  EXPECT_TRUE(os.close(*fd).ok());
  Transcript t = os.transcript();
  ASSERT_EQ(t.entries.size(), 4u);
  EXPECT_EQ(t.entries[0].kind, TranscriptEntry::Kind::kReadFile);
  EXPECT_EQ(t.entries[0].text, *text);
  EXPECT_EQ(t.entries[2].path, "/dev/null");
  EXPECT_EQ(t.entries[2].in.size(), 4u);
  EXPECT_THAT(t.entries[2].error, HasSubstr("NV_ESC_REGISTER_FD"));
  EXPECT_EQ(t.entries[3].kind, TranscriptEntry::Kind::kClose);
}

// ---- VA ranges -----------------------------------------------------------------------------

TEST(NvRmVaRange, FirstFitWithAlignmentAndCoalescing) {
  auto r = VaRange::reserve(hcq::linux_os(), "test", 0x30'0000'0000, 16 << 20, 1ull << 47);
  ASSERT_TRUE(r.ok()) << r.status();
  VaRange& v = **r;
  uint64_t a = *v.alloc(4096, 4096);
  uint64_t b = *v.alloc(2 << 20, 2 << 20);
  EXPECT_EQ(a, v.base());
  EXPECT_EQ(b % (2 << 20), 0u);
  uint64_t c = *v.alloc(4096, 4096);
  if (b > a + 4096) {
    EXPECT_EQ(c, a + 4096);  // the hole before b is used first
  }
  v.free(a, 4096);
  v.free(c, 4096);
  v.free(b, 2 << 20);
  EXPECT_EQ(*v.alloc(16 << 20, 4096), v.base());  // everything coalesced again
  auto full = v.alloc(4096, 4096);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(full.status().message(), HasSubstr("the test VA range ["));
}

TEST(NvRmVaRange, ATakenBaseFallsBackBelowTheLimit) {
  constexpr uint64_t kBase = 0x10'0000'0000, kSize = 64 << 20;
  hcq::Os& os = hcq::linux_os();
  // Occupy the preferred base (under a sanitizer it is shadow memory already).
  auto blocker = hcq::map(os, reinterpret_cast<void*>(kBase), kSize, PROT_NONE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
  auto r = VaRange::reserve(os, "low", kBase, kSize, 1ull << 40);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE((*r)->base(), kBase);
  EXPECT_LE((*r)->base() + (*r)->size(), 1ull << 40);
  EXPECT_GE((*r)->size(), kSize / 128);
}

}  // namespace
}  // namespace baregrad::nv
