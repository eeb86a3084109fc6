#include "compiler/symbolic.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "compiler/interp.h"
#include "compiler/spec.h"
#include "tests/unit/index_const.h"

namespace baregrad::compiler {
namespace {

TEST(SymbolicSimple, FoldsConstantsOfEveryKind) {
  EXPECT_EQ(simplify(c64(7) * c64(6) + c64(1)), c64(43));
  EXPECT_EQ(simplify(c64(-7) / c64(2)), c64(-3));
  EXPECT_EQ(simplify(c64(-7) % c64(2)), c64(-1));
  auto i8 = [](int64_t v) { return UOp::cnst_int(dtypes::kInt8, v); };
  EXPECT_EQ(simplify(i8(127) + i8(1)), i8(-128));
  auto f32 = [](double v) { return UOp::cnst(dtypes::kFloat32, v); };
  EXPECT_EQ(simplify(f32(0.1) + f32(0.2)), f32(static_cast<float>(0.1f + 0.2f)));
  EXPECT_EQ(simplify(cast(f32(-2.75), dtypes::kInt32)), UOp::cnst_int(dtypes::kInt32, -2));
  EXPECT_EQ(simplify(lt(c64(3), c64(4))), UOp::cnst_int(dtypes::kBool, 1));
}

TEST(SymbolicSimple, NeverFoldsDivisionByZero) {
  for (UOpPtr e : {c64(5) / c64(0), c64(5) % c64(0)}) {
    EXPECT_EQ(graph_rewrite(e, symbolic_simple()), e);
    EXPECT_EQ(simplify(e), e);
  }
}

TEST(SymbolicSimple, Identities) {
  auto x = UOp::var("x", -5, 5);
  const PatternMatcher& pm = symbolic_simple();
  EXPECT_EQ(graph_rewrite(x + 0, pm), x);
  EXPECT_EQ(graph_rewrite(c64(0) + x, pm), x);
  EXPECT_EQ(graph_rewrite(x * 1, pm), x);
  EXPECT_EQ(graph_rewrite(x * 0, pm), c64(0));
  EXPECT_EQ(graph_rewrite(x / 1, pm), x);
  EXPECT_EQ(graph_rewrite(x % 1, pm), c64(0));
  EXPECT_EQ(graph_rewrite(x - x, pm), c64(0));
  EXPECT_EQ(graph_rewrite(-(-x), pm), x);
  EXPECT_EQ(graph_rewrite(cast(x, dtypes::kInt64), pm), x);
  EXPECT_EQ(graph_rewrite(lt(x, x), pm), UOp::cnst_int(dtypes::kBool, 0));
  EXPECT_EQ(graph_rewrite(where(lt(x, 3), x, x), pm), x);
  EXPECT_EQ(graph_rewrite(where(UOp::cnst_int(dtypes::kBool, 1), x, x * 2), pm), x);
  auto b = lt(x, 2);
  auto t = UOp::cnst_int(dtypes::kBool, 1), f = UOp::cnst_int(dtypes::kBool, 0);
  EXPECT_EQ(graph_rewrite(logical_and(b, t), pm), b);
  EXPECT_EQ(graph_rewrite(logical_and(b, f), pm), f);
  EXPECT_EQ(graph_rewrite(UOp::alu(Op::OR, {b, t}), pm), t);
  EXPECT_EQ(graph_rewrite(UOp::alu(Op::OR, {b, f}), pm), b);
}

TEST(SymbolicSimple, LeavesFloatsAloneWhereIeeeDiffers) {
  auto p = UOp::make(Op::DEFINE_VAR, dtypes::kFloat32, {}, VarArg{"p", 0, 0});
  const PatternMatcher& pm = symbolic_simple();
  UOpPtr z = UOp::cnst(dtypes::kFloat32, 0.0);
  for (UOpPtr e : {p * z, p + z, p - p, lt(p, p)}) EXPECT_EQ(graph_rewrite(e, pm), e);
  EXPECT_EQ(graph_rewrite(p + UOp::cnst(dtypes::kFloat32, -0.0), pm), p);
  EXPECT_EQ(graph_rewrite(p * UOp::cnst(dtypes::kFloat32, 1.0), pm), p);
}

TEST(Symbolic, TargetedIndexMath) {
  auto x = UOp::var("x", 0, 100), y = UOp::var("y", 0, 3), z = UOp::var("z", 0, 1000);
  EXPECT_EQ(simplify((x * 4 + y) / 4), x);
  EXPECT_EQ(simplify((x * 4 + y) % 4), y);
  EXPECT_EQ(simplify((x * 4 + z) / 4), x + z / 4);
  EXPECT_EQ(simplify((x * 4 + z) % 4), z % 4);
  EXPECT_EQ(simplify((x + 9) % 4), (x + 1) % 4);
  EXPECT_EQ(simplify((z % 16) % 4), z % 4);
  EXPECT_EQ(simplify((z / 4) / 8), z / 32);
  EXPECT_EQ(simplify(z / 1), z);
  EXPECT_EQ(simplify((z + 3) + 5), z + 8);
  EXPECT_EQ(simplify((z * 3) * 5), z * 15);
  EXPECT_EQ(simplify(z * 3 + z * 5), z * 8);
  EXPECT_EQ(simplify((z + z) + z * 2), z * 4);
  EXPECT_EQ(simplify(z + z), z + z);  // z * 2 would add a node
  EXPECT_EQ(simplify(c64(3) + z), z + 3);
  EXPECT_EQ(simplify(y % 8), y);
  EXPECT_EQ(simplify(y / 8), c64(0));
  EXPECT_EQ(simplify((z * 6) / 6), z);
  EXPECT_EQ(simplify((z * 6) % 6), c64(0));
  EXPECT_EQ(simplify((z * 4 + x * 6) / 8), (z * 2 + x * 3) / 4);
  EXPECT_EQ(simplify((z / 4) * 4 + z % 4), z);
  EXPECT_EQ(simplify(lt(y, 4)), UOp::cnst_int(dtypes::kBool, 1));
  EXPECT_EQ(simplify(lt(y, 0)), UOp::cnst_int(dtypes::kBool, 0));
  EXPECT_EQ(simplify(lt(z * 4, 10)), lt(z, 3));
  EXPECT_EQ(simplify(lt(z + 4, 10)), lt(z, 6));
  EXPECT_EQ(simplify(lt(z / 4, 10)), lt(z, 40));
  EXPECT_EQ(simplify(maximum(y, x + 3)), x + 3);
  EXPECT_EQ(simplify(where(lt(y, 4), x, z)), x);
}

TEST(Symbolic, NegativeOperandsKeepTruncation) {
  auto a = UOp::var("a", -10, 10);
  // (a*4 + 3) // 4 is not a for negative a: -4*4+3 = -13, -13/4 = -3.
  UOpPtr e = (a * 4 + 3) / 4;
  UOpPtr s = simplify(e);
  for (int64_t v = -10; v <= 10; v++)
    EXPECT_EQ(eval_int(s, {{"a", v}}), eval_int(e, {{"a", v}})) << s->str();
  EXPECT_EQ(simplify((a * 4) / 4), a);
  EXPECT_EQ(simplify((a % 16) % 4), a % 4);
  EXPECT_EQ(simplify(a % 11), a);
}

TEST(Symbolic, NarrowIntegerSumsKeepWrapAround) {
  std::mt19937_64 rng(7);
  for (DType t : {dtypes::kInt8, dtypes::kUint8, dtypes::kInt32, dtypes::kUint32}) {
    auto x = cast(UOp::var("x", -300, 300), t), y = cast(UOp::var("y", 0, 300), t);
    auto k = [&](int64_t v) { return UOp::cnst_int(t, v); };
    for (int i = 0; i < 500; i++) {
      UOpPtr e = rng() % 2 ? x : y;
      for (int d = 0; d < 5; d++) {
        UOpPtr c = k(static_cast<int64_t>(rng() % 400) - 200);
        switch (rng() % 5) {
          case 0:
            e = e + c;
            break;
          case 1:
            e = e - (rng() % 2 ? x : y);
            break;
          case 2:
            e = e * c;
            break;
          case 3:
            e = -e + (rng() % 2 ? x : y);
            break;
          default:
            e = c - e;
            break;
        }
      }
      UOpPtr s = simplify(e);
      ASSERT_LE(s->size(), e->size());
      for (int64_t xv = -300; xv <= 300; xv += 37)
        for (int64_t yv = 0; yv <= 300; yv += 41)
          ASSERT_EQ(eval_int(e, {{"x", xv}, {"y", yv}}), eval_int(s, {{"x", xv}, {"y", yv}}))
              << t.name() << " x=" << xv << " y=" << yv << "\n"
              << e->str() << "->\n"
              << s->str();
    }
  }
  UOpPtr x8 = cast(UOp::var("x", 0, 10), dtypes::kInt8);
  UOpPtr c100 = UOp::cnst_int(dtypes::kInt8, 100);
  EXPECT_EQ(simplify((x8 + c100) + c100), x8 + UOp::cnst_int(dtypes::kInt8, -56));
}

// Random index expressions over bounded variables; bounds keep every value far from overflow.
class ExprGen {
 public:
  explicit ExprGen(uint64_t seed) : rng_(seed) {}

  void new_vars() {
    vars_.clear();
    int n = 1 + pick(3);
    for (int i = 0; i < n; i++) {
      int64_t lo = pick(3) == 0 ? -pick(20) - 1 : pick(2) * pick(5);
      int64_t hi = lo + pick(40);
      vars_.push_back(UOp::var("v" + std::to_string(i), lo, hi));
    }
  }
  VarValues assignment() {
    VarValues out;
    for (auto& v : vars_) {
      const VarArg& a = v->arg_as<VarArg>();
      out[a.name] = a.min + pick(static_cast<int>(a.max - a.min + 1));
    }
    return out;
  }
  // Operands are drawn in a fixed order so every compiler builds the same expressions.
  UOpPtr expr(int depth) {
    if (depth == 0 || pick(5) == 0) return leaf();
    int op = pick(9);
    UOpPtr a = op == 7 ? cond(depth - 1) : expr(depth - 1);
    switch (op) {
      case 0:
        return a + expr(depth - 1);
      case 1:
        return a - expr(depth - 1);
      case 2:
        return a * constant(-4, 8);
      case 3:
        return a * (pick(2) ? vars_[pick(vars_.size())] : constant(-3, 6));
      case 4:
        return a / constant(1, 9);
      case 5:
        return a % constant(1, 9);
      case 6:
        return maximum(a, expr(depth - 1));
      case 7: {
        UOpPtr b = expr(depth - 1);
        return where(a, b, expr(depth - 1));
      }
      default:
        return a + constant(-10, 10);
    }
  }
  const std::vector<UOpPtr>& vars() const { return vars_; }

 private:
  int pick(size_t n) { return static_cast<int>(rng_() % n); }
  UOpPtr constant(int lo, int hi) { return c64(lo + pick(hi - lo + 1)); }
  UOpPtr leaf() { return pick(4) == 0 ? constant(-5, 20) : vars_[pick(vars_.size())]; }
  UOpPtr cond(int depth) {
    UOpPtr a = expr(depth);
    switch (pick(3)) {
      case 0:
        return lt(a, expr(depth));
      case 1:
        return lt(a, constant(-10, 30));
      default:
        return ne(a, expr(depth));
    }
  }
  std::mt19937_64 rng_;
  std::vector<UOpPtr> vars_;
};

std::string show(const VarValues& vals) {
  std::string s;
  for (auto& [k, v] : vals) s += k + "=" + std::to_string(v) + " ";
  return s;
}

TEST(Symbolic, RandomExpressionsKeepValuesAndNeverGrow) {
  constexpr int kExprs = 100000, kAssignments = 8;
  ExprGen gen(0x5eed);
  auto start = std::chrono::steady_clock::now();
  int changed = 0, fallbacks = 0;
  size_t before = 0, after = 0;
  for (int i = 0; i < kExprs; i++) {
    if (i % 50 == 0) gen.new_vars();
    UOpPtr e = gen.expr(1 + i % 6);
    UOpPtr s = simplify(e);
    changed += s != e;
    RewriteOptions fixed;
    fixed.fixed_point = true;
    fallbacks += graph_rewrite(e, symbolic(), fixed)->size() > e->size();
    before += e->size();
    after += s->size();
    ASSERT_LE(s->size(), e->size()) << "grew:\n" << e->str() << "->\n" << s->str();
    Status ok = verify_expr(s);
    ASSERT_TRUE(ok.ok()) << ok.to_string() << "\n" << s->str();
    for (int j = 0; j < kAssignments; j++) {
      VarValues vals = gen.assignment();
      ASSERT_EQ(eval_int(e, vals), eval_int(s, vals)) << "vars: " << show(vals) << "\noriginal:\n"
                                                      << e->str() << "simplified:\n"
                                                      << s->str();
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "%d expressions, %d simplified, %d fell back to symbolic_simple, nodes %zu -> %zu, "
      "%.2f s\n",
      kExprs, changed, fallbacks, before, after, secs);
  // The rules do real work, and the whole-graph fallback of simplify() stays rare.
  EXPECT_LT(after * 10, before * 6);
  EXPECT_LT(fallbacks, kExprs / 1000);
}

}  // namespace
}  // namespace baregrad::compiler

namespace baregrad::compiler {
namespace {

// known_divisor: targeted cases (what vector accesses need proven), then random index
// expressions checked exhaustively over their variables' ranges by the interpreter: every value
// is a multiple of the claimed divisor.
TEST(KnownDivisor, TargetedCases) {
  auto x = UOp::var("x", 0, 100), y = UOp::var("y", 0, 127);
  auto c = [](int64_t v) { return UOp::index_const(v); };
  EXPECT_EQ(known_divisor((x * 128 + y).get()), 1);
  EXPECT_EQ(known_divisor(((x * 128 + y) * 4).get()), 4);
  EXPECT_EQ(known_divisor((x * 512 + y * 4).get()), 4);
  EXPECT_EQ(known_divisor((x * 512 + y * 4 + c(1)).get()), 1);
  EXPECT_EQ(known_divisor((x * 512 + c(64)).get()), 64);
  EXPECT_EQ(known_divisor(c(0).get()), int64_t{1} << 30);
  EXPECT_EQ(known_divisor(c(-24).get()), 8);
  EXPECT_EQ(known_divisor(((x * 8) / c(2)).get()), 4);
  EXPECT_EQ(known_divisor(((x * 8) / c(16)).get()), 1);
  EXPECT_EQ(known_divisor(((x * 8) % c(12)).get()), 4);
  EXPECT_EQ(known_divisor(UOp::alu(Op::SHL, {x, c(3)}).get()), 8);
  EXPECT_EQ(known_divisor(where(lt(x, y), x * 16, y * 4).get()), 4);
  EXPECT_EQ(known_divisor(cast(x * 16, dtypes::kInt32).get()), 16);
  EXPECT_EQ(known_divisor(cast(x * 16, dtypes::kFloat32).get()), 1);  // not an int
}

TEST(KnownDivisor, NeverClaimsMoreThanEveryValueHas) {
  std::mt19937_64 rng(11);
  auto x = UOp::var("x", 0, 20), y = UOp::var("y", -7, 9);
  auto leaf = [&]() -> UOpPtr {
    switch (rng() % 4) {
      case 0:
        return x;
      case 1:
        return y;
      default: {
        int64_t odd = static_cast<int64_t>(rng() % 7) * 2 + 1;
        return UOp::index_const((rng() % 5 == 0 ? 0 : odd) << (rng() % 5));
      }
    }
  };
  std::function<UOpPtr(int)> gen = [&](int depth) -> UOpPtr {
    if (depth == 0) return leaf();
    UOpPtr a = gen(depth - 1), b = gen(depth - 1);
    auto pow2 = [&] { return UOp::index_const(int64_t{1} << (1 + rng() % 3)); };
    switch (rng() % 9) {
      case 0:
        return a + b;
      case 1:
        return a - b;
      case 2:
        return a * b;
      case 3:
        return UOp::alu(Op::SHL, {a, UOp::index_const(static_cast<int64_t>(rng() % 4))});
      case 4:
        return a % UOp::index_const(static_cast<int64_t>(rng() % 12) + 1);
      case 5:
        return a / pow2();
      case 6:
        return where(lt(a, b), a, b * pow2());
      case 7:
        return maximum(a, b);
      default:
        return -a;
    }
  };
  for (int trial = 0; trial < 400; trial++) {
    UOpPtr e = gen(1 + static_cast<int>(rng() % 3));
    int64_t d = known_divisor(e.get());
    for (int64_t xv = 0; xv <= 20; xv++)
      for (int64_t yv = -7; yv <= 9; yv++) {
        int64_t v = eval_int(e, {{"x", xv}, {"y", yv}});
        ASSERT_EQ(v % d, 0) << e->str() << " at x=" << xv << " y=" << yv << " claims " << d;
      }
  }
}

}  // namespace
}  // namespace baregrad::compiler
