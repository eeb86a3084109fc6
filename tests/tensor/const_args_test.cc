// Constants that change between calls travel as launch scalars (tensor/const_args.h): results
// against a float64 reference rounded per op to the tensor's dtype, the number of programs
// built, which constants stay inlined, TinyJit captures, and the bound on the records.
#include "tensor/const_args.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/options.h"
#include "compiler/ast.h"
#include "compiler/passes/lift_consts.h"
#include "compiler/uop.h"
#include "tensor/jit.h"
#include "tensor/schedule.h"
#include "tests/tensor/test_util.h"

namespace baregrad::tensor {
namespace {
using namespace test_util;

runtime::Device& device_of(const Tensor& t) { return *t.lazy().base->device; }

// x * s + 0.75 in `t` for many s (NaN, infinities, -0.0 and denormals among them): every value
// matches the reference bit for bit, and the kernel is built at most twice.
TEST(ConstArgs, AChangingScalarIsRightForEveryValueAndBuildsTwice) {
  const double inf = std::numeric_limits<double>::infinity();
  const Vec xs = {1.0, -2.5, 0.0, 3e-3, 1024.0};
  const Vec ss = {3.0,   -0.0, 0.1,   1e-40, inf, -inf, std::nan(""), 7.5,
                  65504, 1e38, -1e-3, 2.0,   0.0, 1.0,  -1.0,         123.456};
  for (DType t : {dtypes::kFloat32, dtypes::kFloat64, dtypes::kFloat16, dtypes::kBFloat16}) {
    Tensor x = Tensor::from_data(xs, {5}, kF64).cast(t).realize();
    auto& dev = device_of(x);
    size_t before = dev.program_cache_stats().built;
    for (double s : ss) {
      Vec got = (x * s + 0.75).to_vector();
      for (size_t i = 0; i < xs.size(); i++) {
        double xi = compiler::round_to(t, xs[i]);
        double want =
            compiler::round_to(t, compiler::round_to(t, xi * compiler::round_to(t, s)) + 0.75);
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(got[i])) << t.name() << " s=" << s << " x=" << xs[i];
        } else {
          EXPECT_EQ(got[i], want) << t.name() << " s=" << s << " x=" << xs[i];
          EXPECT_EQ(std::signbit(got[i]), std::signbit(want)) << t.name() << " s=" << s;
        }
      }
    }
    size_t built = dev.program_cache_stats().built - before;
    if (dev.program_cache_stats().built > 0) {
      EXPECT_LE(built, 2u) << t.name();
    }
  }
}

TEST(ConstArgs, IntegerScalarsKeepEveryBit) {
  for (DType t : {dtypes::kInt32, dtypes::kUint8, dtypes::kInt64, dtypes::kUint32}) {
    Tensor x = Tensor::from_data({1, 2, 3}, {3}, kF64).cast(t).realize();
    for (int64_t s : {int64_t{5}, int64_t{250}, int64_t{0}, int64_t{77}, int64_t{2147483647}}) {
      Vec got = (x + static_cast<double>(s)).to_vector();
      for (int i = 0; i < 3; i++)
        EXPECT_EQ(got[i], static_cast<double>(compiler::wrap_int(t, s + i + 1)))
            << t.name() << " s=" << s;
    }
  }
}

// Only the constant that changed is lifted; the one that stayed the same is still inlined.
TEST(ConstArgs, OnlyTheChangingConstantIsLifted) {
  clear_const_args();
  Tensor x = Tensor::from_data({1, 2, 3}, {3}, kF64).realize();
  auto ast_of = [&](double s) { return create_schedule({(x * s + 1.25).lazy()}).at(0).ast; };
  auto first = ast_of(2.0);
  KernelPlan p1 = plan_kernel(first);
  EXPECT_EQ(p1.ast, first);  // first sight: everything inlined
  auto second = ast_of(3.0);
  KernelPlan p2 = plan_kernel(second);
  EXPECT_NE(p2.ast, second);
  auto left = compiler::liftable_consts(p2.ast);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0]->const_value(), 1.25);
  EXPECT_EQ(plan_kernel(ast_of(4.0)).ast, p2.ast);  // every later value: the same program
  EXPECT_EQ(plan_kernel(first).ast, p2.ast);        // and the first value too, from now on
  ConstArgStats st = const_arg_stats();
  EXPECT_EQ(st.templates, 1u);
  EXPECT_EQ(st.lifted, 1u);
  EXPECT_EQ(plan_kernel(ast_of(5.0), /*inline_all=*/true).ast, ast_of(5.0));
  // The other constant changes too: both are lifted from then on, for every AST of the shape
  // (the template's lifted kernel is kept per version of what varies).
  auto other = create_schedule({(x * 6.0 + 0.5).lazy()}).at(0).ast;
  KernelPlan p3 = plan_kernel(other);
  EXPECT_TRUE(compiler::liftable_consts(p3.ast).empty());
  EXPECT_EQ(plan_kernel(ast_of(7.0)).ast, p3.ast);
  EXPECT_EQ(plan_kernel(second).ast, p3.ast);
  Vec got = (x * 7.0 + 0.5).to_vector();
  EXPECT_EQ(got, (Vec{7.5, 14.5, 21.5}));
}

// A TinyJit capture replays the values it captured; eager calls around it keep working.
TEST(ConstArgs, JitCapturesInlineTheirConstants) {
  double scale = 2.0;
  TinyJit jit(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * scale + 1.0}; });
  Tensor x = Tensor::from_data({1, 2}, {2}, kF64);
  for (int i = 0; i < 3; i++) {
    scale = 2.0 + i;  // the second call captures (scale 3); the third replays that
    jit({Tensor::from_data({1, 2}, {2}, kF64)});
  }
  ASSERT_TRUE(jit.captured());
  scale = 100.0;
  EXPECT_EQ(jit({Tensor::from_data({3, 4}, {2}, kF64)})[0].to_vector(), (Vec{10, 13}));
  EXPECT_EQ((x * 9.0 + 1.0).to_vector(), (Vec{10, 19}));
}

// The records stay bounded by PROGRAM_CACHE_SIZE however many kernel shapes run.
TEST(ConstArgs, RecordsAreBounded) {
  set_option_for_test("PROGRAM_CACHE_SIZE", "16");
  clear_const_args();
  for (int n = 1; n <= 40; n++) {
    Tensor x = Tensor::from_data(Vec(static_cast<size_t>(n), 1.0), {n}, kF64);
    EXPECT_EQ((x * 2.5).to_vector()[0], 2.5);
    EXPECT_LE(const_arg_stats().templates, 16u);
  }
  set_option_for_test("PROGRAM_CACHE_SIZE", "");
  EXPECT_EQ(max_records(), static_cast<size_t>(options().program_cache_size));
}

// Rows of a buffer written one at a time (a cache: t[i] = v, t[i:i+2] += 1) share one program:
// the launch passes the buffer from the row on. Values against a float64 reference; rows in
// every order, past the first 64 bytes and not, and an odd offset that only partly shifts.
TEST(ShiftViews, WritesIntoRowsOfABufferShareOneProgram) {
  Tensor t = Tensor::from_data(Vec(64 * 16, 0.0), {64, 16}).realize();
  Vec want(64 * 16, 0.0);
  auto& dev = device_of(t);
  for (int64_t r : {5, 0, 63, 17, 5, 40}) {  // the first write of this shape builds
    Tensor row = t.shrink({{r, r + 2 > 64 ? 64 : r + 2}, {0, 16}});
    row.write_view(row + static_cast<double>(r + 1));
    for (int64_t i = r; i < std::min<int64_t>(r + 2, 64); i++)
      for (int j = 0; j < 16; j++) want[i * 16 + j] += r + 1;
    if (r == 5 && dev.program_cache_stats().built > 0) {
      size_t before = dev.program_cache_stats().built;
      for (int64_t q : {1, 30, 62}) {  // other rows: no new program
        Tensor v = t.shrink({{q, q + 2}, {0, 16}});
        v.write_view(v + static_cast<double>(r + 1));
        for (int64_t i = q; i < q + 2; i++)
          for (int j = 0; j < 16; j++) want[i * 16 + j] += r + 1;
      }
      EXPECT_EQ(dev.program_cache_stats().built, before);
    }
  }
  EXPECT_EQ(t.to_vector(), want);
}

TEST(ShiftViews, ShiftsWholeCacheLinesOfSingleViewsOnly) {
  using compiler::ShapeTracker;
  auto g0 = compiler::global(0, dtypes::kFloat32), g1 = compiler::global(1, dtypes::kFloat32);
  auto at = [](int64_t offset) { return compiler::strided({4}, {1}, offset); };
  // buffer 0 written at 100 and read at 37 (floats): shifted by 32 (128 bytes); buffer 1 read
  // at 3 only: less than 64 bytes, not shifted
  auto ast = compiler::sink(
      {compiler::store(g0, at(100),
                       compiler::UOp::alu(compiler::Op::ADD, {compiler::load(g0, at(37)),
                                                              compiler::load(g1, at(3))}))});
  KernelPlan p = shift_views(ast);
  ASSERT_EQ(p.shifts.size(), 1u);
  EXPECT_EQ(p.shifts[0], (std::pair<int, int64_t>{0, 32 * 4}));
  std::vector<int64_t> offsets;
  for (const compiler::UOp* n : p.ast->toposort())
    if (n->op() == compiler::Op::VIEW) offsets.push_back(n->arg_as<ShapeTracker>().views[0].offset);
  std::sort(offsets.begin(), offsets.end());
  EXPECT_EQ(offsets, (std::vector<int64_t>{3, 5, 68}));
  // a pad (a masked view whose offset is before the buffer) and a stack of views: left alone
  ShapeTracker padded = compiler::strided({4}, {1}, -1);
  padded.views[0].mask = std::vector<std::pair<int64_t, int64_t>>{{1, 4}};
  auto masked = compiler::sink({compiler::store(g0, at(0), compiler::load(g1, padded))});
  EXPECT_TRUE(shift_views(masked).shifts.empty());
  ShapeTracker two{{compiler::View::contiguous({4}), compiler::strided({4}, {1}, 64).views[0]}};
  auto stacked = compiler::sink({compiler::store(g0, at(0), compiler::load(g1, two))});
  EXPECT_TRUE(shift_views(stacked).shifts.empty());
  EXPECT_EQ(shift_views(stacked).ast, stacked);
}

}  // namespace
}  // namespace baregrad::tensor
