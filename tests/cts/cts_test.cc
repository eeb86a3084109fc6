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
#if BAREGRAD_HAS_MOCK_NV
#include "drivers/nv/cubin.h"
#endif

namespace baregrad::cts {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;

class CtsSignal : public Cts {};
class CtsQueue : public Cts {};
class CtsTimeline : public Cts {};
class CtsExec : public Cts {};
class CtsCopy : public Cts {};

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
  CTS_REQUIRE("peers");
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
  CTS_ASSERT_OK(dev().set_timeline_for_test(hcq::kTimelineWrap - 3));
  EXPECT_EQ(dev().timeline_value(), hcq::kTimelineWrap - 3);
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
    EXPECT_LE(got[i], hcq::kTimelineWrap)
        << "a 32-bit device cannot compare timeline value " << got[i];
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
  CTS_ASSERT_OK(dev().set_timeline_for_test(hcq::kTimelineWrap - 3));
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
    // The copy queue's half ran; a backend without copies on its compute queue skips the rest.
    if (q == cq.get() && xq->engine() == hcq::Engine::kCopy) {
      CTS_REQUIRE("compute queue copies");
    }
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

CTS_INSTANTIATE(CtsDeathTest);
CTS_INSTANTIATE(CtsSignal);
CTS_INSTANTIATE(CtsQueue);
CTS_INSTANTIATE(CtsTimeline);
CTS_INSTANTIATE(CtsExec);
CTS_INSTANTIATE(CtsCopy);

#if BAREGRAD_HAS_MOCK_NV
// The PTX twins of the CTS kernels (what the nv backends run) assemble for Ampere, Hopper and
// Blackwell, and each cubin declares the parameters where the CPU ABI's twins read them: one
// 8-byte slot per buffer, then per scalar.
TEST(CtsPtx, EveryKernelAssemblesAndTakesItsParametersInOrder) {
  struct K {
    KernelFn fn;
    uint32_t params;
  };
  for (K k :
       {K{add_one, 1}, K{reverse_double, 3}, K{append_log, 2}, K{store_var, 2}, K{increment, 1}}) {
    for (int sm : {80, 90, 120}) {
      std::string entry = "cts_kernel_" + std::to_string(k.params);
      Result<std::vector<uint8_t>> cubin = cts_cubin(k.fn, sm, entry);
      if (!cubin.ok() && cubin.status().code() == StatusCode::kNotFound)
        GTEST_SKIP() << cubin.status();
      ASSERT_TRUE(cubin.ok()) << cubin.status();
      SCOPED_TRACE(entry + " sm_" + std::to_string(sm));
      Result<nv::CubinImage> img = nv::load_cubin(*cubin, entry);
      ASSERT_TRUE(img.ok()) << img.status();
      EXPECT_EQ(img->sm, sm);
      ASSERT_EQ(img->params.size(), k.params);
      for (uint32_t i = 0; i < k.params; i++) {
        EXPECT_EQ(img->params[i].ordinal, i);
        EXPECT_EQ(img->params[i].offset, 8 * i);
        EXPECT_EQ(img->params[i].size, 8u);
      }
    }
  }
}
#endif

}  // namespace
}  // namespace baregrad::cts
