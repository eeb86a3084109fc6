#include "compiler/passes/lift_consts.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <string_view>

#include "base/check.h"
#include "compiler/interp.h"

namespace baregrad::compiler {
namespace {

constexpr const char* kPrefix = "lifted_const";

bool liftable(const UOp& u) {
  if (!u.is_const() || u.dtype().count != 1 || u.dtype().ptr) return false;
  DType t = u.dtype();
  return (dtypes::is_float(t) && !dtypes::is_fp8(t)) || dtypes::is_int(t);
}

// The signed integer dtype of t's width.
DType int_of_width(DType t) {
  switch (t.itemsize()) {
    case 1:
      return dtypes::kInt8;
    case 2:
      return dtypes::kInt16;
    case 4:
      return dtypes::kInt32;
    default:
      return dtypes::kInt64;
  }
}

// The var's bounds: every value of t (a float: every bit pattern of its width, read signed;
// uint64: every int64, its bit pattern).
std::pair<int64_t, int64_t> var_bounds(DType t) {
  DType w = dtypes::is_float(t) ? int_of_width(t) : t;
  const int bits = 8 * w.itemsize();
  if (bits == 64) return {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
  if (dtypes::is_unsigned(w)) return {0, (int64_t{1} << bits) - 1};
  return {-(int64_t{1} << (bits - 1)), (int64_t{1} << (bits - 1)) - 1};
}

UOpPtr lifted(const UOp& c, size_t i) {
  DType t = c.dtype();
  auto [lo, hi] = var_bounds(t);
  UOpPtr v = UOp::var(lifted_name(i), lo, hi);
  auto cast = [](const UOpPtr& x, DType to) {
    return x->dtype() == to ? x : UOp::make(Op::CAST, to, {x});
  };
  if (!dtypes::is_float(t)) return cast(v, t);
  return UOp::make(Op::BITCAST, t, {cast(v, int_of_width(t))});
}

}  // namespace

std::vector<UOpPtr> liftable_consts(const UOpPtr& sink) {
  std::vector<UOpPtr> out;
  for (const UOp* u : sink->toposort())
    if (liftable(*u)) out.push_back(u->self());
  return out;
}

std::string lifted_name(size_t i) { return kPrefix + std::to_string(i); }

int lifted_index(const std::string& name) {
  const std::string_view prefix(kPrefix),
      rest = std::string_view(name).substr(std::min(name.size(), prefix.size()));
  if (name.compare(0, prefix.size(), prefix) != 0 || rest.empty()) return -1;
  int i = -1;
  auto [end, err] = std::from_chars(rest.data(), rest.data() + rest.size(), i);
  return err == std::errc() && end == rest.data() + rest.size() && i >= 0 ? i : -1;
}

int64_t const_bits(const UOp& c) {
  CHECK(liftable(c)) << "const_bits of " << op_name(c.op()) << " " << c.dtype().name();
  DType t = c.dtype();
  // uint64 as its bit pattern, narrower unsigned values as themselves
  if (!dtypes::is_float(t)) return c.const_int();
  // the value rounded to t once, read back as the signed integer of t's width (the reference
  // interpreter's conversions, which the renderers match)
  return reinterpret(make_value(t, c.const_value()), int_of_width(t)).i;
}

UOpPtr lift_consts(const UOpPtr& sink,
                   const std::vector<UOpPtr>& consts,
                   const std::vector<size_t>& which) {
  if (which.empty()) return sink;
  std::vector<std::pair<UOpPtr, UOpPtr>> repl;
  repl.reserve(which.size());
  for (size_t i : which) {
    CHECK(i < consts.size()) << "lift_consts: constant " << i << " of " << consts.size();
    repl.emplace_back(consts[i], lifted(*consts[i], i));
  }
  return sink->substitute(repl);
}

}  // namespace baregrad::compiler
