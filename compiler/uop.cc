#include "compiler/uop.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <unordered_map>

#include "base/check.h"

namespace baregrad::compiler {

// ---------------------------------------------------------------------------------------------
// The op table

namespace {
struct OpInfo {
  const char* name;
  OpGroup group;
  int arity;
};
constexpr OpInfo kOps[] = {
#define OP(name, group, arity) {#name, OpGroup::group, arity},
#include "compiler/ops.def"
#undef OP
};
}  // namespace

const char* op_name(Op op) { return kOps[static_cast<int>(op)].name; }
OpGroup op_group(Op op) { return kOps[static_cast<int>(op)].group; }
int op_arity(Op op) { return kOps[static_cast<int>(op)].arity; }
bool is_alu(Op op) {
  OpGroup g = op_group(op);
  return g == OpGroup::Unary || g == OpGroup::Binary || g == OpGroup::Ternary;
}
bool is_commutative(Op op) {
  return op == Op::ADD || op == Op::MUL || op == Op::MAX || op == Op::CMPNE || op == Op::CMPEQ ||
         op == Op::AND || op == Op::OR || op == Op::XOR;
}
bool is_comparison(Op op) { return op == Op::CMPLT || op == Op::CMPNE || op == Op::CMPEQ; }

// ---------------------------------------------------------------------------------------------
// Hashing and interning

namespace {
uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

uint64_t hash_arg(const Arg& a) {
  struct Visitor {
    uint64_t operator()(std::monostate) const { return 0; }
    uint64_t operator()(int64_t v) const { return mix(1, static_cast<uint64_t>(v)); }
    uint64_t operator()(double v) const {
      uint64_t bits;
      std::memcpy(&bits, &v, 8);
      return mix(2, bits);
    }
    uint64_t operator()(bool v) const { return mix(3, v); }
    uint64_t operator()(const std::string& s) const { return mix(4, std::hash<std::string>()(s)); }
    uint64_t operator()(const VarArg& v) const {
      return mix(mix(mix(5, std::hash<std::string>()(v.name)), v.min), v.max);
    }
    uint64_t operator()(const ReduceArg& r) const {
      uint64_t h = mix(6, static_cast<uint64_t>(r.op));
      for (int a : r.axes) h = mix(h, a);
      return h;
    }
    uint64_t operator()(const ShapeTracker& st) const { return mix(7, hash_value(st)); }
  };
  return std::visit(Visitor{}, a);
}

// Args compare by value, except doubles compare by bit pattern so that -0.0 and nan intern
// as distinct constants.
bool arg_equal(const Arg& a, const Arg& b) {
  if (a.index() != b.index()) return false;
  if (auto* x = std::get_if<double>(&a)) {
    double y = std::get<double>(b);
    return std::memcmp(x, &y, 8) == 0;
  }
  return a == b;
}
}  // namespace

struct UOpTable {
  std::mutex mu;
  std::unordered_multimap<uint64_t, UOp*> nodes;

  static UOpTable& get() {
    static UOpTable* table = new UOpTable();  // NOTE: leaked on purpose; outlives all UOps
    return *table;
  }
};

UOp::UOp(Op op, DType dtype, std::vector<UOpPtr> src, Arg arg, uint64_t hash)
    : op_(op), dtype_(dtype), src_(std::move(src)), arg_(std::move(arg)), hash_(hash) {}

UOpPtr UOp::make(Op op, DType dtype, std::vector<UOpPtr> src, Arg arg) {
  uint64_t h = mix(mix(static_cast<uint64_t>(op) + 1,
                       static_cast<uint64_t>(dtype.scalar) | (uint64_t{dtype.count} << 8) |
                           (uint64_t{dtype.ptr} << 24) | (uint64_t(dtype.addr) << 25)),
                   hash_arg(arg));
  for (auto& s : src) h = mix(h, s->hash_);
  UOpTable& t = UOpTable::get();
  std::lock_guard lock(t.mu);
  auto [lo, hi] = t.nodes.equal_range(h);
  for (auto it = lo; it != hi; ++it) {
    UOp* n = it->second;
    if (n->op_ != op || !(n->dtype_ == dtype) || n->src_ != src || !arg_equal(n->arg_, arg))
      continue;
    // Only take nodes that are still alive; a dying node is replaced below.
    int64_t c = n->refs_.load(std::memory_order_relaxed);
    while (c > 0 && !n->refs_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel)) {
    }
    if (c > 0) {
      UOpPtr out;
      out.p_ = n;  // already counted
      return out;
    }
  }
  UOp* n = new UOp(op, dtype, std::move(src), std::move(arg), h);
  t.nodes.emplace(h, n);
  return UOpPtr(n);
}

UOpPtr::UOpPtr(const UOp* p) : p_(p) {
  if (p_) p_->refs_.fetch_add(1, std::memory_order_relaxed);
}
UOpPtr::UOpPtr(const UOpPtr& o) : p_(o.p_) {
  if (p_) p_->refs_.fetch_add(1, std::memory_order_relaxed);
}
UOpPtr::~UOpPtr() {
  if (!p_ || p_->refs_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  UOpTable& t = UOpTable::get();
  {
    std::lock_guard lock(t.mu);
    auto [lo, hi] = t.nodes.equal_range(p_->hash_);
    for (auto it = lo; it != hi; ++it)
      if (it->second == p_) {
        t.nodes.erase(it);
        break;
      }
  }
  delete p_;  // releases the sources outside the lock
}

UOpPtr UOp::self() const { return UOpPtr(this); }

// ---------------------------------------------------------------------------------------------
// Constructors

UOpPtr UOp::cnst(DType dtype, double v) {
  DType b = dtype.base();
  if (dtypes::is_float(b)) return make(Op::CONST, dtype, {}, v);
  if (dtypes::is_bool(b)) return make(Op::CONST, dtype, {}, v != 0);
  CHECK(std::isfinite(v)) << "non-finite constant " << v << " for " << dtype.name();
  int64_t iv = dtypes::is_unsigned(b) && v >= 9223372036854775808.0
                   ? static_cast<int64_t>(static_cast<uint64_t>(v))
                   : static_cast<int64_t>(v);
  return make(Op::CONST, dtype, {}, wrap_int(b, iv));
}

UOpPtr UOp::cnst_int(DType dtype, int64_t v) {
  DType b = dtype.base();
  if (dtypes::is_float(b)) return make(Op::CONST, dtype, {}, static_cast<double>(v));
  if (dtypes::is_bool(b)) return make(Op::CONST, dtype, {}, v != 0);
  return make(Op::CONST, dtype, {}, wrap_int(b, v));
}

UOpPtr UOp::var(const std::string& name, int64_t min, int64_t max) {
  return make(Op::DEFINE_VAR, dtypes::kIndex, {}, VarArg{name, min, max});
}

UOpPtr UOp::alu(Op op, std::vector<UOpPtr> src) {
  CHECK(is_alu(op) && !src.empty()) << op_name(op);
  DType dt = src[op == Op::WHERE ? 1 : 0]->dtype();
  if (is_comparison(op)) dt = dtypes::kBool.vec(dt.count);
  return make(op, dt, std::move(src));
}

double UOp::const_value() const {
  CHECK(op_ == Op::CONST) << "const_value of " << op_name(op_);
  if (auto* d = std::get_if<double>(&arg_)) return *d;
  if (auto* b = std::get_if<bool>(&arg_)) return *b ? 1.0 : 0.0;
  int64_t i = std::get<int64_t>(arg_);
  return dtypes::is_unsigned(dtype_) ? static_cast<double>(static_cast<uint64_t>(i))
                                     : static_cast<double>(i);
}

int64_t UOp::const_int() const {
  CHECK(op_ == Op::CONST) << "const_int of " << op_name(op_);
  if (auto* d = std::get_if<double>(&arg_)) return static_cast<int64_t>(*d);
  if (auto* b = std::get_if<bool>(&arg_)) return *b;
  return std::get<int64_t>(arg_);
}

bool UOp::is_const(int64_t v) const {
  if (op_ != Op::CONST) return false;
  if (auto* i = std::get_if<int64_t>(&arg_)) return *i == v;
  if (auto* b = std::get_if<bool>(&arg_)) return *b == (v != 0);
  return std::get<double>(arg_) == static_cast<double>(v);
}

UOpPtr UOp::with_src(std::vector<UOpPtr> src) const {
  return make(op_, dtype_, std::move(src), arg_);
}
UOpPtr UOp::with_dtype(DType dtype) const { return make(op_, dtype, src_, arg_); }

// ---------------------------------------------------------------------------------------------
// Graph walks

std::vector<const UOp*> UOp::toposort() const {
  std::vector<const UOp*> order;
  std::unordered_map<const UOp*, bool> seen;
  std::vector<std::pair<const UOp*, size_t>> stack{{this, 0}};
  seen[this] = true;
  while (!stack.empty()) {
    auto& [n, i] = stack.back();
    if (i < n->src_.size()) {
      const UOp* s = n->src_[i++].get();
      if (seen.emplace(s, true).second) stack.push_back({s, 0});
    } else {
      order.push_back(n);
      stack.pop_back();
    }
  }
  return order;
}

UOpPtr UOp::substitute(const std::vector<std::pair<UOpPtr, UOpPtr>>& repl) const {
  std::unordered_map<const UOp*, UOpPtr> out;
  for (auto& [from, to] : repl) out[from.get()] = to;
  for (const UOp* n : toposort()) {
    if (out.count(n)) continue;
    std::vector<UOpPtr> src;
    bool changed = false;
    for (auto& s : n->src_) {
      auto it = out.find(s.get());
      src.push_back(it->second);
      changed |= it->second.get() != s.get();
    }
    out[n] = changed ? n->with_src(std::move(src)) : n->self();
  }
  return out[this];
}

std::string arg_str(const Arg& a) {
  struct Visitor {
    std::string operator()(std::monostate) const { return ""; }
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const {
      std::ostringstream os;
      os.precision(17);
      os << v;
      return os.str();
    }
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(const std::string& s) const { return "\"" + s + "\""; }
    std::string operator()(const VarArg& v) const {
      return v.name + "[" + std::to_string(v.min) + ".." + std::to_string(v.max) + "]";
    }
    std::string operator()(const ReduceArg& r) const {
      std::string s = std::string(op_name(r.op)) + " axes=(";
      for (size_t i = 0; i < r.axes.size(); i++) s += (i ? "," : "") + std::to_string(r.axes[i]);
      return s + ")";
    }
    std::string operator()(const ShapeTracker& st) const { return st.str(); }
  };
  return std::visit(Visitor{}, a);
}

std::string UOp::str() const {
  std::ostringstream os;
  std::unordered_map<const UOp*, int> ids;
  for (const UOp* n : toposort()) {
    int id = static_cast<int>(ids.size());
    ids[n] = id;
    os << "%" << id << " = " << op_name(n->op_) << " " << n->dtype_.name();
    if (!n->src_.empty()) {
      os << " (";
      for (size_t i = 0; i < n->src_.size(); i++)
        os << (i ? ", " : "") << "%" << ids[n->src_[i].get()];
      os << ")";
    }
    std::string a = arg_str(n->arg_);
    if (!a.empty()) os << " " << a;
    os << "\n";
  }
  return os.str();
}

}  // namespace baregrad::compiler
