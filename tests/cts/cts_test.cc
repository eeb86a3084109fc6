// The HCQ conformance suite: the contract of hcq/hcq.h, written once and run on every backend
// (tests/cts/backends.cc). Tests needing what a backend lacks skip with the backend's reason.

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

#include "drivers/cpu/device.h"
#include "hcq/hcq.h"
#include "tests/cts/backends.h"

namespace baregrad::cts {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr size_t kMiB = 1 << 20;
constexpr uint64_t kWrap = 1ull << 31;

class CtsSignal : public Cts {};
class CtsQueue : public Cts {};
class CtsTimeline : public Cts {};
class CtsExec : public Cts {};
class CtsCopy : public Cts {};
class CtsFault : public Cts {};
class CtsAllocator : public Cts {};

// ---- devices -------------------------------------------------------------------------------

class CtsDeathTest : public Cts {};

TEST_P(CtsDeathTest, DestroyWithCachedBuffersIsClean) {
  // The usual end of a device: freed buffers still sit in the LRU cache.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const Backend& backend = GetParam();
  EXPECT_EXIT(
      {
        auto d = backend.open();
        if (!d.ok()) std::_Exit(2);
        auto b = (*d)->allocator().alloc(4096);
        if (!b.ok()) std::_Exit(3);
        (*d)->allocator().free(*b);
        d->reset();
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

// ---- signals -------------------------------------------------------------------------------

TEST_P(CtsSignal, SetValueAndWaitForReachedValues) {
  CTS_ASSERT_OK_AND_ASSIGN(auto s, dev().new_signal("cts set", 5));
  EXPECT_EQ(s->name(), "cts set");
  EXPECT_EQ(s->value(), 5u);
  s->set(9);
  EXPECT_EQ(s->value(), 9u);
  CTS_EXPECT_OK(s->wait(9, 50ms));
  CTS_EXPECT_OK(s->wait(4, 50ms));  // >=, not ==
  EXPECT_EQ(s->timestamp_ns(), 0u) << "a new signal has no timestamp";
}

TEST_P(CtsSignal, WaitTimesOutNamingSignalExpectedAndSeen) {
  CTS_ASSERT_OK_AND_ASSIGN(auto s, dev().new_signal("cts never reached", 7654));
  auto t0 = Clock::now();
  Status st = s->wait(1234567, 50ms);
  double ms = ms_since(t0);
  EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded) << st;
  EXPECT_THAT(st.message(), HasSubstr("cts never reached"));
  EXPECT_THAT(st.message(), HasSubstr("1234567"));
  EXPECT_THAT(st.message(), HasSubstr("7654"));
  EXPECT_GE(ms, 50);
  EXPECT_LT(ms, 2000);
  CTS_EXPECT_OK(dev().error());  // a host wait on a CPU-owned signal does not fault the device
}

TEST_P(CtsSignal, WaitTimeoutRestartsOnProgress) {
  CTS_ASSERT_OK_AND_ASSIGN(auto s, dev().new_signal("cts ticking"));
  std::thread ticker([&s] {
    for (int i = 0; i < 15; i++) {
      std::this_thread::sleep_for(20ms);
      s->set(s->value() + 1);
    }
  });
  auto t0 = Clock::now();
  Status st = s->wait(15, 100ms);
  double ms = ms_since(t0);
  ticker.join();
  CTS_EXPECT_OK(st);
  EXPECT_GE(ms, 250) << "the wait outlived its 100 ms timeout only through progress";
}

TEST_P(CtsSignal, WaitReturnsTheDeviceErrorPromptly) {
  CTS_ASSERT_OK_AND_ASSIGN(auto s, dev().new_signal("cts never set"));
  Status st;
  double ms = 0;
  std::thread waiter([&] {
    auto t0 = Clock::now();
    st = s->wait(1);  // the default 30 s timeout
    ms = ms_since(t0);
  });
  std::this_thread::sleep_for(20ms);
  dev().set_error(internal("cts injected fault"));
  waiter.join();
  EXPECT_EQ(st.code(), StatusCode::kInternal) << st;
  EXPECT_THAT(st.message(), HasSubstr("cts injected fault"));
  EXPECT_LT(ms, 5000);
}

TEST_P(CtsSignal, PoolGivesEachLiveSignalItsOwnNamedSlot) {
  constexpr int kSignals = 300;  // more than one 4 KiB page of 16-byte slots
  std::vector<std::unique_ptr<hcq::Signal>> sigs;
  std::set<uint64_t> vas;
  for (int i = 0; i < kSignals; i++) {
    CTS_ASSERT_OK_AND_ASSIGN(auto s, dev().new_signal("cts pool " + std::to_string(i), i));
    EXPECT_EQ(s->va() % 16, 0u);
    vas.insert(s->va());
    sigs.push_back(std::move(s));
  }
  EXPECT_EQ(vas.size(), static_cast<size_t>(kSignals));
  for (int i = 0; i < kSignals; i++) EXPECT_EQ(sigs[i]->value(), static_cast<uint64_t>(i));
  for (int i = 0; i < kSignals; i++) sigs[i]->set(1000 + i);
  for (int i = 0; i < kSignals; i++) {
    EXPECT_EQ(sigs[i]->value(), static_cast<uint64_t>(1000 + i)) << i;
    EXPECT_EQ(dev().signal_name(sigs[i]->va()), "cts pool " + std::to_string(i));
  }
  uint64_t freed = sigs[7]->va();
  sigs[7].reset();
  vas.erase(freed);
  EXPECT_EQ(dev().signal_name(freed), "?");
  CTS_ASSERT_OK_AND_ASSIGN(auto again, dev().new_signal("cts recycled", 42));
  EXPECT_EQ(again->value(), 42u) << "a recycled slot starts at its new initial value";
  EXPECT_EQ(vas.count(again->va()), 0u) << "a new signal shares a slot with a live one";
  EXPECT_EQ(dev().signal_name(again->va()), "cts recycled");
}

// ---- queues --------------------------------------------------------------------------------

TEST_P(CtsQueue, WaitStallsTheQueueUntilTheSignalIsReached) {
  CTS_REQUIRE("execution");
  CTS_ASSERT_OK_AND_ASSIGN(auto a, dev().new_signal("cts gate"));
  CTS_ASSERT_OK_AND_ASSIGN(auto b, dev().new_signal("cts after gate"));
  auto q = dev().compute_queue();
  q->wait(*a, 1).signal(*b, 7);
  CTS_ASSERT_OK(q->submit());
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(b->value(), 0u) << "the queue went past a wait for a value not reached";
  a->set(1);
  CTS_EXPECT_OK(b->wait(7, 5000ms));
  EXPECT_EQ(b->value(), 7u);
}

TEST_P(CtsQueue, ComputeQueueWaitsForTheCopyQueue) {
  CTS_REQUIRE("execution");
  auto xq = dev().copy_queue();
  if (!xq) GTEST_SKIP() << GetParam().name << " has no copy engine";
  constexpr int kN = 10007;
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer src, alloc(kN * 4));
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer dst, alloc(kN * 4));
  std::vector<int32_t> host(kN), zeros(kN, 0), out(kN);
  std::iota(host.begin(), host.end(), 100);
  CTS_ASSERT_OK(dev().allocator().copy_in(src, host.data(), kN * 4));
  CTS_ASSERT_OK(dev().allocator().copy_in(dst, zeros.data(), kN * 4));
  CTS_ASSERT_OK(dev().synchronize());

  auto prg = program("add_one", add_one, {kN * 4}, 0);
  CTS_ASSERT_OK_AND_ASSIGN(hcq::ArgsState * args, args_for(*prg));
  args->set_buf(0, va_of(dst));
  CTS_ASSERT_OK_AND_ASSIGN(auto copied, dev().new_signal("cts copied"));
  CTS_ASSERT_OK_AND_ASSIGN(auto added, dev().new_signal("cts added"));
  auto cq = dev().compute_queue();
  cq->wait(*copied, 1);
  launch(*cq, *prg, *args, kN);
  cq->signal(*added, 1);
  CTS_ASSERT_OK(cq->submit());
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(added->value(), 0u) << "the compute queue did not wait for the copy queue";

  xq->copy(va_of(dst), va_of(src), kN * 4).signal(*copied, 1);
  CTS_ASSERT_OK(xq->submit());
  CTS_ASSERT_OK(added->wait(1, 5000ms));
  CTS_ASSERT_OK(dev().allocator().copy_out(out.data(), dst, kN * 4));
  for (int i = 0; i < kN; i++) ASSERT_EQ(out[i], 101 + i) << "element " << i;
}

TEST_P(CtsQueue, QueueWaitsOnAnotherDevicesSignal) {
  CTS_REQUIRE("execution");
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Device * dev2, open_another());
  CTS_ASSERT_OK_AND_ASSIGN(auto gate, dev().new_signal("cts gate"));
  CTS_ASSERT_OK_AND_ASSIGN(auto first, dev().new_signal("cts first device done"));
  CTS_ASSERT_OK_AND_ASSIGN(auto second, dev2->new_signal("cts second device done"));
  auto q1 = dev().compute_queue();
  auto q2 = dev2->compute_queue();
  q2->wait(*first, 1).signal(*second, 2);
  CTS_ASSERT_OK(q2->submit());
  q1->wait(*gate, 1).signal(*first, 1);
  CTS_ASSERT_OK(q1->submit());
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(first->value(), 0u);
  EXPECT_EQ(second->value(), 0u) << "the second device did not wait for the first one's signal";
  gate->set(1);
  CTS_EXPECT_OK(second->wait(2, 5000ms));
  EXPECT_EQ(first->value(), 1u);
}

TEST_P(CtsQueue, TimestampsAreWrittenInQueueOrder) {
  CTS_REQUIRE("execution");
  CTS_ASSERT_OK_AND_ASSIGN(auto t1, dev().new_signal("cts before gate"));
  CTS_ASSERT_OK_AND_ASSIGN(auto t2, dev().new_signal("cts after gate"));
  CTS_ASSERT_OK_AND_ASSIGN(auto gate, dev().new_signal("cts gate"));
  CTS_ASSERT_OK_AND_ASSIGN(auto done, dev().new_signal("cts done"));
  auto q = dev().compute_queue();
  q->timestamp(*t1).wait(*gate, 1).timestamp(*t2).signal(*done, 1);
  CTS_ASSERT_OK(q->submit());
  auto t0 = Clock::now();
  while (t1->timestamp_ns() == 0 && ms_since(t0) < 5000) std::this_thread::sleep_for(1ms);
  ASSERT_NE(t1->timestamp_ns(), 0u) << "the first timestamp was never written";
  std::this_thread::sleep_for(30ms);
  EXPECT_EQ(t2->timestamp_ns(), 0u) << "a timestamp was written before the wait ahead of it";
  gate->set(1);
  CTS_ASSERT_OK(done->wait(1, 5000ms));
  EXPECT_GE(t2->timestamp_ns(), t1->timestamp_ns() + 30'000'000) << "timestamps are in ns";
  EXPECT_EQ(t1->value(), 0u) << "timestamp() wrote the signal's value";
}

TEST_P(CtsQueue, SubmitPatchesSymbolicSignalValues) {
  CTS_ASSERT_OK_AND_ASSIGN(auto s, dev().new_signal("cts replayed"));
  for (bool bound : {false, true}) {
    auto q = dev().compute_queue();
    q->signal(*s, hcq::Value::sym(1));
    if (bound) CTS_ASSERT_OK(q->bind());
    SCOPED_TRACE(bound ? "bound" : "unbound");
    for (int64_t v : std::vector<int64_t>{5, 1000000007, 17, int64_t{1} << 40}) {
      s->set(0);
      CTS_ASSERT_OK(q->submit(std::vector<int64_t>{-1, v}));
      CTS_ASSERT_OK(s->wait(static_cast<uint64_t>(v), 5000ms));
      EXPECT_EQ(s->value(), static_cast<uint64_t>(v));
    }
  }
}

// ---- the timeline --------------------------------------------------------------------------

TEST_P(CtsTimeline, SubmissionsGetConsecutiveValues) {
  auto cq = dev().compute_queue();
  auto xq = copy_or_compute_queue(dev());
  uint64_t first = dev().timeline_value();
  for (uint64_t i = 0; i < 6; i++) {
    hcq::HwQueue& q = i % 2 ? *xq : *cq;
    CTS_ASSERT_OK_AND_ASSIGN(uint64_t v, dev().submit_on_timeline(q, [](hcq::HwQueue&) {}));
    EXPECT_EQ(v, first + i);
  }
  EXPECT_EQ(dev().timeline_value(), first + 6);
  CTS_ASSERT_OK(dev().synchronize());
  EXPECT_EQ(dev().timeline().value(), dev().timeline_value() - 1);
}

TEST_P(CtsTimeline, SynchronizeWaitsForAStalledSubmission) {
  CTS_REQUIRE("execution");
  CTS_ASSERT_OK_AND_ASSIGN(auto gate, dev().new_signal("cts gate"));
  auto cq = dev().compute_queue();
  auto xq = copy_or_compute_queue(dev());
  CTS_ASSERT_OK_AND_ASSIGN(
      uint64_t v, dev().submit_on_timeline(*cq, [&](hcq::HwQueue& q) { q.wait(*gate, 1); }));
  // The next submission, on the other engine, waits for this one through the timeline.
  CTS_ASSERT_OK_AND_ASSIGN(uint64_t v2, dev().submit_on_timeline(*xq, [](hcq::HwQueue&) {}));
  EXPECT_EQ(v2, v + 1);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(dev().timeline().value(), v - 1);
  gate->set(1);
  CTS_ASSERT_OK(dev().synchronize(5000ms));
  EXPECT_EQ(dev().timeline().value(), v2);
}

TEST_P(CtsTimeline, WrapsPast2To31IntoANewEpoch) {
  CTS_ASSERT_OK(dev().set_timeline_for_test(kWrap - 3));
  EXPECT_EQ(dev().timeline_value(), kWrap - 3);
  uint64_t epoch0 = dev().timeline_epoch();
  auto q = dev().compute_queue();
  std::vector<uint64_t> got;
  for (int i = 0; i < 6; i++) {
    CTS_ASSERT_OK_AND_ASSIGN(uint64_t v, dev().submit_on_timeline(*q, [](hcq::HwQueue&) {}));
    got.push_back(v);
    CTS_ASSERT_OK(dev().synchronize(5000ms));
    EXPECT_EQ(dev().timeline().value(), dev().timeline_value() - 1) << "after submission " << i;
  }
  SCOPED_TRACE(::testing::PrintToString(got));
  int wraps = 0;
  for (size_t i = 0; i < got.size(); i++) {
    EXPECT_LE(got[i], kWrap) << "a 32-bit device cannot compare timeline value " << got[i];
    if (i > 0 && got[i] <= got[i - 1]) {
      wraps++;
      EXPECT_EQ(got[i], 1u) << "the timeline restarts at 1";
    } else if (i > 0) {
      EXPECT_EQ(got[i], got[i - 1] + 1);
    }
  }
  EXPECT_EQ(wraps, 1);
  EXPECT_EQ(dev().timeline_epoch(), epoch0 + 1);
  EXPECT_LT(dev().timeline_value(), 16u);
}

TEST_P(CtsTimeline, CopiesAndKernelsStayOrderedAcrossTheWrap) {
  CTS_REQUIRE("execution");
  // Two staging chunks per copy, so the staging buffers hold values of both epochs.
  constexpr size_t kN = (hcq::Allocator::kStagingBytes + hcq::Allocator::kStagingBytes / 2) / 4;
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer buf, alloc(kN * 4));
  auto prg = program("add_one", add_one, {kN * 4}, 0);
  CTS_ASSERT_OK_AND_ASSIGN(hcq::ArgsState * args, args_for(*prg));
  args->set_buf(0, va_of(buf));
  auto q = dev().compute_queue();
  CTS_ASSERT_OK(dev().set_timeline_for_test(kWrap - 3));
  uint64_t epoch0 = dev().timeline_epoch();
  std::vector<int32_t> in(kN), out(kN);
  for (int it = 0; it < 5; it++) {
    for (size_t i = 0; i < kN; i++) in[i] = static_cast<int32_t>(i * 31 + it * 1000003);
    CTS_ASSERT_OK(dev().allocator().copy_in(buf, in.data(), kN * 4));
    CTS_ASSERT_OK(
        dev().submit_on_timeline(*q, [&](hcq::HwQueue& hq) { launch(hq, *prg, *args, kN); }));
    CTS_ASSERT_OK(dev().allocator().copy_out(out.data(), buf, kN * 4));
    for (size_t i = 0; i < kN; i++)
      ASSERT_EQ(out[i], in[i] + 1) << "iteration " << it << " at " << i;
    CTS_ASSERT_OK(dev().synchronize(5000ms));
  }
  EXPECT_EQ(dev().timeline_epoch(), epoch0 + 1);
}

// ---- kernels -------------------------------------------------------------------------------

TEST_P(CtsExec, LaunchesRunInSubmissionOrder) {
  CTS_REQUIRE("execution");
  constexpr int kLaunches = 200;
  constexpr size_t kLogBytes = (1 + kLaunches) * 8;
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer log, alloc(kLogBytes));
  std::vector<int64_t> host(1 + kLaunches, 0);
  CTS_ASSERT_OK(dev().allocator().copy_in(log, host.data(), kLogBytes));
  auto prg = program("append_log", append_log, {kLogBytes}, 1);
  std::vector<hcq::ArgsState*> args;
  for (int i = 0; i < kLaunches; i++) {
    CTS_ASSERT_OK_AND_ASSIGN(hcq::ArgsState * a, args_for(*prg));
    a->set_buf(0, va_of(log));
    a->set_var(0, i);
    args.push_back(a);
  }
  auto q = dev().compute_queue();
  auto run = [&](int lo, int hi) {
    return dev().submit_on_timeline(*q, [&](hcq::HwQueue& hq) {
      for (int i = lo; i < hi; i++) launch(hq, *prg, *args[i], 1);
    });
  };
  CTS_ASSERT_OK(run(0, kLaunches / 2));  // half in one submission, the rest in ten
  for (int lo = kLaunches / 2; lo < kLaunches; lo += kLaunches / 20)
    CTS_ASSERT_OK(run(lo, lo + kLaunches / 20));
  CTS_ASSERT_OK(dev().allocator().copy_out(host.data(), log, kLogBytes));
  EXPECT_EQ(host[0], kLaunches);
  for (int i = 0; i < kLaunches; i++) ASSERT_EQ(host[1 + i], i) << "log entry " << i;
}

TEST_P(CtsExec, KernelSeesWhatThePreviousKernelWrote) {
  CTS_REQUIRE("execution");
  constexpr int64_t kN = 100003;
  constexpr size_t kBytes = kN * 4;
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer a, alloc(kBytes));
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer b, alloc(kBytes));
  std::vector<int32_t> in(kN), out(kN);
  for (int64_t i = 0; i < kN; i++) in[i] = static_cast<int32_t>((i * 7919) % 100000 - 50000);
  CTS_ASSERT_OK(dev().allocator().copy_in(a, in.data(), kBytes));
  auto inc = program("add_one", add_one, {kBytes}, 0);
  auto rev = program("reverse_double", reverse_double, {kBytes, kBytes}, 1);
  CTS_ASSERT_OK_AND_ASSIGN(hcq::ArgsState * inc_args, args_for(*inc));
  CTS_ASSERT_OK_AND_ASSIGN(hcq::ArgsState * rev_args, args_for(*rev));
  inc_args->set_buf(0, va_of(a));
  rev_args->set_buf(0, va_of(b));
  rev_args->set_buf(1, va_of(a));
  rev_args->set_var(0, kN);
  auto q = dev().compute_queue();
  // In one submission: b[i] = (in[n - 1 - i] + 1) * 2.
  CTS_ASSERT_OK(dev().submit_on_timeline(*q, [&](hcq::HwQueue& hq) {
    launch(hq, *inc, *inc_args, kN);
    launch(hq, *rev, *rev_args, kN);
  }));
  CTS_ASSERT_OK(dev().allocator().copy_out(out.data(), b, kBytes));
  for (int64_t i = 0; i < kN; i++) ASSERT_EQ(out[i], (in[kN - 1 - i] + 1) * 2) << "element " << i;
  // In two submissions: b[i] = (in[n - 1 - i] + 2) * 2.
  CTS_ASSERT_OK(
      dev().submit_on_timeline(*q, [&](hcq::HwQueue& hq) { launch(hq, *inc, *inc_args, kN); }));
  CTS_ASSERT_OK(
      dev().submit_on_timeline(*q, [&](hcq::HwQueue& hq) { launch(hq, *rev, *rev_args, kN); }));
  CTS_ASSERT_OK(dev().allocator().copy_out(out.data(), b, kBytes));
  for (int64_t i = 0; i < kN; i++) ASSERT_EQ(out[i], (in[kN - 1 - i] + 2) * 2) << "element " << i;
}

TEST_P(CtsExec, BoundQueueReplaysPatchSymbolicArguments) {
  CTS_REQUIRE("execution");
  const std::vector<int64_t> values = {7, -3, int64_t{1} << 40, 99, 123456789};
  auto prg = program("store_var", store_var, {8}, 1);
  CTS_ASSERT_OK_AND_ASSIGN(hcq::ArgsState * args, args_for(*prg));
  args->set_var(0, hcq::Value::sym(0));
  args->set_buf(0, hcq::Value::sym(1));
  std::vector<hcq::Buffer> outs;
  for (size_t i = 0; i < values.size(); i++) {
    CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer b, alloc(8));
    int64_t zero = 0;
    CTS_ASSERT_OK(dev().allocator().copy_in(b, &zero, 8));
    outs.push_back(b);
  }
  CTS_ASSERT_OK(dev().synchronize());
  CTS_ASSERT_OK_AND_ASSIGN(auto done, dev().new_signal("cts replay done"));
  auto q = dev().compute_queue();
  launch(*q, *prg, *args, 1);
  q->signal(*done, hcq::Value::sym(2));
  CTS_ASSERT_OK(q->bind());
  for (size_t i = 0; i < values.size(); i++) {
    std::vector<int64_t> vars = {values[i], va_of(outs[i]), static_cast<int64_t>(i + 1)};
    SCOPED_TRACE("replay " + std::to_string(i));
    CTS_ASSERT_OK(q->submit(vars));
    CTS_ASSERT_OK(done->wait(i + 1, 5000ms));
  }
  for (size_t i = 0; i < values.size(); i++) {
    int64_t got = 0;
    CTS_ASSERT_OK(dev().allocator().copy_out(&got, outs[i], 8));
    EXPECT_EQ(got, values[i]) << "replay " << i;
  }
}

// ---- copies --------------------------------------------------------------------------------

TEST_P(CtsCopy, HostRoundTripsAtOddOffsets) {
  CTS_REQUIRE("execution");
  constexpr size_t kGuard = 9;
  const size_t sizes[] = {1, 3, 4095, 4097, 2 * kMiB - 1, 2 * kMiB + 1, 7 * kMiB + 13};
  hcq::Allocator& al = dev().allocator();
  for (size_t k = 0; k < std::size(sizes); k++) {
    size_t n = sizes[k], off = 1 + 2 * (k % 4), total = off + n + kGuard;
    SCOPED_TRACE("size " + std::to_string(n) + " at offset " + std::to_string(off));
    CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer buf, alloc(total));
    std::vector<uint8_t> fill(total, 0xa5), out(total);
    CTS_ASSERT_OK(al.copy_in(buf, fill.data(), total));
    auto data = random_bytes(n, 1000 + k);
    CTS_ASSERT_OK(al.copy_in(buf.view(off, n), data.get(), n));
    CTS_ASSERT_OK(al.copy_out(out.data(), buf, total));
    EXPECT_TRUE(same_bytes(out.data() + off, data.get(), n));
    EXPECT_TRUE(same_bytes(out.data(), fill.data(), off)) << "bytes before the view changed";
    EXPECT_TRUE(same_bytes(out.data() + off + n, fill.data(), kGuard))
        << "bytes after the view changed";
    std::vector<uint8_t> view_out(n);
    CTS_ASSERT_OK(al.copy_out(view_out.data(), buf.view(off, n), n));
    EXPECT_TRUE(same_bytes(view_out.data(), data.get(), n)) << "copy_out of the view";
  }
}

TEST_P(CtsCopy, HostRoundTripOf512MiB) {
  CTS_REQUIRE("execution");
  constexpr size_t kN = 512 * kMiB;
  hcq::Allocator& al = dev().allocator();
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer buf, al.alloc(kN));
  {
    auto data = random_bytes(kN, 512);
    auto out = std::make_unique_for_overwrite<uint8_t[]>(kN);
    CTS_EXPECT_OK(al.copy_in(buf, data.get(), kN));
    CTS_EXPECT_OK(al.copy_out(out.get(), buf, kN));
    EXPECT_TRUE(same_bytes(out.get(), data.get(), kN));
  }
  al.free(buf);
  EXPECT_GE(al.cached_bytes(), kN);
  CTS_EXPECT_OK(al.clear_cache());
  EXPECT_EQ(al.cached_bytes(), 0u);
}

TEST_P(CtsCopy, QueueCopiesBetweenBuffersAtOddOffsets) {
  CTS_REQUIRE("execution");
  constexpr size_t kN = 3 * kMiB + 7;
  hcq::Allocator& al = dev().allocator();
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer a, alloc(kN + 3));
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer b, alloc(kN + 5));
  auto data = random_bytes(kN + 3, 77);
  std::vector<uint8_t> fill(kN + 5, 0x5a), out(kN + 5);
  CTS_ASSERT_OK(al.copy_in(a, data.get(), kN + 3));
  auto cq = dev().compute_queue();
  auto xq = copy_or_compute_queue(dev());
  for (hcq::HwQueue* q : {xq.get(), cq.get()}) {
    SCOPED_TRACE(q->engine() == hcq::Engine::kCopy ? "copy queue" : "compute queue");
    CTS_ASSERT_OK(al.copy_in(b, fill.data(), kN + 5));
    CTS_ASSERT_OK(dev().submit_on_timeline(*q, [&](hcq::HwQueue& hq) {
      hq.copy(va_of(b) + 5, va_of(a) + 3, static_cast<int64_t>(kN));
    }));
    CTS_ASSERT_OK(al.copy_out(out.data(), b, kN + 5));
    EXPECT_TRUE(same_bytes(out.data() + 5, data.get() + 3, kN));
    EXPECT_TRUE(same_bytes(out.data(), fill.data(), 5)) << "bytes before the destination changed";
  }
}

TEST_P(CtsCopy, HostCopiesTakeOneTimelineValuePerStagingChunk) {
  constexpr size_t kN = 3 * hcq::Allocator::kStagingBytes + 13;
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer buf, alloc(kN));
  auto data = random_bytes(kN, 3);
  std::vector<uint8_t> out(kN);
  uint64_t v0 = dev().timeline_value();
  CTS_ASSERT_OK(dev().allocator().copy_in(buf, data.get(), kN));
  EXPECT_EQ(dev().timeline_value(), v0 + 4);
  CTS_ASSERT_OK(dev().allocator().copy_out(out.data(), buf, kN));
  EXPECT_EQ(dev().timeline_value(), v0 + 8);
  CTS_ASSERT_OK(dev().synchronize());
  EXPECT_EQ(dev().timeline().value(), v0 + 7);
}

// ---- faults --------------------------------------------------------------------------------

TEST_P(CtsFault, CopyFromAnUnmappedAddressFailsTheDeviceForever) {
  CTS_REQUIRE("execution");
  constexpr uint64_t kUnmapped = 0xdead0;  // in no allocation of any device
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Device * dev2, open_another());
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer dst, alloc(64));
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer dst2, alloc(*dev2, 16));
  auto prg = program("add_one", add_one, {16}, 0);
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
  auto* cpu = dynamic_cast<drivers::cpu::Device*>(&dev());
  if (!cpu) GTEST_SKIP() << GetParam().name << " has no queue timeout (drivers::cpu::Device)";
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

TEST_P(CtsFault, RefusedSubmissionLeavesNoHoleInTheTimeline) {
  auto* cpu = dynamic_cast<drivers::cpu::Device*>(&dev());
  if (!cpu) GTEST_SKIP() << GetParam().name << ": fills the ring of a drivers::cpu::Device";
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

CTS_INSTANTIATE(CtsDeathTest);
CTS_INSTANTIATE(CtsSignal);
CTS_INSTANTIATE(CtsQueue);
CTS_INSTANTIATE(CtsTimeline);
CTS_INSTANTIATE(CtsExec);
CTS_INSTANTIATE(CtsCopy);
CTS_INSTANTIATE(CtsFault);
CTS_INSTANTIATE(CtsConcurrency);
CTS_INSTANTIATE(CtsAllocator);

}  // namespace
}  // namespace baregrad::cts
