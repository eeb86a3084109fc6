#include "compiler/uop.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <thread>
#include <unordered_set>
#include <vector>

#include "base/error.h"
#include "compiler/interp.h"
#include "tests/unit/index_const.h"

namespace baregrad::compiler {
namespace {

UOpPtr range(int64_t lo, int64_t hi) {
  return UOp::make(Op::RANGE, dtypes::kIndex, {c64(lo), c64(hi)}, int64_t{0});
}

TEST(UOp, EqualFieldsGiveTheSameNode) {
  auto x = UOp::var("x", 0, 9);
  EXPECT_EQ((x + 1).get(), (x + 1).get());
  EXPECT_EQ(UOp::var("x", 0, 9).get(), x.get());
  EXPECT_NE(UOp::var("x", 0, 10).get(), x.get());
  EXPECT_NE(UOp::cnst_int(dtypes::kInt32, 1).get(), UOp::cnst_int(dtypes::kInt64, 1).get());
  EXPECT_NE((x + 1).get(), (x + 2).get());
  EXPECT_NE((x + 1).get(), (x - 1).get());
}

TEST(UOp, ZeroAndNegativeZeroAreDistinctConstants) {
  auto pz = UOp::cnst(dtypes::kFloat32, 0.0), nz = UOp::cnst(dtypes::kFloat32, -0.0);
  EXPECT_NE(pz.get(), nz.get());
  EXPECT_TRUE(std::signbit(nz->const_value()));
  EXPECT_EQ(UOp::cnst(dtypes::kFloat32, NAN).get(), UOp::cnst(dtypes::kFloat32, NAN).get());
}

TEST(UOp, UnreferencedNodesDieAndCanBeRebuilt) {
  auto x = UOp::var("x", 0, 9);
  UOpPtr parent = x * 7 + 3;
  const UOp* child = parent->src(0).get();
  // The child lives while the parent does; rebuilding it finds the same node.
  EXPECT_EQ((x * 7).get(), child);
  parent = UOpPtr();
  for (int i = 0; i < 3; i++) {
    UOpPtr again = x * 7 + 3;
    EXPECT_EQ(again->op(), Op::ADD);
    EXPECT_EQ(again->src(0)->src(1)->const_int(), 7);
    EXPECT_EQ((x * 7 + 3).get(), again.get());
  }
}

TEST(UOp, ToposortPutsSourcesFirstAndEachNodeOnce) {
  auto x = UOp::var("x", 0, 9), y = UOp::var("y", 0, 9);
  UOpPtr s = x * y + (x * y) % 3;
  std::vector<const UOp*> order = s->toposort();
  EXPECT_EQ(order.back(), s.get());
  EXPECT_EQ(std::unordered_set<const UOp*>(order.begin(), order.end()).size(), order.size());
  EXPECT_EQ(order.size(), 6u);  // x, y, x*y, 3, (x*y)%3, the root
  for (size_t i = 0; i < order.size(); i++)
    for (auto& src : order[i]->src()) {
      auto at = std::find(order.begin(), order.end(), src.get());
      EXPECT_LT(at - order.begin(), static_cast<long>(i));
    }
  EXPECT_EQ(s->size(), order.size());
}

TEST(UOp, SubstituteReplacesByIdentity) {
  auto x = UOp::var("x", 0, 9), y = UOp::var("y", 0, 9);
  UOpPtr e = (x + 1) * x;
  EXPECT_EQ(e->substitute({{x, y}}), (y + 1) * y);
  EXPECT_EQ(e->substitute({{x + 1, c64(5)}}), c64(5) * x);
  EXPECT_EQ(e->substitute({}), e);
}

TEST(UOp, BoundsOfIndexOps) {
  auto r = range(2, 10), a = UOp::var("a", -3, 5);
  EXPECT_EQ(r->vmin(), 2);
  EXPECT_EQ(r->vmax(), 9);
  EXPECT_EQ((r + a)->vmin(), -1);
  EXPECT_EQ((r + a)->vmax(), 14);
  EXPECT_EQ((r * a)->vmin(), -27);
  EXPECT_EQ((r * a)->vmax(), 45);
  EXPECT_EQ((r * -2)->vmin(), -18);
  EXPECT_EQ((r / 4)->vmin(), 0);
  EXPECT_EQ((r / 4)->vmax(), 2);
  EXPECT_EQ((a / 2)->vmin(), -1);
  EXPECT_EQ((a / 2)->vmax(), 2);
  EXPECT_EQ((r % 4)->vmin(), 0);
  EXPECT_EQ((r % 4)->vmax(), 3);
  EXPECT_EQ((a % 4)->vmin(), -3);
  EXPECT_EQ((a % 4)->vmax(), 3);
  EXPECT_EQ(lt(r, 2)->vmax(), 0);
  EXPECT_EQ(lt(r, 10)->vmin(), 1);
  EXPECT_EQ(lt(r, 5)->vmin(), 0);
  EXPECT_EQ(lt(r, 5)->vmax(), 1);
  UOpPtr w = where(lt(a, 0), r, a * 10);
  EXPECT_EQ(w->vmin(), -30);
  EXPECT_EQ(w->vmax(), 50);
  EXPECT_EQ(where(UOp::cnst_int(dtypes::kBool, 1), r, a)->vmin(), 2);
}

TEST(UOp, IntegerAluWrapsToTheDtype) {
  auto run = [](Op op, DType t, int64_t a, int64_t b) {
    std::array<int64_t, 2> x{a, b};
    return exec_alu_int(op, t, x);
  };
  EXPECT_EQ(run(Op::ADD, dtypes::kInt8, 127, 1), -128);
  EXPECT_EQ(run(Op::SUB, dtypes::kUint8, 0, 1), 255);
  EXPECT_EQ(run(Op::ADD, dtypes::kUint8, 255, 1), 0);
  EXPECT_EQ(run(Op::MUL, dtypes::kInt8, 16, 16), 0);
  EXPECT_EQ(run(Op::ADD, dtypes::kInt32, std::numeric_limits<int32_t>::max(), 1),
            std::numeric_limits<int32_t>::min());
  EXPECT_EQ(run(Op::IDIV, dtypes::kInt32, -7, 2), -3);
  EXPECT_EQ(run(Op::MOD, dtypes::kInt32, -7, 2), -1);
  EXPECT_EQ(run(Op::MOD, dtypes::kInt32, 7, -2), 1);
  EXPECT_EQ(run(Op::CMPLT, dtypes::kUint8, 200, 100), 0);
  EXPECT_EQ(run(Op::CMPLT, dtypes::kInt8, -56, 100), 1);
  EXPECT_EQ(wrap_int(dtypes::kUint16, -1), 65535);
}

TEST(UOp, FloatAluRoundsToTheDtype) {
  auto run = [](Op op, DType t, double a, double b) {
    std::array<double, 2> x{a, b};
    return exec_alu_float(op, t, x);
  };
  EXPECT_EQ(run(Op::ADD, dtypes::kFloat32, 0.1f, 0.2f), static_cast<double>(0.1f + 0.2f));
  EXPECT_NE(run(Op::ADD, dtypes::kFloat64, 0.1f, 0.2f), static_cast<double>(0.1f + 0.2f));
  EXPECT_EQ(run(Op::ADD, dtypes::kFloat32, 1.0, std::ldexp(1.0, -30)), 1.0);
  EXPECT_EQ(run(Op::ADD, dtypes::kFloat16, 2048, 1), 2048);
  EXPECT_EQ(run(Op::ADD, dtypes::kBFloat16, 1.0, std::ldexp(1.0, -9)), 1.0);
  EXPECT_EQ(round_to(dtypes::kFloat32, 1.0 / 3), static_cast<double>(1.0f / 3));
  EXPECT_TRUE(std::isnan(run(Op::MAX, dtypes::kFloat32, NAN, 1.0)));
}

TEST(UOp, ConcurrentBuildersGetTheSameNodes) {
  constexpr int kIters = 100000;
  auto build = [](int i) {
    auto x = UOp::var("x", 0, 1000);
    return (x * (i % 97) + (i % 13)) % 7 + UOp::var("t", 0, 100);
  };
  std::vector<UOpPtr> a(kIters), b(kIters);
  std::thread t1([&] {
    for (int i = 0; i < kIters; i++) a[i] = build(i);
  });
  std::thread t2([&] {
    for (int i = 0; i < kIters; i++) {
      b[i] = build(i);
      UOpPtr churn = UOp::var("churn", 0, i) + i;  // dies at once
    }
  });
  t1.join();
  t2.join();
  for (int i = 0; i < kIters; i++) ASSERT_EQ(a[i].get(), b[i].get()) << i;
}

TEST(Interp, EvaluatesIndexMathWithCSemantics) {
  auto x = UOp::var("x", -10, 10);
  UOpPtr e = (x * 3 - 1) / 2 % 4;
  for (int64_t v = -10; v <= 10; v++) EXPECT_EQ(eval_int(e, {{"x", v}}), (v * 3 - 1) / 2 % 4);
  EXPECT_EQ(eval_int(where(lt(x, 0), -x, x), {{"x", -7}}), 7);
  EXPECT_EQ(eval_int(maximum(x, c64(2)), {{"x", -7}}), 2);
  EXPECT_EQ(eval_int(UOp::cnst_int(dtypes::kInt8, 100) + UOp::cnst_int(dtypes::kInt8, 100)), -56);
}

TEST(Interp, CastsTruncateAndRound) {
  auto f = [](double v) { return UOp::cnst(dtypes::kFloat32, v); };
  EXPECT_EQ(eval_int(cast(f(-2.75), dtypes::kInt32)), -2);
  EXPECT_EQ(eval_int(cast(f(2.75), dtypes::kUint8)), 2);
  EXPECT_EQ(eval_int(cast(f(0.25), dtypes::kBool)), 1);
  EXPECT_EQ(eval_int(cast(UOp::cnst_int(dtypes::kInt32, 300), dtypes::kUint8)), 44);
  EXPECT_EQ(eval_float(cast(UOp::cnst_int(dtypes::kInt64, (1 << 24) + 1), dtypes::kFloat32)),
            16777216.0);
  EXPECT_EQ(eval_float(cast(UOp::cnst(dtypes::kFloat64, 0.1), dtypes::kFloat32)),
            static_cast<double>(0.1f));
  EXPECT_EQ(eval_int(cast(UOp::cnst(dtypes::kFloat64, NAN), dtypes::kInt32)), 0);
}

TEST(Interp, BitcastsReinterpretBits) {
  auto bitcast = [](const UOpPtr& u, DType t) { return UOp::make(Op::BITCAST, t, {u}); };
  EXPECT_EQ(eval_int(bitcast(UOp::cnst(dtypes::kFloat32, 1.0), dtypes::kUint32)), 0x3f800000);
  EXPECT_EQ(eval_int(bitcast(UOp::cnst(dtypes::kFloat32, -2.0), dtypes::kInt32)),
            static_cast<int32_t>(0xc0000000u));
  EXPECT_EQ(
      eval_float(bitcast(UOp::cnst_int(dtypes::kInt64, 0x3ff0000000000000), dtypes::kFloat64)),
      1.0);
  EXPECT_EQ(eval_int(bitcast(UOp::cnst(dtypes::kFloat16, 1.0), dtypes::kUint16)), 0x3c00);
  EXPECT_EQ(eval_int(bitcast(UOp::cnst(dtypes::kBFloat16, -1.0), dtypes::kInt16)),
            static_cast<int16_t>(0xbf80));
  EXPECT_EQ(eval_float(bitcast(UOp::cnst_int(dtypes::kUint16, 0x4000), dtypes::kBFloat16)), 2.0);
}

TEST(Interp, InputsBindArbitraryNodes) {
  auto p = UOp::make(Op::DEFINE_VAR, dtypes::kFloat32, {}, VarArg{"p", 0, 0});
  NodeValues in{{p.get(), 0.1}};
  auto two = UOp::cnst(dtypes::kFloat32, 2.0);
  EXPECT_EQ(eval_float(p * two + p, {}, &in), static_cast<double>(0.1f * 2.0f + 0.1f));
  auto buf = UOp::make(Op::DEFINE_GLOBAL, dtypes::kFloat32.as_ptr(), {}, int64_t{0});
  auto ld =
      UOp::make(Op::LOAD, dtypes::kFloat32, {UOp::make(Op::INDEX, buf->dtype(), {buf, c64(0)})});
  NodeValues loads{{ld.get(), 1.5}};
  EXPECT_EQ(eval_float(ld * two, {}, &loads), 3.0);
  EXPECT_THROW(eval_float(ld * two), Error);
  EXPECT_THROW(eval_int(UOp::var("q", 0, 1)), Error);
}

}  // namespace
}  // namespace baregrad::compiler
