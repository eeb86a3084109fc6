// Bad input to the HCQ contract: refused when recorded, with a Status saying what and where;
// the device stays healthy and the timeline keeps no hole.
#include <gmock/gmock.h>

#include "base/format.h"
#include "tests/cts/backends.h"

namespace baregrad::cts {
namespace {

using ::testing::HasSubstr;
using CtsBadInput = Cts;

TEST_P(CtsBadInput, ExecOnACopyQueueIsRefusedWhenRecorded) {
  std::unique_ptr<hcq::HwQueue> q = dev().copy_queue();
  if (!q) GTEST_SKIP() << GetParam().name << " has no copy queue";
  auto prg = program("add_one", add_one, {16}, 0);
  CTS_ASSERT_OK_AND_ASSIGN(hcq::ArgsState * args, args_for(*prg));
  uint64_t before = dev().timeline_value();
  Result<uint64_t> r =
      dev().submit_on_timeline(*q, [&](hcq::HwQueue& hq) { launch(hq, *prg, *args, 4); });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("exec of 'add_one'"));
  EXPECT_THAT(r.status().message(), HasSubstr("copy queue"));
  EXPECT_EQ(dev().timeline_value(), before);  // the value was not used up
  EXPECT_FALSE(dev().failed());
  CTS_EXPECT_OK(dev().synchronize());
  q->reset();
  EXPECT_TRUE(q->refusal().ok());
}

TEST_P(CtsBadInput, CopyPastABuffersEndIsRefusedWhenRecorded) {
  CTS_REQUIRE("address checks");
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer a, alloc(64));
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer b, alloc(64));
  auto q = copy_or_compute_queue(dev());
  q->copy(va_of(a) + 32, va_of(b), 64);
  ASSERT_FALSE(q->refusal().ok());
  EXPECT_THAT(q->refusal().message(), HasSubstr("copy of 64 bytes"));
  EXPECT_THAT(q->refusal().message(),
              HasSubstr("destination " + hex(a.va + 32) + " runs past the end of the buffer at " +
                        hex(a.va) + " (64 bytes)"));
  Status s = q->submit();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  q->reset();
  q->copy(va_of(a), 0x10, 8);
  EXPECT_THAT(q->refusal().message(), HasSubstr("source 0x10 is in no allocation"));
  EXPECT_FALSE(dev().failed());
}

TEST_P(CtsBadInput, AFullCommandBufferIsRefusedNotOverrun) {
  CTS_REQUIRE("command buffer");
  auto q = dev().compute_queue();
  for (int i = 0; i < 100000 && q->refusal().ok(); i++) q->memory_barrier();
  ASSERT_FALSE(q->refusal().ok());
  EXPECT_EQ(q->refusal().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(q->refusal().message(), HasSubstr("words is full"));
  EXPECT_EQ(q->submit().code(), StatusCode::kResourceExhausted);
  EXPECT_FALSE(dev().failed());
}

TEST_P(CtsBadInput, ASignalOutsideThePeerGroupIsRefused) {
  // A device of another backend: its signals live in memory this device's queues need not see.
  Result<std::unique_ptr<hcq::Device>> other = open_foreign();
  if (!other.ok() && other.status().code() == StatusCode::kNotFound) GTEST_SKIP() << other.status();
  CTS_ASSERT_OK_AND_ASSIGN(std::unique_ptr<hcq::Device> foreign, std::move(other));
  {
    CTS_ASSERT_OK_AND_ASSIGN(std::unique_ptr<hcq::Signal> s, foreign->new_signal("foreign"));
    auto q = dev().compute_queue();
    q->wait(*s, 1);
    ASSERT_FALSE(q->refusal().ok());
    EXPECT_THAT(q->refusal().message(),
                HasSubstr("wait on a queue of " + dev().name() + ": signal 'foreign' belongs to " +
                          foreign->name()));
    EXPECT_EQ(q->submit().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_FALSE(dev().failed());
}

TEST_P(CtsBadInput, ASubmissionLargerThanTheRingIsRefused) {
  auto* cpu = dynamic_cast<cpu::Device*>(&dev());
  if (!cpu) GTEST_SKIP() << GetParam().name << " has no software ring";
  std::vector<uint32_t> words(1 << 17, 0x04000000);  // barriers
  Status s = cpu->engine(hcq::Engine::kCompute).publish(words);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("131072 words cannot fit the ring of 65536"));
  EXPECT_FALSE(dev().failed());
}

using CtsPeer = Cts;

TEST_P(CtsPeer, ABufferMappedIntoAPeerIsUsableByItsQueuesUntilFreed) {
  CTS_REQUIRE("execution");
  CTS_REQUIRE("peers");
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Device * peer, open_another());
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer mine, alloc(64));
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer theirs, alloc(*peer, 64));
  auto bytes = random_bytes(64, 7);
  CTS_ASSERT_OK(dev().allocator().copy_in(mine, bytes.get(), 64));
  CTS_ASSERT_OK(dev().synchronize());
  auto q = copy_or_compute_queue(*peer);
  q->copy(va_of(theirs), va_of(mine), 64);  // not mapped into the peer yet
  EXPECT_THAT(q->refusal().message(), HasSubstr("is in no allocation of"));
  CTS_ASSERT_OK(dev().allocator().map_into(mine, *peer));
  CTS_ASSERT_OK(peer->submit_on_timeline(
      *q, [&](hcq::HwQueue& hq) { hq.copy(va_of(theirs), va_of(mine), 64); }));
  uint8_t got[64];
  CTS_ASSERT_OK(peer->allocator().copy_out(got, theirs, 64));
  EXPECT_TRUE(same_bytes(got, bytes.get(), 64));
  EXPECT_TRUE(peer->allocator().find(mine.va).has_value());
  // Freed for real (nolru), a mapped buffer leaves the peer too.
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer brief, dev().allocator().alloc(64, {.nolru = true}));
  CTS_ASSERT_OK(dev().allocator().map_into(brief, *peer));
  EXPECT_TRUE(peer->allocator().find(brief.va).has_value());
  dev().allocator().free(brief);
  EXPECT_FALSE(peer->allocator().find(brief.va).has_value());
}

TEST_P(CtsPeer, MappingOutsideThePeerGroupIsUnimplemented) {
  Result<std::unique_ptr<hcq::Device>> other = open_foreign();
  if (!other.ok() && other.status().code() == StatusCode::kNotFound) GTEST_SKIP() << other.status();
  CTS_ASSERT_OK_AND_ASSIGN(std::unique_ptr<hcq::Device> foreign, std::move(other));
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer mine, alloc(64));
  Status s = dev().allocator().map_into(mine, *foreign);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("into " + foreign->name()));
}

CTS_INSTANTIATE(CtsPeer);

CTS_INSTANTIATE(CtsBadInput);

}  // namespace
}  // namespace baregrad::cts
