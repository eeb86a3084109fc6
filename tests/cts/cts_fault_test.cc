// The HCQ conformance suite, continued: faults and the sticky error state, concurrent
// submitters, and the allocator, on every backend (tests/cts/backends.cc).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/format.h"
#include "drivers/cpu/device.h"
#include "hcq/hcq.h"
#include "tests/cts/backends.h"

namespace baregrad::cts {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;

class CtsFault : public Cts {};
class CtsAllocator : public Cts {};

// ---- faults --------------------------------------------------------------------------------

TEST_P(CtsFault, CopyFromAnUnmappedAddressFailsTheDeviceForever) {
  CTS_REQUIRE("execution");
  constexpr uint64_t kUnmapped = 0xdead0;  // in no allocation of any device
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Device * dev2, open_another());
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer dst, alloc(64));
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer dst2, alloc(*dev2, 16));
  auto prg = program(*dev2, "add_one", add_one, {16}, 0);
  CTS_ASSERT_OK_AND_ASSIGN(hcq::ArgsState * args2, args_for(*dev2, *prg));
  auto q = copy_or_compute_queue(dev());
  // A symbolic source: a constant one would be refused when recorded (CtsBadInput).
  std::vector<int64_t> vars{static_cast<int64_t>(kUnmapped)};
  CTS_ASSERT_OK(dev().submit_on_timeline(
      *q, [&](hcq::HwQueue& hq) { hq.copy(va_of(dst), hcq::Value::sym(0), 64); }, vars));
  Status err = dev().synchronize(5000ms);
  ASSERT_FALSE(err.ok());
  EXPECT_THAT(err.message(), HasSubstr("MMU fault"));
  EXPECT_THAT(err.message(), HasSubstr(hex(kUnmapped)));
  expect_sticky(dev(), err, dst);
  CTS_EXPECT_OK(dev2->error());
  expect_works(*dev2, *prg, *args2, dst2);
}

TEST_P(CtsFault, CopyFromAFreedBufferFaults) {
  CTS_REQUIRE("execution");
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer dst, alloc(4096));
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer gone, dev().allocator().alloc(4096, {.nolru = true}));
  dev().allocator().free(gone);
  auto q = copy_or_compute_queue(dev());
  std::vector<int64_t> vars{va_of(gone)};
  CTS_ASSERT_OK(dev().submit_on_timeline(
      *q, [&](hcq::HwQueue& hq) { hq.copy(va_of(dst), hcq::Value::sym(0), 4096); }, vars));
  Status err = dev().synchronize(5000ms);
  ASSERT_FALSE(err.ok());
  EXPECT_THAT(err.message(), HasSubstr("MMU fault"));
  EXPECT_THAT(err.message(), HasSubstr(hex(gone.va)));
  expect_sticky(dev(), err, dst);
}

TEST_P(CtsFault, KernelReachingPastItsBufferFaults) {
  CTS_REQUIRE("execution");
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer small, alloc(64));
  auto prg = program("cts_overreach", add_one, {4096}, 0);
  CTS_ASSERT_OK_AND_ASSIGN(hcq::ArgsState * args, args_for(*prg));
  args->set_buf(0, va_of(small));
  auto q = dev().compute_queue();
  CTS_ASSERT_OK(
      dev().submit_on_timeline(*q, [&](hcq::HwQueue& hq) { launch(hq, *prg, *args, 16); }));
  Status err = dev().synchronize(5000ms);
  ASSERT_FALSE(err.ok());
  EXPECT_THAT(err.message(), HasSubstr("MMU fault"));
  EXPECT_THAT(err.message(), HasSubstr("cts_overreach"));
  EXPECT_THAT(err.message(), HasSubstr(hex(small.va)));
  expect_sticky(dev(), err, small);
}

TEST_P(CtsFault, StuckQueueWaitFaultsAfterTheQueueTimeout) {
  auto* cpu = dynamic_cast<cpu::Device*>(&dev());
  if (!cpu) GTEST_SKIP() << GetParam().name << " has no queue timeout (cpu::Device)";
  cpu->set_queue_timeout(100ms);
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer buf, alloc(64));
  CTS_ASSERT_OK_AND_ASSIGN(auto never, dev().new_signal("cts never set", 3));
  auto q = dev().compute_queue();
  CTS_ASSERT_OK(dev().submit_on_timeline(*q, [&](hcq::HwQueue& hq) { hq.wait(*never, 1234); }));
  auto t0 = Clock::now();
  Status err = dev().synchronize();  // the default host timeout: 30 s
  double ms = ms_since(t0);
  EXPECT_EQ(err.code(), StatusCode::kDeadlineExceeded) << err;
  EXPECT_THAT(err.message(), HasSubstr("compute queue of CPU"));
  EXPECT_THAT(err.message(), HasSubstr("cts never set"));
  EXPECT_THAT(err.message(), HasSubstr("1234"));
  EXPECT_THAT(err.message(), HasSubstr("saw 3"));
  EXPECT_LT(ms, 5000) << "the host learnt of the hang from the queue, not its own timeout";
  expect_sticky(dev(), err, buf);
}

// A kernel that never returns, writing its buffer as it spins.
void spin_forever(void* const* bufs, const int64_t*, int64_t, int64_t) {
  auto* p = static_cast<volatile uint64_t*>(bufs[0]);
  for (;;) p[0] = p[0] + 1;
}

// A kernel whose items each take 20 ms: slow, but every finished item is progress.
void slow_items(void* const* bufs, const int64_t*, int64_t lo, int64_t hi) {
  auto* p = static_cast<volatile uint64_t*>(bufs[0]);
  for (int64_t i = lo; i < hi; i++) {
    std::this_thread::sleep_for(20ms);
    p[0] = p[0] + 1;
  }
}

// A kernel running longer than the wait's timeout is not a hang while its items finish
// (HANG_TIMEOUT_MS counts time without progress): 40 items of 20 ms under a 200 ms timeout.
TEST(CpuHang, ALongKernelWhoseItemsFinishIsNotAHang) {
  auto dev = std::move(cpu::Device::create(1).value());
  hcq::Buffer buf = dev->allocator().alloc(4096, {.nolru = true}).value();
  auto prg = std::make_unique<cpu::Program>("slow_items", slow_items, std::vector<size_t>{4096}, 0);
  hcq::Buffer mem =
      dev->allocator().alloc(prg->args_prefix() + 8, {.host = true, .cpu_access = true}).value();
  hcq::ArgsState args(mem, prg->args_prefix(), 1, 0);
  args.set_buf(0, buf.va);
  std::memset(reinterpret_cast<void*>(buf.va), 0, 8);
  auto q = dev->compute_queue();
  ASSERT_TRUE(dev->submit_on_timeline(
                     *q, [&](hcq::HwQueue& hq) { hq.exec(*prg, args, {40, 1, 1}, {1, 1, 1}); })
                  .ok());
  Status s = dev->synchronize(200ms);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(*reinterpret_cast<const uint64_t*>(buf.va), 40u);
  dev->allocator().free(buf);
  dev->allocator().free(mem);
}

// Records each call's range: how the engine split a launch.
std::atomic<int> g_calls{0};
std::atomic<int64_t> g_items{0}, g_widest{0};
void count_calls(void* const*, const int64_t*, int64_t lo, int64_t hi) {
  g_calls++;
  g_items += hi - lo;
  int64_t w = g_widest.load();
  while (hi - lo > w && !g_widest.compare_exchange_weak(w, hi - lo)) {
  }
}

// A serial program (one too small to repay waking a worker: cpu::Device::load_program decides
// from the compiler's estimates) runs its items as one range on the engine's thread; another
// is split over the pool's threads in chunks.
TEST(CpuEngine, SerialProgramsRunTheirItemsInOneCall) {
  auto dev = std::move(cpu::Device::create(2).value());
  for (bool serial : {true, false}) {
    g_calls = 0;
    g_items = 0;
    g_widest = 0;
    cpu::Program prg("count_calls", count_calls, std::vector<size_t>{0}, 0, nullptr, serial);
    hcq::Buffer mem =
        dev->allocator().alloc(prg.args_prefix() + 8, {.host = true, .cpu_access = true}).value();
    hcq::ArgsState args(mem, prg.args_prefix(), 1, 0);
    args.set_buf(0, 0);
    auto q = dev->compute_queue();
    ASSERT_TRUE(dev->submit_on_timeline(
                       *q, [&](hcq::HwQueue& hq) { hq.exec(prg, args, {8, 1, 1}, {1, 1, 1}); })
                    .ok());
    ASSERT_TRUE(dev->synchronize(5s).ok());
    EXPECT_EQ(g_items.load(), 8);
    EXPECT_EQ(g_calls.load(), serial ? 1 : 8) << serial;
    EXPECT_EQ(g_widest.load(), serial ? 8 : 1) << serial;
    dev->allocator().free(mem);
  }
}

// Which thread ran the kernel last.
std::atomic<std::thread::id> g_ran_on;
void note_thread(void* const*, const int64_t*, int64_t, int64_t) {
  g_ran_on = std::this_thread::get_id();
}

// A small submission (its waits met, its kernels serial) on an idle engine runs on the
// submitting thread: done when submit returns, without a handoff to the worker and back. Any
// other runs on the engine's worker, in order behind what the ring still holds.
TEST(CpuEngine, SmallSubmissionsOnAnIdleEngineRunOnTheSubmittingThread) {
  auto dev = std::move(cpu::Device::create(2).value());
  auto sig = dev->new_signal("cts inline").value();
  auto gate = dev->new_signal("cts gate").value();
  auto args_for = [&](const cpu::Program& prg) {
    hcq::Buffer mem =
        dev->allocator().alloc(prg.args_prefix() + 8, {.host = true, .cpu_access = true}).value();
    auto args = std::make_unique<hcq::ArgsState>(mem, prg.args_prefix(), 1, 0);
    args->set_buf(0, 0);
    return std::pair{mem, std::move(args)};
  };
  cpu::Program serial("note_thread", note_thread, std::vector<size_t>{0}, 0, nullptr, true);
  cpu::Program pooled("note_thread", note_thread, std::vector<size_t>{0}, 0, nullptr, false);
  auto [mem_s, args_s] = args_for(serial);
  auto [mem_p, args_p] = args_for(pooled);
  auto q = dev->compute_queue();
  const auto me = std::this_thread::get_id();
  uint64_t v = 0;
  auto submit = [&](const cpu::Program& prg, const hcq::ArgsState& args, uint64_t wait_for) {
    q->reset();
    q->wait(*gate, wait_for).exec(prg, args, {1, 1, 1}, {1, 1, 1}).signal(*sig, ++v);
    ASSERT_TRUE(q->submit().ok());
  };
  // Serial, waits met, engine idle: run here, finished on return.
  g_ran_on = std::thread::id();
  submit(serial, *args_s, 0);
  EXPECT_EQ(sig->value(), v);
  EXPECT_EQ(g_ran_on.load(), me);
  // A pooled kernel goes to the worker (the engine thread takes the first share).
  submit(pooled, *args_p, 0);
  ASSERT_TRUE(sig->wait(v, 5s).ok());
  EXPECT_NE(g_ran_on.load(), me);
  // An unmet wait goes to the worker, and a serial kernel behind it (the ring is not empty)
  // waits its turn there rather than overtaking it.
  submit(serial, *args_s, 1);
  uint64_t gated = v;
  submit(serial, *args_s, 0);
  std::this_thread::sleep_for(20ms);
  EXPECT_LT(sig->value(), gated);  // neither ran: the second is behind the first
  gate->set(1);
  ASSERT_TRUE(sig->wait(v, 5s).ok());
  EXPECT_NE(g_ran_on.load(), me);
  dev->allocator().free(mem_s);
  dev->allocator().free(mem_p);
}

// When the host gives up on a kernel (a hang), the CPU device fails; freeing the buffer the
// kernel still writes and destroying the device must neither crash the kernel nor wait for it: what
// the hung work uses is left to the process's exit. Run in a child process (the kernel spins until
// that process exits).
TEST(CpuHang, AHungKernelKeepsItsMemoryAndTheDeviceDiesWithoutWaitingForIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        auto dev = std::move(cpu::Device::create(1).value());
        hcq::Buffer buf = dev->allocator().alloc(4096, {.nolru = true}).value();
        auto prg = std::make_unique<cpu::Program>("spin_forever", spin_forever,
                                                  std::vector<size_t>{4096}, 0);
        hcq::Buffer mem = dev->allocator()
                              .alloc(prg->args_prefix() + 8, {.host = true, .cpu_access = true})
                              .value();
        hcq::ArgsState args(mem, prg->args_prefix(), 1, 0);
        args.set_buf(0, buf.va);
        auto q = dev->compute_queue();
        auto launched = dev->submit_on_timeline(
            *q, [&](hcq::HwQueue& hq) { hq.exec(*prg, args, {1, 1, 1}, {1, 1, 1}); });
        if (!launched.ok()) std::_Exit(2);
        if (dev->synchronize(200ms).ok() || !dev->failed()) std::_Exit(3);
        if (!dev->abandoned()) std::_Exit(4);
        dev->allocator().free(buf);
        (void)prg.release();  // a launch's program outlives it (HcqDevice keeps it in flight)
        auto t0 = Clock::now();
        dev.reset();
        if (Clock::now() - t0 > 10s) std::_Exit(5);
        std::this_thread::sleep_for(100ms);  // the kernel goes on writing `buf` meanwhile
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_P(CtsFault, RefusedSubmissionLeavesNoHoleInTheTimeline) {
  auto* cpu = dynamic_cast<cpu::Device*>(&dev());
  if (!cpu) GTEST_SKIP() << GetParam().name << ": fills the ring of a cpu::Device";
  cpu->set_queue_timeout(100ms);
  CTS_ASSERT_OK_AND_ASSIGN(auto gate, dev().new_signal("cts gate"));
  auto q = dev().compute_queue();
  constexpr uint64_t kOpen = uint64_t{1} << 40;
  // The first submission stalls on the gate, which keeps moving so that the wait does not time
  // out; the submissions behind it fill the ring until publishing one times out.
  CTS_ASSERT_OK(dev().submit_on_timeline(*q, [&](hcq::HwQueue& hq) { hq.wait(*gate, kOpen); }));
  std::atomic<bool> stop{false};
  std::thread ticker([&] {
    while (!stop.load()) {
      gate->set(gate->value() + 1);
      std::this_thread::sleep_for(10ms);
    }
  });
  Status refused;
  for (int i = 0; i < 100000 && refused.ok(); i++)
    refused = dev().submit_on_timeline(*q, [](hcq::HwQueue&) {}).status();
  stop.store(true);
  ticker.join();
  ASSERT_FALSE(refused.ok()) << "the ring never filled";
  gate->set(kOpen);
  // Either the refusal failed the device, or the device recovers once the queue drains.
  if (!dev().failed()) {
    CTS_EXPECT_OK(dev().synchronize(2000ms));
    CTS_EXPECT_OK(dev().error());
  }
}

TEST_P(CtsFault, SetErrorIsStickyAndTheFirstErrorWins) {
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer buf, alloc(64));
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Device * dev2, open_another());
  CTS_EXPECT_OK(dev().error());
  dev().set_error(internal("cts first fault"));
  dev().set_error(aborted("cts second fault"));
  Status err = dev().error();
  EXPECT_EQ(err.code(), StatusCode::kInternal) << err;
  EXPECT_THAT(err.message(), HasSubstr("cts first fault"));
  EXPECT_THAT(err.message(), Not(HasSubstr("cts second fault")));
  EXPECT_THAT(err.message(), HasSubstr(dev().name())) << "the error names the device";
  expect_sticky(dev(), err, buf);
  auto q = dev2->compute_queue();
  CTS_EXPECT_OK(dev2->submit_on_timeline(*q, [](hcq::HwQueue&) {}));
  CTS_EXPECT_OK(dev2->synchronize(5000ms));
}

// ---- concurrency ---------------------------------------------------------------------------

class CtsConcurrency : public Cts {
 protected:
  // Two threads, each submitting kPerThread launches of `increment` on its own counter through
  // its own queue, then synchronizing. Checks the timeline values they got.
  static constexpr int kPerThread = 500;
  void two_submitters(std::vector<int64_t>* counters) {
    auto prg = program("increment", increment, {8}, 0);
    hcq::ArgsState* args[2];
    hcq::Buffer bufs[2];
    for (int t = 0; t < 2; t++) {
      int64_t zero = 0;
      CTS_ASSERT_OK_AND_ASSIGN(bufs[t], alloc(8));
      CTS_ASSERT_OK(dev().allocator().copy_in(bufs[t], &zero, 8));
      CTS_ASSERT_OK_AND_ASSIGN(args[t], args_for(*prg));
      args[t]->set_buf(0, va_of(bufs[t]));
    }
    CTS_ASSERT_OK(dev().synchronize());
    uint64_t first = dev().timeline_value();
    std::vector<uint64_t> got[2];
    Status st[2];
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; t++) {
      threads.emplace_back([&, t] {
        auto q = dev().compute_queue();
        for (int i = 0; i < kPerThread && st[t].ok(); i++) {
          auto v = dev().submit_on_timeline(*q, [&](hcq::HwQueue& hq) {
            launch(hq, *prg, *args[t], 1);
            std::this_thread::yield();  // invites the other submitter in while recording
          });
          if (v.ok()) got[t].push_back(*v);
          st[t] = v.status();
        }
        if (st[t].ok()) st[t] = dev().synchronize(10000ms);
      });
    }
    for (auto& th : threads) th.join();
    CTS_ASSERT_OK(st[0]);
    CTS_ASSERT_OK(st[1]);
    std::vector<uint64_t> all;
    for (int t = 0; t < 2; t++) {
      EXPECT_TRUE(std::is_sorted(got[t].begin(), got[t].end())) << "thread " << t;
      all.insert(all.end(), got[t].begin(), got[t].end());
    }
    std::sort(all.begin(), all.end());
    std::vector<uint64_t> want(2 * kPerThread);
    std::iota(want.begin(), want.end(), first);
    EXPECT_EQ(all, want) << "each value handed out exactly once";
    EXPECT_EQ(dev().timeline_value(), first + 2 * kPerThread);
    EXPECT_EQ(dev().timeline().value(), first + 2 * kPerThread - 1);
    for (int t = 0; t < 2; t++) {
      int64_t c = -1;
      CTS_ASSERT_OK(dev().allocator().copy_out(&c, bufs[t], 8));
      counters->push_back(c);
    }
  }
};

TEST_P(CtsConcurrency, TwoSubmittersGetEveryTimelineValueOnce) {
  std::vector<int64_t> counters;
  two_submitters(&counters);
}

TEST_P(CtsConcurrency, TwoSubmittersKernelsCountExactly) {
  CTS_REQUIRE("execution");
  std::vector<int64_t> counters;
  two_submitters(&counters);
  EXPECT_EQ(counters, (std::vector<int64_t>{kPerThread, kPerThread}));
}

TEST_P(CtsConcurrency, TwoThreadsCopyThroughTheStagingBuffersAtOnce) {
  CTS_REQUIRE("execution");
  constexpr int kRounds = 8;
  const size_t sizes[2] = {kMiB + 3, 5 * kMiB + 1};
  hcq::Buffer bufs[2];
  for (int t = 0; t < 2; t++) {
    CTS_ASSERT_OK_AND_ASSIGN(bufs[t], alloc(sizes[t]));
  }
  std::atomic<int> mismatches{0};
  Status st[2];
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; t++) {
    threads.emplace_back([&, t] {
      std::vector<uint8_t> out(sizes[t]);
      for (int r = 0; r < kRounds && st[t].ok(); r++) {
        auto data = random_bytes(sizes[t], 100 * t + r);
        st[t] = dev().allocator().copy_in(bufs[t], data.get(), sizes[t]);
        if (st[t].ok()) st[t] = dev().allocator().copy_out(out.data(), bufs[t], sizes[t]);
        if (st[t].ok() && std::memcmp(out.data(), data.get(), sizes[t]) != 0) mismatches++;
      }
    });
  }
  for (auto& th : threads) th.join();
  CTS_EXPECT_OK(st[0]);
  CTS_EXPECT_OK(st[1]);
  EXPECT_EQ(mismatches.load(), 0);
}

// ---- the allocator -------------------------------------------------------------------------

TEST_P(CtsAllocator, FreedBufferIsReusedForTheSameSizeAndSpec) {
  hcq::Allocator& al = dev().allocator();
  constexpr size_t kN = 12347;
  size_t cached0 = al.cached_bytes(), used0 = al.used_bytes();
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer b, al.alloc(kN));
  EXPECT_EQ(al.used_bytes(), used0 + kN);
  al.free(b);
  EXPECT_EQ(al.used_bytes(), used0);
  EXPECT_EQ(al.cached_bytes(), cached0 + kN);
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer again, al.alloc(kN));
  EXPECT_EQ(again.va, b.va) << "the cached buffer was not reused";
  EXPECT_EQ(al.cached_bytes(), cached0);
  EXPECT_EQ(al.used_bytes(), used0 + kN);
  al.free(again);
  // Another size or spec must not get the cached buffer.
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer smaller, al.alloc(kN - 1));
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer host, al.alloc(kN, {.host = true, .cpu_access = true}));
  EXPECT_NE(smaller.va, b.va);
  EXPECT_NE(host.va, b.va);
  EXPECT_NE(host.cpu, nullptr) << "cpu_access memory has a CPU mapping";
  EXPECT_EQ(al.cached_bytes(), cached0 + kN);
  al.free(smaller);
  al.free(host);
  EXPECT_EQ(al.cached_bytes(), cached0 + 3 * kN - 1);
  EXPECT_EQ(al.used_bytes(), used0);
}

TEST_P(CtsAllocator, NolruBuffersAndClearCacheReleaseMemory) {
  hcq::Allocator& al = dev().allocator();
  size_t cached0 = al.cached_bytes(), used0 = al.used_bytes();
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer b, al.alloc(3 * 4096, {.nolru = true}));
  al.free(b);
  EXPECT_EQ(al.cached_bytes(), cached0) << "a nolru buffer was cached";
  EXPECT_EQ(al.used_bytes(), used0);
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer c, al.alloc(5000));
  al.free(c);
  EXPECT_EQ(al.cached_bytes(), cached0 + 5000);
  CTS_EXPECT_OK(al.clear_cache());
  EXPECT_EQ(al.cached_bytes(), 0u);
  EXPECT_EQ(al.used_bytes(), used0);
}

TEST_P(CtsAllocator, AllocOfZeroBytesIsInvalidArgument) {
  auto b = dev().allocator().alloc(0);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument) << b.status();
  CTS_EXPECT_OK(dev().error());
}

TEST_P(CtsAllocator, HostCopyPastTheBufferIsInvalidArgumentNamingSizes) {
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer buf, alloc(100));
  std::vector<uint8_t> host(200);
  uint64_t v0 = dev().timeline_value();
  for (Status s : {dev().allocator().copy_in(buf, host.data(), 101),
                   dev().allocator().copy_out(host.data(), buf, 101)}) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr("101"));
    EXPECT_THAT(s.message(), HasSubstr("100"));
  }
  Status s = dev().allocator().copy_in(buf.view(10, 50), host.data(), 51);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("51"));
  EXPECT_EQ(dev().timeline_value(), v0) << "a refused copy submitted work";
  CTS_EXPECT_OK(dev().error());  // a caller's mistake does not fault the device
}

TEST_P(CtsAllocator, ConcurrentAllocationsGetDistinctAddresses) {
  constexpr int kPerThread = 10000;
  constexpr size_t kBytes = 4096;
  hcq::Allocator& al = dev().allocator();
  size_t used0 = al.used_bytes();
  std::vector<hcq::Buffer> got[2];
  Status st[2];
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; t++) {
    threads.emplace_back([&, t] {
      ready++;
      while (ready.load() < 2) std::this_thread::yield();
      for (int i = 0; i < kPerThread && st[t].ok(); i++) {
        auto b = al.alloc(kBytes);
        if (b.ok()) got[t].push_back(*b);
        st[t] = b.status();
      }
    });
  }
  for (auto& th : threads) th.join();
  CTS_EXPECT_OK(st[0]);
  CTS_EXPECT_OK(st[1]);
  std::map<uint64_t, hcq::Buffer> distinct;
  for (const auto& v : got)
    for (const hcq::Buffer& b : v) distinct.emplace(b.va, b);
  EXPECT_EQ(distinct.size(), 2u * kPerThread) << "two live buffers share an address";
  EXPECT_EQ(al.used_bytes(), used0 + 2 * kPerThread * kBytes);
  for (const auto& [va, b] : distinct) al.free(b);
}

TEST_P(CtsAllocator, FindReturnsTheMappedAllocationHoldingAnAddress) {
  hcq::Allocator& al = dev().allocator();
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer b, al.alloc(1000));
  for (uint64_t off : {0, 1, 999}) {
    auto f = al.find(b.va + off);
    ASSERT_TRUE(f.has_value()) << "offset " << off;
    EXPECT_EQ(f->va, b.va);
    EXPECT_EQ(f->size, 1000u);
  }
  EXPECT_FALSE(al.find(b.va + 1000).has_value()) << "one past the end";
  al.free(b);
  EXPECT_TRUE(al.find(b.va + 1).has_value()) << "a cached buffer is still mapped";
  CTS_ASSERT_OK(al.clear_cache());
  EXPECT_FALSE(al.find(b.va + 1).has_value()) << "clear_cache() unmapped it";
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer gone, al.alloc(1000, {.nolru = true}));
  al.free(gone);
  EXPECT_FALSE(al.find(gone.va + 1).has_value()) << "a freed nolru buffer is unmapped";
}
CTS_INSTANTIATE(CtsFault);
CTS_INSTANTIATE(CtsConcurrency);
CTS_INSTANTIATE(CtsAllocator);

}  // namespace
}  // namespace baregrad::cts
