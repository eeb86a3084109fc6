// The UOp IR: immutable, hash-consed nodes (op, dtype, src, arg). The one header a pass author
// reads together with pattern.h. Two UOps with equal fields are the same object, so pointer
// equality is structural equality and common subexpressions are shared for free.
#pragma once

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "compiler/dtype.h"
#include "compiler/view.h"

namespace baregrad::compiler {

enum class Op : uint8_t {
#define OP(name, group, arity) name,
#include "compiler/ops.def"
#undef OP
};
enum class OpGroup : uint8_t { Unary, Binary, Ternary, Meta, Memory, Control, Kernel, Vector };

const char* op_name(Op op);
OpGroup op_group(Op op);
int op_arity(Op op);  // < 0: variadic
constexpr int kNumOps = 0
#define OP(name, group, arity) +1
#include "compiler/ops.def"
#undef OP
    ;
// ALU ops: the unary, binary and ternary groups.
bool is_alu(Op op);
// a op b == b op a.
bool is_commutative(Op op);
// Comparisons produce bool.
bool is_comparison(Op op);

// Argument of REDUCE_AXIS: the combining op (ADD, MUL, MAX) and the kernel axes it reduces.
struct ReduceArg {
  Op op = Op::ADD;
  std::vector<int> axes;
  bool operator==(const ReduceArg&) const = default;
};
// Argument of DEFINE_VAR and SPECIAL: a named int64 with inclusive bounds.
struct VarArg {
  std::string name;
  int64_t min = 0;
  int64_t max = 0;
  bool operator==(const VarArg&) const = default;
};
// CONST values hold int64 for every integer type (uint64 as its bit pattern), double for
// floats, bool for bool.
using Arg = std::
    variant<std::monostate, int64_t, double, bool, std::string, VarArg, ReduceArg, ShapeTracker>;
std::string arg_str(const Arg& a);

class UOp;
// Counted reference to an interned UOp. Nodes die when the last reference goes.
class UOpPtr {
 public:
  UOpPtr() = default;
  UOpPtr(const UOp* p);  // takes a new reference to p
  UOpPtr(const UOpPtr& o);
  UOpPtr(UOpPtr&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  UOpPtr& operator=(UOpPtr o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~UOpPtr();
  const UOp* get() const { return p_; }
  const UOp* operator->() const { return p_; }
  const UOp& operator*() const { return *p_; }
  explicit operator bool() const { return p_ != nullptr; }
  bool operator==(const UOpPtr& o) const { return p_ == o.p_; }
  bool operator==(std::nullptr_t) const { return p_ == nullptr; }

 private:
  friend class UOp;
  const UOp* p_ = nullptr;
};
struct UOpPtrHash {
  size_t operator()(const UOpPtr& p) const { return std::hash<const void*>()(p.get()); }
};

class UOp {
 public:
  // The interned node with these fields (created if it does not exist).
  static UOpPtr make(Op op, DType dtype, std::vector<UOpPtr> src = {}, Arg arg = {});
  // A constant of `dtype` (scalar or vector, broadcast) holding `v` converted to the dtype.
  static UOpPtr cnst(DType dtype, double v);
  static UOpPtr cnst_int(DType dtype, int64_t v);
  static UOpPtr index_const(int64_t v) { return cnst_int(dtypes::kIndex, v); }
  static UOpPtr var(const std::string& name, int64_t min, int64_t max);
  // An ALU op; the result dtype is bool for comparisons, else the first source's dtype.
  static UOpPtr alu(Op op, std::vector<UOpPtr> src);

  Op op() const { return op_; }
  DType dtype() const { return dtype_; }
  const std::vector<UOpPtr>& src() const { return src_; }
  const UOpPtr& src(size_t i) const { return src_[i]; }
  const Arg& arg() const { return arg_; }
  uint64_t hash() const { return hash_; }

  template <class T>
  const T& arg_as() const {
    return std::get<T>(arg_);
  }
  // Value of a CONST as double / int64 (CHECKs that this is a CONST).
  double const_value() const;
  int64_t const_int() const;
  bool is_const() const { return op_ == Op::CONST; }
  bool is_const(int64_t v) const;

  // The same node with other sources / dtype.
  UOpPtr with_src(std::vector<UOpPtr> src) const;
  UOpPtr with_dtype(DType dtype) const;
  UOpPtr self() const;
  // Every node reachable from this one, sources before users; this node last.
  std::vector<const UOp*> toposort() const;
  // Replace nodes by pointer identity everywhere below (and including) this node.
  UOpPtr substitute(const std::vector<std::pair<UOpPtr, UOpPtr>>& repl) const;
  // Inclusive integer bounds of this value over every input (int / bool dtypes; floats give
  // the int64 extremes). Derived from DEFINE_VAR, SPECIAL and RANGE bounds.
  int64_t vmin() const;
  int64_t vmax() const;
  // Number of nodes reachable from this one.
  size_t size() const { return toposort().size(); }
  // Readable multi-line dump with shared nodes numbered.
  std::string str() const;

  UOp(const UOp&) = delete;
  UOp& operator=(const UOp&) = delete;

 private:
  friend class UOpPtr;
  friend struct UOpTable;
  UOp(Op op, DType dtype, std::vector<UOpPtr> src, Arg arg, uint64_t hash);
  void compute_bounds() const;

  Op op_;
  DType dtype_;
  std::vector<UOpPtr> src_;
  Arg arg_;
  uint64_t hash_;
  mutable std::atomic<int64_t> refs_{0};
  mutable std::once_flag bounds_once_;
  mutable int64_t vmin_ = 0, vmax_ = 0;
};

// Arithmetic sugar for building index math and expressions; operands must share a dtype, and
// an int64_t operand becomes a CONST of the other side's dtype.
UOpPtr operator+(const UOpPtr& a, const UOpPtr& b);
UOpPtr operator-(const UOpPtr& a, const UOpPtr& b);
UOpPtr operator*(const UOpPtr& a, const UOpPtr& b);
UOpPtr operator/(const UOpPtr& a, const UOpPtr& b);  // IDIV for ints, FDIV for floats
UOpPtr operator%(const UOpPtr& a, const UOpPtr& b);
UOpPtr operator-(const UOpPtr& a);
UOpPtr operator+(const UOpPtr& a, int64_t b);
UOpPtr operator-(const UOpPtr& a, int64_t b);
UOpPtr operator*(const UOpPtr& a, int64_t b);
UOpPtr operator/(const UOpPtr& a, int64_t b);
UOpPtr operator%(const UOpPtr& a, int64_t b);
UOpPtr lt(const UOpPtr& a, const UOpPtr& b);
UOpPtr lt(const UOpPtr& a, int64_t b);
UOpPtr ne(const UOpPtr& a, const UOpPtr& b);
UOpPtr maximum(const UOpPtr& a, const UOpPtr& b);
UOpPtr where(const UOpPtr& c, const UOpPtr& a, const UOpPtr& b);
UOpPtr logical_and(const UOpPtr& a, const UOpPtr& b);
UOpPtr cast(const UOpPtr& a, DType to);
// A const of `v` with a's dtype.
UOpPtr const_like(const UOpPtr& a, double v);

// Evaluates a scalar ALU op on constants with the dtype's wrap/truncation semantics (the
// reference semantics the renderers must match). Used by constant folding and tests.
double exec_alu_float(Op op, DType dtype, std::span<const double> operands);
int64_t exec_alu_int(Op op, DType dtype, std::span<const int64_t> operands);
// Truncates / wraps an int64 to `dtype` (sign- or zero-extended back to int64).
int64_t wrap_int(DType dtype, int64_t v);
// Rounds a double to the precision of a float dtype (identity for float64).
double round_to(DType t, double v);

}  // namespace baregrad::compiler
