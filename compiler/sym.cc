#include "compiler/sym.h"

#include <algorithm>
#include <sstream>

#include "base/check.h"
#include "base/checked.h"
#include "base/error.h"

namespace baregrad::compiler {
namespace {

int64_t mul(int64_t a, int64_t b) { return mul_or_fail("sym", "a symbolic size", a, b); }
int64_t add(int64_t a, int64_t b) { return add_or_fail("sym", "a symbolic size", a, b); }

// Bounds of a product of bounded factors: the extremes are among the corner products.
std::pair<int64_t, int64_t> mul_bounds(std::pair<int64_t, int64_t> a,
                                       std::pair<int64_t, int64_t> b) {
  int64_t c[4] = {mul(a.first, b.first), mul(a.first, b.second), mul(a.second, b.first),
                  mul(a.second, b.second)};
  return {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
}

std::pair<int64_t, int64_t> term_bounds(const Sym::Term& t) {
  std::pair<int64_t, int64_t> r{t.coeff, t.coeff};
  for (const SymVar& v : t.vars) r = mul_bounds(r, {v.min, v.max});
  return r;
}

}  // namespace

Sym::Sym(int64_t c) {
  if (c != 0) terms_.push_back({{}, c});
}

Sym Sym::var(const SymVar& v) {
  if (v.min > v.max)
    fail("sym", "Variable '" + v.name + "' has min " + std::to_string(v.min) + " > max " +
                    std::to_string(v.max));
  if (v.min == v.max) return Sym(v.min);
  Sym s;
  s.terms_.push_back({{v}, 1});
  return s;
}

void Sym::normalize() {
  for (auto& t : terms_) std::sort(t.vars.begin(), t.vars.end());
  std::sort(terms_.begin(), terms_.end(),
            [](const Term& a, const Term& b) { return a.vars < b.vars; });
  std::vector<Term> out;
  for (auto& t : terms_) {
    if (!out.empty() && out.back().vars == t.vars)
      out.back().coeff = add(out.back().coeff, t.coeff);
    else
      out.push_back(std::move(t));
  }
  std::erase_if(out, [](const Term& t) { return t.coeff == 0; });
  terms_ = std::move(out);
  std::vector<SymVar> vs = vars();  // one name, one range: a mix-up is a caller's bug
  for (size_t i = 1; i < vs.size(); i++)
    if (vs[i].name == vs[i - 1].name)
      fail("sym", "Variable '" + vs[i].name + "' appears with bounds [" +
                      std::to_string(vs[i - 1].min) + ", " + std::to_string(vs[i - 1].max) +
                      "] and [" + std::to_string(vs[i].min) + ", " + std::to_string(vs[i].max) +
                      "]");
}

bool Sym::is_const() const {
  return terms_.empty() || (terms_.size() == 1 && terms_[0].vars.empty());
}

int64_t Sym::const_value() const {
  CHECK(is_const()) << "Sym " << str() << " is not a constant";
  return terms_.empty() ? 0 : terms_[0].coeff;
}

// Term-by-term interval bounds. Tighter after shifting every variable to start at 0
// (v = min + u, u >= 0): then a term's sign alone bounds it, so i*i - i over [1, 10] gives
// [0, 90] rather than [1 - 10, 100 - 1].
std::pair<int64_t, int64_t> Sym::bounds() const {
  auto interval = [](const std::vector<Term>& terms) {
    std::pair<int64_t, int64_t> r{0, 0};
    for (auto& t : terms) {
      auto [lo, hi] = term_bounds(t);
      r = {add(r.first, lo), add(r.second, hi)};
    }
    return r;
  };
  std::pair<int64_t, int64_t> r = interval(terms_);
  if (is_const()) return r;
  Sym shifted;
  for (auto& t : terms_) {
    Sym x = t.coeff;
    for (const SymVar& v : t.vars) {
      Sym u;
      if (v.max > v.min) u.terms_.push_back({{{v.name + "'", 0, v.max - v.min}}, 1});
      x = x * (Sym(v.min) + u);
    }
    shifted = shifted + x;
  }
  std::pair<int64_t, int64_t> s = interval(shifted.terms_);
  return {std::max(r.first, s.first), std::min(r.second, s.second)};
}

int64_t Sym::vmin() const { return bounds().first; }
int64_t Sym::vmax() const { return bounds().second; }

int64_t Sym::eval(const Bindings& b) const {
  int64_t r = 0;
  for (auto& t : terms_) {
    int64_t x = t.coeff;
    for (const SymVar& v : t.vars) {
      auto it = b.find(v.name);
      if (it == b.end()) fail("sym", "no value bound to Variable '" + v.name + "' in " + str());
      x = mul(x, it->second);
    }
    r = add(r, x);
  }
  return r;
}

std::vector<SymVar> Sym::vars() const {
  std::vector<SymVar> out;
  for (auto& t : terms_)
    for (const SymVar& v : t.vars)
      if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  std::sort(out.begin(), out.end());
  return out;
}

Sym operator+(const Sym& a, const Sym& b) {
  Sym out = a;
  out.terms_.insert(out.terms_.end(), b.terms_.begin(), b.terms_.end());
  out.normalize();
  return out;
}

Sym Sym::operator-() const {
  Sym out = *this;
  for (auto& t : out.terms_) t.coeff = mul(t.coeff, -1);
  return out;
}

Sym operator-(const Sym& a, const Sym& b) { return a + (-b); }

Sym operator*(const Sym& a, const Sym& b) {
  Sym out;
  for (auto& x : a.terms_)
    for (auto& y : b.terms_) {
      Sym::Term t{x.vars, mul(x.coeff, y.coeff)};
      t.vars.insert(t.vars.end(), y.vars.begin(), y.vars.end());
      out.terms_.push_back(std::move(t));
    }
  out.normalize();
  return out;
}

std::string Sym::str() const {
  if (terms_.empty()) return "0";
  std::ostringstream os;
  for (size_t i = 0; i < terms_.size(); i++) {
    const Term& t = terms_[i];
    int64_t c = t.coeff;
    if (i) {
      os << (c < 0 ? " - " : " + ");
      c = c < 0 ? -c : c;
    } else if (c < 0 && !t.vars.empty()) {
      os << "-";
      c = -c;
    }
    bool coeff = c != 1 || t.vars.empty();
    if (coeff) os << c;
    for (size_t j = 0; j < t.vars.size(); j++) os << (coeff || j ? "*" : "") << t.vars[j].name;
  }
  return os.str();
}

uint64_t Sym::hash() const {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  auto mix = [&](uint64_t v) { h = (h ^ v) * 0x100000001b3ull + (h >> 29); };
  for (auto& t : terms_) {
    mix(static_cast<uint64_t>(t.coeff));
    for (const SymVar& v : t.vars) mix(std::hash<std::string>()(v.name));
  }
  return h;
}

std::optional<bool> sym_lt(const Sym& a, const Sym& b) {
  Sym d = a - b;
  if (d.vmax() < 0) return true;
  if (d.vmin() >= 0) return false;
  return std::nullopt;
}

std::optional<bool> sym_eq(const Sym& a, const Sym& b) {
  if (a == b) return true;
  Sym d = a - b;
  if (d.vmin() > 0 || d.vmax() < 0) return false;
  return std::nullopt;
}

Sym sym_prod(const std::vector<Sym>& dims) {
  Sym p = 1;
  for (const Sym& d : dims) p = p * d;
  return p;
}

std::vector<Sym> to_syms(const std::vector<int64_t>& v) { return {v.begin(), v.end()}; }

std::string syms_str(const std::vector<Sym>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); i++) s += (i ? ", " : "") + v[i].str();
  return s + (v.size() == 1 ? ",)" : ")");
}

bool any_symbolic(const std::vector<Sym>& v) {
  return std::any_of(v.begin(), v.end(), [](const Sym& s) { return !s.is_const(); });
}

}  // namespace baregrad::compiler
