// The schedule cache (tensor/schedule_cache.h): a graph built like an earlier one on other buffers
// reuses that schedule, bound to its own buffers; graphs that differ in anything the scheduler
// reads are scheduled anew. Values against a float64 reference computed here.
#include "tensor/schedule_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "base/options.h"
#include "tensor/tensor.h"

namespace baregrad::tensor {
namespace {

using detail::schedule_cache_stats;

class ScheduleCache : public ::testing::Test {
 protected:
  void SetUp() override { detail::clear_schedule_cache(); }
  void TearDown() override {
    set_option_for_test("SCHEDULE_CACHE_SIZE", "");
    detail::clear_schedule_cache();
  }
};

std::vector<double> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-2, 2);
  std::vector<double> v(n);
  for (double& x : v) x = static_cast<float>(u(rng));  // exactly representable in float32
  return v;
}

// softmax over rows of a (rows x cols) matrix times b, then + 1: several kernels, intermediates.
Tensor graph(const Tensor& a, const Tensor& b) {
  Tensor e = (a * b).exp();
  return e / e.sum({1}, true) + 1.0;
}
std::vector<double> reference(const std::vector<double>& a,
                              const std::vector<double>& b,
                              int rows,
                              int cols) {
  std::vector<double> out(a.size());
  for (int r = 0; r < rows; r++) {
    double sum = 0;
    for (int c = 0; c < cols; c++) sum += std::exp(a[r * cols + c] * b[r * cols + c]);
    for (int c = 0; c < cols; c++)
      out[r * cols + c] = std::exp(a[r * cols + c] * b[r * cols + c]) / sum + 1;
  }
  return out;
}

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); i++) EXPECT_NEAR(got[i], want[i], 1e-5) << "element " << i;
}

TEST_F(ScheduleCache, TheSameGraphOnNewBuffersReusesTheScheduleWithItsOwnBuffers) {
  const int rows = 3, cols = 5;
  for (uint32_t step = 0; step < 3; step++) {
    auto av = random_values(rows * cols, 2 * step), bv = random_values(rows * cols, 2 * step + 1);
    Tensor a = Tensor::from_data(av, {rows, cols}).realize();
    Tensor b = Tensor::from_data(bv, {rows, cols}).realize();
    auto before = schedule_cache_stats();
    Tensor out = graph(a, b);
    size_t kernels = create_schedule({out.lazy()}).size();
    EXPECT_GE(kernels, 2u);  // the sum and what reads it: an intermediate buffer
    auto after = schedule_cache_stats();
    EXPECT_EQ(after.hits - before.hits, step == 0 ? 0u : 1u);
    expect_near_all(out.to_vector(), reference(av, bv, rows, cols));
  }
}

TEST_F(ScheduleCache, WhichNodesAreSharedIsPartOfTheKey) {
  Tensor x = Tensor::from_data({1, 2}, {2}).realize();
  expect_near_all((x + x).to_vector(), {2, 4});
  Tensor p = Tensor::from_data({1, 2}, {2}).realize(),
         q = Tensor::from_data({10, 20}, {2}).realize();
  auto before = schedule_cache_stats();
  expect_near_all((p + q).to_vector(), {11, 22});  // two inputs where x + x read one
  EXPECT_EQ(schedule_cache_stats().hits, before.hits);
  Tensor y = Tensor::from_data({5, 6}, {2}).realize();
  expect_near_all((y + y).to_vector(), {10, 12});
  EXPECT_EQ(schedule_cache_stats().hits, before.hits + 1);
  // As many nodes of the same kinds, wired otherwise: (p - q) * p, then (r - s) * s.
  expect_near_all(((p - q) * p).to_vector(), {-9, -36});
  Tensor r = Tensor::from_data({1, 2}, {2}).realize(), s = Tensor::from_data({3, 4}, {2}).realize();
  expect_near_all(((r - s) * s).to_vector(), {-6, -8});
  expect_near_all(((s - r) * s).to_vector(), {6, 8});  // the same wiring as (p - q) * p: a hit
  EXPECT_EQ(schedule_cache_stats().hits, before.hits + 2);
}

TEST_F(ScheduleCache, ShapesDtypesAndViewsMakeOtherKeys) {
  Tensor a = Tensor::from_data({1, 2, 3, 4}, {2, 2}).realize();
  expect_near_all((a + 1.0).to_vector(), {2, 3, 4, 5});
  uint64_t hits = schedule_cache_stats().hits;
  expect_near_all((a.transpose() + 1.0).to_vector(), {2, 4, 3, 5});
  expect_near_all((a.reshape({4}) + 1.0).to_vector(), {2, 3, 4, 5});
  expect_near_all((a.cast(dtypes::kInt32) + 1.0).to_vector(), {2, 3, 4, 5});
  Tensor b = Tensor::from_data({1, 2, 3, 4, 5, 6}, {2, 3}).realize();
  expect_near_all((b + 1.0).to_vector(), {2, 3, 4, 5, 6, 7});
  EXPECT_EQ(schedule_cache_stats().hits, hits);
  Tensor c = Tensor::from_data({7, 8, 9, 10}, {2, 2}).realize();
  expect_near_all((c.transpose() + 1.0).to_vector(), {8, 10, 9, 11});
  EXPECT_EQ(schedule_cache_stats().hits, hits + 1);
}

TEST_F(ScheduleCache, WritesIntoExistingBuffersAreServedIntoTheirOwnBuffers) {
  // assign and setitem: the same update of other buffers reuses the schedule, each writing into
  // its own target; what the value reads of the written buffer, and where a view writes, make
  // other keys.
  Tensor w = Tensor::from_data({1, 2}, {2}).realize(), u = Tensor::from_data({5, 6}, {2}).realize();
  w.assign(w * 2.0);
  u.assign(u * 2.0);  // a hit: both read buffers from_data made
  auto before = schedule_cache_stats();
  u.assign(u * 2.0);  // both now read what an assign wrote
  w.assign(w * 2.0);
  EXPECT_EQ(schedule_cache_stats().hits, before.hits + 1);
  expect_near_all(w.to_vector(), {4, 8});
  expect_near_all(u.to_vector(), {20, 24});
  before = schedule_cache_stats();
  w.assign(u * 2.0);  // reads another buffer than it writes
  EXPECT_EQ(schedule_cache_stats().hits, before.hits);
  u.assign(w * 2.0);
  EXPECT_EQ(schedule_cache_stats().hits, before.hits + 1);
  expect_near_all(w.to_vector(), {40, 48});
  expect_near_all(u.to_vector(), {80, 96});
  Tensor m = Tensor::from_data({0, 1, 2, 3, 4, 5}, {3, 2}).realize();
  for (auto [r, hit] : std::vector<std::pair<int64_t, int>>{{0, 0}, {1, 0}, {0, 1}, {2, 0}}) {
    before = schedule_cache_stats();
    m.shrink({{r, r + 1}, {0, 2}}).write_view(Tensor::from_data({10.0 * r, 10.0 * r + 1}, {1, 2}));
    EXPECT_EQ(schedule_cache_stats().hits, before.hits + hit) << "row " << r;
  }
  expect_near_all(m.to_vector(), {0, 1, 10, 11, 20, 21});
}

TEST_F(ScheduleCache, SizeZeroTurnsItOffAndAFullCacheStartsOver) {
  set_option_for_test("SCHEDULE_CACHE_SIZE", "0");
  Tensor a = Tensor::from_data({1, 2}, {2}).realize();
  for (int i = 0; i < 2; i++) expect_near_all((a * 3.0).to_vector(), {3, 6});
  auto off = schedule_cache_stats();
  EXPECT_EQ(off.hits + off.misses + off.uncacheable + off.entries, 0u);
  set_option_for_test("SCHEDULE_CACHE_SIZE", "2");
  for (int64_t n : {2, 3, 4}) {
    Tensor b = Tensor::full({n}, 1.0).contiguous().realize();
    expect_near_all((b + 2.0).to_vector(), std::vector<double>(n, 3.0));
  }
  EXPECT_LE(schedule_cache_stats().entries, 2u);
  EXPECT_EQ(schedule_cache_stats().misses, 6u);  // each n: the contiguous() and the add
}

TEST_F(ScheduleCache, ScalarValuesShareOneEntryAndEachGetsItsOwn) {
  // x * s + t with new Python scalars on every call (a learning rate, a loop index): one entry
  // serves them all, each call computing with its own values.
  Tensor a = Tensor::from_data({1, 2, 3, 4}, {4}).realize();
  expect_near_all((a * 2.0 + 1.0).to_vector(), {3, 5, 7, 9});
  auto before = schedule_cache_stats();
  for (double s : {0.5, -3.0, 0.0, 1.0, 2.0, 1e6}) {
    double t = s - 1.0;
    std::vector<double> want;
    for (double v : {1.0, 2.0, 3.0, 4.0}) want.push_back(static_cast<float>(v * s + t));
    expect_near_all((a * s + t).to_vector(), want);
  }
  EXPECT_EQ(schedule_cache_stats().hits, before.hits + 6);
  EXPECT_EQ(schedule_cache_stats().entries, before.entries);
  // The same value in two places, and a value equal to a constant the kernel makes itself (0
  // where a pad reads nothing): each is its own.
  expect_near_all((a.pad({{1, 0}}) + 0.0).to_vector(), {0, 1, 2, 3, 4});
  expect_near_all((a.pad({{1, 0}}) + 7.0).to_vector(), {7, 8, 9, 10, 11});
  expect_near_all((a * 3.0 + 3.0).to_vector(), {6, 9, 12, 15});
  // The constants of an int kernel.
  Tensor i = Tensor::from_data({5, 6}, {2}, dtypes::kInt32).realize();
  for (double k : {1.0, 4.0}) expect_near_all((i * k).to_vector(), {5 * k, 6 * k});
}

}  // namespace
}  // namespace baregrad::tensor
