#include "compiler/sym_view.h"

#include <algorithm>

#include "base/check.h"
#include "base/error.h"

namespace baregrad::compiler {
namespace {

using SymRanges = std::vector<std::pair<Sym, Sym>>;

SymRanges ranges_of(const SymView& v) {
  if (v.mask) return *v.mask;
  SymRanges r;
  for (const Sym& s : v.shape) r.emplace_back(Sym(0), s);
  return r;
}

// max(a, b) / min(a, b) when the bounds decide which; else nullopt.
std::optional<Sym> sym_max(const Sym& a, const Sym& b) {
  std::optional<bool> l = sym_lt(a, b);
  if (!l) return a == b ? std::optional<Sym>(a) : std::nullopt;
  return *l ? b : a;
}
std::optional<Sym> sym_min(const Sym& a, const Sym& b) {
  std::optional<bool> l = sym_lt(a, b);
  if (!l) return a == b ? std::optional<Sym>(a) : std::nullopt;
  return *l ? a : b;
}

bool is_one(const Sym& s) { return s == Sym(1); }

// Drops a mask that is the full range of every dim.
SymView drop_full_mask(SymView v) {
  if (!v.mask) return v;
  for (size_t d = 0; d < v.shape.size(); d++)
    if (!((*v.mask)[d].first == Sym(0) && (*v.mask)[d].second == v.shape[d])) return v;
  v.mask.reset();
  return v;
}

bool is_plain_contiguous(const SymView& v) {
  return v.offset == Sym(0) && !v.mask && v.strides == SymView::contiguous(v.shape).strides;
}

std::vector<Sym> squeezed(const std::vector<Sym>& s) {
  std::vector<Sym> out;
  for (const Sym& d : s)
    if (!is_one(d)) out.push_back(d);
  return out;
}

}  // namespace

SymTracker SymTracker::contiguous(std::vector<Sym> shape, Bindings vals) {
  return SymTracker{{SymView::contiguous(std::move(shape))}, std::move(vals)};
}

SymTracker SymTracker::of(const ShapeTracker& st) {
  SymTracker out;
  for (const View& v : st.views) out.views.push_back(SymView::of(v));
  return out;
}

ShapeTracker SymTracker::instantiate() const {
  ShapeTracker st;
  for (const SymView& v : views) st.views.push_back(v.instantiate());
  return st;
}

ShapeTracker SymTracker::eval() const {
  ShapeTracker st;
  for (const SymView& v : views) st.views.push_back(v.eval(vals));
  return st;
}

bool SymTracker::is_symbolic() const {
  return std::any_of(views.begin(), views.end(), [](const SymView& v) { return v.is_symbolic(); });
}

std::string SymTracker::str() const {
  std::string s = "SymTracker(";
  for (size_t i = 0; i < views.size(); i++) s += (i ? ", " : "") + views[i].str();
  return s + ")";
}

void merge_bindings(std::string_view op, Bindings& a, const Bindings& b) {
  for (auto& [k, v] : b) {
    auto [it, fresh] = a.emplace(k, v);
    if (!fresh && it->second != v)
      fail(op,
           "Variable '" + k + "' is bound to both " + std::to_string(it->second) + " and " +
               std::to_string(v),
           ErrorKind::kValue);
  }
}

std::optional<SymTracker> sym_reshape(const SymTracker& st, const std::vector<Sym>& shape) {
  const SymView& v = st.views.back();
  if (v.shape == shape) return st;
  std::optional<bool> same = sym_eq(sym_prod(v.shape), sym_prod(shape));
  if (!same || !*same) return std::nullopt;
  SymTracker out = st;
  if (is_plain_contiguous(v)) {
    out.views.back() = SymView::contiguous(shape);
    return out;
  }
  if (squeezed(v.shape) == squeezed(shape)) {  // only size-1 dims added or removed
    SymView n;
    n.offset = v.offset;
    SymRanges m = ranges_of(v), nm;
    size_t j = 0;
    for (const Sym& s : shape) {
      while (j < v.shape.size() && is_one(v.shape[j])) {
        if (!(m[j].first == Sym(0) && m[j].second == Sym(1))) return std::nullopt;  // empty
        j++;
      }
      if (is_one(s)) {
        n.shape.push_back(1);
        n.strides.push_back(0);
        nm.emplace_back(Sym(0), Sym(1));
        continue;
      }
      n.shape.push_back(s);
      n.strides.push_back(v.strides[j]);
      nm.push_back(m[j]);
      j++;
    }
    for (; j < v.shape.size(); j++)
      if (!(m[j].first == Sym(0) && m[j].second == Sym(1))) return std::nullopt;
    if (v.mask) n.mask = std::move(nm);
    out.views.back() = drop_full_mask(std::move(n));
    return out;
  }
  out.views.push_back(SymView::contiguous(shape));  // re-index through the old view
  return out;
}

SymTracker sym_permute(const SymTracker& st, const std::vector<int>& order) {
  SymTracker out = st;
  const SymView& v = st.views.back();
  SymView& n = out.views.back();
  for (size_t i = 0; i < order.size(); i++) {
    n.shape[i] = v.shape[order[i]];
    n.strides[i] = v.strides[order[i]];
    if (v.mask) (*n.mask)[i] = (*v.mask)[order[i]];
  }
  return out;
}

std::optional<SymTracker> sym_expand(const SymTracker& st, const std::vector<Sym>& shape) {
  SymTracker out = st;
  SymView& n = out.views.back();
  if (shape.size() != n.shape.size()) return std::nullopt;
  for (size_t d = 0; d < shape.size(); d++) {
    if (n.shape[d] == shape[d]) continue;
    if (!is_one(n.shape[d])) return std::nullopt;
    n.shape[d] = shape[d];
    n.strides[d] = 0;
    if (n.mask) {
      auto& [lo, hi] = (*n.mask)[d];
      bool full = lo == Sym(0) && hi == Sym(1);
      lo = 0;
      hi = full ? shape[d] : Sym(0);
    }
  }
  return out;
}

std::optional<SymTracker> sym_pad(const SymTracker& st, const SymRanges& before_after) {
  SymTracker out = st;
  SymView& n = out.views.back();
  SymRanges m = ranges_of(n);
  bool any = false;
  for (size_t d = 0; d < n.shape.size(); d++) {
    auto& [b, a] = before_after[d];
    if (b == Sym(0) && a == Sym(0)) continue;
    any = true;
    n.offset = n.offset - b * n.strides[d];
    n.shape[d] = n.shape[d] + b + a;
    m[d] = {m[d].first + b, m[d].second + b};
  }
  if (any) n.mask = std::move(m);
  n = drop_full_mask(std::move(n));
  return out;
}

std::optional<SymTracker> sym_shrink(const SymTracker& st, const SymRanges& ranges) {
  SymTracker out = st;
  SymView& n = out.views.back();
  for (size_t d = 0; d < n.shape.size(); d++) {
    auto& [lo, hi] = ranges[d];
    n.offset = n.offset + lo * n.strides[d];
    n.shape[d] = hi - lo;
    if (n.mask) {
      auto& [mlo, mhi] = (*n.mask)[d];
      std::optional<Sym> nlo = sym_max(mlo - lo, Sym(0)), nhi = sym_min(mhi - lo, hi - lo);
      if (!nlo || !nhi) return std::nullopt;
      mlo = *nlo;
      mhi = *nhi;
    }
  }
  n = drop_full_mask(std::move(n));
  return out;
}

SymTracker sym_flip(const SymTracker& st, const std::vector<bool>& axes) {
  SymTracker out = st;
  SymView& n = out.views.back();
  for (size_t d = 0; d < n.shape.size(); d++) {
    if (!axes[d]) continue;
    n.offset = n.offset + (n.shape[d] - 1) * n.strides[d];
    n.strides[d] = -n.strides[d];
    if (n.mask) {
      auto& [lo, hi] = (*n.mask)[d];
      std::pair<Sym, Sym> r{n.shape[d] - hi, n.shape[d] - lo};
      (*n.mask)[d] = r;
    }
  }
  return out;
}

SymTracker sym_compose(const SymTracker& inner, const SymTracker& outer) {
  SymTracker st = inner;
  st.views.insert(st.views.end(), outer.views.begin(), outer.views.end());
  merge_bindings("realize", st.vals, outer.vals);
  return st;
}

}  // namespace baregrad::compiler
