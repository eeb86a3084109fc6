// The transcendental expansions evaluated node by node with the reference ALU semantics (the
// interpreter's), against long double libm: max ulp error over random bit patterns, dense
// sweeps and known hard cases, plus exact IEEE / C99 edge results.
#include "compiler/passes/transcendental.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <span>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "compiler/interp.h"
#include "compiler/spec.h"
#include "compiler/symbolic.h"

namespace baregrad::compiler {
namespace {

constexpr DType kF16 = dtypes::kFloat16;
constexpr DType kBF16 = dtypes::kBFloat16;
constexpr DType kF32 = dtypes::kFloat32;
constexpr DType kF64 = dtypes::kFloat64;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr long double kPiOver2 = 1.570796326794896619231321691639751442L;

// A kernel input of dtype t (a LOAD from buffer `slot`).
UOpPtr input(DType t, int slot) {
  UOpPtr buf = UOp::make(Op::DEFINE_GLOBAL, t.base().as_ptr(), {}, int64_t{slot});
  UOpPtr idx = UOp::make(Op::INDEX, buf->dtype(), {buf, UOp::index_const(0)});
  return UOp::make(Op::LOAD, t, {idx});
}

// One op expanded as the pipeline emits it, linearized once, then evaluated per input (one lane)
// with the interpreter's conversions and exec_alu_*: every node rounds to its dtype.
class Program {
 public:
  Program(Op op, DType t) {
    UOpPtr x = input(t, 0), y = input(t, 1);
    UOpPtr raw = op == Op::POW ? UOp::alu(op, {x, y}) : UOp::alu(op, {x});
    // As the codegen pipeline runs it: the expansion, then constant folding.
    UOpPtr sink = rewrite_transcendentals(UOp::make(Op::SINK, dtypes::kVoid, {raw}));
    out_ = graph_rewrite(sink, symbolic_simple())->src(0);
    std::unordered_map<const UOp*, int> ids;
    std::vector<std::pair<const UOp*, size_t>> stack{{out_.get(), 0}};
    while (!stack.empty()) {  // post-order walk that stops at the inputs
      auto& [n, i] = stack.back();
      bool leaf = n == x.get() || n == y.get();
      if (!leaf && i < n->src().size()) {
        const UOp* s = n->src()[i++].get();
        if (!ids.count(s)) stack.push_back({s, 0});
        continue;
      }
      stack.pop_back();
      if (ids.count(n)) continue;
      Node node{n->op(), n->dtype().base(), {}, 0, {}};
      if (leaf)
        node.input = n == x.get() ? 1 : 2;
      else if (n->op() == Op::CONST)
        node.value = const_value(n);
      else if (is_alu(n->op()))
        for (const UOpPtr& s : n->src()) node.src[node.nsrc++] = ids.at(s.get());
      else
        ADD_FAILURE() << "unexpected " << op_name(n->op()) << " in the expansion";
      ids[n] = static_cast<int>(nodes_.size());
      nodes_.push_back(node);
    }
    vals_.resize(nodes_.size());
  }

  const UOpPtr& out() const { return out_; }
  size_t size() const { return nodes_.size(); }

  double run(double x, double y = 0) {
    for (size_t k = 0; k < nodes_.size(); k++) {
      const Node& n = nodes_[k];
      if (n.input)
        vals_[k] = make_value(n.dt, n.input == 1 ? x : y);
      else if (n.nsrc == 0)
        vals_[k] = n.value;
      else
        vals_[k] = eval(n);
    }
    return vals_.back().f;
  }

 private:
  struct Node {
    Op op;
    DType dt;
    int src[3];
    int nsrc;
    Value value;
    int input = 0;
  };

  static Value const_value(const UOp* n) {
    DType t = n->dtype().base();
    if (auto* d = std::get_if<double>(&n->arg())) return make_value(t, *d);
    return make_int_value(t, n->const_int());
  }

  Value eval(const Node& n) const {
    const Value& a = vals_[n.src[0]];
    if (n.op == Op::CAST) return convert(a, n.dt);
    if (n.op == Op::BITCAST) return reinterpret(a, n.dt);
    DType edt = vals_[n.src[n.op == Op::WHERE ? 1 : 0]].dtype;
    if (dtypes::is_float(edt)) {
      double v[3];
      for (int i = 0; i < n.nsrc; i++) v[i] = vals_[n.src[i]].f;
      return make_value(n.dt, exec_alu_float(n.op, edt, std::span<const double>(v, n.nsrc)));
    }
    int64_t v[3];
    for (int i = 0; i < n.nsrc; i++) v[i] = vals_[n.src[i]].i;
    return make_int_value(n.dt, exec_alu_int(n.op, edt, std::span<const int64_t>(v, n.nsrc)));
  }

  UOpPtr out_;
  std::vector<Node> nodes_;
  std::vector<Value> vals_;
};

// Mantissa bits and minimum normal exponent of a float dtype.
int mant_bits(DType t) { return t == kF64 ? 52 : t == kF32 ? 23 : t == kF16 ? 10 : 7; }
int min_exp(DType t) { return t == kF64 ? -1022 : t == kF16 ? -14 : -126; }

// |got - ref| in ulps of ref in dtype t; 0 when both are the same inf or both nan; inf when
// only one of them is nan, or got is inf and ref does not round to it.
double ulp_error(DType t, double got, long double ref) {
  if (std::isnan(ref) || std::isnan(got)) return std::isnan(ref) == std::isnan(got) ? 0 : kInf;
  double rounded = round_to(t, static_cast<double>(ref));
  if (std::isinf(got) || std::isinf(rounded)) return got == rounded ? 0 : kInf;
  int e = ref == 0 ? min_exp(t) : std::max(std::ilogb(ref), min_exp(t));
  return static_cast<double>(std::fabs(got - ref) / std::ldexp(1.0L, e - mant_bits(t)));
}

// Worst ulp error of one function over many inputs, with the input that reached it.
struct Worst {
  double ulp = 0, x = 0, y = 0;
  void add(double err, double xv, double yv) {
    if (err > ulp) *this = {err, xv, yv};
  }
};

using Inputs = std::vector<std::pair<double, double>>;
using RefFn = long double (*)(double, double);
long double ref_exp2(double x, double) { return exp2l(x); }
long double ref_log2(double x, double) { return log2l(x); }
long double ref_sin(double x, double) { return sinl(x); }
long double ref_pow(double x, double y) { return powl(x, y); }

// Max ulp error of p against ref over `in`, printed to the test log.
Worst measure(Program& p, DType t, RefFn ref, const Inputs& in, const char* what) {
  Worst w;
  for (auto [x, y] : in) w.add(ulp_error(t, p.run(x, y), ref(x, y)), x, y);
  std::printf("[ transcendental ] %-4s %-8s max %.3f ulp at x=%.17g y=%.17g (%zu inputs)\n", what,
              t.name().c_str(), w.ulp, w.x, w.y, in.size());
  return w;
}

// Each result must be bit-identical to the correctly rounded C99 value, zeros' signs included.
void expect_exact(Program& p, DType t, RefFn ref, const Inputs& in) {
  for (auto [x, y] : in) {
    double got = p.run(x, y), want = round_to(t, static_cast<double>(ref(x, y)));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << t.name() << " x=" << x << " y=" << y << " got " << got;
    } else {
      EXPECT_EQ(got, want) << t.name() << " x=" << x << " y=" << y;
      EXPECT_EQ(std::signbit(got), std::signbit(want)) << t.name() << " x=" << x << " y=" << y;
    }
  }
}

double from_bits(DType t, uint64_t b) {
  return t == kF64 ? std::bit_cast<double>(b) : std::bit_cast<float>(static_cast<uint32_t>(b));
}
// n uniformly random bit patterns of t (float32 or float64), fixed seed.
Inputs random_bits(DType t, int n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  Inputs in;
  for (int i = 0; i < n; i++) in.push_back({from_bits(t, rng()), 0});
  return in;
}
// n + 1 points evenly spaced over [lo, hi], rounded to t.
Inputs sweep(DType t, double lo, double hi, int n) {
  Inputs in;
  for (int i = 0; i <= n; i++) in.push_back({round_to(t, lo + (hi - lo) * i / n), 0});
  return in;
}
Inputs singles(DType t, std::initializer_list<double> xs) {
  Inputs in;
  for (double x : xs) in.push_back({round_to(t, x), 0});
  return in;
}
Inputs concat(std::initializer_list<Inputs> parts) {
  Inputs out;
  for (const Inputs& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// Exponent facts of float32 / float64: overflow threshold of exp2 and the smallest denormal.
int max_exp2(DType t) { return t == kF64 ? 1024 : 128; }
int min_denorm(DType t) { return t == kF64 ? -1074 : -149; }
double max_finite(DType t) { return t == kF64 ? DBL_MAX : FLT_MAX; }

constexpr DType kWide[] = {kF32, kF64};

TEST(Transcendental, ExpansionUsesOnlyPlainAluOps) {
  const Op allowed[] = {Op::ADD,   Op::SUB,   Op::MUL,   Op::FDIV,    Op::NEG,   Op::MAX,
                        Op::CMPLT, Op::CMPNE, Op::WHERE, Op::AND,     Op::OR,    Op::SHL,
                        Op::SHR,   Op::TRUNC, Op::CAST,  Op::BITCAST, Op::CONST, Op::LOAD};
  for (Op op : {Op::EXP2, Op::LOG2, Op::SIN, Op::POW}) {
    for (DType t : {kF16, kBF16, kF32, kF64, kF32.vec(4), kF64.vec(2)}) {
      UOpPtr x = input(t, 0);
      UOpPtr raw = op == Op::POW ? UOp::alu(op, {x, input(t, 1)}) : UOp::alu(op, {x});
      UOpPtr out = rewrite_transcendentals(UOp::make(Op::SINK, dtypes::kVoid, {raw}))->src(0);
      EXPECT_EQ(out->dtype(), t) << op_name(op);
      Status valid = verify_expr(out);
      EXPECT_TRUE(valid.ok()) << valid.to_string();
      int alu = 0;
      for (const UOp* n : out->toposort()) {
        if (n->op() == Op::INDEX || n->op() == Op::DEFINE_GLOBAL) continue;
        if (n->op() == Op::CONST && n->dtype() == dtypes::kIndex) continue;  // the input's index
        alu += is_alu(n->op());
        EXPECT_NE(std::find(std::begin(allowed), std::end(allowed), n->op()), std::end(allowed))
            << op_name(op) << " " << t.name() << " expands to " << op_name(n->op());
        EXPECT_EQ(n->dtype().count, t.count) << op_name(op) << " " << n->dtype().name();
      }
      if (t.count == 1)
        std::printf("[ transcendental ] %-4s %-8s %d ALU ops\n", op_name(op), t.name().c_str(),
                    alu);
    }
  }
}

TEST(Transcendental, FastEvaluatorMatchesTheReferenceInterpreter) {
  std::mt19937 rng(7);
  for (DType t : kWide) {
    for (Op op : {Op::EXP2, Op::LOG2, Op::SIN, Op::POW}) {
      Program p(op, t);
      UOpPtr x = input(t, 0), y = input(t, 1);
      for (auto [xv, unused] : random_bits(t, 200, 11)) {
        double yv = op == Op::POW ? std::ldexp(static_cast<double>(rng() % 4096) - 2048, -6) : 0;
        NodeValues in{{x.get(), xv}, {y.get(), yv}};
        double want = eval_float(p.out(), {}, &in), got = p.run(xv, yv);
        EXPECT_TRUE(got == want || (std::isnan(got) && std::isnan(want)))
            << op_name(op) << " " << t.name() << " x=" << xv << " y=" << yv;
      }
    }
  }
}

TEST(Transcendental, VectorLanesMatchScalar) {
  for (Op op : {Op::EXP2, Op::LOG2, Op::SIN, Op::POW}) {
    Program scalar(op, kF32), vec(op, kF32.vec(4));
    EXPECT_EQ(scalar.size(), vec.size());
    for (auto [x, unused] : random_bits(kF32, 2000, 3)) {
      double y = op == Op::POW ? std::fmod(x, 7.0) : 0;
      double a = scalar.run(x, y), b = vec.run(x, y);
      EXPECT_TRUE(a == b || (std::isnan(a) && std::isnan(b))) << op_name(op) << " x=" << x;
    }
  }
}

TEST(Transcendental, Exp2) {
  for (DType t : kWide) {
    Program p(Op::EXP2, t);
    double top = max_exp2(t), bottom = min_denorm(t);
    Inputs in = concat({random_bits(t, 200000, 1), sweep(t, bottom - 3, top + 2, 200000),
                        sweep(t, bottom - 1.5, bottom + mant_bits(t) + 1.5, 100000),
                        sweep(t, -1, 1, 100000)});
    EXPECT_LE(measure(p, t, ref_exp2, in, "exp2").ulp, 1.0);
    // Overflow to inf at 2^max, denormals down to the smallest, ties to even at its half.
    Inputs edges = singles(t, {-kInf, kInf, kNan, 0.0, -0.0, top, 1e30, -1e30, bottom - 1,
                               bottom - 0.5, bottom - 2, max_finite(t), -max_finite(t)});
    for (double k = bottom - 10; k <= top + 10; k++) edges.push_back({k, 0});
    expect_exact(p, t, ref_exp2, edges);
  }
}

TEST(Transcendental, Log2) {
  for (DType t : kWide) {
    Program p(Op::LOG2, t);
    Inputs near_one;
    for (int k = -2000; k <= 2000; k++)
      near_one.push_back({1 + k * std::ldexp(1.0, -mant_bits(t) - (k < 0)), 0});
    double min_normal = std::ldexp(1.0, min_denorm(t) + mant_bits(t));
    Inputs in = concat({random_bits(t, 200000, 2), sweep(t, 0.5, 2, 200000), near_one,
                        sweep(t, 0, min_normal, 100000), sweep(t, 1, 1e6, 100000)});
    EXPECT_LE(measure(p, t, ref_log2, in, "log2").ulp, 1.0);
    Inputs edges = singles(t, {0.0, -0.0, -1, -kInf, kInf, kNan, 1, -min_normal, max_finite(t)});
    for (int k = min_denorm(t); k < max_exp2(t); k++) edges.push_back({std::ldexp(1.0, k), 0});
    expect_exact(p, t, ref_log2, edges);
  }
}

// Float32 inputs closest to multiples of pi/2 (found by an exhaustive exact search), where the
// argument reduction cancels the most bits.
const uint32_t kSinHardF32[] = {0x6f79be45, 0x50a3e87f, 0x6ff9be45, 0x5123e87f,
                                0x437ce5f1, 0x7079be45, 0x6a1976f1, 0x53b146a6,
                                0x65898498, 0x51a3e87f, 0x43fce5f1, 0x77584625};
// Float64 sin is accurate below this bound (Cody-Waite with a 5-piece pi/2).
constexpr double kSinF64Range = 1.6e9;

TEST(Transcendental, Sin) {
  for (DType t : kWide) {
    Program p(Op::SIN, t);
    double range = t == kF64 ? kSinF64Range : max_finite(t);
    Inputs in = concat({sweep(t, -10, 10, 200000), sweep(t, -1e6, 1e6, 100000),
                        sweep(t, -1, 1, 50000), sweep(t, -range, range, 100000)});
    for (auto xy : random_bits(t, 200000, 3))
      if (!(std::fabs(xy.first) >= range)) in.push_back(xy);
    std::mt19937 rng(4);
    for (int k = 1; k < 40000; k++) {  // nearest values to multiples of pi/2
      long double m = k < 20000 ? k : rng() % (1u << 30);
      in.push_back({round_to(t, static_cast<double>(m * kPiOver2)), 0});
    }
    if (t == kF32)
      for (uint32_t b : kSinHardF32)
        for (int d = -2; d <= 2; d++) in.push_back({from_bits(t, b + d), 0});
    EXPECT_LE(measure(p, t, ref_sin, in, "sin").ulp, 1.0);
    double tiny = std::ldexp(1.0, t == kF64 ? -30 : -14), den = std::ldexp(1.0, min_denorm(t));
    expect_exact(p, t, ref_sin, singles(t, {0.0, -0.0, kInf, -kInf, kNan, den, -den, tiny, -tiny}));
  }
  // Past its accurate range float64 sin stays finite and within [-1, 1].
  Program p(Op::SIN, kF64);
  for (auto [x, unused] : random_bits(kF64, 20000, 5)) {
    if (!std::isfinite(x)) continue;
    double got = p.run(x);
    EXPECT_TRUE(got >= -1 && got <= 1) << "x=" << x << " sin=" << got;
  }
}

// (x, y) with |y*log2 x| in the finite range, x spanning every exponent and values near 1, and
// integer y for negative x.
Inputs pow_samples(DType t, int n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> wdist(min_denorm(t) - 3, max_exp2(t) + 2);
  Inputs in;
  while (static_cast<int>(in.size()) < n) {
    double x = std::fabs(from_bits(t, rng()));
    if (in.size() % 8 == 0) x = 1 + std::ldexp(static_cast<double>(rng() % 8192) - 4096, -24);
    x = round_to(t, x);
    if (!std::isfinite(x) || x == 0 || x == 1) continue;
    double y = round_to(t, wdist(rng) / std::log2(x));
    if (rng() % 4 == 0) {
      y = std::trunc(y);
      x = -x;
    }
    in.push_back({x, y});
  }
  return in;
}

TEST(Transcendental, Pow) {
  for (DType t : kWide) {
    Program p(Op::POW, t);
    Inputs in = pow_samples(t, 200000, 5);
    std::mt19937_64 rng(6);
    for (int i = 0; i < 100000; i++) in.push_back({from_bits(t, rng()), from_bits(t, rng())});
    for (int x = -20; x <= 20; x++)
      for (int y = -30; y <= 30; y++) in.push_back({x, y});
    EXPECT_LE(measure(p, t, ref_pow, in, "pow").ulp, 1.0);
    // C99 F.9.4.4 special cases, sign of zero included, and the range limits.
    const double specials[] = {0.0, -0.0, 1,   -1,   2,    -2,    0.5, -0.5,
                               3,   -3,   2.5, -2.5, kInf, -kInf, kNan};
    Inputs edges;
    for (double x : specials)
      for (double y : specials) {
        bool plain = std::isfinite(x) && x != 0 && std::fabs(x) != 1 && std::isfinite(y) &&
                     y != 0 && (y != std::trunc(y) || std::fabs(x) == 2.5);
        if (!plain || (x < 0 && y != std::trunc(y))) edges.push_back({x, y});
      }
    double top = max_exp2(t), bottom = min_denorm(t);
    const double limits[][2] = {{2, top},      {2, bottom},    {2, bottom - 1},
                                {-2, top - 1}, {-2, bottom},   {-2, bottom + 1},
                                {-8, 1.0 / 3}, {-1, 16777215}, {-1, 16777216}};
    for (auto [x, y] : limits) edges.push_back({x, round_to(t, y)});
    expect_exact(p, t, ref_pow, edges);
  }
}

// Every value of a 16-bit float type.
Inputs all_half(DType t) {
  Inputs in;
  for (uint32_t b = 0; b < 65536; b++) {
    uint16_t h = static_cast<uint16_t>(b);
    double v = t == kF16 ? static_cast<double>(std::bit_cast<_Float16>(h))
                         : std::bit_cast<float>(uint32_t{h} << 16);
    in.push_back({v, 0});
  }
  return in;
}

TEST(Transcendental, HalfTypesRoundOnceFromFloat32) {
  for (DType t : {kF16, kBF16}) {
    Inputs all = all_half(t), pairs;
    std::mt19937 rng(8);
    for (int i = 0; i < 50000; i++)
      pairs.push_back({all[rng() % 65536].first, all[rng() % 65536].first});
    const std::tuple<Op, RefFn, const char*> cases[] = {{Op::EXP2, ref_exp2, "exp2"},
                                                        {Op::LOG2, ref_log2, "log2"},
                                                        {Op::SIN, ref_sin, "sin"},
                                                        {Op::POW, ref_pow, "pow"}};
    for (auto [op, ref, what] : cases) {
      Program p(op, t);
      EXPECT_LE(measure(p, t, ref, op == Op::POW ? pairs : all, what).ulp, 0.51) << what;
    }
  }
}

}  // namespace
}  // namespace baregrad::compiler
