#include "compiler/view.h"

#include <algorithm>
#include <sstream>

#include "base/checked.h"

namespace baregrad::compiler {
namespace {
uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull + (h >> 29); }

template <class T>
void join(std::ostringstream& os, const std::vector<T>& v) {
  os << "(";
  for (size_t i = 0; i < v.size(); i++) os << (i ? ", " : "") << v[i];
  os << (v.size() == 1 ? ",)" : ")");
}
}  // namespace

bool View::operator==(const View& o) const {
  return shape == o.shape && strides == o.strides && offset == o.offset && mask == o.mask &&
         (sym == o.sym || (sym && o.sym && *sym == *o.sym));
}

SymView SymView::contiguous(std::vector<Sym> shape) {
  SymView v;
  v.strides.assign(shape.size(), Sym(0));
  Sym acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    v.strides[i] = shape[i] == Sym(1) ? Sym(0) : acc;
    acc = acc * shape[i];
  }
  v.shape = std::move(shape);
  return v;
}

SymView SymView::of(const View& v) {
  SymView s;
  s.shape = to_syms(v.shape);
  s.strides = to_syms(v.strides);
  s.offset = v.offset;
  if (v.mask) {
    s.mask.emplace();
    for (auto [lo, hi] : *v.mask) s.mask->emplace_back(lo, hi);
  }
  return s;
}

View SymView::eval(const Bindings& b) const {
  View v;
  for (const Sym& x : shape) v.shape.push_back(x.eval(b));
  for (const Sym& x : strides) v.strides.push_back(x.eval(b));
  v.offset = offset.eval(b);
  if (mask) {
    v.mask.emplace();
    for (auto& [lo, hi] : *mask) v.mask->emplace_back(lo.eval(b), hi.eval(b));
  }
  return v;
}

View SymView::instantiate() const {
  Bindings b;
  auto add = [&](const Sym& x) {
    for (const SymVar& v : x.vars()) b[v.name] = v.max;
  };
  for (const Sym& x : shape) add(x);
  for (const Sym& x : strides) add(x);
  add(offset);
  if (mask)
    for (auto& [lo, hi] : *mask) add(lo), add(hi);
  View v = eval(b);
  for (size_t d = 0; d < shape.size(); d++) v.shape[d] = shape[d].vmax();  // loop bounds
  if (is_symbolic()) v.sym = std::make_shared<const SymView>(*this);
  return v;
}

int64_t SymView::extent_bound() const {
  // The largest index is offset + sum over dims of (the mask's last index, or its first where
  // the stride is negative) * stride. Terms with constant strides are summed as one polynomial
  // before taking its bound, so that variables that cancel do (a pad by `i` in front has offset
  // -i and reads up to index i + size - 1); other terms are bounded one by one.
  Sym at = offset;
  int64_t rest = 0;
  for (size_t d = 0; d < shape.size(); d++) {
    Sym lo_d = 0, hi_d = shape[d] - 1;
    if (mask) lo_d = (*mask)[d].first, hi_d = (*mask)[d].second - 1;
    if (hi_d.vmax() < lo_d.vmin()) return 0;  // an empty mask for every value
    if (strides[d].is_const())
      at = at + (strides[d].const_value() >= 0 ? hi_d : lo_d) * strides[d];
    else
      rest += std::max((hi_d * strides[d]).vmax(), (lo_d * strides[d]).vmax());
  }
  return std::max<int64_t>(at.vmax() + rest + 1, 0);
}

bool SymView::is_symbolic() const {
  bool m = mask && std::any_of(mask->begin(), mask->end(),
                               [](auto& r) { return !r.first.is_const() || !r.second.is_const(); });
  return any_symbolic(shape) || any_symbolic(strides) || !offset.is_const() || m;
}

std::string SymView::str() const {
  std::string s = "SymView(shape=" + syms_str(shape) + ", strides=" + syms_str(strides) +
                  ", offset=" + offset.str();
  if (mask) {
    s += ", mask=(";
    for (auto& [lo, hi] : *mask) s += "(" + lo.str() + "," + hi.str() + ")";
    s += ")";
  }
  return s + ")";
}

std::vector<int64_t> View::strides_for(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 0);
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = shape[i] == 1 ? 0 : acc;
    // Only a zero-size shape can overflow here (a zero size further out); its strides are moot.
    acc = checked_mul(acc, shape[i]).value_or(0);
  }
  return strides;
}

View View::contiguous(std::vector<int64_t> shape) {
  View v;
  v.strides = strides_for(shape);
  v.shape = std::move(shape);
  return v;
}

int64_t View::numel() const { return numel_or_fail("view", shape); }

bool View::is_contiguous() const { return offset == 0 && !mask && strides == strides_for(shape); }

std::string View::str() const {
  std::ostringstream os;
  os << "View(shape=";
  join(os, shape);
  os << ", strides=";
  join(os, strides);
  os << ", offset=" << offset;
  if (mask) {
    os << ", mask=(";
    for (auto& [lo, hi] : *mask) os << "(" << lo << "," << hi << ")";
    os << ")";
  }
  if (sym) os << ", sym=" << sym->str();
  os << ")";
  return os.str();
}

std::string ShapeTracker::str() const {
  std::string s = "ShapeTracker(";
  for (size_t i = 0; i < views.size(); i++) s += (i ? ", " : "") + views[i].str();
  return s + ")";
}

uint64_t hash_value(const View& v) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int64_t s : v.shape) h = mix(h, s);
  for (int64_t s : v.strides) h = mix(h, s * 31);
  h = mix(h, v.offset);
  if (v.mask)
    for (auto& [lo, hi] : *v.mask) h = mix(mix(h, lo), hi);
  if (v.sym) {
    for (const Sym& x : v.sym->shape) h = mix(h, x.hash());
    for (const Sym& x : v.sym->strides) h = mix(h, x.hash() * 31);
    h = mix(h, v.sym->offset.hash());
    if (v.sym->mask)
      for (auto& [lo, hi] : *v.sym->mask) h = mix(mix(h, lo.hash()), hi.hash());
  }
  return h;
}

uint64_t hash_value(const ShapeTracker& st) {
  uint64_t h = 7;
  for (auto& v : st.views) h = mix(h, hash_value(v));
  return h;
}

}  // namespace baregrad::compiler
