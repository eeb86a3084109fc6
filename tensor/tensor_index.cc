// Tensor::operator[]: numpy-style basic and advanced indexing, as tinygrad's _getitem. Ints and
// slices are views (shrink, flip, pad, reshape), none() a reshape; integer tensors become one-hot
// masks summed over the indexed axes, so autograd covers everything without new backward rules.
// The indexing ops (gather, scatter, one_hot, masked_fill, index) are composed the same way.
#include <algorithm>
#include <numeric>
#include <string>

#include "base/error.h"
#include "tensor/tensor.h"
#include "tensor/tensor_internal.h"

namespace baregrad::tensor {
namespace {

// An index tensor's values as a signed type wide enough to add the axis size to.
Tensor signed_index(const Tensor& t) {
  DType d = t.dtype();
  if (d.itemsize() < 4) return t.cast(dtypes::kInt32);
  if (dtypes::is_unsigned(d) || d.itemsize() > 4) return t.cast(dtypes::kInt64);
  return t;
}

// numpy's broadcast of the index tensors' shapes.
Shape broadcast_shapes(const std::vector<Tensor>& ts) {
  size_t n = 0;
  for (const auto& t : ts) n = std::max(n, t.shape().size());
  Shape out(n, 1);
  for (const auto& t : ts) {
    const Shape& s = t.shape();
    for (size_t i = 0; i < s.size(); i++) {
      int64_t& o = out[n - s.size() + i];
      if (s[i] != o && s[i] != 1 && o != 1) {
        std::string all;
        for (const auto& u : ts) all += (all.empty() ? "" : " ") + shape_str(u.shape());
        fail("getitem", "index tensors cannot be broadcast together: " + all, ErrorKind::kIndex);
      }
      if (o == 1) o = s[i];
    }
  }
  return out;
}

// A non-int entry and the size of the dim it becomes in the basic-indexed view (ints drop theirs).
struct Entry {
  Idx idx;
  int64_t size;  // none() is 1; a tensor keeps its axis's size until the masks reduce it
};

// The entries with the ellipsis (or the missing tail) replaced by full slices; validates counts.
std::vector<Idx> expand_ellipsis(const std::vector<Idx>& idx, const Shape& shape) {
  int ellipses = 0, used = 0;
  for (const auto& i : idx) {
    ellipses += i.kind() == Idx::Kind::kEllipsis;
    used += i.kind() != Idx::Kind::kEllipsis && i.kind() != Idx::Kind::kNone;
  }
  if (ellipses > 1) fail("getitem", "an index can only have a single ellipsis", ErrorKind::kIndex);
  if (used > static_cast<int>(shape.size()))
    fail("getitem", "too many indices: " + str(used) + " for a tensor of shape " + shape_str(shape),
         ErrorKind::kIndex);
  std::vector<Idx> out;
  auto fill = [&] { out.insert(out.end(), shape.size() - used, Idx::slice()); };
  for (const auto& i : idx) {
    if (i.kind() == Idx::Kind::kEllipsis)
      fill();
    else
      out.push_back(i);
  }
  if (ellipses == 0) fill();
  return out;
}

}  // namespace

Idx::Idx(const Tensor& t) : kind_(Kind::kTensor), tensor_(std::make_shared<const Tensor>(t)) {}

Idx Idx::slice(std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step) {
  Idx r(Kind::kSlice);
  r.start_ = start;
  r.stop_ = stop;
  r.step_ = step;
  return r;
}

Tensor Tensor::operator[](int64_t i) const { return (*this)[std::vector<Idx>{Idx(i)}]; }
Tensor Tensor::operator[](const Tensor& t) const { return (*this)[std::vector<Idx>{Idx(t)}]; }

Tensor Tensor::operator[](const std::vector<Idx>& idx) const {
  std::vector<Idx> full = expand_ellipsis(idx, shape());
  // Basic indexing on the input's axes: ints shrink to one element, slices view.
  Tensor x = *this;
  std::vector<Entry> kept;  // every entry but ints, in order: the dims of the reshaped view
  int axis = 0;
  for (const auto& i : full) {
    if (i.kind() == Idx::Kind::kNone) {
      kept.push_back({i, 1});
      continue;
    }
    int64_t n = shape()[axis];
    if (i.kind() == Idx::Kind::kInt) {
      int64_t v = i.value() < 0 ? i.value() + n : i.value();
      if (v < 0 || v >= n)
        fail("getitem",
             "index " + str(i.value()) + " is out of bounds for axis " + str(axis) + " with size " +
                 str(n),
             ErrorKind::kIndex);
      std::vector<std::pair<int64_t, int64_t>> r;
      for (int64_t d : x.shape()) r.push_back({0, d});
      r[axis] = {v, v + 1};
      x = x.shrink(r);
    } else if (i.kind() == Idx::Kind::kSlice) {
      if (i.step() == 0)
        fail("getitem", "slice step is 0 for axis " + str(axis), ErrorKind::kValue);
      x = x.slice(axis, i.start(), i.stop(), i.step());
      kept.push_back({i, x.shape()[axis]});
    } else {
      DType t = i.tensor().dtype();
      if (dtypes::is_bool(t))
        fail("getitem", "bool (mask) index tensors are not supported (axis " + str(axis) + ")",
             ErrorKind::kIndex);
      if (!dtypes::is_int(t))
        fail("getitem",
             "index tensors must have an integer dtype, got " + t.name() + " for axis " + str(axis),
             ErrorKind::kIndex);
      kept.push_back({i, n});
    }
    axis++;
  }
  Shape view;
  for (const auto& e : kept) view.push_back(e.size);
  x = x.reshape(view);

  // Advanced indexing: out[..., b, ...] = sum over the indexed axes of x where every mask holds.
  std::vector<int> dims;
  std::vector<Tensor> ts;
  for (size_t d = 0; d < kept.size(); d++) {
    if (kept[d].idx.kind() != Idx::Kind::kTensor) continue;
    dims.push_back(static_cast<int>(d));
    ts.push_back(kept[d].idx.tensor());
  }
  if (ts.empty()) return x;
  Shape big = broadcast_shapes(ts);
  int n = x.ndim(), d0 = dims[0], nb = static_cast<int>(big.size());
  std::optional<Tensor> mask;
  for (size_t j = 0; j < ts.size(); j++) {
    int64_t size = view[dims[j]];
    Tensor t = signed_index(ts[j]);
    t = where(t.lt(Tensor::full({}, 0, t.dtype(), t.device())), t + static_cast<double>(size), t);
    // (1 x d0, big, 1 x (n - d0)) against arange(size) on the axis this tensor indexes.
    Shape ts_shape(d0 + nb - t.ndim(), 1);
    ts_shape.insert(ts_shape.end(), t.shape().begin(), t.shape().end());
    ts_shape.resize(n + nb, 1);
    Shape ar_shape(n + nb, 1);
    ar_shape[dims[j] + nb] = size;
    Tensor hit = t.reshape(ts_shape).eq(
        Tensor::arange(0, static_cast<double>(size), 1, t.dtype(), device()).reshape(ar_shape));
    mask = mask ? mask->logical_and(hit) : hit;
  }
  Shape spread(x.shape().begin(), x.shape().begin() + d0);
  spread.insert(spread.end(), nb, 1);
  spread.insert(spread.end(), x.shape().begin() + d0, x.shape().end());
  std::vector<int> axes;
  for (int d : dims) axes.push_back(d + nb);
  Tensor zero = Tensor::full({}, 0, dtype(), device());
  Tensor r = where(*mask, x.reshape(spread), zero).sum(axes).cast(dtype());
  // numpy: the broadcast dims replace adjacent indexed axes, else they lead.
  bool adjacent = dims.back() - d0 + 1 == static_cast<int>(dims.size());
  if (adjacent || d0 == 0) return r;
  std::vector<int> perm;
  for (int d = d0; d < d0 + nb; d++) perm.push_back(d);
  for (int d = 0; d < d0; d++) perm.push_back(d);
  for (int d = d0 + nb; d < r.ndim(); d++) perm.push_back(d);
  return r.permute(perm);
}

// ---- indexing ops ------------------------------------------------------------------------------

Tensor Tensor::masked_fill(const Tensor& mask, double value) const {
  broadcast("masked_fill", *this, mask);
  return where(mask, scalar_like(value), *this);
}

Tensor Tensor::scatter(int axis, const Tensor& index, const Tensor& src) const {
  int ax = norm_axis("scatter", axis, ndim());
  check_same_device("scatter", lazy(), index.lazy());
  check_same_device("scatter", lazy(), src.lazy());
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

Tensor Tensor::gather(int axis, const Tensor& index) const {
  int ax = norm_axis("gather", axis, ndim());
  check_same_device("gather", lazy(), index.lazy());
  auto where_str = " for a tensor of shape " + shape_str(shape());
  if (!dtypes::is_int(index.dtype()))
    fail("gather", "index must be an integer tensor, got " + index.dtype().name(),
         ErrorKind::kType);
  if (index.ndim() != ndim())
    fail("gather", "index of shape " + shape_str(index.shape()) + where_str + ": ndims differ",
         ErrorKind::kValue);
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int d = 0; d < ndim(); d++) {
    if (d != ax && index.shape()[d] > shape()[d])
      fail("gather",
           "index of shape " + shape_str(index.shape()) + where_str + " exceeds dim " +
               std::to_string(d),
           ErrorKind::kValue);
    ranges.push_back({0, d == ax ? shape()[d] : index.shape()[d]});
  }
  // x[..., j along axis ...] picked where j == index: a one-hot mask on a new last axis.
  Tensor x = shrink(ranges).unsqueeze(-1).transpose(-1, ax);
  Tensor hit = index.unsqueeze(-1).eq(arange_on(*this, shape()[ax]));
  return where(hit, x, scalar_like(0)).sum({-1}).cast(dtype());
}

Tensor Tensor::one_hot(int64_t num_classes) const {
  if (!dtypes::is_int(dtype()))
    fail("one_hot", "needs an integer tensor, got " + dtype().name() + " " + shape_str(shape()),
         ErrorKind::kType);
  if (num_classes < 0) {
    if (numel() == 0) fail("one_hot", "num_classes unknown for an empty tensor", ErrorKind::kValue);
    num_classes = static_cast<int64_t>(max().to_vector()[0]) + 1;
  }
  return unsqueeze(-1).eq(arange_on(*this, num_classes)).cast(dtypes::kInt32);
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
