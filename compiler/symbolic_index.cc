// Index-math rules. Sums are rewritten as linear forms sum(k_i * t_i) + c over the int ring of
// their dtype, which makes reordering and merging exact even where values wrap. Rules that
// reason about bounds (IDIV, MOD, comparisons, MAX) are limited to int64, where vmin/vmax are
// sound, and only fire when the values they divide or compare are computed without overflow
// (a node whose bounds overflow gets the full int64 range, which every such rule rejects).
#include "compiler/symbolic_index.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>
#include <utility>

namespace baregrad::compiler {
namespace {

using I = int64_t;
constexpr I kMin = std::numeric_limits<I>::min();
constexpr I kMax = std::numeric_limits<I>::max();
constexpr int kMaxFlattenVisits = 256;

I wadd(I a, I b) { return static_cast<I>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }
I wmul(I a, I b) { return static_cast<I>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); }
I wneg(I a) { return static_cast<I>(0 - static_cast<uint64_t>(a)); }
I floor_div(I a, I b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }
I ceil_div(I a, I b) { return a / b + (a % b != 0 && (a < 0) == (b < 0)); }

bool int_scalar(DType t) { return dtypes::is_int(t) && t.count == 1 && !t.ptr; }
bool is_index(const UOp* u) { return u->dtype() == dtypes::kIndex; }
// The computed value of `u` equals its mathematical value (no int64 overflow below it).
bool exact(const UOp* u) { return u->vmin() != kMin || u->vmax() != kMax; }

// The signed representative of `v` in the ring of `t` (sign-extended from t's width).
I norm(DType t, I v) {
  switch (t.scalar_size()) {
    case 1:
      return static_cast<int8_t>(v);
    case 2:
      return static_cast<int16_t>(v);
    case 4:
      return static_cast<int32_t>(v);
    default:
      return v;
  }
}

struct Linear {
  DType dtype;
  std::vector<std::pair<UOpPtr, I>> terms;  // distinct terms in first-seen order
  I c = 0;
  int visits = 0;
};

void add_term(Linear& f, const UOp* u, I k) {
  for (auto& [t, kt] : f.terms)
    if (t.get() == u) {
      kt = wadd(kt, k);
      return;
    }
  f.terms.push_back({u->self(), k});
}

// Adds scale * n to f, looking through ADD, SUB, NEG, MUL by a CONST and CONST.
bool flatten(const UOp* n, I scale, Linear& f) {
  if (++f.visits > kMaxFlattenVisits) return false;
  auto same = [&](size_t i) { return n->src(i)->dtype() == f.dtype; };
  switch (n->op()) {
    case Op::ADD:
    case Op::SUB:
      if (!same(0) || !same(1)) break;
      return flatten(n->src(0).get(), scale, f) &&
             flatten(n->src(1).get(), n->op() == Op::SUB ? wneg(scale) : scale, f);
    case Op::NEG:
      if (!same(0)) break;
      return flatten(n->src(0).get(), wneg(scale), f);
    case Op::MUL:
      for (size_t i = 0; i < 2; i++)
        if (n->src(i)->is_const() && same(0) && same(1))
          return flatten(n->src(1 - i).get(), wmul(scale, n->src(i)->const_int()), f);
      break;
    case Op::CONST:
      f.c = wadd(f.c, wmul(scale, n->const_int()));
      return true;
    default:
      break;
  }
  add_term(f, n, scale);
  return true;
}

// (x // C) * (k * C) + (x % C) * k -> x * k: C guarantees x == (x / C) * C + x % C.
bool merge_divmod(Linear& f) {
  for (size_t i = 0; i < f.terms.size(); i++) {
    const UOp* m = f.terms[i].first.get();
    if (m->op() != Op::MOD || !m->src(1)->is_const() || m->src(1)->const_int() == 0) continue;
    I k = f.terms[i].second, want = norm(f.dtype, wmul(k, m->src(1)->const_int()));
    for (size_t j = 0; j < f.terms.size(); j++) {
      const UOp* d = f.terms[j].first.get();
      if (d->op() != Op::IDIV || d->src() != m->src() || f.terms[j].second != want) continue;
      UOpPtr x = m->src(0);
      f.terms.erase(f.terms.begin() + std::max(i, j));
      f.terms.erase(f.terms.begin() + std::min(i, j));
      return flatten(x.get(), k, f);
    }
  }
  return false;
}

void normalize(Linear& f) {
  std::vector<std::pair<UOpPtr, I>> kept;
  for (auto& [t, k] : f.terms)
    if (norm(f.dtype, k) != 0) kept.push_back({t, norm(f.dtype, k)});
  f.terms = std::move(kept);
  f.c = norm(f.dtype, f.c);
}

// The linear form of `n`, or nullopt when it is too large to flatten.
std::optional<Linear> linear(const UOp* n) {
  Linear f;
  f.dtype = n->dtype();
  if (!flatten(n, 1, f)) return std::nullopt;
  normalize(f);
  while (merge_divmod(f)) normalize(f);
  if (f.visits > kMaxFlattenVisits) return std::nullopt;
  return f;
}

// Canonical expression of f: terms in order (coefficient -1 ones subtracted last), CONST last.
UOpPtr build(const Linear& f) {
  auto k_const = [&](I v) { return UOp::cnst_int(f.dtype, v); };
  UOpPtr acc;
  for (auto& [t, k] : f.terms) {
    if (k == -1) continue;
    UOpPtr p = k == 1 ? t : t * k_const(k);
    acc = acc ? acc + p : p;
  }
  I c = f.c;
  for (auto& [t, k] : f.terms) {
    if (k != -1) continue;
    if (acc)
      acc = acc - t;
    else if (c != 0)
      acc = k_const(std::exchange(c, 0)) - t;
    else
      acc = -t;
  }
  if (c != 0) acc = acc ? acc + k_const(c) : k_const(c);
  return acc ? acc : k_const(0);
}

// `out` unless it equals `n` or has more nodes.
UOpPtr if_not_larger(const UOp* n, UOpPtr out) {
  if (!out || out.get() == n || out->size() > n->size()) return nullptr;
  return out;
}

// True when every CONST below `out` is also below `n`.
bool reuses_consts(const UOp* n, const UOpPtr& out) {
  std::vector<const UOp*> have = n->toposort();
  for (const UOp* u : out->toposort())
    if (u->is_const() && std::find(have.begin(), have.end(), u) == have.end()) return false;
  return true;
}

// A sum in canonical form: smaller, or reordered without new constants (so that a rewrite of
// a node whose parts stay shared elsewhere rarely adds nodes to the whole graph).
UOpPtr fold_sum(const Match& m) {
  auto f = linear(m.node.get());
  if (!f) return nullptr;
  UOpPtr out = if_not_larger(m.node.get(), build(*f));
  if (!out || out->size() < m.node->size() || reuses_consts(m.node.get(), out)) return out;
  return nullptr;
}

UOpPtr divmod_by_bounds(const UOp* n, const UOp* s, I c);

UOpPtr fold_divmod(const Match& m) {
  const UOp* n = m.node.get();
  const UOp* s = n->src(0).get();
  I c = n->src(1)->const_int();
  bool div = n->op() == Op::IDIV;
  if (s->vmin() > -c && s->vmax() < c) return div ? UOp::index_const(0) : s->self();
  return if_not_larger(n, divmod_by_bounds(n, s, c));
}

UOpPtr divmod_by_bounds(const UOp* n, const UOp* s, I c) {
  bool div = n->op() == Op::IDIV;
  auto f = linear(s);
  if (!f || !exact(s)) return nullptr;
  I g = f->c == kMin ? 1 : std::gcd(c, f->c);
  for (auto& [t, k] : f->terms) g = k == kMin ? 1 : std::gcd(g, k);
  if (div && g > 1) {  // (g*u) // (g*d) == u // d for every sign
    Linear u{f->dtype, {}, f->c / g};
    for (auto& [t, k] : f->terms) u.terms.push_back({t, k / g});
    return c == g ? build(u) : build(u) / (c / g);
  }
  Linear q{f->dtype, {}, 0}, r{f->dtype, {}, 0};
  for (auto& [t, k] : f->terms) (k % c == 0 ? q : r).terms.push_back({t, k % c == 0 ? k / c : k});
  bool nonneg = s->vmin() >= 0, nonpos = s->vmax() <= 0;
  if (!nonneg && !nonpos) {  // s == q*c exactly
    if (!r.terms.empty() || f->c % c != 0) return nullptr;
    q.c = f->c / c;
    return div ? build(q) : UOp::index_const(0);
  }
  // s == (q + q0) * c + R, and s // c == q + q0 + R / c rounded like s (floor or ceil).
  I q0 = nonneg ? floor_div(f->c, c) : ceil_div(f->c, c);
  r.c = wadd(f->c, wneg(wmul(q0, c)));
  UOpPtr rest = build(r);
  auto round = [&](I v) { return nonneg ? floor_div(v, c) : ceil_div(v, c); };
  if (exact(rest.get()) && round(rest->vmin()) == round(rest->vmax())) {
    I k = round(rest->vmin());
    if (!div) return build(Linear{r.dtype, r.terms, wadd(r.c, wneg(wmul(k, c)))});
    q.c = wadd(q0, k);
    return build(q);
  }
  if (nonneg ? rest->vmin() < 0 : rest->vmax() > 0) return nullptr;
  if (!div) return rest % c;
  q.terms.push_back({rest / c, 1});
  q.c = q0;
  return build(q);
}

// x*c < d  <=>  x < ceil(d/c);  x+c < d  <=>  x < d-c;  x//c < d  <=>  x < d*c (d > 0) or
// x < (d-1)*c+1 (d <= 0); d < x+c  <=>  d-c < x. c > 0 and no overflow, else declines.
UOpPtr normalize_lt(const Match& m) {
  const UOp* a = m.node->src(0).get();
  const UOp* b = m.node->src(1).get();
  I out;
  if (b->is_const() && a->src().size() == 2 && a->src(1)->is_const() && exact(a)) {
    I c = a->src(1)->const_int(), d = b->const_int();
    const UOpPtr& x = a->src(0);
    if (a->op() == Op::ADD && !__builtin_sub_overflow(d, c, &out)) return lt(x, out);
    if (c <= 0) return nullptr;
    if (a->op() == Op::MUL) return lt(x, ceil_div(d, c));
    if (a->op() == Op::IDIV && d > 0 && !__builtin_mul_overflow(d, c, &out)) return lt(x, out);
    if (a->op() == Op::IDIV && d <= 0 && d > kMin && !__builtin_mul_overflow(d - 1, c, &out) &&
        out < kMax)
      return lt(x, out + 1);
    return nullptr;
  }
  if (a->is_const() && b->op() == Op::ADD && b->src(1)->is_const() && exact(b) &&
      !__builtin_sub_overflow(a->const_int(), b->src(1)->const_int(), &out))
    return lt(UOp::index_const(out), b->src(0));
  return nullptr;
}

}  // namespace

std::vector<std::pair<UPat, RewriteFn>> index_rules() {
  std::vector<std::pair<UPat, RewriteFn>> r;
  std::vector<Op> commutative, alu;
  for (int i = 0; i < kNumOps; i++) {
    if (is_commutative(static_cast<Op>(i))) commutative.push_back(static_cast<Op>(i));
    if (is_alu(static_cast<Op>(i))) alu.push_back(static_cast<Op>(i));
  }
  // CONSTs to the right of commutative ops
  r.push_back({UPat::ops(commutative).where([](const UOp* n) {
                 return n->src().size() == 2 && n->src(0)->is_const() && !n->src(1)->is_const();
               }),
               [](const Match& m) { return m.node->with_src({m.node->src(1), m.node->src(0)}); }});
  // int64 values (and int64 comparisons) whose bounds are one point
  r.push_back({UPat::ops(alu).where([](const UOp* n) {
                 bool cmp = is_comparison(n->op()) && is_index(n->src(0).get());
                 return (is_index(n) || cmp) && n->vmin() == n->vmax();
               }),
               [](const Match& m) { return UOp::cnst_int(m.node->dtype(), m.node->vmin()); }});
  r.push_back({UPat::ops({Op::ADD, Op::SUB, Op::NEG, Op::MUL}).where([](const UOp* n) {
                 return int_scalar(n->dtype());
               }),
               fold_sum});
  auto pos_const = [](const UOp* c) { return c->const_int() > 0; };
  r.push_back({UPat::ops({Op::IDIV, Op::MOD},
                         std::vector<UPat>{UPat::var("x"), UPat::cvar("c").where(pos_const)})
                   .where(is_index),
               fold_divmod});
  // (x % (c*k)) % c -> x % c;  (x // c1) // c2 -> x // (c1*c2)   (c > 0, every sign of x)
  r.push_back(
      {UPat::var("x") % UPat::cvar("c1").where(pos_const) % UPat::cvar("c2").where(pos_const),
       [](const Match& m) -> UOpPtr {
         if (!is_index(m.node.get()) || m["c1"]->const_int() % m["c2"]->const_int() != 0)
           return nullptr;
         return m["x"] % m["c2"];
       }});
  r.push_back(
      {UPat::var("x") / UPat::cvar("c1").where(pos_const) / UPat::cvar("c2").where(pos_const),
       [](const Match& m) -> UOpPtr {
         I c;
         if (!is_index(m.node.get()) ||
             __builtin_mul_overflow(m["c1"]->const_int(), m["c2"]->const_int(), &c))
           return nullptr;
         return m["x"] / c;
       }});
  r.push_back(
      {UPat::op(Op::CMPLT, std::vector<UPat>{UPat::var(), UPat::var()}).where([](const UOp* n) {
         return is_index(n->src(0).get());
       }),
       normalize_lt});
  // x+c != d  <=>  x != d-c (and ==): ADD is a bijection on the ring
  r.push_back({UPat::ops({Op::CMPNE, Op::CMPEQ},
                         std::vector<UPat>{UPat::var("x") + UPat::cvar("c"), UPat::cvar("d")}),
               [](const Match& m) -> UOpPtr {
                 DType t = m["x"]->dtype();
                 if (!int_scalar(t)) return nullptr;
                 I d = wadd(m["d"]->const_int(), wneg(m["c"]->const_int()));
                 return m.node->with_src({m["x"], UOp::cnst_int(t, d)});
               }});
  r.push_back({UPat::op(Op::MAX, std::vector<UPat>{UPat::var("a"), UPat::var("b")}).where(is_index),
               [](const Match& m) -> UOpPtr {
                 if (m["a"]->vmin() >= m["b"]->vmax()) return m["a"];
                 if (m["b"]->vmin() >= m["a"]->vmax()) return m["b"];
                 return nullptr;
               }});
  return r;
}

}  // namespace baregrad::compiler
