// Constants that change between calls travel as launch scalars (tensor/const_args.h): results
// against a float64 reference rounded per op to the tensor's dtype, the number of programs
// built, which constants stay inlined, TinyJit captures, and the bound on the records.
#include "tensor/const_args.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "base/options.h"
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

}  // namespace
}  // namespace baregrad::tensor
