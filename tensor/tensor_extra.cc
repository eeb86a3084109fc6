// Extra Tensor ops (tinygrad's names and semantics): creation helpers, dropout, scatter, padding
// modes, losses, attention, einsum and slicing. Each is composed from existing Tensor ops, so
// autograd covers them without backward rules of their own.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string_view>

#include "base/error.h"
#include "tensor/tensor.h"

namespace baregrad::tensor {
namespace {
using compiler::least_upper_float;
using Pads = std::vector<std::pair<int64_t, int64_t>>;

std::string device_of(const Tensor& t) { return t.lazy().base->device->name(); }

// 0, 1, ..., n-1 as int32 on `t`'s device.
Tensor arange_on(const Tensor& t, int64_t n) {
  std::vector<double> v(n);
  std::iota(v.begin(), v.end(), 0.0);
  return Tensor::from_data(v, {n}, dtypes::kInt32, device_of(t));
}

Tensor as_float(const Tensor& t) { return t.cast(least_upper_float(t.dtype())); }

// `r` (freshly generated on the default device) moved to `t`'s device when they differ.
Tensor on_device_of(const Tensor& r, const Tensor& t) {
  if (device_of(r) == device_of(t)) return r;
  return Tensor::from_data(r.to_vector(), r.shape(), r.dtype(), device_of(t));
}

// Full ranges of `s`, for shrink.
Pads full_ranges(const Shape& s) {
  Pads r;
  for (int64_t d : s) r.push_back({0, d});
  return r;
}

std::string str(int64_t v) { return std::to_string(v); }

}  // namespace

// ---- creation ----------------------------------------------------------------------------------

Tensor Tensor::eye(int64_t n, int64_t m, DType dtype) {
  if (m < 0) m = n;
  if (n < 0) fail("eye", "negative size " + str(n), ErrorKind::kValue);
  Tensor i = arange(0, static_cast<double>(n)).reshape({n, 1});
  return i.eq(arange(0, static_cast<double>(m)).reshape({1, m})).cast(dtype);
}

Tensor Tensor::linspace(double start, double stop, int64_t steps, DType dtype) {
  if (steps < 0) fail("linspace", "steps " + str(steps) + " is negative", ErrorKind::kValue);
  if (dtypes::is_bool(dtype)) fail("linspace", "bool dtype is not supported", ErrorKind::kValue);
  std::vector<double> v(steps);
  double delta = steps > 1 ? (stop - start) / static_cast<double>(steps - 1) : 0;
  for (int64_t i = 0; i < steps; i++) v[i] = start + static_cast<double>(i) * delta;
  if (steps > 1) v.back() = stop;
  return from_data(v, {steps}, dtype);
}

Tensor Tensor::zeros_like(const Tensor& t) { return full_like(t, 0); }
Tensor Tensor::ones_like(const Tensor& t) { return full_like(t, 1); }
Tensor Tensor::full_like(const Tensor& t, double value) {
  return full(t.shape(), value, t.dtype(), device_of(t));
}

Tensor Tensor::rand_like(const Tensor& t) {
  if (!dtypes::is_float(t.dtype()))
    fail("rand_like", "needs a float tensor, got " + t.dtype().name() + " " + shape_str(t.shape()),
         ErrorKind::kValue);
  return on_device_of(rand(t.shape(), t.dtype()), t);
}

Tensor Tensor::randint(Shape shape, int64_t low, int64_t high, DType dtype) {
  if (!dtypes::is_int(dtype))
    fail("randint", "dtype must be an integer, got " + dtype.name(), ErrorKind::kType);
  if (low >= high)
    fail("randint", "empty range [" + str(low) + ", " + str(high) + ")", ErrorKind::kValue);
  // floor(u * (high - low)) < high - low for u < 1 in float64; the minimum guards rounding.
  auto span = static_cast<double>(high - low);
  Tensor k = (rand(std::move(shape), dtypes::kFloat64) * span).cast(dtypes::kInt64);
  Tensor top = full({}, span - 1, dtypes::kInt64);
  return (k.minimum(top) + static_cast<double>(low)).cast(dtype);
}

Tensor Tensor::normal(Shape shape, double mean, double std, DType dtype) {
  if (!dtypes::is_float(dtype))
    fail("normal", "dtype must be a float, got " + dtype.name(), ErrorKind::kType);
  return randn(std::move(shape), dtype) * std + mean;
}

// ---- elementwise -------------------------------------------------------------------------------

Tensor Tensor::dropout(double p, bool training) const {
  if (!(p >= 0 && p <= 1))
    fail("dropout", "p = " + std::to_string(p) + " is not in [0, 1]", ErrorKind::kValue);
  if (!training || p == 0) return *this;
  if (p == 1) return *this * 0.0;  // keeps the (zero) gradient path
  Tensor u = on_device_of(rand(shape()), *this);
  return where(u.lt(u.scalar_like(p)), scalar_like(0), *this) / (1 - p);
}

Tensor Tensor::masked_fill(const Tensor& mask, double value) const {
  broadcast("masked_fill", *this, mask);
  return where(mask, scalar_like(value), *this);
}

Tensor Tensor::scatter(int axis, const Tensor& index, const Tensor& src) const {
  int ax = norm_axis("scatter", axis, ndim());
  std::string shapes = "index " + shape_str(index.shape()) + ", src " + shape_str(src.shape()) +
                       " into " + shape_str(shape());
  if (!dtypes::is_int(index.dtype()))
    fail("scatter", "index must be an integer tensor, got " + index.dtype().name(),
         ErrorKind::kType);
  if (src.dtype() != dtype())
    fail("scatter", "src dtype " + src.dtype().name() + " differs from " + dtype().name(),
         ErrorKind::kType);
  if (index.ndim() != ndim() || src.ndim() != ndim())
    fail("scatter", shapes + ": ndims differ", ErrorKind::kValue);
  for (int d = 0; d < ndim(); d++)
    if (index.shape()[d] > src.shape()[d] || (d != ax && index.shape()[d] > shape()[d]))
      fail("scatter", shapes + ": index exceeds dim " + str(d), ErrorKind::kValue);
  int64_t n = shape()[ax], m = index.shape()[ax];
  if (index.numel() == 0) return *this;
  // A new last axis j runs over index positions along `axis`; `axis` itself becomes the target k.
  Tensor s = src.shrink(full_ranges(index.shape())).unsqueeze(-1).transpose(ax, -1);
  Tensor idx = index.unsqueeze(-1).transpose(ax, -1);
  Shape kshape(ndim() + 1, 1);
  kshape[ax] = n;
  Tensor hit = idx.eq(arange_on(*this, n).reshape(kshape));
  Tensor j1 = arange_on(*this, m) + 1.0;  // 1-based, so that 0 means "no hit"
  Tensor last = where(hit, j1, j1.scalar_like(0)).max({-1}, true);
  Tensor val = where(hit.logical_and(j1.eq(last)), s, scalar_like(0)).sum({-1}).cast(dtype());
  Tensor written = last.squeeze(-1).ne(last.scalar_like(0));
  Pads pads;
  for (int d = 0; d < ndim(); d++) pads.push_back({0, d == ax ? 0 : shape()[d] - index.shape()[d]});
  return where(written.pad(pads), val.pad(pads), *this);
}

// ---- reductions and movement -------------------------------------------------------------------

Tensor Tensor::cumprod(int axis) const {
  if (ndim() == 0) return reshape({1}).cumprod(0).reshape({});
  int ax = norm_axis("cumprod", axis, ndim());
  int64_t n = shape()[ax];
  // out[i] = prod over j of (j <= i ? x[j] : 1): a lower-triangular mask on a new axis.
  Tensor i = arange_on(*this, n).reshape({n, 1}), j = arange_on(*this, n).reshape({1, n});
  Tensor x = transpose(ax, -1).unsqueeze(-2);
  return where(i.lt(j), scalar_like(1), x).prod({-1}).transpose(ax, -1);
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
  for (int d = s; d <= e; d++) merged *= shape()[d];
  out.push_back(merged);
  out.insert(out.end(), shape().begin() + e + 1, shape().end());
  return reshape(out);
}

Tensor Tensor::unflatten(int axis, const Shape& sizes) const {
  int ax = norm_axis("unflatten", axis, ndim());
  int64_t known = 1, infer = 0;
  for (int64_t v : sizes) v == -1 ? infer++ : known *= v;
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
    Tensor inside = full(x.shape(), 1, dtypes::kBool, device_of(x)).pad(grow);
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

// ---- losses and attention ----------------------------------------------------------------------

Tensor Tensor::binary_cross_entropy(const Tensor& target) const {
  broadcast("binary_cross_entropy", *this, target);
  Tensor p = as_float(*this), y = target.cast(p.dtype()), lo = p.scalar_like(-100);
  return (-(y * p.log().maximum(lo) + (-y + 1.0) * (-p + 1.0).log().maximum(lo))).mean();
}

Tensor Tensor::binary_cross_entropy_with_logits(const Tensor& target) const {
  broadcast("binary_cross_entropy_with_logits", *this, target);
  Tensor x = as_float(*this);
  return (x.softplus() - x * target.cast(x.dtype())).mean();
}

Tensor Tensor::mse(const Tensor& target) const {
  broadcast("mse", *this, target);
  return (*this - target).square().mean();
}

Tensor Tensor::scaled_dot_product_attention(const Tensor& key,
                                            const Tensor& value,
                                            const std::optional<Tensor>& attn_mask,
                                            bool is_causal) const {
  const char* op = "scaled_dot_product_attention";
  std::string shapes = "query " + shape_str(shape()) + ", key " + shape_str(key.shape()) +
                       ", value " + shape_str(value.shape());
  if (ndim() < 2 || key.ndim() < 2 || value.ndim() < 2)
    fail(op, shapes + ": need >= 2 dims", ErrorKind::kValue);
  if (shape().back() != key.shape().back())
    fail(op, shapes + ": query and key dims differ", ErrorKind::kValue);
  if (key.shape()[key.ndim() - 2] != value.shape()[value.ndim() - 2])
    fail(op, shapes + ": key and value lengths differ", ErrorKind::kValue);
  if (is_causal && attn_mask) fail(op, "attn_mask given with is_causal", ErrorKind::kValue);
  Tensor q = as_float(*this);
  Tensor qk = q.matmul(key.transpose(-2, -1)) / std::sqrt(static_cast<double>(shape().back()));
  Tensor ninf = qk.scalar_like(-INFINITY);
  if (is_causal) {
    int64_t l = qk.shape()[qk.ndim() - 2], s = qk.shape().back();
    Tensor above = arange_on(qk, l).reshape({l, 1}).lt(arange_on(qk, s).reshape({1, s}));
    qk = where(above, ninf, qk);
  }
  if (attn_mask) {
    if (attn_mask->shape() != qk.shape()) broadcast(op, qk, *attn_mask);
    qk = dtypes::is_bool(attn_mask->dtype()) ? where(*attn_mask, qk, ninf) : qk + *attn_mask;
  }
  return qk.softmax(-1).matmul(value);
}

// ---- einsum ------------------------------------------------------------------------------------

namespace {
constexpr std::string_view kDots = "...";

// The labels of `term`: its letters, with "..." standing for the last `dims` of the `ell`
// broadcast dims, which get the chars 1..ell (below any letter, so they sort first).
std::vector<char> labels_of(std::string_view term, int dims, int ell, const std::string& f) {
  std::vector<char> out;
  for (size_t i = 0; i < term.size(); i++) {
    if (term.substr(i, 3) == kDots) {
      for (int k = ell - dims; k < ell; k++) out.push_back(static_cast<char>(1 + k));
      i += 2;
    } else if (std::isalpha(static_cast<unsigned char>(term[i]))) {
      out.push_back(term[i]);
    } else {
      fail("einsum", "bad character '" + std::string(1, term[i]) + "' in '" + f + "'",
           ErrorKind::kValue);
    }
  }
  return out;
}

int letters_in(std::string_view term) {
  return static_cast<int>(std::count_if(term.begin(), term.end(), [](char c) {
    return std::isalpha(static_cast<unsigned char>(c));
  }));
}
}  // namespace

Tensor Tensor::einsum(const std::string& formula, const std::vector<Tensor>& operands) {
  std::string f;
  for (char c : formula)
    if (c != ' ') f += c;
  size_t arrow = f.find("->");
  std::string_view lhs = std::string_view(f).substr(0, arrow);
  std::vector<std::string_view> terms;
  for (size_t b = 0, e = 0; e < lhs.size() || b == 0; b = e + 1) {
    e = std::min(lhs.find(',', b), lhs.size());
    terms.push_back(lhs.substr(b, e - b));
  }
  if (terms.size() != operands.size())
    fail("einsum",
         "'" + formula + "' has " + str(terms.size()) + " terms for " + str(operands.size()) +
             " operands",
         ErrorKind::kValue);
  int ell = 0;
  std::vector<int> dims(terms.size());
  for (size_t i = 0; i < terms.size(); i++) {
    bool dots = terms[i].find(kDots) != std::string_view::npos;
    dims[i] = operands[i].ndim() - letters_in(terms[i]);
    if (dims[i] < 0 || (!dots && dims[i] != 0))
      fail("einsum",
           "term '" + std::string(terms[i]) + "' does not fit operand " + str(i) + " of shape " +
               shape_str(operands[i].shape()),
           ErrorKind::kValue);
    ell = std::max(ell, dims[i]);
  }
  std::map<char, int64_t> size;  // every label, sorted; the size it broadcasts to
  std::map<char, int> uses;
  std::vector<std::vector<char>> labels;
  for (size_t i = 0; i < terms.size(); i++) {
    const Shape& s = operands[i].shape();
    labels.push_back(labels_of(terms[i], dims[i], ell, formula));
    for (size_t d = 0; d < s.size(); d++) {
      char c = labels[i][d];
      std::string name = c < 'A' ? "..." : std::string(1, c);
      if (std::count(labels[i].begin(), labels[i].end(), c) > 1)
        fail("einsum",
             "repeated index '" + name + "' in term '" + std::string(terms[i]) +
                 "' (diagonals are not supported)",
             ErrorKind::kValue);
      int64_t& n = size.try_emplace(c, 1).first->second;  // size 1 broadcasts (also to 0)
      if (n != 1 && s[d] != 1 && n != s[d])
        fail("einsum",
             "index '" + name + "' has sizes " + str(n) + " and " + str(s[d]) + " (operand " +
                 str(i) + " of shape " + shape_str(s) + ")",
             ErrorKind::kValue);
      if (s[d] != 1) n = s[d];
      uses[c]++;
    }
  }
  std::vector<char> out;
  if (arrow == std::string::npos) {
    for (auto [c, n] : uses)  // numpy's implicit output: "..." first, then letters used once
      if (c < 'A' || n == 1) out.push_back(c);
  } else {
    out = labels_of(std::string_view(f).substr(arrow + 2), ell, ell, formula);
    for (char c : out)
      if (!size.count(c) || std::count(out.begin(), out.end(), c) > 1)
        fail("einsum",
             "output index '" + std::string(1, c) + "' is unknown or repeated in '" + formula + "'",
             ErrorKind::kValue);
  }
  // Each operand permuted to sorted label order and viewed over all labels (1 where it lacks
  // one); their broadcast product is summed over the labels not in the output.
  std::optional<Tensor> prod;
  for (size_t i = 0; i < operands.size(); i++) {
    std::vector<int> order(labels[i].size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](int a, int b) { return labels[i][a] < labels[i][b]; });
    Shape view;
    for (auto [c, n] : size) {
      auto at = std::find(labels[i].begin(), labels[i].end(), c);
      view.push_back(at == labels[i].end() ? 1 : operands[i].shape()[at - labels[i].begin()]);
    }
    Tensor x = operands[i].permute(order).reshape(view);
    prod = prod ? *prod * x : x;
  }
  if (!prod) fail("einsum", "no operands for '" + formula + "'", ErrorKind::kValue);
  Shape all;
  std::vector<int> drop;
  std::vector<char> kept;
  for (auto [c, n] : size) {
    all.push_back(n);
    if (std::count(out.begin(), out.end(), c)) {
      kept.push_back(c);
    } else {
      drop.push_back(static_cast<int>(all.size()) - 1);
    }
  }
  Tensor r = prod->expand(all);
  if (!drop.empty()) r = r.sum(drop);
  std::vector<int> perm;
  for (char c : out)
    perm.push_back(static_cast<int>(std::find(kept.begin(), kept.end(), c) - kept.begin()));
  return r.permute(perm);
}

// ---- slicing -----------------------------------------------------------------------------------

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
  int64_t s = std::abs(step), span = step > 0 ? e - b : b - e;
  int64_t count = span > 0 ? (span + s - 1) / s : 0;
  Pads r = full_ranges(shape());
  if (count == 0) {
    r[ax] = {0, 0};
    return shrink(r);
  }
  int64_t last = b + (count - 1) * step;
  r[ax] = {std::min(b, last), std::max(b, last) + 1};
  Tensor x = shrink(r);
  if (step < 0) x = x.flip({ax});
  if (s == 1) return x;
  // Every s-th element: pad to count * s, view as (count, s) and keep column 0.
  Pads p(ndim(), {0, 0});
  p[ax] = {0, s - 1};
  Shape grid = x.shape();
  grid[ax] = s;
  grid.insert(grid.begin() + ax, count);
  Pads keep = full_ranges(grid);
  keep[ax + 1] = {0, 1};
  Shape out = shape();
  out[ax] = count;
  return x.pad(p).reshape(grid).shrink(keep).reshape(out);
}

Tensor Tensor::index(const std::vector<int64_t>& idx) const {
  if (static_cast<int>(idx.size()) > ndim())
    fail("index", str(idx.size()) + " indices for shape " + shape_str(shape()), ErrorKind::kIndex);
  Pads r = full_ranges(shape());
  Shape out(shape().begin() + idx.size(), shape().end());
  for (size_t d = 0; d < idx.size(); d++) {
    int64_t n = shape()[d], i = idx[d] < 0 ? idx[d] + n : idx[d];
    if (i < 0 || i >= n)
      fail("index",
           "index " + str(idx[d]) + " is out of bounds for dim " + str(d) + " of " +
               shape_str(shape()),
           ErrorKind::kIndex);
    r[d] = {i, i + 1};
  }
  return shrink(r).reshape(out);
}

}  // namespace baregrad::tensor
