#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/check.h"
#include "base/error.h"
#include "base/format.h"
#include "base/log.h"
#include "base/options.h"
#include "base/status.h"
#include "base/thread_pool.h"
#include "base/timer.h"

namespace baregrad {
namespace {

using ::testing::HasSubstr;

// Every index of [0, n) runs exactly once per parallel_for: back to back (the workers still
// spinning on the last call), after an idle gap longer than the 2 ms spin (the workers asleep on
// the condition variable), and with fewer items than threads.
TEST(ThreadPool, RunsEveryIndexOnceBackToBackAndAfterIdling) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(64);
  auto run = [&](int64_t n) {
    for (auto& h : hits) h.store(0);
    pool.parallel_for(n, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; i++) hits[i].fetch_add(1);
    });
    for (int64_t i = 0; i < 64; i++) ASSERT_EQ(hits[i].load(), i < n ? 1 : 0) << n << " " << i;
  };
  for (int round = 0; round < 500; round++) run(round % 64 + 1);
  for (int round = 0; round < 3; round++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    run(64);
    run(2);
  }
}

// A pool destroyed right after a call (its workers spinning) or never used joins its threads.
TEST(ThreadPool, DestroysWhileItsWorkersSpinOrSleep) {
  for (int i = 0; i < 20; i++) {
    ThreadPool pool(2);
    if (i % 2) pool.parallel_for(8, [](int64_t, int64_t) {});
  }
}

TEST(Error, WhatIsOpInBracketsThenMessage) {
  Error error("realize", "shape mismatch");
  EXPECT_STREQ(error.what(), "[realize] shape mismatch");
  EXPECT_EQ(error.op(), "realize");
  EXPECT_EQ(error.message(), "shape mismatch");
}

TEST(Error, FailThrowsError) {
  EXPECT_THROW(fail("alloc", "out of memory"), Error);
  try {
    fail("alloc", "out of memory");
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[alloc] out of memory");
  }
}

TEST(Format, TupleStrIsPythonsTupleRepr) {
  EXPECT_EQ(tuple_str(std::vector<int64_t>{}), "()");
  EXPECT_EQ(tuple_str(std::vector<int64_t>{5}), "(5,)");
  EXPECT_EQ(tuple_str(std::vector<int64_t>{2, -3, 4}), "(2, -3, 4)");
}

TEST(Status, DefaultIsOk) {
  Status status;
  EXPECT_TRUE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kOk);
  EXPECT_EQ(status.to_string(), "OK");
}

TEST(Status, FactoryRecordsCodeMessageAndCallerLocation) {
  int line = __LINE__ + 1;
  Status status = invalid_argument("bad shape");
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "bad shape");
  EXPECT_THAT(std::string(status.file()), HasSubstr("base_test.cc"));
  EXPECT_EQ(status.line(), line);
  EXPECT_EQ(status.to_string(),
            "InvalidArgument: bad shape (base_test.cc:" + std::to_string(line) + ")");
}

TEST(Status, EachFactoryHasItsCode) {
  EXPECT_EQ(not_found("x").code(), StatusCode::kNotFound);
  EXPECT_EQ(resource_exhausted("x").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(deadline_exceeded("x").code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(unavailable("x").code(), StatusCode::kUnavailable);
  EXPECT_EQ(unimplemented("x").code(), StatusCode::kUnimplemented);
  EXPECT_EQ(internal("x").code(), StatusCode::kInternal);
  EXPECT_EQ(failed_precondition("x").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(aborted("x").code(), StatusCode::kAborted);
  EXPECT_EQ(status_code_name(StatusCode::kResourceExhausted), "ResourceExhausted");
}

TEST(Status, ErrnoErrorNamesCallNumberAndText) {
  Status status = errno_error("open(/dev/kfd)", ENOENT);
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  EXPECT_EQ(status.message(), "open(/dev/kfd) failed: errno " + std::to_string(ENOENT) +
                                  " (No such file or directory)");
  EXPECT_EQ(errno_error("ioctl", ETIMEDOUT).code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(errno_error("mmap", ENOMEM).code(), StatusCode::kResourceExhausted);
}

TEST(Status, ThrowIfErrorConvertsToError) {
  EXPECT_NO_THROW(Status().throw_if_error("noop"));
  try {
    not_found("no device").throw_if_error("open");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.op(), "open");
    EXPECT_THAT(e.what(), HasSubstr("[open] NotFound: no device (base_test.cc:"));
  }
}

TEST(Result, HoldsValueOrError) {
  Result<int> good = 42;
  ASSERT_TRUE(good.ok());
  EXPECT_TRUE(good.status().ok());
  EXPECT_EQ(good.value(), 42);
  EXPECT_EQ(*good, 42);

  Result<int> bad = unavailable("busy");
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kUnavailable);
}

TEST(Result, SupportsMoveOnlyValuesAndArrow) {
  Result<std::unique_ptr<std::string>> result = std::make_unique<std::string>("abc");
  EXPECT_EQ((*result)->size(), 3u);
  std::unique_ptr<std::string> taken = std::move(result).value();
  EXPECT_EQ(*taken, "abc");

  Result<std::string> text = std::string("hello");
  EXPECT_EQ(text->size(), 5u);
}

TEST(ResultDeathTest, ValueOnErrorAbortsWithStatusText) {
  Result<int> bad = not_found("missing kernel");
  EXPECT_DEATH((void)bad.value(), "Result::value\\(\\) on error: NotFound: missing kernel");
}

Status fails_if_negative(int x) {
  if (x < 0) return invalid_argument("negative");
  return Status();
}

Result<int> half(int x) {
  if (x % 2 != 0) return invalid_argument("odd");
  return x / 2;
}

int reached = 0;

Status check_then_count(int x) {
  RETURN_IF_ERROR(fails_if_negative(x));
  RETURN_IF_ERROR(half(x));
  ++reached;
  return Status();
}

TEST(Macros, ReturnIfErrorPropagatesFirstErrorAndContinuesOnOk) {
  reached = 0;
  EXPECT_TRUE(check_then_count(4).ok());
  EXPECT_EQ(reached, 1);
  Status negative = check_then_count(-2);
  EXPECT_EQ(negative.message(), "negative");
  Status odd = check_then_count(3);
  EXPECT_EQ(odd.message(), "odd");
  EXPECT_EQ(reached, 1);
}

Result<int> quarter(int x) {
  ASSIGN_OR_RETURN(int h, half(x));
  ASSIGN_OR_RETURN(auto q, half(h));
  return q;
}

Result<std::unique_ptr<int>> boxed(int x) {
  ASSIGN_OR_RETURN(int h, half(x));
  return std::make_unique<int>(h);
}

Status store_boxed(int x, int* out) {
  std::unique_ptr<int> box;
  ASSIGN_OR_RETURN(box, boxed(x));
  *out = *box;
  return Status();
}

TEST(Macros, AssignOrReturnAssignsValueOrReturnsError) {
  EXPECT_EQ(quarter(8).value(), 2);
  EXPECT_EQ(quarter(6).status().message(), "odd");
  EXPECT_EQ(quarter(5).status().code(), StatusCode::kInvalidArgument);
  int out = 0;
  EXPECT_TRUE(store_boxed(10, &out).ok());
  EXPECT_EQ(out, 5);
  EXPECT_FALSE(store_boxed(7, &out).ok());
}

// Restores DEBUG after a test changes it.
class OptionsTest : public ::testing::Test {
 protected:
  void TearDown() override { set_option_for_test("DEBUG", std::to_string(saved_debug_)); }
  int saved_debug_ = options().debug;
};

TEST_F(OptionsTest, ParsesValidValues) {
  set_option_for_test("DEBUG", "3");
  EXPECT_EQ(options().debug, 3);
  set_option_for_test("DEBUG", "");
  EXPECT_EQ(options().debug, 0);
}

TEST_F(OptionsTest, BadValueThrowsNamingVariableAndValue) {
  set_option_for_test("DEBUG", "2");
  try {
    set_option_for_test("DEBUG", "abc");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.op(), "options");
    EXPECT_EQ(e.kind(), ErrorKind::kValue);
    EXPECT_EQ(e.message(), "DEBUG=abc: must be an integer >= 0");
  }
  EXPECT_EQ(options().debug, 2);
  EXPECT_THROW(set_option_for_test("THREADS", "-1"), Error);
  // THREADS is capped: 100000 threads is a typo, not a machine.
  try {
    set_option_for_test("THREADS", "100000");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.message(), "THREADS=100000: must be an integer in [0, 1024]");
  }
  EXPECT_THROW(set_option_for_test("SPEC", "maybe"), Error);
  EXPECT_THROW(set_option_for_test("NO_SUCH_OPTION", "1"), Error);
}

TEST_F(OptionsTest, HangTimeoutIsBoundedAndRestorable) {
  EXPECT_EQ(options().hang_timeout_ms, 30000);
  set_option_for_test("HANG_TIMEOUT_MS", "5000");
  EXPECT_EQ(options().hang_timeout_ms, 5000);
  try {
    set_option_for_test("HANG_TIMEOUT_MS", "86400001");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.message(), "HANG_TIMEOUT_MS=86400001: must be an integer in [0, 86400000]");
  }
  set_option_for_test("HANG_TIMEOUT_MS", "");  // the default again
  EXPECT_EQ(options().hang_timeout_ms, 30000);
}

TEST_F(OptionsTest, TableDocumentsEveryOptionAndDefaultsParse) {
  std::vector<std::string> names;
  for (const OptionInfo& info : option_table()) {
    names.emplace_back(info.name);
    EXPECT_FALSE(info.help.empty()) << info.name;
  }
  EXPECT_THAT(names,
              ::testing::UnorderedElementsAre(
                  "DEV", "DEBUG", "CACHE_DIR", "DISABLE_COMPILER_CACHE", "PROGRAM_CACHE_SIZE",
                  "KERNEL_CACHE_MB", "SCHEDULE_CACHE_SIZE", "HANG_TIMEOUT_MS", "THREADS", "CPU_CC",
                  "SPEC", "PROFILE", "PROFILE_PATH", "KERNEL_LOG", "PTXAS", "CUDA_PATH", "LD_LLD",
                  "AMD_AQL", "BAREGRAD_LIBCUDA", "BAREGRAD_LIBCUBLAS", "BEAM", "BEAM_BUDGET_S"));
  EXPECT_FALSE(options().cache_dir.empty());
  EXPECT_FALSE(options().cc.empty());
  EXPECT_EQ(options().profile_path, "profile.json");
}

int side_effects = 0;
int count_side_effect() { return ++side_effects; }

TEST_F(OptionsTest, LogPrintsOnlyAtOrBelowDebugLevelAndSkipsOperandsOtherwise) {
  side_effects = 0;
  set_option_for_test("DEBUG", "1");
  ::testing::internal::CaptureStderr();
  BG_LOG(2) << "hidden " << count_side_effect();
  BG_LOG(1) << "shown " << count_side_effect();
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "shown 1\n");
  EXPECT_EQ(side_effects, 1);
}

TEST_F(OptionsTest, ScopedTimerReportsElapsedAndLogsAtDebug2) {
  set_option_for_test("DEBUG", "2");
  double ms = -1;
  ::testing::internal::CaptureStderr();
  {
    ScopedTimer timer("lower", &ms);
  }
  EXPECT_GE(ms, 0.0);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(),
              ::testing::MatchesRegex("lower: [0-9]+\\.[0-9][0-9] ms\n"));
  double t0 = now_ms();
  double t1 = now_ms();
  EXPECT_LE(t0, t1);
}

TEST(Check, PassingCheckDoesNotEvaluateMessage) {
  side_effects = 0;
  int x = 3;
  CHECK(x > 0) << count_side_effect();
  CHECK_EQ(x, 3) << count_side_effect();
  CHECK_LT(-1, 1u);  // compared by value, not after unsigned conversion
  CHECK_GE(x, 3);
  EXPECT_EQ(side_effects, 0);
}

TEST(CheckDeathTest, FailurePrintsConditionLocationAndMessage) {
  int x = 3;
  EXPECT_DEATH(CHECK(x > 5) << "x=" << x, "CHECK failed: x > 5 at .*base_test.cc:[0-9]+: x=3");
}

TEST(CheckDeathTest, ComparisonFailurePrintsBothValues) {
  int a = 2;
  int b = 7;
  EXPECT_DEATH(CHECK_EQ(a, b) << "sizes", "CHECK failed: a == b \\(2 vs. 7\\) at .*: sizes");
  EXPECT_DEATH(CHECK_GT(a, b), "CHECK failed: a > b \\(2 vs. 7\\)");
}

int unreachable_op(int op) {
  if (op == 0) return 1;
  UNREACHABLE() << "unknown op " << op;
}

TEST(CheckDeathTest, UnreachableAborts) {
  EXPECT_EQ(unreachable_op(0), 1);
  EXPECT_DEATH(unreachable_op(9), "UNREACHABLE at .*base_test.cc:[0-9]+: unknown op 9");
}

}  // namespace
}  // namespace baregrad
