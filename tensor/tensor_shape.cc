// Tensor movement ops: the views, the ops composed from them (cat, split, repeat, roll, pad_mode,
// slice, ...), and matmul.
#include <algorithm>
#include <numeric>

#include "base/checked.h"
#include "base/error.h"
#include "compiler/view_ops.h"
#include "tensor/jit.h"
#include "tensor/tensor.h"
#include "tensor/tensor_internal.h"

namespace baregrad::tensor {
namespace {
using compiler::least_upper_dtype;
using Grads = std::vector<std::optional<Tensor>>;
using compiler::Sym;
using compiler::SymTracker;
using SymRanges = std::vector<std::pair<Sym, Sym>>;

SymTracker sym_or_const(const Lazy& l) { return l.sym ? *l.sym : SymTracker::of(l.st); }

// sym_or_const(l) that also carries the values `vals` of an op's symbolic arguments.
SymTracker sym_with(const Lazy& l, const char* op, const compiler::Bindings& vals) {
  SymTracker st = sym_or_const(l);
  compiler::merge_bindings(op, st.vals, vals);
  return st;
}

// The symbolic shape of a reshape of `from` (concrete `cur`) to `to`, matching groups of dims
// with equal products. A symbolic dim keeps its Sym, merged dims multiply theirs; splitting a
// symbolic dim, or one whose value is now 0 or 1 (the grouping is ambiguous), gives nullopt.
std::optional<std::vector<Sym>> infer_reshape(const std::vector<Sym>& from,
                                              const Shape& cur,
                                              const Shape& to) {
  for (size_t i = 0; i < from.size(); i++)
    if (!from[i].is_const() && cur[i] <= 1) return std::nullopt;
  std::vector<Sym> out;
  size_t i = 0, j = 0;
  while (i < cur.size() || j < to.size()) {
    if (j < to.size() && to[j] == 1 && (i >= cur.size() || cur[i] != 1 || !from[i].is_const())) {
      out.push_back(1);  // a new size-1 dim
      j++;
      continue;
    }
    if (i < cur.size() && cur[i] == 1 && from[i].is_const() && (j >= to.size() || to[j] != 1)) {
      i++;  // a removed size-1 dim
      continue;
    }
    if (i >= cur.size() || j >= to.size()) return std::nullopt;
    size_t i0 = i, j0 = j;
    int64_t a = cur[i++], b = to[j++];
    while (a != b) {
      if (a < b && i < cur.size())
        a *= cur[i++];
      else if (b < a && j < to.size())
        b *= to[j++];
      else
        return std::nullopt;
    }
    std::vector<Sym> group(from.begin() + static_cast<long>(i0),
                           from.begin() + static_cast<long>(i));
    if (!compiler::any_symbolic(group)) {
      for (size_t k = j0; k < j; k++) out.push_back(to[k]);
      continue;
    }
    size_t big = 0, at = j0;
    for (size_t k = j0; k < j; k++)
      if (to[k] != 1) big++, at = k;
    if (big != 1) return std::nullopt;  // a symbolic dim split in several
    for (size_t k = j0; k < j; k++) out.push_back(k == at ? compiler::sym_prod(group) : Sym(1));
  }
  return out;
}

// A symbolic shape `op` could not keep: the result has the current values' sizes, so a TinyJit
// capture of it serves only those values.
std::optional<SymTracker> or_specialize(std::optional<SymTracker> st, const char* op) {
  if (!st) detail::jit_specialize(std::string(op) + " of a symbolic shape has no symbolic form");
  return st;
}

// `l` seen through `st`, with its symbolic form `op(sym)` when `l` has one.
template <class F>
Lazy view_of(const Lazy& l, compiler::ShapeTracker st, const char* name, F op) {
  if (!l.sym) return lazy_view(l, std::move(st));
  return lazy_view(l, std::move(st), keep_sym(or_specialize(op(*l.sym), name)));
}

Shape eval_all(const std::vector<Sym>& v, const compiler::Bindings& vals) {
  Shape out;
  for (const Sym& s : v) out.push_back(s.eval(vals));
  return out;
}

std::vector<std::pair<int64_t, int64_t>> eval_ranges(const SymRanges& r,
                                                     const compiler::Bindings& vals) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (auto& [a, b] : r) out.emplace_back(a.eval(vals), b.eval(vals));
  return out;
}
}  // namespace

int Tensor::norm_axis(const char* name, int axis, int n) const {
  if (axis < -n || axis >= n)
    fail(name, "axis " + std::to_string(axis) + " out of range for shape " + shape_str(shape()),
         ErrorKind::kIndex);
  return axis < 0 ? axis + n : axis;
}

std::vector<int> Tensor::norm_axes(const char* name, std::vector<int> axes) const {
  if (ndim() == 0) {  // a 0-d tensor takes axis 0 or -1 (torch, tinygrad) and reduces over none
    for (int a : axes) norm_axis(name, a, 1);
    return {};
  }
  if (axes.empty()) {
    axes.resize(ndim());
    std::iota(axes.begin(), axes.end(), 0);
  }
  for (int& a : axes) a = norm_axis(name, a, ndim());
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    fail(name, "repeated axis for shape " + shape_str(shape()), ErrorKind::kValue);
  return axes;
}

// ---- movement ----------------------------------------------------------------------------------

Tensor Tensor::reshape(Shape s) const {
  auto infer = std::count(s.begin(), s.end(), -1);
  if (infer > 1) fail("reshape", "more than one -1 in " + shape_str(s), ErrorKind::kValue);
  if (infer == 1) {
    Shape rest;
    std::copy_if(s.begin(), s.end(), std::back_inserter(rest), [](int64_t d) { return d != -1; });
    int64_t known = checked_numel(rest).value_or(0);  // 0 also for a negative size or overflow
    if (known == 0 || numel() % known != 0)
      fail("reshape", "cannot reshape " + shape_str(shape()) + " to " + shape_str(s),
           ErrorKind::kValue);
    *std::find(s.begin(), s.end(), -1) = numel() / known;
  }
  if (s == shape()) return *this;
  Shape from = shape();
  const Lazy& l = impl_->lazy;
  Lazy v = view_of(l, compiler::reshape(l.st, s), "reshape", [&](const SymTracker& st) {
    auto to = infer_reshape(st.shape(), from, s);
    return to ? compiler::sym_reshape(st, *to) : std::nullopt;
  });
  return record(std::move(v), "reshape", {*this},
                [from](const Tensor& g) { return Grads{g.reshape(from)}; });
}

Tensor Tensor::permute(std::vector<int> order) const {
  if (static_cast<int>(order.size()) != ndim())
    fail("permute",
         "order of " + std::to_string(order.size()) + " axes for shape " + shape_str(shape()),
         ErrorKind::kValue);
  for (int& a : order) a = norm_axis("permute", a, ndim());
  std::vector<int> inverse(order.size());
  for (size_t i = 0; i < order.size(); i++) inverse[order[i]] = static_cast<int>(i);
  Lazy v = view_of(impl_->lazy, compiler::permute(impl_->lazy.st, order), "permute",
                   [&](const SymTracker& st) { return compiler::sym_permute(st, order); });
  return record(std::move(v), "permute", {*this},
                [inverse](const Tensor& g) { return Grads{g.permute(inverse)}; });
}

Tensor Tensor::expand(Shape s) const {
  if (s.size() < shape().size())
    fail("expand", "cannot expand " + shape_str(shape()) + " to " + shape_str(s),
         ErrorKind::kValue);
  Shape cur(s.size() - shape().size(), 1);
  cur.insert(cur.end(), shape().begin(), shape().end());
  for (size_t i = 0; i < s.size(); i++)
    if (s[i] == -1) s[i] = cur[i];
  Tensor t = reshape(cur);
  if (s == cur) return t;
  std::vector<int> grown;  // the broadcast dims sum their gradient back
  for (size_t i = 0; i < s.size(); i++)
    if (cur[i] != s[i]) grown.push_back(static_cast<int>(i));
  Lazy v = view_of(t.impl_->lazy, compiler::expand(t.impl_->lazy.st, s), "expand",
                   [&](const SymTracker& st) {
                     std::vector<Sym> to = st.shape();  // unchanged dims keep their Sym
                     for (int a : grown) to[a] = s[a];
                     return compiler::sym_expand(st, to);
                   });
  return record(std::move(v), "expand", {t},
                [grown](const Tensor& g) { return Grads{g.sum(grown, true)}; });
}

Tensor Tensor::expand_sym(const std::vector<Sym>& shape, const compiler::Bindings& vals) const {
  if (!compiler::any_symbolic(shape)) return expand(eval_all(shape, vals));
  if (std::optional<std::vector<Sym>> cur = sym_shape(); cur && *cur == shape) return *this;
  Shape s = eval_all(shape, vals);
  Tensor t = expand(s);  // checks the sizes
  if (t.impl_ == impl_)  // a new tensor: its shadow differs from this one's
    t = record(impl_->lazy, "expand", {*this}, [](const Tensor& g) { return Grads{g}; });
  SymTracker base = sym_with(impl_->lazy, "expand", vals);
  std::optional<SymTracker> st = base;
  if (shape.size() > base.shape().size()) {  // new leading dims of size 1 first
    std::vector<Sym> padded(shape.size() - base.shape().size(), Sym(1));
    padded.insert(padded.end(), base.shape().begin(), base.shape().end());
    st = compiler::sym_reshape(base, padded);
  }
  if (st) st = compiler::sym_expand(*st, shape);
  t.impl_->lazy.sym = keep_sym(or_specialize(st, "expand"));
  return t;
}

Tensor Tensor::shrink_sym(const SymRanges& ranges, const compiler::Bindings& vals) const {
  Tensor t = shrink(eval_ranges(ranges, vals));  // checks the ranges
  SymTracker base = sym_with(impl_->lazy, "shrink", vals);
  t.impl_->lazy.sym = keep_sym(or_specialize(compiler::sym_shrink(base, ranges), "shrink"));
  return t;
}

Tensor Tensor::pad_sym(const SymRanges& before_after, const compiler::Bindings& vals) const {
  Tensor t = pad(eval_ranges(before_after, vals));  // checks the sizes
  SymTracker base = sym_with(impl_->lazy, "pad", vals);
  t.impl_->lazy.sym = keep_sym(or_specialize(compiler::sym_pad(base, before_after), "pad"));
  return t;
}

std::optional<std::vector<Sym>> Tensor::sym_shape() const {
  if (!impl_->lazy.sym) return std::nullopt;
  return impl_->lazy.sym->shape();
}

compiler::Bindings Tensor::sym_vals() const {
  return impl_->lazy.sym ? impl_->lazy.sym->vals : compiler::Bindings{};
}

Tensor Tensor::pad(std::vector<std::pair<int64_t, int64_t>> before_after) const {
  Shape from = shape();
  compiler::ShapeTracker st = compiler::pad(impl_->lazy.st, before_after);  // checks the sizes
  std::vector<std::pair<int64_t, int64_t>> back;
  for (size_t i = 0; i < before_after.size() && i < from.size(); i++)
    back.push_back({before_after[i].first, before_after[i].first + from[i]});
  Lazy v = view_of(impl_->lazy, std::move(st), "pad", [&](const SymTracker& t) {
    SymRanges r;
    for (auto& [b, a] : before_after) r.emplace_back(b, a);
    return compiler::sym_pad(t, r);
  });
  return record(std::move(v), "pad", {*this},
                [back](const Tensor& g) { return Grads{g.shrink(back)}; });
}

Tensor Tensor::shrink(std::vector<std::pair<int64_t, int64_t>> ranges) const {
  Shape from = shape();
  compiler::ShapeTracker st = compiler::shrink(impl_->lazy.st, ranges);  // checks the ranges
  std::vector<std::pair<int64_t, int64_t>> back;
  for (size_t i = 0; i < ranges.size() && i < from.size(); i++)
    back.push_back({ranges[i].first, from[i] - ranges[i].second});
  Lazy v = view_of(impl_->lazy, std::move(st), "shrink", [&](const SymTracker& t) {
    SymRanges r;
    for (auto& [lo, hi] : ranges) r.emplace_back(lo, hi);
    return compiler::sym_shrink(t, r);
  });
  return record(std::move(v), "shrink", {*this},
                [back](const Tensor& g) { return Grads{g.pad(back)}; });
}

Tensor Tensor::flip(std::vector<int> axes) const {
  std::vector<bool> f(ndim(), false);
  for (int a : norm_axes("flip", axes)) f[a] = true;
  std::vector<int> flipped = norm_axes("flip", axes);
  Lazy v = view_of(impl_->lazy, compiler::flip(impl_->lazy.st, f), "flip",
                   [&](const SymTracker& st) { return compiler::sym_flip(st, f); });
  return record(std::move(v), "flip", {*this},
                [flipped](const Tensor& g) { return Grads{g.flip(flipped)}; });
}

Tensor Tensor::transpose(int a, int b) const {
  std::vector<int> order(ndim());
  std::iota(order.begin(), order.end(), 0);
  std::swap(order[norm_axis("transpose", a, ndim())], order[norm_axis("transpose", b, ndim())]);
  return permute(order);
}

Tensor Tensor::unsqueeze(int axis) const {
  Shape s = shape();
  s.insert(s.begin() + norm_axis("unsqueeze", axis, ndim() + 1), 1);
  return reshape(s);
}

Tensor Tensor::squeeze(int axis) const {
  int a = norm_axis("squeeze", axis, ndim());
  if (shape()[a] != 1)
    fail("squeeze", "axis " + std::to_string(axis) + " of " + shape_str(shape()) + " is not 1",
         ErrorKind::kValue);
  Shape s = shape();
  s.erase(s.begin() + a);
  return reshape(s);
}

// ---- composed movement -------------------------------------------------------------------------

Tensor Tensor::cat(const std::vector<Tensor>& ts, int axis) {
  if (ts.empty()) fail("cat", "no tensors to concatenate", ErrorKind::kValue);
  const Tensor& first = ts[0];
  int ax = first.norm_axis("cat", axis, first.ndim());
  DType t = first.dtype();
  int64_t total = 0;
  for (const Tensor& x : ts) {
    check_same_device("cat", first.lazy(), x.lazy());
    bool same = x.ndim() == first.ndim();
    for (int d = 0; same && d < x.ndim(); d++) same = d == ax || x.shape()[d] == first.shape()[d];
    if (!same)
      fail("cat",
           "shapes " + shape_str(first.shape()) + " and " + shape_str(x.shape()) +
               " differ outside axis " + std::to_string(axis),
           ErrorKind::kValue);
    t = least_upper_dtype(t, x.dtype());
    total = add_or_fail("cat", "the sizes of axis " + std::to_string(axis), total, x.shape()[ax]);
  }
  DType sum_t = dtypes::is_bool(t) ? dtypes::kUint8 : t;  // bools add as 0/1 bytes
  std::vector<std::pair<int64_t, int64_t>> pads(first.ndim(), {0, 0});
  std::optional<Tensor> out;
  int64_t offset = 0;
  for (const Tensor& x : ts) {
    pads[ax] = {offset, total - offset - x.shape()[ax]};
    offset += x.shape()[ax];
    Tensor part = x.cast(sum_t).pad(pads);
    out = out ? *out + part : part;
  }
  return out->cast(t);
}

Tensor Tensor::stack(const std::vector<Tensor>& ts, int axis) {
  if (ts.empty()) fail("stack", "no tensors to stack", ErrorKind::kValue);
  int ax = ts[0].norm_axis("stack", axis, ts[0].ndim() + 1);
  std::vector<Tensor> parts;
  for (const Tensor& x : ts) {
    check_same_device("stack", ts[0].lazy(), x.lazy());
    if (x.shape() != ts[0].shape())
      fail("stack",
           "shapes " + shape_str(ts[0].shape()) + " and " + shape_str(x.shape()) + " differ",
           ErrorKind::kValue);
    parts.push_back(x.unsqueeze(ax));
  }
  return cat(parts, ax);
}

std::vector<Tensor> Tensor::split(const std::vector<int64_t>& sizes, int axis) const {
  int ax = norm_axis("split", axis, ndim());
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) fail("split", "negative size in " + shape_str(sizes), ErrorKind::kValue);
    total = add_or_fail("split", "sizes " + shape_str(sizes), total, s);
  }
  if (total != shape()[ax])
    fail("split",
         "sizes " + shape_str(sizes) + " sum to " + std::to_string(total) + ", but axis " +
             std::to_string(axis) + " of " + shape_str(shape()) + " has " +
             std::to_string(shape()[ax]),
         ErrorKind::kValue);
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int64_t d : shape()) ranges.push_back({0, d});
  std::vector<Tensor> out;
  int64_t offset = 0;
  for (int64_t s : sizes) {
    ranges[ax] = {offset, offset + s};
    offset += s;
    out.push_back(shrink(ranges));
  }
  return out;
}

std::vector<Tensor> Tensor::split(int64_t size, int axis) const {
  int ax = norm_axis("split", axis, ndim());
  if (size <= 0)
    fail("split", "size " + std::to_string(size) + " is not positive", ErrorKind::kValue);
  int64_t n = shape()[ax];
  std::vector<int64_t> sizes;
  for (int64_t i = 0; i < std::max<int64_t>(n, 1); i += size)
    sizes.push_back(std::min(size, n - i));
  return split(sizes, axis);
}

std::vector<Tensor> Tensor::chunk(int64_t chunks, int axis) const {
  int ax = norm_axis("chunk", axis, ndim());
  if (chunks <= 0)
    fail("chunk", "chunks " + std::to_string(chunks) + " is not positive", ErrorKind::kValue);
  int64_t n = shape()[ax];
  if (n == 0) return split(std::vector<int64_t>(chunks, 0), axis);
  return split((n + chunks - 1) / chunks, axis);
}

Tensor Tensor::repeat(const std::vector<int64_t>& repeats) const {
  if (static_cast<int>(repeats.size()) < ndim())
    fail("repeat",
         "repeats " + shape_str(repeats) + " for shape " + shape_str(shape()) + " (need at least " +
             std::to_string(ndim()) + ")",
         ErrorKind::kValue);
  Shape base(repeats.size() - ndim(), 1), unsq, expanded, out;
  base.insert(base.end(), shape().begin(), shape().end());
  for (size_t i = 0; i < repeats.size(); i++) {
    if (repeats[i] < 0)
      fail("repeat", "negative count in repeats " + shape_str(repeats), ErrorKind::kValue);
    unsq.insert(unsq.end(), {1, base[i]});
    expanded.insert(expanded.end(), {repeats[i], base[i]});
    out.push_back(mul_or_fail("repeat", "repeats " + shape_str(repeats), repeats[i], base[i]));
  }
  numel_or_fail("repeat", out);
  return reshape(unsq).expand(expanded).reshape(out);
}

Tensor Tensor::roll(int64_t shift, std::optional<int> axis) const {
  if (!axis) return flatten().roll(shift, 0).reshape(shape());
  int ax = norm_axis("roll", *axis, ndim());
  int64_t n = shape()[ax];
  if (n == 0 || shift % n == 0) return *this;
  int64_t s = ((shift % n) + n) % n;
  std::vector<int64_t> reps(ndim(), 1);
  reps[ax] = 2;
  Tensor twice = repeat(reps);  // checks that 2 * n fits
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int64_t d : shape()) ranges.push_back({0, d});
  ranges[ax] = {n - s, 2 * n - s};
  return twice.shrink(ranges);  // out[i] = x[(i - shift) mod n]
}

Tensor Tensor::flatten(int start, int end) const {
  if (ndim() == 0) {
    norm_axis("flatten", start, 1), norm_axis("flatten", end, 1);
    return reshape({1});
  }
  int s = norm_axis("flatten", start, ndim()), e = norm_axis("flatten", end, ndim());
  if (s > e)
    fail("flatten", "start " + str(start) + " after end " + str(end) + " for " + shape_str(shape()),
         ErrorKind::kValue);
  Shape out(shape().begin(), shape().begin() + s);
  int64_t merged = 1;
  for (int d = s; d <= e; d++) merged *= shape()[d];  // a part of a valid shape's product
  out.push_back(merged);
  out.insert(out.end(), shape().begin() + e + 1, shape().end());
  return reshape(out);
}

Tensor Tensor::unflatten(int axis, const Shape& sizes) const {
  int ax = norm_axis("unflatten", axis, ndim());
  int64_t known = 1, infer = 0;
  for (int64_t v : sizes) v == -1 ? infer++ : known = checked_mul(known, v).value_or(-1);
  bool ok = infer == 0 ? known == shape()[ax] : infer == 1 && known > 0 && shape()[ax] % known == 0;
  if (!ok || std::any_of(sizes.begin(), sizes.end(), [](int64_t v) { return v < -1; }))
    fail("unflatten",
         "sizes " + shape_str(sizes) + " do not split axis " + str(axis) + " of " +
             shape_str(shape()),
         ErrorKind::kValue);
  Shape out(shape().begin(), shape().begin() + ax);
  out.insert(out.end(), sizes.begin(), sizes.end());
  out.insert(out.end(), shape().begin() + ax + 1, shape().end());
  return reshape(out);
}

Tensor Tensor::pad_mode(Pads before_after, std::string_view mode, double value) const {
  bool constant = mode == "constant";
  if (!constant && mode != "reflect" && mode != "replicate" && mode != "circular")
    fail("pad_mode",
         "unknown mode '" + std::string(mode) + "' (constant, reflect, replicate or circular)",
         ErrorKind::kValue);
  if (static_cast<int>(before_after.size()) != ndim())
    fail("pad_mode",
         str(before_after.size()) + " (before, after) pairs for shape " + shape_str(shape()),
         ErrorKind::kValue);
  Pads crop, grow;
  for (int d = 0; d < ndim(); d++) {
    auto [b, a] = before_after[d];
    int64_t lo = std::max<int64_t>(-b, 0), hi = shape()[d] - std::max<int64_t>(-a, 0);
    if (lo > hi)
      fail("pad_mode",
           "negative padding crops more than dim " + str(d) + " of " + shape_str(shape()),
           ErrorKind::kValue);
    crop.push_back({lo, hi});
    grow.push_back({std::max<int64_t>(b, 0), std::max<int64_t>(a, 0)});
  }
  Tensor x = shrink(crop);
  if (constant) {
    if (value == 0) return x.pad(grow);
    Tensor inside = full(x.shape(), 1, dtypes::kBool, x.device()).pad(grow);
    return where(inside, x.pad(grow), x.scalar_like(value));
  }
  for (int d = 0; d < ndim(); d++) {
    auto [b, a] = grow[d];
    int64_t n = x.shape()[d];
    if (b == 0 && a == 0) continue;
    std::string what = "padding (" + str(b) + ", " + str(a) + ") of dim " + str(d) + " (size " +
                       str(n) + ") in mode " + std::string(mode);
    auto part = [&](int64_t lo, int64_t hi) {
      Pads r = full_ranges(x.shape());
      r[d] = {lo, hi};
      return x.shrink(r);
    };
    std::vector<Tensor> parts;
    if (mode == "reflect") {
      if (b >= n || a >= n) fail("pad_mode", what + ": needs padding < size", ErrorKind::kValue);
      parts = {part(1, b + 1).flip({d}), x, part(n - 1 - a, n - 1).flip({d})};
    } else if (mode == "replicate") {
      if (n == 0) fail("pad_mode", what + ": nothing to replicate", ErrorKind::kValue);
      Shape sb = x.shape(), sa = x.shape();
      sb[d] = b, sa[d] = a;
      parts = {part(0, 1).expand(sb), x, part(n - 1, n).expand(sa)};
    } else {
      if (b > n || a > n)
        fail("pad_mode", what + ": wraps around more than once", ErrorKind::kValue);
      parts = {part(n - b, n), x, part(0, a)};
    }
    x = cat(parts, d);
  }
  return x;
}

Tensor Tensor::slice(int axis,
                     std::optional<int64_t> start,
                     std::optional<int64_t> stop,
                     int64_t step) const {
  int ax = norm_axis("slice", axis, ndim());
  if (step == 0) fail("slice", "step is 0", ErrorKind::kValue);
  int64_t n = shape()[ax];
  // Python's slice.indices(n): clamp to [0, n] going up, to [-1, n - 1] going down.
  auto norm = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t i = *v < 0 ? *v + n : *v;
    return step > 0 ? std::clamp<int64_t>(i, 0, n) : std::clamp<int64_t>(i, -1, n - 1);
  };
  int64_t b = norm(start, step > 0 ? 0 : n - 1), e = norm(stop, step > 0 ? n : -1);
  // |step| as unsigned: -2**63 has no int64 magnitude. A step of at least the span takes one.
  uint64_t s = step > 0 ? static_cast<uint64_t>(step) : 0 - static_cast<uint64_t>(step);
  int64_t span = step > 0 ? e - b : b - e;
  int64_t count = span <= 0 ? 0 : static_cast<int64_t>((static_cast<uint64_t>(span) - 1) / s + 1);
  Pads r = full_ranges(shape());
  if (count == 0) {
    r[ax] = {0, 0};
    return shrink(r);
  }
  int64_t last = count == 1 ? b : b + (count - 1) * step;  // count > 1: |step| < span <= n
  r[ax] = {std::min(b, last), std::max(b, last) + 1};
  Tensor x = shrink(r);
  if (step < 0) x = x.flip({ax});
  if (count == 1 || s == 1) return x;
  // Every s-th element: pad to count * s, view as (count, s) and keep column 0.
  Pads p(ndim(), {0, 0});
  p[ax] = {0, static_cast<int64_t>(s) - 1};
  Shape grid = x.shape();
  grid[ax] = static_cast<int64_t>(s);
  grid.insert(grid.begin() + ax, count);
  Pads keep = full_ranges(grid);
  keep[ax + 1] = {0, 1};
  Shape out = shape();
  out[ax] = count;
  return x.pad(p).reshape(grid).shrink(keep).reshape(out);
}

// ---- matmul ------------------------------------------------------------------------------------

Tensor Tensor::matmul(const Tensor& o) const {
  check_same_device("matmul", lazy(), o.lazy());
  if (ndim() == 0 || o.ndim() == 0) fail("matmul", "scalar operand", ErrorKind::kValue);
  Tensor a = ndim() == 1 ? unsqueeze(0) : *this;
  Tensor b = o.ndim() == 1 ? o.unsqueeze(1) : o;
  int64_t k = a.shape().back(), kb = b.shape()[b.ndim() - 2];
  if (k != kb)
    fail("matmul",
         "inner dims differ: " + shape_str(shape()) + " @ " + shape_str(o.shape()) + " (" +
             std::to_string(k) + " vs " + std::to_string(kb) + ")",
         ErrorKind::kValue);
  // (..., n, 1, k) * (..., 1, m, k) summed over k: one fused multiply-reduce kernel. The sum
  // accumulates small ints in 32 bits; the result has the operands' dtype, as torch's and
  // tinygrad's (int8 @ int8 is int8).
  Tensor x = a.unsqueeze(-2);
  Tensor y = b.transpose(-2, -1).unsqueeze(-3);
  Tensor prod = x * y;
  Tensor out = prod.sum({-1});
  if (out.dtype() != prod.dtype()) out = out.cast(prod.dtype());
  if (ndim() == 1) out = out.squeeze(-2);
  if (o.ndim() == 1) out = out.squeeze(-1);
  return out;
}

}  // namespace baregrad::tensor
