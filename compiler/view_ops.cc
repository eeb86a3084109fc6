#include "compiler/view_ops.h"

#include <algorithm>
#include <optional>
#include <span>
#include <sstream>
#include <string>

#include "base/check.h"
#include "base/checked.h"
#include "base/error.h"

namespace baregrad::compiler {
namespace {

using Ranges = std::vector<std::pair<int64_t, int64_t>>;

template <class T>
std::string fmt(const std::vector<T>& v) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < v.size(); i++) os << (i ? ", " : "") << v[i];
  os << (v.size() == 1 ? ",)" : ")");
  return os.str();
}

std::string fmt(std::pair<int64_t, int64_t> r) {
  return "(" + std::to_string(r.first) + ", " + std::to_string(r.second) + ")";
}

// The element count of a shape some op already checked (see check_numel); overflow is a bug.
int64_t numel(const std::vector<int64_t>& shape) {
  std::optional<int64_t> n = checked_numel(shape);
  CHECK(n) << "a view of shape " << fmt(shape) << " slipped past the element-count checks";
  return *n;
}

// Every new shape an op builds passes here: sizes >= 0 whose product fits int64.
void check_numel(std::string_view op, const std::vector<int64_t>& shape) {
  numel_or_fail(op, shape);
}

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}
int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

// The mask of `v`, or the full range of every dim when it has none.
Ranges ranges_of(const View& v) {
  if (v.mask) return *v.mask;
  Ranges r;
  for (int64_t s : v.shape) r.emplace_back(0, s);
  return r;
}

// True when some dim's mask is empty, so every position reads as padding.
bool is_invalid(const View& v) {
  return v.mask &&
         std::any_of(v.mask->begin(), v.mask->end(), [](auto r) { return r.first >= r.second; });
}

View invalid_view(std::vector<int64_t> shape) {
  View v;
  v.strides.assign(shape.size(), 0);
  v.mask = Ranges(shape.size(), {0, 0});
  v.shape = std::move(shape);
  return v;
}

// Size-1 dims get stride 0, masks are clipped to the shape, a full mask is dropped, an empty one
// makes the view all padding and a zero-size view becomes contiguous.
View canonical(View v) {
  if (numel(v.shape) == 0) return View::contiguous(v.shape);
  for (size_t d = 0; d < v.shape.size(); d++)
    if (v.shape[d] == 1) v.strides[d] = 0;
  if (!v.mask) return v;
  bool full = true;
  for (size_t d = 0; d < v.shape.size(); d++) {
    auto& [lo, hi] = (*v.mask)[d];
    lo = std::max<int64_t>(lo, 0);
    hi = std::min(hi, v.shape[d]);
    if (lo >= hi) return invalid_view(v.shape);
    full &= lo == 0 && hi == v.shape[d];
  }
  if (full) v.mask.reset();
  return v;
}

// An all-padding tracker of `shape`. A 0-d view has no dim to carry the empty mask, so a 0-d
// one keeps it on a (1,) view read through a () view (a 0-d invalid_view would read element 0).
ShapeTracker invalid_tracker(const std::vector<int64_t>& shape) {
  if (shape.empty()) return ShapeTracker{{invalid_view({1}), View::contiguous({})}};
  return ShapeTracker{{canonical(invalid_view(shape))}};
}

// `v` grown by (before, after) >= 0 per dim; the new positions are masked out. Throws
// Error("[pad] ...") when a size, the element count or the offset leaves int64.
View pad_view(View v, const Ranges& before_after) {
  Ranges m = ranges_of(v);
  std::vector<int64_t> shape = v.shape;
  int64_t offset = v.offset;
  for (size_t d = 0; d < v.shape.size(); d++) {
    auto [b, a] = before_after[d];
    std::optional<int64_t> size = checked_add(v.shape[d], b), step = checked_mul(b, v.strides[d]);
    if (size) size = checked_add(*size, a);
    std::optional<int64_t> off = step ? checked_sub(offset, *step) : std::nullopt;
    if (!size || !off)
      fail("pad",
           "padding " + fmt(before_after[d]) + " of axis " + std::to_string(d) + " of " +
               fmt(v.shape) + " does not fit int64",
           ErrorKind::kValue);
    shape[d] = *size;
    offset = *off;
    m[d] = {m[d].first + b, m[d].second + b};  // within shape[d]
  }
  check_numel("pad", shape);
  v.shape = std::move(shape);
  v.offset = offset;
  v.mask = std::move(m);
  return v;
}

// One old dim of a reshape: size, stride and mask range.
struct Dim {
  int64_t size, stride, lo, hi;
};

// The flat range [lo, hi) of row-major `sizes` as a box (singletons, one range, full dims),
// or nullopt when it is not one.
std::optional<Ranges> split_box(int64_t lo, int64_t hi, const std::vector<int64_t>& sizes) {
  size_t m = sizes.size();
  std::vector<int64_t> w(m, 1);
  for (size_t i = m - 1; i-- > 0;) w[i] = w[i + 1] * sizes[i + 1];
  size_t j = 0;  // the coarsest dim both ends are aligned to; the dims after it are full
  while (lo % w[j] != 0 || hi % w[j] != 0) j++;
  int64_t outer = w[j] * sizes[j];
  if (lo / outer != (hi - 1) / outer) return std::nullopt;
  Ranges box(m);
  for (size_t i = 0; i < m; i++) {
    int64_t first = lo / w[i] % sizes[i];
    box[i] = i < j    ? std::pair{first, first + 1}
             : i == j ? std::pair{first, (hi - 1) / w[i] % sizes[i] + 1}
                      : std::pair<int64_t, int64_t>{0, sizes[i]};
  }
  return box;
}

// Maps the old dims `od` onto the new dims `nd` of `out` (equal products). Valid positions
// must be singletons, then one range, then full dims, with the dims from the range on mergeable.
bool reshape_chunk(std::span<const Dim> od, std::span<const size_t> nd, View& out) {
  size_t k = od.size(), j = 0;
  while (j + 1 < k && od[j].hi - od[j].lo == 1) j++;
  for (size_t m = j + 1; m < k; m++)
    if (od[m].lo != 0 || od[m].hi != od[m].size) return false;
  for (size_t m = j; m + 1 < k; m++)
    if (od[m].stride != od[m + 1].stride * od[m + 1].size) return false;
  int64_t step = od[k - 1].stride, w = 1, lo = 0, len = 0;
  for (size_t m = k; m-- > 0; w *= od[m].size) {
    if (m < j) out.offset += od[m].lo * (od[m].stride - step * w);
    if (m <= j) lo += od[m].lo * w;
    if (m == j) len = (od[m].hi - od[m].lo) * w;
  }
  std::vector<int64_t> sizes;
  for (size_t d : nd) sizes.push_back(out.shape[d]);
  std::optional<Ranges> box = split_box(lo, lo + len, sizes);
  if (!box) return false;
  int64_t ws = 1;
  for (size_t m = nd.size(); m-- > 0; ws *= sizes[m]) {
    out.strides[nd[m]] = step * ws;
    (*out.mask)[nd[m]] = (*box)[m];
  }
  return true;
}

// `v` (valid, > 0 elements) reshaped to `shape` as one view, or nullopt.
std::optional<View> reshape_view(const View& v, const std::vector<int64_t>& shape) {
  std::vector<Dim> od;
  Ranges m = ranges_of(v);
  for (size_t d = 0; d < v.shape.size(); d++)
    if (v.shape[d] != 1) od.push_back({v.shape[d], v.strides[d], m[d].first, m[d].second});
  std::vector<size_t> nd;
  for (size_t d = 0; d < shape.size(); d++)
    if (shape[d] != 1) nd.push_back(d);
  View out{shape, std::vector<int64_t>(shape.size(), 0), v.offset, Ranges{}};
  for (int64_t s : shape) out.mask->emplace_back(0, s);
  for (size_t i = 0, j = 0; i < od.size();) {  // chunks between common prefix products
    size_t i0 = i, j0 = j;
    int64_t po = od[i++].size, pn = shape[nd[j++]];
    while (po != pn) {
      if (po < pn)
        po *= od[i++].size;
      else
        pn *= shape[nd[j++]];
    }
    if (!reshape_chunk(std::span(od).subspan(i0, i - i0), std::span(nd).subspan(j0, j - j0), out))
      return std::nullopt;
  }
  return out;
}

// A run of mergeable dims of an earlier view, and the later view's dims that step through it.
struct Group {
  int64_t size, weight, stride, lo, hi;           // lo, hi: the earlier view's mask
  std::vector<std::pair<size_t, int64_t>> terms;  // (later dim, coordinate step)
  int64_t origin = 0, first = 0, last = 0;        // coordinates the later view reaches
};

// `l` (unmasked, > 0 elements) composed with `p` as one view when the digits of every stride
// of `l` (in the mixed radix of `p`'s groups) never carry from one group into the next and
// `p`'s mask binds at most one dim of `l` per group. A stride may span groups: a step of one
// row plus one column, say, as in sliding windows over a repeated axis.
std::optional<View> project(const View& p, const View& l) {
  int64_t n = numel(p.shape), mn = l.offset, mx = l.offset;
  for (size_t d = 0; d < l.shape.size(); d++)
    ((l.strides[d] < 0) ? mn : mx) += (l.shape[d] - 1) * l.strides[d];
  if (mn < 0 || mx >= n) return std::nullopt;
  Ranges pm = ranges_of(p);
  std::vector<Group> groups;
  int64_t w = n;
  for (size_t d = 0; d < p.shape.size(); d++) {
    w /= p.shape[d];
    if (p.shape[d] == 1) continue;
    Group g{p.shape[d], w, p.strides[d], pm[d].first, pm[d].second, {}};
    bool full = g.lo == 0 && g.hi == g.size;
    Group* last = groups.empty() ? nullptr : &groups.back();
    if (last && full && last->lo == 0 && last->hi == last->size &&
        last->stride == g.stride * g.size) {
      last->size *= g.size;
      last->hi = last->size;
      last->weight = g.weight;
      last->stride = g.stride;
    } else {
      groups.push_back(std::move(g));
    }
  }
  for (size_t d = 0; d < l.shape.size(); d++) {  // |stride| as mixed-radix digits, outer first
    int64_t t = l.strides[d], rest = std::abs(t);
    if (l.shape[d] == 1 || t == 0) continue;
    for (Group& g : groups) {
      int64_t c = rest / g.weight;
      rest -= c * g.weight;
      if (c != 0) g.terms.emplace_back(d, t < 0 ? -c : c);
    }
    if (rest != 0) return std::nullopt;
  }
  View out{l.shape, std::vector<int64_t>(l.shape.size(), 0), p.offset, ranges_of(l)};
  for (Group& g : groups) {
    g.origin = g.first = g.last = l.offset / g.weight % g.size;
    for (auto [d, c] : g.terms) (c < 0 ? g.first : g.last) += (l.shape[d] - 1) * c;
    if (g.first < 0 || g.last >= g.size) return std::nullopt;  // it would carry
    out.offset += g.origin * g.stride;
    for (auto [d, c] : g.terms) out.strides[d] += c * g.stride;
  }
  for (const Group& g : groups) {
    if (g.first >= g.lo && g.last < g.hi) continue;  // the mask of `p` never binds here
    if (g.terms.empty()) {
      if (l.shape.empty()) return std::nullopt;  // see invalid_tracker
      return invalid_view(l.shape);
    }
    if (g.terms.size() > 1) return std::nullopt;
    auto [d, c] = g.terms[0];  // g.lo <= origin + c * x < g.hi
    int64_t a = g.lo - g.origin, b = g.hi - 1 - g.origin;
    auto& r = (*out.mask)[d];
    r.first = std::max(r.first, c > 0 ? ceil_div(a, c) : ceil_div(b, c));
    r.second = std::min(r.second, (c > 0 ? floor_div(b, c) : floor_div(a, c)) + 1);
  }
  return out;
}

// One view equal to `l` read through `p`, or nullopt. Relies on `l`'s valid positions mapping
// into [0, numel(p)), which every op keeps (and `project` checks).
std::optional<View> merge(const View& p, const View& l) {
  if (numel(l.shape) == 0 || is_invalid(l)) return l;
  if (is_invalid(p)) {
    if (l.shape.empty()) return std::nullopt;  // see invalid_tracker
    return invalid_view(l.shape);
  }
  if (l.mask) {  // merge the unmasked box, then pad it back out
    View inner = l;
    inner.mask.reset();
    Ranges ba;
    for (size_t d = 0; d < l.shape.size(); d++) {
      auto [lo, hi] = (*l.mask)[d];
      inner.offset += lo * l.strides[d];
      inner.shape[d] = hi - lo;
      ba.emplace_back(lo, l.shape[d] - hi);
    }
    std::optional<View> m = merge(p, inner);
    if (!m) return std::nullopt;
    return pad_view(*m, ba);
  }
  if (l.offset == 0 && l.strides == View::strides_for(l.shape) && numel(l.shape) == numel(p.shape))
    if (std::optional<View> r = reshape_view(p, l.shape)) return r;
  return project(p, l);
}

// `st` with its last view replaced by `v`, canonical and simplified.
ShapeTracker with_last(const ShapeTracker& st, View v) {
  ShapeTracker out = st;
  out.views.back() = canonical(std::move(v));
  return out.views.size() == 1 ? out : simplify(out);
}

// `what` names the argument; it is called only to build the error (view ops run per tensor op:
// formatting shapes up front was most of their cost).
template <class What>
void check_rank(std::string_view op, What&& what, size_t n, const ShapeTracker& st) {
  CHECK(!st.views.empty()) << "a ShapeTracker without views";
  if (n != st.shape().size())
    fail(op,
         std::string(what()) + " has " + std::to_string(n) + " entries for the " +
             std::to_string(st.shape().size()) + " axes of " + fmt(st.shape()),
         ErrorKind::kValue);
}

}  // namespace

ShapeTracker reshape(const ShapeTracker& st, const std::vector<int64_t>& shape) {
  CHECK(!st.views.empty()) << "a ShapeTracker without views";
  auto what = [&] { return "cannot reshape " + fmt(st.shape()) + " to " + fmt(shape); };
  if (std::any_of(shape.begin(), shape.end(), [](int64_t s) { return s < 0; }))
    fail("reshape", what() + ": negative size", ErrorKind::kValue);
  check_numel("reshape", shape);
  if (numel(st.shape()) != numel(shape))
    fail("reshape",
         what() + ": " + std::to_string(numel(st.shape())) + " elements vs " +
             std::to_string(numel(shape)),
         ErrorKind::kValue);
  if (st.shape() == shape) return st;
  const View& v = st.views.back();
  if (numel(shape) == 0) return ShapeTracker::contiguous(shape);
  if (is_invalid(v)) return invalid_tracker(shape);
  if (std::optional<View> r = reshape_view(v, shape)) return with_last(st, *r);
  ShapeTracker out = st;
  out.views.push_back(View::contiguous(shape));
  return simplify(out);
}

ShapeTracker permute(const ShapeTracker& st, const std::vector<int>& order) {
  check_rank("permute", [&] { return "order " + fmt(order); }, order.size(), st);
  std::vector<bool> seen(order.size(), false);
  for (int o : order) {
    if (o < 0 || o >= static_cast<int>(order.size()) || seen[o])
      fail("permute", fmt(order) + " is not a permutation of the axes of " + fmt(st.shape()),
           ErrorKind::kValue);
    seen[o] = true;
  }
  const View& v = st.views.back();
  View out = v;
  for (size_t d = 0; d < order.size(); d++) {
    out.shape[d] = v.shape[order[d]];
    out.strides[d] = v.strides[order[d]];
    if (v.mask) (*out.mask)[d] = (*v.mask)[order[d]];
  }
  return with_last(st, std::move(out));
}

ShapeTracker expand(const ShapeTracker& st, const std::vector<int64_t>& shape) {
  check_rank("expand", [&] { return "shape " + fmt(shape); }, shape.size(), st);
  View v = st.views.back();
  for (size_t d = 0; d < shape.size(); d++) {
    if (shape[d] == v.shape[d]) continue;
    if (v.shape[d] != 1 || shape[d] < 0)
      fail("expand",
           "cannot expand " + fmt(st.shape()) + " to " + fmt(shape) + ": axis " +
               std::to_string(d) + " has size " + std::to_string(v.shape[d]) +
               (shape[d] < 0 ? ", the target is negative" : ", not 1"),
           ErrorKind::kValue);
    v.shape[d] = shape[d];
    v.strides[d] = 0;
    if (v.mask) {
      auto& r = (*v.mask)[d];
      r = {0, r.first < r.second ? shape[d] : 0};
    }
  }
  check_numel("expand", shape);
  return with_last(st, std::move(v));
}

ShapeTracker pad(const ShapeTracker& st,
                 const std::vector<std::pair<int64_t, int64_t>>& before_after) {
  check_rank("pad", [] { return "padding"; }, before_after.size(), st);
  for (size_t d = 0; d < before_after.size(); d++)
    if (before_after[d].first < 0 || before_after[d].second < 0)
      fail("pad",
           "negative padding " + fmt(before_after[d]) + " on axis " + std::to_string(d) + " of " +
               fmt(st.shape()),
           ErrorKind::kValue);
  if (std::all_of(before_after.begin(), before_after.end(),
                  [](auto p) { return p.first == 0 && p.second == 0; }))
    return st;
  return with_last(st, pad_view(st.views.back(), before_after));
}

ShapeTracker shrink(const ShapeTracker& st,
                    const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  check_rank("shrink", [] { return "ranges"; }, ranges.size(), st);
  View v = st.views.back();
  Ranges m = ranges_of(v);
  for (size_t d = 0; d < ranges.size(); d++) {
    auto [lo, hi] = ranges[d];
    if (lo < 0 || lo > hi || hi > v.shape[d])
      fail("shrink",
           "range " + fmt(ranges[d]) + " on axis " + std::to_string(d) + " of " + fmt(st.shape()) +
               " is not within [0, " + std::to_string(v.shape[d]) + "] with lo <= hi",
           ErrorKind::kValue);
    v.offset += lo * v.strides[d];
    v.shape[d] = hi - lo;
    m[d] = {std::clamp<int64_t>(m[d].first - lo, 0, hi - lo),
            std::clamp<int64_t>(m[d].second - lo, 0, hi - lo)};
  }
  if (v.mask) v.mask = std::move(m);
  return with_last(st, std::move(v));
}

ShapeTracker flip(const ShapeTracker& st, const std::vector<bool>& axes) {
  check_rank("flip", [] { return "axes"; }, axes.size(), st);
  View v = st.views.back();
  for (size_t d = 0; d < axes.size(); d++) {
    int64_t n = v.shape[d];
    if (!axes[d] || n <= 1) continue;
    v.offset += (n - 1) * v.strides[d];
    v.strides[d] = -v.strides[d];
    if (v.mask) (*v.mask)[d] = {n - (*v.mask)[d].second, n - (*v.mask)[d].first};
  }
  return with_last(st, std::move(v));
}

ShapeTracker simplify(const ShapeTracker& st) {
  CHECK(!st.views.empty()) << "a ShapeTracker without views";
  // Any all-padding view hides every position; a zero-size tracker reads nothing.
  if (numel(st.shape()) == 0 || std::any_of(st.views.begin(), st.views.end(), is_invalid))
    return invalid_tracker(st.shape());
  ShapeTracker out = st;
  for (size_t i = out.views.size() - 1; i > 0; i--) {
    std::optional<View> m = merge(out.views[i - 1], out.views[i]);
    if (!m) continue;
    out.views[i - 1] = canonical(std::move(*m));
    out.views.erase(out.views.begin() + i);
    if (is_invalid(out.views[i - 1])) return invalid_tracker(st.shape());
    i = out.views.size();  // start over from the last view
  }
  return out;
}

bool is_contiguous(const ShapeTracker& st) {
  return st.views.size() == 1 && st.views[0].is_contiguous();
}

int64_t real_size(const ShapeTracker& st) {
  CHECK(!st.views.empty()) << "a ShapeTracker without views";
  const View& v = st.views.front();
  if (numel(st.shape()) == 0 || numel(v.shape) == 0 || is_invalid(v)) return 0;
  Ranges m = ranges_of(v);
  int64_t hi = v.offset;
  for (size_t d = 0; d < v.shape.size(); d++)
    hi += std::max(m[d].first * v.strides[d], (m[d].second - 1) * v.strides[d]);
  return std::max<int64_t>(hi + 1, 0);
}

}  // namespace baregrad::compiler
