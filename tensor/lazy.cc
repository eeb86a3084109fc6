#include "tensor/lazy.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>

#include "base/check.h"
#include "base/checked.h"
#include "base/error.h"
#include "compiler/view_ops.h"
#include "tensor/counters.h"
#include "tensor/jit.h"

namespace baregrad::tensor {

DType Lazy::dtype() const { return base->dtype; }

int64_t Lazy::numel() const { return numel_or_fail("numel", shape()); }

bool Lazy::is_base_view() const {
  return st.views.size() == 1 && compiler::is_contiguous(st) && st.shape() == base->shape;
}

LazyBase::~LazyBase() {
  // Sources held only here are moved out before they die, so each dies with no source chain.
  std::vector<std::shared_ptr<LazyBase>> dying;
  auto take_sole = [&](std::vector<Lazy>& srcs) {
    for (Lazy& s : srcs)
      if (s.base && s.base.use_count() == 1) dying.push_back(std::move(s.base));
  };
  take_sole(srcs);
  while (!dying.empty()) {
    std::shared_ptr<LazyBase> b = std::move(dying.back());
    dying.pop_back();
    take_sole(b->srcs);
  }
}

int64_t LazyBase::numel() const { return numel_or_fail("numel", shape); }

DeviceBuffer::DeviceBuffer(std::shared_ptr<runtime::Device> dev, runtime::Buffer buf)
    : device(std::move(dev)), buffer(buf) {
  counters().mem_used.fetch_add(static_cast<int64_t>(buffer.bytes), std::memory_order_relaxed);
}

DeviceBuffer::~DeviceBuffer() {
  counters().mem_used.fetch_sub(static_cast<int64_t>(buffer.bytes), std::memory_order_relaxed);
  if (device) device->free(buffer);
}

namespace {
// The value of `l` when it is a constant seen without padding (every element equal).
std::optional<double> const_value(const Lazy& l) {
  if (l.base->kind != LazyKind::kConst || l.base->realized || l.base->sym_value)
    return std::nullopt;
  for (const auto& v : l.st.views)
    if (v.mask) return std::nullopt;
  return l.base->value;
}

// `v` as stored in `t` (rounded or wrapped).
double to_dtype(DType t, double v) {
  if (compiler::dtypes::is_float(t)) return compiler::round_to(t, v);
  if (compiler::dtypes::is_bool(t)) return v != 0;
  if (!std::isfinite(v)) return 0;
  return static_cast<double>(compiler::wrap_int(t, static_cast<int64_t>(v)));
}

// Records `b` as a reader of each source base. Dead entries are dropped whenever the list
// reaches a power of two, so the lists stay proportional to their live readers.
void register_reader(const std::shared_ptr<LazyBase>& b) {
  for (auto& s : b->srcs) {
    auto& r = s.base->readers;
    if (r.size() >= 16 && (r.size() & (r.size() - 1)) == 0)
      r.erase(std::remove_if(r.begin(), r.end(), [](const auto& w) { return w.expired(); }),
              r.end());
    r.push_back(b);
  }
}

Lazy make(std::shared_ptr<LazyBase> b) {
  register_reader(b);
  if (b->kind == LazyKind::kIota) b->iota_expr = true;
  if (b->kind == LazyKind::kAlu || b->kind == LazyKind::kCast || b->kind == LazyKind::kReduce) {
    bool consts = true;
    for (const Lazy& s : b->srcs) {
      consts =
          consts && (s.base->iota_expr || (s.base->kind == LazyKind::kConst && !s.base->realized));
      b->iota_expr = b->iota_expr || s.base->iota_expr;
    }
    b->iota_expr = b->iota_expr && consts;
  }
  Lazy l{std::move(b), {}};
  l.st = ShapeTracker::contiguous(l.base->shape);
  l.sym = l.base->sym;
  return l;
}
// The symbolic base of a node computed over `src`'s shape (with `ones` set to 1), or null.
std::shared_ptr<const compiler::SymTracker> sym_base(const Lazy& src,
                                                     const std::vector<int>& ones = {}) {
  if (!src.sym) return nullptr;
  std::vector<compiler::Sym> shape = src.sym->shape();
  for (int a : ones) shape[a] = 1;
  return keep_sym(compiler::SymTracker::contiguous(std::move(shape), src.sym->vals));
}
}  // namespace

std::shared_ptr<const compiler::SymTracker> keep_sym(std::optional<compiler::SymTracker> st) {
  if (!st || !st->is_symbolic()) return nullptr;
  return std::make_shared<const compiler::SymTracker>(std::move(*st));
}

Lazy lazy_buffer(std::shared_ptr<DeviceBuffer> buf, DType dtype, std::vector<int64_t> shape) {
  auto b = std::make_shared<LazyBase>();
  b->kind = LazyKind::kBuffer;
  b->dtype = dtype;
  b->shape = std::move(shape);
  b->device = buf->device;
  b->realized = std::move(buf);
  return make(std::move(b));
}

Lazy lazy_const(const std::shared_ptr<runtime::Device>& dev,
                DType dtype,
                double value,
                std::vector<int64_t> shape) {
  auto b = std::make_shared<LazyBase>();
  b->kind = LazyKind::kConst;
  b->dtype = dtype;
  // Stored as the dtype holds it: folds read `value` (float32(2147483000) is 2147483008, and a
  // cast to int32 folded from the unrounded double gave 2147483000 where a kernel gives ...008).
  b->value = compiler::dtypes::is_float(dtype) ? to_dtype(dtype, value) : value;
  b->device = dev;
  // A const is one element broadcast to `shape`.
  b->shape = {};
  Lazy scalar = make(std::move(b));
  if (shape.empty()) return scalar;
  std::vector<int64_t> ones(shape.size(), 1);
  return lazy_view(scalar, compiler::expand(compiler::reshape(scalar.st, ones), shape));
}

Lazy lazy_iota(const std::shared_ptr<runtime::Device>& dev, DType dtype, int64_t n) {
  auto b = std::make_shared<LazyBase>();
  b->kind = LazyKind::kIota;
  b->dtype = dtype;
  b->device = dev;
  b->shape = {n};
  return make(std::move(b));
}

Lazy lazy_sym_const(const std::shared_ptr<runtime::Device>& dev,
                    DType dtype,
                    const compiler::Sym& value,
                    const compiler::Bindings& vals) {
  auto b = std::make_shared<LazyBase>();
  b->kind = LazyKind::kConst;
  b->dtype = dtype;
  b->value = to_dtype(dtype, static_cast<double>(value.eval(vals)));
  b->sym_value = value;
  b->sym_value_vals = vals;
  b->device = dev;
  return make(std::move(b));
}

void check_same_device(std::string_view op, const Lazy& a, const Lazy& b) {
  if (a.base->device == b.base->device) return;
  fail(op,
       "inputs on different devices: " + a.base->device->name() + " and " + b.base->device->name());
}

Lazy lazy_alu(Op op, std::vector<Lazy> srcs, DType dtype) {
  CHECK(!srcs.empty());
  for (size_t i = 1; i < srcs.size(); i++) {
    if (srcs[i].base->device == srcs[0].base->device) continue;
    std::string name = compiler::op_name(op);  // only for the error: a tiny op's build is ~1 us
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    check_same_device(name, srcs[0], srcs[i]);
  }
  // Constant folding: an op on constants is a constant (so no kernel lacks a shape to run in).
  // Of symbolic views, it is a constant of the current values' shape.
  auto specialize_const = [&] {
    for (auto& s : srcs)
      if (s.sym) detail::jit_specialize("a constant of symbolic shape was folded");
  };
  std::vector<double> vals;
  for (auto& s : srcs)
    if (auto v = const_value(s)) vals.push_back(*v);
  DType in = srcs[op == Op::WHERE ? 1 : 0].dtype();
  if (vals.size() == srcs.size() && !compiler::dtypes::is_float(in)) {
    std::vector<int64_t> iv(vals.begin(), vals.end());
    if (op == Op::WHERE) iv[0] = vals[0] != 0;
    bool div0 = (op == Op::IDIV || op == Op::MOD) && iv[1] == 0;
    if (!div0) specialize_const();
    if (!div0)
      return lazy_const(srcs[0].base->device, dtype,
                        static_cast<double>(compiler::exec_alu_int(op, in, iv)), srcs[0].shape());
  } else if (vals.size() == srcs.size()) {
    specialize_const();
    return lazy_const(srcs[0].base->device, dtype, compiler::exec_alu_float(op, in, vals),
                      srcs[0].shape());
  }
  auto b = std::make_shared<LazyBase>();
  b->kind = LazyKind::kAlu;
  b->op = op;
  b->dtype = dtype;
  b->shape = srcs[0].shape();
  b->device = srcs[0].base->device;
  for (auto& s : srcs) CHECK(s.shape() == b->shape) << "lazy_alu: sources of different shapes";
  for (auto& s : srcs) {  // the first symbolic source gives the shape; all give their values
    if (!s.sym) continue;
    if (!b->sym) {
      b->sym = sym_base(s);
      continue;
    }
    compiler::SymTracker merged = *b->sym;
    compiler::merge_bindings(compiler::op_name(op), merged.vals, s.sym->vals);
    b->sym = keep_sym(std::move(merged));
  }
  b->srcs = std::move(srcs);
  return make(std::move(b));
}

namespace {

Lazy reduce_node(Op op, const Lazy& src, std::vector<int> axes) {
  auto b = std::make_shared<LazyBase>();
  b->kind = LazyKind::kReduce;
  b->op = op;
  b->dtype = src.dtype();
  b->shape = src.shape();
  for (int a : axes) b->shape[a] = 1;
  b->sym = sym_base(src, axes);
  b->axes = std::move(axes);
  b->device = src.base->device;
  b->srcs = {src};
  return make(std::move(b));
}

// Reductions of at least this many elements per output are split in two kernels.
constexpr int64_t kSplitReduceMin = 32768;

// True when `src` is where(... == arange ..., v, 0): a sum of it reads one element per output
// (a one-hot axis, compiler/opt/kernel.h), which a split would turn back into a loop.
bool one_hot_sum(const Lazy& src) {
  const LazyBase* b = src.base.get();
  while (b->kind == LazyKind::kCast && !b->realized && !b->srcs.empty()) b = b->srcs[0].base.get();
  if (b->kind != LazyKind::kAlu || b->op != Op::WHERE || b->realized || b->srcs.empty())
    return false;
  std::vector<const LazyBase*> stack{b->srcs[0].base.get()};
  while (!stack.empty()) {
    const LazyBase* t = stack.back();
    stack.pop_back();
    if (t->realized || t->kind != LazyKind::kAlu) continue;
    if (t->op == Op::AND)
      for (auto& s : t->srcs) stack.push_back(s.base.get());
    if (t->op == Op::CMPEQ)
      for (auto& s : t->srcs)
        if (s.base->kind == LazyKind::kIota && !s.base->realized) return true;
  }
  return false;
}

// A kernel runs one thread (one core on the CPU) per output element, so a large reduction into
// few outputs runs nearly serially. Split (tinygrad's split_reduceop): the largest reduce axis
// s becomes (s / d, d), a first kernel reduces every axis but d, giving d partial results per
// output with d threads, and a second kernel combines them. d is the axis' largest divisor up to
// 256 (4096 on GPUs, which need many more threads) leaving at least 16 elements per partial
// result; d is the inner, contiguous part, so neighbouring threads read neighbouring elements.
std::optional<Lazy> split_reduce(Op op, const Lazy& src, const std::vector<int>& axes) {
  if (op != Op::ADD && op != Op::MAX) return std::nullopt;
  if (op == Op::ADD && one_hot_sum(src)) return std::nullopt;
  if (src.sym) return std::nullopt;  // a symbolic axis is never split
  int64_t per_output = 1;
  int axis = -1;
  for (int a : axes) {
    per_output *= src.shape()[a];
    if (axis < 0 || src.shape()[a] > src.shape()[axis]) axis = a;
  }
  if (per_output < kSplitReduceMin) return std::nullopt;
  const auto& dev = src.base->device;
  int64_t max_split = dev && dev->target_info().gpu ? 4096 : 256, s = src.shape()[axis], d = 0;
  for (int64_t c = std::min(max_split, s / 16); c >= 8 && d == 0; c--)
    if (s % c == 0) d = c;
  if (d == 0) return std::nullopt;
  std::vector<int64_t> shape = src.shape();
  shape[axis] = s / d;
  shape.insert(shape.begin() + axis + 1, d);
  std::vector<int> first;  // every reduce axis, those after `axis` moved one on
  for (int a : axes) first.push_back(a > axis ? a + 1 : a);
  Lazy partial = reduce_node(op, lazy_view(src, compiler::reshape(src.st, shape)), first);
  Lazy total = reduce_node(op, partial, {axis + 1});
  std::vector<int64_t> out = src.shape();
  for (int a : axes) out[a] = 1;
  return lazy_view(total, compiler::reshape(total.st, out));
}

}  // namespace

Lazy lazy_reduce(Op op, const Lazy& src, std::vector<int> axes) {
  // Reducing an empty axis gives the identity (no kernel loop would run to write it).
  std::vector<int64_t> out_shape = src.shape();
  bool empty = false;
  for (int a : axes) {
    empty |= out_shape[a] == 0;
    out_shape[a] = 1;
  }
  if ((empty || const_value(src)) && src.sym)
    detail::jit_specialize("a reduction over a symbolic shape was folded");
  if (empty) {
    double id = op == Op::ADD ? 0 : op == Op::MUL ? 1 : compiler::dtypes::min_value(src.dtype());
    if (op == Op::MAX && compiler::dtypes::is_float(src.dtype())) id = -INFINITY;
    return lazy_const(src.base->device, src.dtype(), id, out_shape);
  }
  if (auto v = const_value(src)) {
    std::vector<int64_t> shape = src.shape();
    double n = 1;
    for (int a : axes) {
      n *= static_cast<double>(shape[a]);
      shape[a] = 1;
    }
    double r = op == Op::ADD ? *v * n : op == Op::MUL ? std::pow(*v, n) : *v;
    if (op == Op::MAX && n == 0) r = compiler::dtypes::min_value(src.dtype());
    return lazy_const(src.base->device, src.dtype(), to_dtype(src.dtype(), r), shape);
  }
  if (auto split = split_reduce(op, src, axes)) return *split;
  return reduce_node(op, src, std::move(axes));
}

Lazy lazy_cast(const Lazy& src, DType dtype) {
  if (auto v = const_value(src))
    return lazy_const(src.base->device, dtype, to_dtype(dtype, *v), src.shape());
  return lazy_contiguous(src, dtype);
}

Lazy lazy_contiguous(const Lazy& src, DType dtype) {
  auto b = std::make_shared<LazyBase>();
  b->kind = LazyKind::kCast;
  b->dtype = dtype;
  b->shape = src.shape();
  b->sym = sym_base(src);
  b->device = src.base->device;
  b->srcs = {src};
  return make(std::move(b));
}

Lazy lazy_copy(const Lazy& src, std::shared_ptr<runtime::Device> dev) {
  CHECK(src.is_base_view()) << "lazy_copy: the source must be a whole base";
  if (src.sym) detail::jit_specialize("a copy between devices of a symbolic shape");
  auto b = std::make_shared<LazyBase>();
  b->kind = LazyKind::kCopy;
  b->dtype = src.dtype();
  b->shape = src.shape();
  b->device = std::move(dev);
  b->srcs = {Lazy{src.base, src.st, nullptr}};
  return make(std::move(b));
}

Lazy lazy_bitcast(const Lazy& src, DType dtype) {
  CHECK_EQ(src.dtype().itemsize(), dtype.itemsize()) << "lazy_bitcast: itemsizes differ";
  Lazy out = lazy_contiguous(src, dtype);
  out.base->op = Op::BITCAST;
  return out;
}

bool is_bitcast_view(const Lazy& l) {
  return l.base->kind == LazyKind::kCast && l.base->op == Op::BITCAST && !l.base->realized &&
         !l.base->srcs.empty() && l.is_base_view();
}

Lazy lazy_view(const Lazy& src, ShapeTracker st, std::shared_ptr<const compiler::SymTracker> sym) {
  return Lazy{src.base, std::move(st), std::move(sym)};
}

}  // namespace baregrad::tensor
