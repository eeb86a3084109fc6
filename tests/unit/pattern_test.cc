#include "compiler/pattern.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "tests/unit/index_const.h"

namespace baregrad::compiler {
namespace {

bool matches(const UPat& p, const UOpPtr& n, Match* out = nullptr) {
  Match m;
  bool ok = p.match(n.get(), m);
  if (out) *out = m;
  return ok;
}

TEST(UPat, BindsNamedParts) {
  auto a = UOp::var("a", 0, 9);
  UPat p = UPat::var("x") + UPat::cnst(0);  // Match points at p's names: p must outlive m
  Match m;
  ASSERT_TRUE(matches(p, a + 0, &m));
  EXPECT_EQ(m.get("x"), a.get());
  EXPECT_EQ(m.get("nope"), nullptr);
  EXPECT_FALSE(matches(p, a + 1));
}

TEST(UPat, SameNameMustBindTheSameNode) {
  auto a = UOp::var("a", 0, 9), b = UOp::var("b", 0, 9);
  UPat twice = UPat::var("x") + UPat::var("x");
  EXPECT_TRUE(matches(twice, a + a));
  EXPECT_FALSE(matches(twice, a + b));
}

TEST(UPat, CommutativeOpsMatchBothOrders) {
  auto a = UOp::var("a", 0, 9);
  UPat p = UPat::var("x") * UPat::cvar("c");
  UOpPtr right = a * 3, left = c64(3) * a;  // Match holds raw pointers into these
  Match m1, m2;
  ASSERT_TRUE(matches(p, right, &m1));
  ASSERT_TRUE(matches(p, left, &m2));
  EXPECT_EQ(m1.get("x"), a.get());
  EXPECT_EQ(m2.get("x"), a.get());
  EXPECT_EQ(m2.get("c"), c64(3).get());
  // SUB is not commutative.
  EXPECT_FALSE(matches(UPat::var("x") - UPat::cvar("c"), c64(3) - a));
}

TEST(UPat, ConstantPatterns) {
  auto a = UOp::var("a", 0, 9);
  EXPECT_TRUE(matches(UPat::cvar("c"), c64(7)));
  EXPECT_FALSE(matches(UPat::cvar("c"), a));
  EXPECT_TRUE(matches(UPat::cnst(3), c64(3)));
  EXPECT_TRUE(matches(UPat::cnst(3), UOp::cnst(dtypes::kFloat32, 3.0)));
  EXPECT_FALSE(matches(UPat::cnst(3), c64(4)));
}

TEST(UPat, DtypeAndArgFilters) {
  auto a = UOp::var("a", 0, 9);
  auto f = UOp::cnst(dtypes::kFloat32, 1.5);
  EXPECT_TRUE(matches(UPat::var("x", dtypes::kInt64), a));
  EXPECT_FALSE(matches(UPat::var("x", dtypes::kInt32), a));
  EXPECT_TRUE(matches(UPat::var().scalar(Scalar::kFloat32), UOp::cnst(dtypes::kFloat32.vec(4), 1)));
  EXPECT_FALSE(matches(UPat::var().scalar(Scalar::kFloat32), c64(1)));
  EXPECT_TRUE(matches(UPat::op(Op::CONST).arg(1.5), f));
  EXPECT_FALSE(matches(UPat::op(Op::CONST).arg(2.5), f));
  EXPECT_TRUE(matches(UPat::op(Op::DEFINE_VAR).arg(VarArg{"a", 0, 9}), a));
  EXPECT_TRUE(matches(UPat::var().where([](const UOp* n) { return n->vmax() == 9; }), a));
  EXPECT_FALSE(matches(UPat::var().where([](const UOp* n) { return n->vmax() == 8; }), a));
}

TEST(UPat, ExtraSourcesNeedAllowExtraSrc) {
  auto buf = UOp::make(Op::DEFINE_GLOBAL, dtypes::kFloat32.as_ptr(), {}, int64_t{0});
  auto valid = lt(UOp::var("a", 0, 9), 5);
  auto idx = UOp::make(Op::INDEX, dtypes::kFloat32.as_ptr(), {buf, c64(1), valid});
  std::vector<UPat> two{UPat::var("b"), UPat::var("i")};
  EXPECT_FALSE(matches(UPat::op(Op::INDEX, two), idx));
  EXPECT_TRUE(matches(UPat::op(Op::INDEX, two).allow_extra_src(), idx));
  EXPECT_FALSE(matches(
      UPat::op(Op::INDEX, std::vector<UPat>{UPat::var(), UPat::var(), UPat::var(), UPat::var()})
          .allow_extra_src(),
      idx));
}

// Records every node the matcher is asked about, declining them all.
PatternMatcher recorder() {
  return PatternMatcher({{UPat::var(), [](const Match& m) -> UOpPtr {
                            static_cast<std::vector<const UOp*>*>(m.ctx)->push_back(m.node.get());
                            return nullptr;
                          }}});
}

TEST(GraphRewrite, BottomUpVisitsSourcesBeforeUsers) {
  auto a = UOp::var("a", 0, 9), b = UOp::var("b", 0, 9);
  UOpPtr root = a + b;
  std::vector<const UOp*> seen;
  RewriteOptions opts;
  opts.ctx = &seen;
  graph_rewrite(root, recorder(), opts);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen.back(), root.get());
}

TEST(GraphRewrite, TopDownVisitsUsersFirst) {
  auto a = UOp::var("a", 0, 9), b = UOp::var("b", 0, 9);
  UOpPtr root = a + b;
  std::vector<const UOp*> seen;
  RewriteOptions opts;
  opts.ctx = &seen;
  opts.order = RewriteOrder::kTopDown;
  graph_rewrite(root, recorder(), opts);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.front(), root.get());
  EXPECT_NE(std::find(seen.begin(), seen.end(), a.get()), seen.end());
}

// Raises CONSTs below 3 by one, at most once per pass: the SINK (visited last, bottom-up)
// refills the budget.
TEST(GraphRewrite, FixedPointRepeatsPasses) {
  PatternMatcher pm({
      {UPat::cvar("c").where([](const UOp* c) { return c->const_int() < 3; }),
       [](const Match& m) -> UOpPtr {
         int* budget = static_cast<int*>(m.ctx);
         if (*budget == 0) return nullptr;
         --*budget;
         return c64(m["c"]->const_int() + 1);
       }},
      {UPat::op(Op::SINK),
       [](const Match& m) -> UOpPtr {
         *static_cast<int*>(m.ctx) = 1;
         return nullptr;
       }},
  });
  UOpPtr root = UOp::make(Op::SINK, dtypes::kVoid, {c64(0)});
  int budget = 1;
  RewriteOptions once;
  once.ctx = &budget;
  EXPECT_EQ(graph_rewrite(root, pm, once)->src(0), c64(1));
  budget = 1;
  RewriteOptions fixed = once;
  fixed.fixed_point = true;
  EXPECT_EQ(graph_rewrite(root, pm, fixed)->src(0), c64(3));
}

TEST(GraphRewrite, RewritesRepeatUntilNoRuleApplies) {
  PatternMatcher pm({{UPat::cvar("c").where([](const UOp* c) { return c->const_int() < 10; }),
                      [](const Match& m) { return c64(m["c"]->const_int() + 1); }}});
  UOpPtr a = UOp::var("a", 0, 9);
  EXPECT_EQ(graph_rewrite(a + 0, pm), a + 10);
}

TEST(PatternMatcher, NullResultDeclinesAndTheNextRuleRuns) {
  auto a = UOp::var("a", 0, 9);
  PatternMatcher pm({
      {UPat::var("x") + UPat::var("y"), [](const Match&) -> UOpPtr { return nullptr; }},
      {UPat::var("x") + UPat::var("y"), [](const Match& m) { return m["x"]; }},
  });
  EXPECT_EQ(pm.rewrite(a + 1), a);
  EXPECT_EQ(pm.rewrite(a * 2), nullptr);
}

TEST(PatternMatcher, ConcatenationKeepsRuleOrder) {
  auto a = UOp::var("a", 0, 9);
  PatternMatcher first({{UPat::var("x") + UPat::cvar("c"), [](const Match& m) { return m["x"]; }}});
  PatternMatcher second(
      {{UPat::var("x") + UPat::cvar("c"), [](const Match& m) { return m["c"]; }}});
  EXPECT_EQ((first + second).rewrite(a + 1), a);
  EXPECT_EQ((second + first).rewrite(a + 1), c64(1));
  EXPECT_EQ((first + second).size(), 2u);
}

}  // namespace
}  // namespace baregrad::compiler
