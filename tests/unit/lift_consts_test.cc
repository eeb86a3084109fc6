// Lifting kernel constants into launch scalars (compiler/passes/lift_consts.h): the bits a launch
// passes, checked against IEEE encodings written out here, and lifted expressions evaluated by the
// reference interpreter against the same expressions with the constants inlined.
#include "compiler/passes/lift_consts.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "compiler/ast.h"
#include "compiler/interp.h"

namespace baregrad::compiler {
namespace {

TEST(LiftConsts, BitsAreTheValueInTheConstantsDtype) {
  // IEEE 754 encodings of 1.5 and -2.0 (sign, biased exponent, fraction), sign-extended from
  // the dtype's width; bfloat16 is float32's top half.
  EXPECT_EQ(const_bits(*UOp::cnst(dtypes::kFloat64, 1.5)), 0x3ff8000000000000);
  EXPECT_EQ(const_bits(*UOp::cnst(dtypes::kFloat32, 1.5)), 0x3fc00000);
  EXPECT_EQ(const_bits(*UOp::cnst(dtypes::kFloat32, -2.0)), -0x40000000);  // 0xc0000000
  EXPECT_EQ(const_bits(*UOp::cnst(dtypes::kFloat16, 1.5)), 0x3e00);
  EXPECT_EQ(const_bits(*UOp::cnst(dtypes::kFloat16, -2.0)), -0x4000);  // 0xc000
  EXPECT_EQ(const_bits(*UOp::cnst(dtypes::kBFloat16, 1.5)), 0x3fc0);
  EXPECT_EQ(const_bits(*UOp::cnst(dtypes::kFloat32, -0.0)), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(const_bits(*UOp::cnst_int(dtypes::kInt8, -3)), -3);
  EXPECT_EQ(const_bits(*UOp::cnst_int(dtypes::kUint32, 0xffffffff)), 0xffffffff);
  EXPECT_EQ(const_bits(*UOp::cnst_int(dtypes::kUint64, -1)), -1);  // uint64 max, its bit pattern
}

TEST(LiftConsts, FindsValueConstantsOnceAndNamesThem) {
  auto in = global(1, dtypes::kFloat32), out = global(0, dtypes::kFloat32);
  auto x = load(in, ShapeTracker::contiguous({4}));
  auto two = UOp::cnst(dtypes::kFloat32, 2.0);
  auto gt = UOp::make(Op::CMPLT, dtypes::kBool, {x, two});
  auto v = UOp::make(
      Op::WHERE, dtypes::kFloat32,
      {UOp::make(Op::AND, dtypes::kBool, {gt, UOp::make(Op::CONST, dtypes::kBool, {}, true)}),
       UOp::alu(Op::MUL, {x, two}), UOp::cnst(dtypes::kFloat32, 7.0)});
  auto ast = sink({store(out, ShapeTracker::contiguous({4}), v)});
  auto consts = liftable_consts(ast);
  ASSERT_EQ(consts.size(), 2u);  // 2.0 once (interned), 7.0; the bool constant stays
  EXPECT_EQ(consts[0]->const_value() + consts[1]->const_value(), 9.0);
  EXPECT_EQ(lifted_index(lifted_name(3)), 3);
  EXPECT_EQ(lifted_index("n"), -1);
  EXPECT_EQ(lifted_index(lifted_name(1) + "x"), -1);

  auto lifted = lift_consts(ast, consts, {0});
  auto left = liftable_consts(lifted);
  ASSERT_EQ(left.size(), 1u);  // only the other one is still a CONST
  EXPECT_EQ(left[0], consts[1]);
  EXPECT_EQ(lift_consts(ast, consts, {}), ast);
}

// x * c + d with c and d lifted, evaluated by the interpreter for every float dtype and for
// awkward values, against the inlined expression.
TEST(LiftConsts, LiftedExpressionsEvaluateExactlyAsInlined) {
  const double values[] = {0.0,  -0.0,   1.0,     -1.5,   3.25e-3,  65504.0,   1e-7,
                           1e30, -1e300, 1.7e308, 5e-324, INFINITY, -INFINITY, NAN};
  for (DType t : {dtypes::kFloat64, dtypes::kFloat32, dtypes::kFloat16, dtypes::kBFloat16}) {
    for (double c : values) {
      for (double d : {0.5, -0.0}) {
        auto x = UOp::var("x", -100, 100);
        auto xf = UOp::make(Op::CAST, t, {x});
        auto cc = UOp::cnst(t, c), dc = UOp::cnst(t, d);
        auto e = UOp::alu(Op::ADD, {UOp::alu(Op::MUL, {xf, cc}), dc});
        auto consts = liftable_consts(e);
        std::vector<size_t> all(consts.size());
        for (size_t i = 0; i < all.size(); i++) all[i] = i;
        auto lifted = lift_consts(e, consts, all);
        ASSERT_TRUE(liftable_consts(lifted).empty()) << t.name();
        for (int64_t xv : {-3, 0, 7}) {
          VarValues vars{{"x", xv}};
          for (size_t i = 0; i < consts.size(); i++) vars[lifted_name(i)] = const_bits(*consts[i]);
          double want = eval_float(e, {{"x", xv}}), got = eval_float(lifted, vars);
          if (std::isnan(want)) {
            EXPECT_TRUE(std::isnan(got)) << t.name() << " c=" << c << " x=" << xv;
          } else {
            EXPECT_EQ(got, want) << t.name() << " c=" << c << " d=" << d << " x=" << xv;
            EXPECT_EQ(std::signbit(got), std::signbit(want)) << t.name() << " c=" << c;
          }
        }
      }
    }
  }
}

TEST(LiftConsts, LiftedIntegersKeepTheirValue) {
  struct Case {
    DType t;
    int64_t v;
  };
  for (Case k : {Case{dtypes::kInt8, -128}, Case{dtypes::kUint8, 255}, Case{dtypes::kInt16, -7},
                 Case{dtypes::kUint16, 65535}, Case{dtypes::kInt32, -2147483647 - 1},
                 Case{dtypes::kUint32, 4294967295}, Case{dtypes::kInt64, -(int64_t{1} << 62)},
                 Case{dtypes::kUint64, -2}}) {
    auto x = UOp::make(Op::CAST, k.t, {UOp::var("x", 0, 5)});
    auto e = UOp::alu(Op::ADD, {x, UOp::cnst_int(k.t, k.v)});
    auto consts = liftable_consts(e);
    ASSERT_EQ(consts.size(), 1u) << k.t.name();
    auto lifted = lift_consts(e, consts, {0});
    for (int64_t xv : {0, 1, 5}) {
      EXPECT_EQ(eval_int(lifted, {{"x", xv}, {lifted_name(0), const_bits(*consts[0])}}),
                eval_int(e, {{"x", xv}}))
          << k.t.name() << " " << k.v << " x=" << xv;
    }
  }
}

}  // namespace
}  // namespace baregrad::compiler
