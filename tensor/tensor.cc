#include "tensor/tensor.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numbers>

#include "base/check.h"
#include "base/checked.h"
#include "base/error.h"
#include "base/format.h"
#include "compiler/fp8.h"
#include "compiler/view_ops.h"
#include "tensor/jit.h"
#include "tensor/schedule.h"
#include "tensor/tensor_internal.h"

namespace baregrad::tensor {
using compiler::least_upper_dtype;

std::string shape_str(const Shape& s) { return tuple_str(s); }

namespace {
std::shared_ptr<runtime::Device> device_or_throw(std::string_view name) {
  auto dev = runtime::get_device(name);
  if (!dev.ok()) dev.status().throw_if_error("device");
  return *dev;
}

int64_t numel_of(std::string_view op, const Shape& s) {
  for (int64_t d : s)
    if (d < 0) fail(op, "negative dimension in " + shape_str(s), ErrorKind::kValue);
  return numel_or_fail(op, s);
}

// Element `i` of `v` stored as `t` (little-endian, rounded / wrapped like a cast).
void store_elem(DType t, double x, uint8_t* p) {
  switch (t.scalar) {
    case compiler::Scalar::kFloat64:
      std::memcpy(p, &x, 8);
      break;
    case compiler::Scalar::kFloat32: {
      float f = static_cast<float>(x);
      std::memcpy(p, &f, 4);
      break;
    }
    case compiler::Scalar::kFloat16: {
      _Float16 h = static_cast<_Float16>(x);
      std::memcpy(p, &h, 2);
      break;
    }
    case compiler::Scalar::kBFloat16: {
      uint32_t u = std::bit_cast<uint32_t>(static_cast<float>(compiler::round_to(t, x)));
      uint16_t h = static_cast<uint16_t>(u >> 16);
      std::memcpy(p, &h, 2);
      break;
    }
    case compiler::Scalar::kFp8e4m3:
    case compiler::Scalar::kFp8e5m2:
    case compiler::Scalar::kFp8e4m3fnuz:
    case compiler::Scalar::kFp8e5m2fnuz:
      *p = compiler::fp8_encode(t, x);
      break;
    case compiler::Scalar::kBool:
      *p = x != 0;
      break;
    default: {
      int64_t i = x >= 9223372036854775808.0 ? static_cast<int64_t>(static_cast<uint64_t>(x))
                                             : static_cast<int64_t>(x);
      i = compiler::wrap_int(t, i);
      std::memcpy(p, &i, t.itemsize());
    }
  }
}

double load_elem(DType t, const uint8_t* p) {
  switch (t.scalar) {
    case compiler::Scalar::kFloat64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    case compiler::Scalar::kFloat32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case compiler::Scalar::kFloat16: {
      _Float16 h;
      std::memcpy(&h, p, 2);
      return static_cast<double>(h);
    }
    case compiler::Scalar::kBFloat16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
    }
    case compiler::Scalar::kFp8e4m3:
    case compiler::Scalar::kFp8e5m2:
    case compiler::Scalar::kFp8e4m3fnuz:
    case compiler::Scalar::kFp8e5m2fnuz:
      return compiler::fp8_decode(t, *p);
    case compiler::Scalar::kBool:
      return *p != 0;
    default: {
      int64_t v = 0;
      std::memcpy(&v, p, t.itemsize());
      v = compiler::wrap_int(t, v);
      return t.scalar == compiler::Scalar::kUint64 ? static_cast<double>(static_cast<uint64_t>(v))
                                                   : static_cast<double>(v);
    }
  }
}
}  // namespace

std::vector<uint8_t> detail::encode_values(const std::vector<double>& values, DType dtype) {
  std::vector<uint8_t> bytes(values.size() * dtype.itemsize());
  for (size_t i = 0; i < values.size(); i++)
    store_elem(dtype, values[i], bytes.data() + i * dtype.itemsize());
  return bytes;
}

// ---- creation ----------------------------------------------------------------------------------

Tensor Tensor::from_data(const std::vector<double>& data,
                         Shape shape,
                         DType dtype,
                         std::string_view device) {
  int64_t n = numel_of("from_data", shape);
  if (static_cast<int64_t>(data.size()) != n)
    fail("from_data",
         std::to_string(data.size()) + " values for shape " + shape_str(shape) + " (" +
             std::to_string(n) + " elements)",
         ErrorKind::kValue);
  std::vector<uint8_t> bytes = detail::encode_values(data, dtype);
  Tensor t = empty(std::move(shape), dtype, device);
  const auto& db = t.lazy().base->realized;
  db->device->copy_in(db->buffer, bytes.data(), bytes.size()).throw_if_error("from_data");
  return t;
}

Tensor Tensor::empty(Shape shape, DType dtype, std::string_view device) {
  int64_t n = numel_of("empty", shape);
  int64_t bytes = bytes_or_fail("empty", shape, n, dtype.itemsize());
  auto dev = device_or_throw(device);
  auto buf = dev->alloc(static_cast<size_t>(bytes));
  if (!buf.ok()) buf.status().throw_if_error("empty");
  auto db = std::make_shared<DeviceBuffer>(dev, *buf);
  return Tensor(lazy_buffer(std::move(db), dtype, std::move(shape)));
}

Tensor Tensor::from_blob(void* data, Shape shape, DType dtype, std::string_view device) {
  if (dtype.ptr || dtype.count != 1 || dtype == dtypes::kVoid)
    fail("from_blob", "unsupported dtype " + dtype.name(), ErrorKind::kType);
  int64_t n = numel_of("from_blob", shape);
  int64_t bytes = bytes_or_fail("from_blob", shape, n, dtype.itemsize());
  if (bytes == 0) return empty(std::move(shape), dtype, device);
  if (!data)
    fail("from_blob", "a null pointer for " + std::to_string(bytes) + " bytes", ErrorKind::kValue);
  auto dev = device_or_throw(device);
  auto buf = dev->adopt_host(data, static_cast<size_t>(bytes));
  if (!buf.ok()) buf.status().throw_if_error("from_blob");
  auto db = std::make_shared<DeviceBuffer>(dev, *buf);
  return Tensor(lazy_buffer(std::move(db), dtype, std::move(shape)));
}

Tensor empty_for(std::string_view op, Shape shape, DType dtype, std::string_view device) {
  try {
    return Tensor::empty(std::move(shape), dtype, device);
  } catch (const Error& e) {
    throw Error(op, e.message(), e.kind());
  }
}

Tensor Tensor::full(Shape shape, double value, DType dtype, std::string_view device) {
  numel_of("full", shape);
  return Tensor(lazy_const(device_or_throw(device), dtype, value, std::move(shape)));
}

Tensor Tensor::sym_scalar(const compiler::Sym& value,
                          const compiler::Bindings& vals,
                          DType dtype,
                          std::string_view device) {
  if (value.is_const()) return full({}, static_cast<double>(value.const_value()), dtype, device);
  Tensor t(lazy_sym_const(device_or_throw(device), dtype, value, vals));
  t.impl_->mode = GradMode::kOff;  // a scalar operand: never a gradient target
  return t;
}

Tensor Tensor::arange(
    double start, double stop, double step, DType dtype, std::string_view device) {
  std::string args = "arange(" + num(start) + ", " + num(stop) + ", " + num(step) + ")";
  if (step == 0) fail("arange", args + ": step is 0", ErrorKind::kValue);
  if (!std::isfinite(start) || !std::isfinite(stop) || !std::isfinite(step))
    fail("arange", args + ": start, stop and step must be finite", ErrorKind::kValue);
  double count = std::max(0.0, std::ceil((stop - start) / step));
  if (!(count < 9223372036854775808.0))
    fail("arange", args + " has " + num(count) + " elements, more than 2**63-1", ErrorKind::kValue);
  int64_t n = static_cast<int64_t>(count);
  double last = start + static_cast<double>(std::max<int64_t>(n - 1, 0)) * step;
  double big = std::max(std::abs(start), std::abs(last));
  bool exact = dtypes::is_int(dtype) ? std::min(start, last) >= dtypes::min_value(dtype) &&
                                           std::max(start, last) <= dtypes::max_value(dtype)
               : dtype == dtypes::kFloat32 ? big <= 16777216.0
               : dtype == dtypes::kFloat64 ? big <= 9007199254740992.0
                                           : false;
  bool small = std::max(std::abs(start), std::abs(step)) <= 9007199254740992.0;  // exact doubles
  if (exact && small && start == std::trunc(start) && step == std::trunc(step)) {
    bool wide = n > INT32_MAX || 2 * big > INT32_MAX;  // i * step fits too
    DType it = wide ? dtypes::kInt64 : dtypes::kInt32;
    Tensor out(lazy_iota(device_or_throw(device), it, n));
    if (step != 1) out = out * Tensor::full({}, step, it, device);
    if (start != 0) out = out + Tensor::full({}, start, it, device);
    return out.dtype() == dtype ? out : out.cast(dtype);
  }
  Tensor out = empty_for("arange", {n}, dtype, device);  // first: a MemoryError names its bytes
  std::vector<double> v = host_vector<double>("arange", n);
  for (int64_t i = 0; i < n; i++) v[i] = start + static_cast<double>(i) * step;
  std::vector<uint8_t> bytes = detail::encode_values(v, dtype);
  const auto& db = out.lazy().base->realized;
  db->device->copy_in(db->buffer, bytes.data(), bytes.size()).throw_if_error("arange");
  return out;
}

Tensor Tensor::eye(int64_t n, int64_t m, DType dtype) {
  if (m < 0) m = n;
  if (n < 0) fail("eye", "negative size " + str(n), ErrorKind::kValue);
  numel_of("eye", {n, m});  // n * m past int64 is a ValueError naming eye
  // Row and column indices; int64 where int32 would wrap.
  DType idx = std::max(n, m) > INT32_MAX ? dtypes::kInt64 : dtypes::kInt32;
  try {
    Tensor i = arange(0, static_cast<double>(n), 1, idx).reshape({n, 1});
    return i.eq(arange(0, static_cast<double>(m), 1, idx).reshape({1, m})).cast(dtype);
  } catch (const Error& e) {
    throw Error("eye", e.message(), e.kind());  // a MemoryError names eye, not its arange
  }
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
  return full(t.shape(), value, t.dtype(), t.device());
}

// ---- elementwise -------------------------------------------------------------------------------

std::pair<Tensor, Tensor> broadcast(const char* op, const Tensor& a, const Tensor& b) {
  const Shape &sa = a.shape(), &sb = b.shape();
  size_t n = std::max(sa.size(), sb.size());
  Shape out(n);
  for (size_t i = 0; i < n; i++) {
    int64_t da = i < n - sa.size() ? 1 : sa[i - (n - sa.size())];
    int64_t db = i < n - sb.size() ? 1 : sb[i - (n - sb.size())];
    if (da != db && da != 1 && db != 1)
      fail(op, "cannot broadcast " + shape_str(sa) + " and " + shape_str(sb), ErrorKind::kValue);
    out[i] = da == 1 ? db : da;
  }
  auto to = [&](const Tensor& t) {
    if (t.shape() == out) return t;
    Shape padded(n - t.shape().size(), 1);
    padded.insert(padded.end(), t.shape().begin(), t.shape().end());
    return t.reshape(padded).expand(out);
  };
  std::optional<std::vector<compiler::Sym>> ya = a.sym_shape(), yb = b.sym_shape();
  if (!ya && !yb) return {to(a), to(b)};
  // Symbolic shapes: each dim takes the operand's Sym that is not 1 (a Variable's first).
  auto padded_sym = [&](const Tensor& t, const std::optional<std::vector<compiler::Sym>>& y) {
    std::vector<compiler::Sym> p(n - t.shape().size(), compiler::Sym(1));
    std::vector<compiler::Sym> own = y ? *y : compiler::to_syms(t.shape());
    p.insert(p.end(), own.begin(), own.end());
    return p;
  };
  std::vector<compiler::Sym> pa = padded_sym(a, ya), pb = padded_sym(b, yb), out_sym(n);
  for (size_t i = 0; i < n; i++)
    out_sym[i] =
        pa[i] == compiler::Sym(1) || (pa[i].is_const() && !pb[i].is_const()) ? pb[i] : pa[i];
  compiler::Bindings vals = a.sym_vals();
  compiler::merge_bindings(op, vals, b.sym_vals());
  auto to_sym = [&](const Tensor& t) {
    Shape padded(n - t.shape().size(), 1);
    padded.insert(padded.end(), t.shape().begin(), t.shape().end());
    return t.reshape(padded).expand_sym(out_sym, vals);
  };
  return {to_sym(a), to_sym(b)};
}

Tensor Tensor::record(Lazy out, const char* op, const std::vector<Tensor>& parents, BackwardFn fn) {
  Tensor t(std::move(out));
  bool on = false, undecided = false, all_off = !parents.empty();
  for (const Tensor& p : parents) {
    GradMode m = p.impl_->mode;
    on = on || m == GradMode::kOn;
    all_off = all_off && m == GradMode::kOff;
    undecided = undecided || (m == GradMode::kUnset && dtypes::is_float(p.dtype()));
  }
  if (all_off) t.impl_->mode = GradMode::kOff;
  if (!on && !(undecided && dtypes::is_float(t.dtype()) && record_undecided())) return t;
  auto node = std::make_shared<GradNode>();
  node->op = op;
  node->parents.reserve(parents.size());
  node->parent_bases.reserve(parents.size());
  for (const Tensor& p : parents) {
    // An undecided history ends where its value was computed (tinygrad replaces a realized
    // tensor's graph by its buffer): a loop feeding realized outputs back in stays bounded.
    TensorImpl& pi = *p.impl_;
    if (history_realized(pi)) {
      pi.node.reset();
      pi.history_dropped = true;
    }
    node->parents.push_back(p.impl_);
    node->parent_bases.emplace_back(pi.lazy.base, pi.lazy.base->version);
  }
  node->backward = std::move(fn);
  node->out_pending = !t.impl_->lazy.base->realized;
  if (on) t.impl_->mode = GradMode::kOn;
  t.impl_->node = std::move(node);
  return t;
}

namespace {
using Grads = std::vector<std::optional<Tensor>>;
}  // namespace

Tensor binary(const char* name, Op op, const Tensor& a, const Tensor& b, DType out) {
  check_same_device(name, a.lazy(), b.lazy());
  auto [bx, by] = broadcast(name, a, b);
  DType t = least_upper_dtype(a.dtype(), b.dtype());
  if (out == dtypes::kVoid) out = t;
  Tensor x = bx.cast(t), y = by.cast(t);
  BackwardFn fn;
  switch (op) {
    case Op::ADD:
      fn = [](const Tensor& g) { return Grads{g, g}; };
      break;
    case Op::SUB:
      fn = [](const Tensor& g) { return Grads{g, -g}; };
      break;
    case Op::MUL:
      fn = [x, y](const Tensor& g) { return Grads{g * saved(y), g * saved(x)}; };
      break;
    case Op::FDIV:
      fn = [x, y](const Tensor& g) {
        Tensor xd = saved(x), yd = saved(y);
        return Grads{g / yd, -(g * xd) / (yd * yd)};
      };
      break;
    case Op::MAX:
      // The larger input takes the gradient; ties split it evenly.
      fn = [x, y](const Tensor& g) {
        Tensor xd = x.detach(), yd = y.detach(), z = Tensor::zeros_like(g), eq = xd.eq(yd);
        Tensor half = g * 0.5;
        return Grads{Tensor::where(yd.lt(xd), g, Tensor::where(eq, half, z)),
                     Tensor::where(xd.lt(yd), g, Tensor::where(eq, half, z))};
      };
      break;
    default:
      fn = [](const Tensor&) { return Grads{std::nullopt, std::nullopt}; };
  }
  return Tensor::record(lazy_alu(op, lazies(x.lazy(), y.lazy()), out), name, {x, y}, std::move(fn));
}

// A scalar operand is "weak": it takes the tensor's dtype unless a float meets an int tensor.
namespace {
DType scalar_dtype(DType t, double v) {
  if (!dtypes::is_float(t) && v != std::trunc(v)) t = dtypes::kFloat32;
  if (dtypes::is_bool(t)) t = v == 0 || v == 1 ? t : dtypes::kInt32;
  return t;
}
}  // namespace

Tensor Tensor::scalar_like(double v) const {
  Tensor c(lazy_const(impl_->lazy.base->device, scalar_dtype(dtype(), v), v, {}));
  c.impl_->mode = GradMode::kOff;  // as tinygrad's scalar operands: never a gradient target
  return c;
}

Tensor Tensor::operator+(const Tensor& o) const { return binary("add", Op::ADD, *this, o, {}); }
Tensor Tensor::operator-(const Tensor& o) const {
  if (dtypes::is_bool(dtype()) && dtypes::is_bool(o.dtype()))
    fail("sub", "subtraction of two bool tensors is not supported: use ^ (bitwise_xor) instead",
         ErrorKind::kType);
  return binary("sub", Op::SUB, *this, o, {});
}
Tensor Tensor::operator*(const Tensor& o) const { return binary("mul", Op::MUL, *this, o, {}); }
Tensor Tensor::operator/(const Tensor& o) const {
  DType t = compiler::least_upper_float(least_upper_dtype(dtype(), o.dtype()));
  return binary("div", Op::FDIV, cast(t), o.cast(t), {});
}
Tensor Tensor::operator+(double v) const { return scalar_op("add", v); }
Tensor Tensor::operator-(double v) const { return scalar_op("sub", v); }
Tensor Tensor::scalar_op(std::string_view op, double v, bool reverse) const {
  Tensor c = scalar_like(v);
  if (!impl_->lazy.sym && ndim() > 0)  // broadcast at once: one stride-0 view, as expand makes
    c.impl_->lazy.st =
        ShapeTracker::of({shape(), Shape(shape().size(), 0), 0, std::nullopt, nullptr});
  const Tensor& a = reverse ? c : *this;
  const Tensor& b = reverse ? *this : c;
  if (op == "add") return a + b;
  if (op == "sub") return a - b;
  if (op == "mul") return a * b;
  if (op == "maximum") return a.maximum(b);
  if (op == "minimum") return a.minimum(b);
  if (op == "lt") return a.lt(b);
  if (op == "le") return a.le(b);
  if (op == "gt") return a.gt(b);
  if (op == "ge") return a.ge(b);
  if (op == "eq") return a.eq(b);
  if (op == "ne") return a.ne(b);
  fail("scalar_op", "unknown op '" + std::string(op) + "'", ErrorKind::kValue);
}
Tensor Tensor::operator*(double v) const { return scalar_op("mul", v); }
Tensor Tensor::operator/(double v) const { return *this / scalar_like(v); }
Tensor Tensor::operator-() const {
  if (dtypes::is_bool(dtype())) fail("neg", "negation of a bool tensor", ErrorKind::kType);
  return unary(Op::NEG);
}
Tensor Tensor::maximum(const Tensor& o) const { return binary("maximum", Op::MAX, *this, o, {}); }
Tensor Tensor::minimum(const Tensor& o) const {
  DType t = least_upper_dtype(dtype(), o.dtype());
  return order_inverse(order_inverse(cast(t)).maximum(order_inverse(o.cast(t))));
}
Tensor Tensor::lt(const Tensor& o) const {
  return binary("lt", Op::CMPLT, *this, o, dtypes::kBool);
}
Tensor Tensor::eq(const Tensor& o) const {
  return binary("eq", Op::CMPEQ, *this, o, dtypes::kBool);
}
Tensor Tensor::ne(const Tensor& o) const {
  return binary("ne", Op::CMPNE, *this, o, dtypes::kBool);
}

Tensor Tensor::where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_same_device("where", cond.lazy(), a.lazy());
  check_same_device("where", cond.lazy(), b.lazy());
  auto [x, y] = broadcast("where", a, b);
  auto [c, x2] = broadcast("where", cond, x);
  auto [c2, y2] = broadcast("where", c, y);
  DType t = least_upper_dtype(a.dtype(), b.dtype());
  Tensor cb = c2.cast(dtypes::kBool).detach(), xt = x2.cast(t), yt = y2.cast(t);
  return record(lazy_alu(Op::WHERE, lazies(cb.lazy(), xt.lazy(), yt.lazy()), t), "where",
                {cb, xt, yt}, [cb](const Tensor& g) {
                  Tensor z = Tensor::zeros_like(g);
                  return Grads{std::nullopt, where(cb, g, z), where(cb, z, g)};
                });
}

Tensor Tensor::cast(DType t) const {
  if (t == dtype()) return *this;
  DType from = dtype();
  return record(lazy_cast(impl_->lazy, t), "cast", {*this},
                [from](const Tensor& g) { return Grads{g.cast(from)}; });
}

Tensor Tensor::bitcast(DType t) const {
  if (t.itemsize() != dtype().itemsize())
    fail("bitcast",
         "cannot bitcast " + dtype().name() + " to " + t.name() +
             " element for element: itemsizes differ",
         ErrorKind::kValue);
  if (t == dtype()) return *this;
  // A bool is 0 or 1 in its byte: the bits of a cast (kernels hold bools as i1, not bytes).
  if (dtypes::is_bool(t) || dtypes::is_bool(dtype())) return cast(t).detach();
  return Tensor(lazy_bitcast(impl_->lazy, t));
}

Tensor Tensor::unary(Op op) const {
  Lazy out = lazy_alu(op, lazies(impl_->lazy), dtype());
  Tensor x = *this, y(out);  // y: the result without history (saved_output)
  auto result = [x, y, op]() { return saved_output(y, [&] { return x.unary(op); }); };
  BackwardFn fn;
  constexpr double kLn2 = std::numbers::ln2;
  switch (op) {
    case Op::NEG:
      fn = [](const Tensor& g) { return Grads{-g}; };
      break;
    case Op::EXP2:
      fn = [result](const Tensor& g) { return Grads{g * result() * kLn2}; };
      break;
    case Op::LOG2:
      fn = [x](const Tensor& g) { return Grads{g / (saved(x) * kLn2)}; };
      break;
    case Op::SQRT:
      fn = [result](const Tensor& g) { return Grads{g / (result() * 2.0)}; };
      break;
    case Op::SIN:
      fn = [x](const Tensor& g) { return Grads{g * (-saved(x) + std::numbers::pi / 2).sin()}; };
      break;
    case Op::RECIP:
      fn = [result](const Tensor& g) {
        Tensor r = result();
        return Grads{-(g * r * r)};
      };
      break;
    default:
      fn = [](const Tensor&) { return Grads{std::nullopt}; };
  }
  return record(std::move(out), op_name(op), {*this}, std::move(fn));
}

Tensor Tensor::relu() const {
  // where(0 < x, x, 0), not maximum(x, 0): the gradient at 0 is 0 (torch, tinygrad), not 1/2.
  // The gradient is recorded directly and masked by the output (0 < relu(x) exactly where
  // 0 < x, NaN included): a mask read from x would make the backward compute x again whenever
  // only the output was stored, and x is usually a convolution or a matmul.
  Tensor x = *this, zero(lazy_const(impl_->lazy.base->device, dtype(), 0, {}));
  // detach(): the closure must not keep where()'s own history, which holds the mask `0 < x` (a
  // lazy reader of whatever x reads: optimizer steps compute such readers before they write).
  Tensor out = where(zero.lt(x.detach()), x.detach(), zero).detach();
  return record(out.lazy(), "relu", {x}, [out, zero](const Tensor& g) {
    return Grads{where(zero.lt(out), g, zero.cast(g.dtype()))};
  });
}
Tensor Tensor::exp2() const { return as_float(*this).unary(Op::EXP2); }
Tensor Tensor::log2() const { return as_float(*this).unary(Op::LOG2); }
Tensor Tensor::exp() const { return (as_float(*this) * (1.0 / std::numbers::ln2)).exp2(); }
Tensor Tensor::log() const { return log2() * std::numbers::ln2; }
Tensor Tensor::sqrt() const { return as_float(*this).unary(Op::SQRT); }
Tensor Tensor::sin() const { return as_float(*this).unary(Op::SIN); }
Tensor Tensor::reciprocal() const { return as_float(*this).unary(Op::RECIP); }
Tensor Tensor::sigmoid() const {
  // The gradient s * (1 - s) is recorded directly: through exp and reciprocal it is 0 * inf = NaN
  // where exp(-x) overflows (x < -88 in float32).
  Tensor x = as_float(*this), s = ((-x.detach()).exp() + 1.0).reciprocal();
  return record(s.lazy(), "sigmoid", {x}, [x, s](const Tensor& g) {
    Tensor sv = saved_output(s, [&] { return x.sigmoid(); });
    return Grads{g * sv * (-sv + 1.0)};
  });
}

// ---- data --------------------------------------------------------------------------------------

const Tensor& Tensor::realize() const {
  run_schedule(create_schedule(lazies(impl_->lazy)));
  // Undecided history ends here, as tinygrad's realize replaces the graph by the buffer: the
  // activations behind a forward-only result are freed (see autograd.h).
  if (history_realized(*impl_)) {
    impl_->node.reset();
    impl_->history_dropped = true;
  }
  return *this;
}

std::vector<double> Tensor::to_vector() const {
  detail::check_no_host_read("to_vector");
  Tensor c = impl_->lazy.is_base_view() ? *this : contiguous();
  c.realize();
  const auto& db = c.impl_->lazy.base->realized;
  CHECK(db) << "to_vector: tensor was not realized";
  std::vector<uint8_t> bytes(static_cast<size_t>(numel()) * dtype().itemsize());
  if (!bytes.empty())
    db->device->copy_out(bytes.data(), db->buffer, bytes.size()).throw_if_error("to_vector");
  std::vector<double> out(numel());
  for (int64_t i = 0; i < numel(); i++)
    out[i] = load_elem(dtype(), bytes.data() + i * dtype().itemsize());
  return out;
}

Tensor Tensor::contiguous() const {
  // A new base whose kernel reads this view and writes it row-major.
  Lazy out = lazy_contiguous(impl_->lazy, dtype());
  out.base->force_kernel = true;
  return record(out, "contiguous", {*this}, [](const Tensor& g) { return Grads{g}; });
}

}  // namespace baregrad::tensor
