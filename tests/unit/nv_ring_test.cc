// The pushbuffer ring of the NVIDIA device and the QMD slots of its queues, fenced against the
// GPU: a MOCK+NV device with a small ring, a fake GPU held back by a semaphore acquire the CPU
// releases late, or hung. Each submission's effect is checked in memory against values the test
// computes itself.
//
// Word counts the expectations rely on, from the method forms (drivers/nv/README.md): a copy is
// 9 words (OFFSET_IN_UPPER..OFFSET_OUT_LOWER: header + 4, LINE_LENGTH_IN: 2, LAUNCH_DMA: 2); a
// semaphore acquire or release 6 (header + ADDR_LO, ADDR_HI, PAYLOAD_LO, PAYLOAD_HI, EXECUTE);
// the completion release the device appends to each ring submission is one more release (6).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "base/check.h"
#include "drivers/mock/nv_device/mock_nv.h"
#include "drivers/mock/nvgpu/fake_gpu.h"
#include "drivers/nv/device.h"

namespace baregrad::nv {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr size_t kRingBytes = 1024;  // 256 words
constexpr size_t kRingWords = kRingBytes / 4;
constexpr size_t kCopyWords = 9, kSemaphoreWords = 6, kReleaseWords = 6;

std::unique_ptr<Device> open(DeviceOptions options) {
  auto d = mock::open_mock_nv(Generation::kHopper, options);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? std::move(d).value() : nullptr;
}

// Host memory the CPU reads and the GPU writes, freed before its device goes.
struct HostMem {
  HostMem(hcq::Device& d, size_t bytes) : dev(d) {
    auto r = d.allocator().alloc(bytes, {.host = true, .cpu_access = true});
    CHECK(r.ok()) << r.status();
    buf = *r;
    std::memset(buf.cpu, 0, bytes);
  }
  ~HostMem() { dev.allocator().free(buf); }
  uint64_t va(size_t i) const { return buf.va + 8 * i; }
  uint64_t get(size_t i) const {
    return std::atomic_ref<uint64_t>(static_cast<uint64_t*>(buf.cpu)[i]).load();
  }
  void put(size_t i, uint64_t v) { static_cast<uint64_t*>(buf.cpu)[i] = v; }
  hcq::Device& dev;
  hcq::Buffer buf;
};

uint64_t value_of(size_t i) { return 0x5eed00000000ull + i * 0x10001ull + 7; }

// `n` source values value_of(i) and a zeroed destination.
struct CopyRig {
  CopyRig(hcq::Device& d, size_t n) : src(d, 8 * n), dst(d, 8 * n) {
    for (size_t i = 0; i < n; i++) src.put(i, value_of(i));
  }
  // Records a copy of element i on `q`.
  void copy(hcq::HwQueue& q, size_t i) { q.copy(dst.va(i), src.va(i), 8); }
  HostMem src, dst;
};

Status submit_copy(hcq::HwQueue& q, CopyRig& rig, size_t i) {
  q.reset();
  rig.copy(q, i);
  return q.submit();
}

TEST(NvRing, SubmissionsWrappingASmallRingManyTimesAllRun) {
  auto dev = open({.pushbuf_ring_bytes = kRingBytes});
  ASSERT_NE(dev, nullptr);
  // Submission i: 1 + i % 3 copies then a release of `sig` to i + 1, so 21, 30 or 39 words with
  // the completion release: 120 of them go round the 256-word ring more than 9 times per engine.
  constexpr size_t kSubmissions = 120;
  static_assert(kSubmissions * (kCopyWords + kSemaphoreWords + kReleaseWords) > 9 * kRingWords);
  constexpr size_t kElements = kSubmissions * 2;  // sum of 1 + i % 3 over i < 120
  CopyRig compute_rig(*dev, kElements), copy_rig(*dev, kElements);
  auto compute_sig = dev->new_signal("compute progress");
  auto copy_sig = dev->new_signal("copy progress");
  ASSERT_TRUE(compute_sig.ok() && copy_sig.ok());
  auto cq = dev->compute_queue(), xq = dev->copy_queue();
  struct Lane {
    hcq::Engine engine;
    hcq::HwQueue& q;
    CopyRig& rig;
    hcq::Signal& sig;
    uint64_t first_seq;
  };
  Lane lanes[] = {
      {hcq::Engine::kCompute, *cq, compute_rig, **compute_sig,
       dev->last_sequence(hcq::Engine::kCompute)},
      {hcq::Engine::kCopy, *xq, copy_rig, **copy_sig, dev->last_sequence(hcq::Engine::kCopy)},
  };
  size_t next = 0;
  for (size_t i = 0; i < kSubmissions; i++) {
    size_t n = 1 + i % 3;
    for (Lane& l : lanes) {
      l.q.reset();
      for (size_t k = 0; k < n; k++) l.rig.copy(l.q, next + k);
      l.q.signal(l.sig, i + 1);
      Status s = l.q.submit();
      ASSERT_TRUE(s.ok()) << "submission " << i << ": " << s;
    }
    next += n;
  }
  ASSERT_EQ(next, kElements);
  for (Lane& l : lanes) {
    ASSERT_TRUE(l.sig.wait(kSubmissions, milliseconds(10000)).ok());
    uint64_t last = dev->last_sequence(l.engine);
    EXPECT_EQ(last - l.first_seq, kSubmissions);  // one sequence number per submission
    ASSERT_TRUE(dev->wait_sequence(l.engine, last).ok());
    EXPECT_EQ(dev->completed_sequence(l.engine), last);
    for (size_t k = 0; k < kElements; k++)
      ASSERT_EQ(l.rig.dst.get(k), value_of(k))
          << "element " << k << " on engine " << static_cast<int>(l.engine);
  }
}

TEST(NvRing, ASubmissionMustFitTheRingTogetherWithItsCompletionRelease) {
  constexpr size_t kSmallRing = 256;  // 64 words
  auto dev = open({.pushbuf_ring_bytes = kSmallRing});
  ASSERT_NE(dev, nullptr);
  CopyRig rig(*dev, 8);
  auto sig = dev->new_signal("done");
  ASSERT_TRUE(sig.ok());
  auto q = dev->compute_queue();
  // 6 copies and a release: 6 * 9 + 6 = 60 words fit 64, but not with the release (66).
  for (size_t k = 0; k < 6; k++) rig.copy(*q, k);
  q->signal(**sig, 1);
  Status s = q->submit();
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(),
            "compute queue of MOCK+NV: a submission of 60 words (66 with the completion release) "
            "cannot fit the pushbuffer ring of 64");
  // 5 copies and a release: 51 words, 57 with it.
  q->reset();
  for (size_t k = 0; k < 5; k++) rig.copy(*q, k);
  q->signal(**sig, 2);
  ASSERT_TRUE(q->submit().ok());
  ASSERT_TRUE((*sig)->wait(2, milliseconds(10000)).ok());
  for (size_t k = 0; k < 5; k++) EXPECT_EQ(rig.dst.get(k), value_of(k));
  EXPECT_EQ(rig.dst.get(5), 0u);
}

TEST(NvRing, TheHostWaitsForAHeldBackGpuInsteadOfOverwritingTheRing) {
  auto dev = open({.pushbuf_ring_bytes = kRingBytes, .timeout = milliseconds(5000)});
  ASSERT_NE(dev, nullptr);
  constexpr size_t kCopies = 60;  // 60 * 15 words: the ring wraps 3 times
  CopyRig rig(*dev, kCopies);
  auto gate = dev->new_signal("gate");
  auto done = dev->new_signal("done");
  ASSERT_TRUE(gate.ok() && done.ok());
  auto q = dev->compute_queue();
  q->wait(**gate, 1);  // the GPU stops here until the CPU opens the gate
  ASSERT_TRUE(q->submit().ok());
  const uint64_t acquire_seq = dev->last_sequence(hcq::Engine::kCompute);

  // Opens the gate once the host stopped publishing (it waits for ring space), at least 100 ms
  // in; notes what the host and the GPU had done by then.
  std::atomic<uint64_t> published_before{0}, completed_before{0}, written_before{0};
  std::thread opener([&] {
    std::this_thread::sleep_for(milliseconds(100));
    uint64_t seen = dev->last_sequence(hcq::Engine::kCompute);
    for (auto t0 = Clock::now(); Clock::now() - t0 < milliseconds(5000);) {
      std::this_thread::sleep_for(milliseconds(20));
      uint64_t now = dev->last_sequence(hcq::Engine::kCompute);
      if (now == seen) break;
      seen = now;
    }
    published_before = seen;
    completed_before = dev->completed_sequence(hcq::Engine::kCompute);
    uint64_t written = 0;
    for (size_t i = 0; i < kCopies; i++) written += rig.dst.get(i) != 0;
    written_before = written;
    (*gate)->set(1);
  });
  Status s;
  for (size_t i = 0; i < kCopies && s.ok(); i++) s = submit_copy(*q, rig, i);
  if (s.ok()) {
    q->reset();
    q->signal(**done, 1);
    s = q->submit();
  }
  opener.join();

  // Held back: the GPU completed nothing from the acquire on, and wrote no element.
  EXPECT_EQ(completed_before.load(), acquire_seq - 1);
  EXPECT_EQ(written_before.load(), 0u);
  // The host published only the copies that fit before the acquire's words: 256 words less the
  // acquire's 12 and less the tail a wrap skips (under 15), in 15-word copy submissions:
  // floor((256 - 12 - 14) / 15) = 15 to floor((256 - 12) / 15) = 16.
  uint64_t published = published_before.load() - acquire_seq;
  EXPECT_GE(published, 15u);
  EXPECT_LE(published, 16u);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE((*done)->wait(1, milliseconds(5000)).ok());
  for (size_t i = 0; i < kCopies; i++) ASSERT_EQ(rig.dst.get(i), value_of(i)) << "copy " << i;
}

TEST(NvRing, AHungGpuFailsTheRingWaitWithDeadlineExceeded) {
  auto dev = open({.pushbuf_ring_bytes = kRingBytes, .timeout = milliseconds(200)});
  ASSERT_NE(dev, nullptr);
  mock::FakeNvGpu* gpu = mock::mock_nv_gpu(*dev);
  ASSERT_NE(gpu, nullptr);
  Clock::time_point teardown;
  {
    CopyRig rig(*dev, 40);
    auto done = dev->new_signal("done");
    ASSERT_TRUE(done.ok());
    auto q = dev->compute_queue(), xq = dev->copy_queue();
    const uint64_t before = dev->last_sequence(hcq::Engine::kCompute);
    ASSERT_EQ(dev->completed_sequence(hcq::Engine::kCompute), before);  // the channel setup ran
    gpu->inject_hang(dev->info().compute.work_submit_token);

    Status failed;
    size_t published = 0;
    Clock::duration took{};
    for (size_t i = 0; i < 40 && failed.ok(); i++) {
      auto t0 = Clock::now();
      failed = submit_copy(*q, rig, i);
      took = Clock::now() - t0;
      if (failed.ok()) published++;
    }
    ASSERT_EQ(failed.code(), StatusCode::kDeadlineExceeded) << failed;
    EXPECT_EQ(failed.message(),
              "compute queue of MOCK+NV: the pushbuffer ring (1024 bytes) is full: ring "
              "submission " +
                  std::to_string(before + 1) + " not complete after 200 ms (the GPU completed " +
                  "up to submission " + std::to_string(before) + ")");
    EXPECT_GE(took, milliseconds(200));
    EXPECT_LT(took, milliseconds(5000));
    // The channel setup's words are free: the whole ring less a wrap's tail (under 15 words),
    // in 15-word copy submissions: floor((256 - 14) / 15) = 16 to floor(256 / 15) = 17.
    EXPECT_GE(published, 16u);
    EXPECT_LE(published, 17u);
    // The refused submission took no sequence number; nothing ran on the hung channel.
    EXPECT_EQ(dev->last_sequence(hcq::Engine::kCompute), before + published);
    for (size_t i = 0; i < 40; i++) ASSERT_EQ(rig.dst.get(i), 0u);
    // Still responsive: the next submission fails the same way, the copy channel still runs.
    EXPECT_EQ(submit_copy(*q, rig, 0).code(), StatusCode::kDeadlineExceeded);
    xq->copy(rig.dst.va(39), rig.src.va(39), 8);
    xq->signal(**done, 1);
    ASSERT_TRUE(xq->submit().ok());
    ASSERT_TRUE((*done)->wait(1, milliseconds(5000)).ok());
    EXPECT_EQ(rig.dst.get(39), value_of(39));
    teardown = Clock::now();
  }
  // Teardown waits for the hung channel at most the timeout (the queue, then the device).
  dev.reset();
  EXPECT_LT(Clock::now() - teardown, milliseconds(5000));
}

// A bound queue is patched in place: a second submit waits until the GPU ran the first, even
// outside the timeline. Each submission copies to its own destination; patching early would
// send both copies to the second one.
TEST(NvRing, ABoundQueueIsPatchedOnlyOnceTheGpuRanItsLastSubmission) {
  auto dev = open({.timeout = milliseconds(5000)});
  ASSERT_NE(dev, nullptr);
  CopyRig rig(*dev, 2);
  auto gate = dev->new_signal("gate");
  auto done = dev->new_signal("done");
  ASSERT_TRUE(gate.ok() && done.ok());
  auto q = dev->copy_queue();
  ASSERT_NE(q, nullptr);
  q->wait(**gate, 1);
  q->copy(hcq::Value::sym(0), rig.src.va(0), 8);
  q->signal(**done, hcq::Value::sym(1));
  ASSERT_TRUE(q->bind().ok());
  ASSERT_TRUE(q->submit(std::vector<int64_t>{static_cast<int64_t>(rig.dst.va(0)), 1}).ok());

  std::atomic<bool> second_returned{false}, returned_before_gate{true};
  std::thread opener([&] {
    std::this_thread::sleep_for(milliseconds(150));
    returned_before_gate = second_returned.load();
    (*gate)->set(1);
  });
  Status s = q->submit(std::vector<int64_t>{static_cast<int64_t>(rig.dst.va(1)), 2});
  second_returned = true;
  opener.join();
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_FALSE(returned_before_gate.load());  // the second submit waited for the first run
  ASSERT_TRUE((*done)->wait(2, milliseconds(5000)).ok());
  EXPECT_EQ(rig.dst.get(0), value_of(0));
  EXPECT_EQ(rig.dst.get(1), value_of(0));
}

TEST(NvRing, AResetQueueDoesNotReuseQmdsTheGpuHasNotRun) {
  auto dev = open({});
  ASSERT_NE(dev, nullptr);
  // The kernel stores its scalar at its buffer.
  auto prg =
      mock::mock_program("store", 1, 1, [](const mock::LaunchInfo& li, hcq::Device&, auto& mem) {
        // The program's parameters start at 0x210 (args_prefix()).
        uint64_t at[2];
        if (li.cbank0.size() < 0x210 + sizeof(at))
          return invalid_argument("constant bank 0 too small");
        std::memcpy(at, li.cbank0.data() + 0x210, sizeof(at));
        auto p = mem.resolve(at[0], 8);
        if (!p) return internal("no memory at the buffer");
        std::memcpy(*p, &at[1], 8);
        return Status();
      });
  ASSERT_EQ(prg->args_prefix(), 0x210u);
  HostMem out(*dev, 16), mem1(*dev, 0x220), mem2(*dev, 0x220);
  hcq::ArgsState a1(mem1.buf, 0x210, 1, 1), a2(mem2.buf, 0x210, 1, 1);
  a1.set_buf(0, static_cast<int64_t>(out.va(0)));
  a1.set_var(0, 0x1111);
  a2.set_buf(0, static_cast<int64_t>(out.va(1)));
  a2.set_var(0, 0x2222);
  auto gate = dev->new_signal("gate");
  auto done = dev->new_signal("done");
  ASSERT_TRUE(gate.ok() && done.ok());
  auto q = dev->compute_queue();

  // Two recordings, submitted outside the timeline while the GPU waits for the gate.
  q->wait(**gate, 1).exec(*prg, a1, {1, 1, 1}, {1, 1, 1});
  ASSERT_TRUE(q->submit().ok());
  q->reset();
  size_t used = dev->allocator().used_bytes();
  q->exec(*prg, a2, {1, 1, 1}, {1, 1, 1});
  ASSERT_TRUE(q->submit().ok());
  EXPECT_GT(dev->allocator().used_bytes(), used);  // a fresh QMD chunk, not the first one's
  EXPECT_EQ(out.get(0), 0u);                       // held back
  EXPECT_EQ(out.get(1), 0u);
  (*gate)->set(1);
  q->reset();
  q->signal(**done, 1);
  ASSERT_TRUE(q->submit().ok());
  ASSERT_TRUE((*done)->wait(1, milliseconds(10000)).ok());
  // Each launch ran its own QMD.
  EXPECT_EQ(out.get(0), 0x1111u);
  EXPECT_EQ(out.get(1), 0x2222u);
  // Once the GPU ran them, a retired chunk is reused.
  q->reset();
  used = dev->allocator().used_bytes();
  q->exec(*prg, a1, {1, 1, 1}, {1, 1, 1});
  EXPECT_EQ(dev->allocator().used_bytes(), used);
  q->reset();
}

}  // namespace
}  // namespace baregrad::nv
