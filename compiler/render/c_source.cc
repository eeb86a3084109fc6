#include "compiler/render/c_source.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

#include "base/check.h"
#include "compiler/render/c_text.h"
#include "compiler/render/cl_source.h"
#include "compiler/render/llvm_ir.h"  // gpu_buffer_slots

namespace baregrad::compiler {
namespace {

using namespace ctext;

bool is_bf16(DType t) { return t.scalar == Scalar::kBFloat16; }
bool is_half(DType t) { return t.scalar == Scalar::kFloat16 || is_bf16(t); }
bool is_bool(DType t) { return dtypes::is_bool(t); }

// Rendered C text; `atomic` text can take a postfix or binary operator without parentheses.
struct Expr {
  std::string text;
  bool atomic = true;
};
Expr compound(std::string s) { return {std::move(s), false}; }
std::string wrap(const Expr& e) { return e.atomic ? e.text : "(" + e.text + ")"; }

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// A DEFINE_VAR name usable in C that cannot collide with the names this renderer generates.
std::string var_name(const std::string& name, size_t i) {
  static const std::set<std::string> kReserved = {
      "bufs",   "vars",  "core_lo", "core_hi", "to_bf16", "int",      "float",
      "double", "char",  "short",   "long",    "for",     "if",       "else",
      "do",     "while", "return",  "void",    "const",   "restrict", "union"};
  size_t stem = name.find_last_not_of("0123456789") + 1;
  static const std::set<std::string> kGenerated = {"alu",  "val", "acc", "cast", "tidx",
                                                   "temp", "vec", "gep", "ridx", "data"};
  bool generated = stem < name.size() && kGenerated.count(name.substr(0, stem));
  if (!is_identifier(name)) return "var" + std::to_string(i);
  if (generated || kReserved.count(name) || name.rfind("__", 0) == 0) return "var_" + name;
  return name;
}

bool one_of(Op op, std::initializer_list<Op> ops) {
  return std::find(ops.begin(), ops.end(), op) != ops.end();
}

// True when the op's value stays inside its dtype's range without a conversion, so that its
// C expression can be nested in another (C promotes sub-int scalars to int).
bool keeps_range(const UOp* u) {
  DType t = u->dtype();
  if (is_half(t)) return false;  // NOTE: clang keeps half results in float until assignment
  return t.count > 1 || t.scalar >= Scalar::kInt32 ||
         !one_of(u->op(), {Op::ADD, Op::SUB, Op::MUL, Op::NEG, Op::SHL, Op::SHR, Op::IDIV, Op::MOD,
                           Op::MULACC});
}

// Vector ALU ops rendered one lane at a time with scalar semantics: in OpenCL C (`cl`) every
// one, since its vectors are for memory access here; in clang's C the ones below.
bool lanewise(const UOp* u, bool cl) {
  Op op = u->op();
  DType out = u->dtype();
  if (!is_alu(op) || out.count == 1) return false;
  if (cl) return true;
  DType in = u->src(op == Op::WHERE ? 1 : 0)->dtype();
  if (one_of(op, {Op::SHL, Op::SHR, Op::EXP2, Op::LOG2, Op::SIN, Op::POW})) return true;
  if (one_of(op, {Op::AND, Op::OR, Op::XOR})) return false;
  if (is_comparison(op)) return is_bool(in);
  if (op == Op::BITCAST) return is_bool(in) || is_bool(out);
  if (op == Op::CAST) return is_bf16(out);
  if (op == Op::WHERE || op == Op::MAX) return is_bool(out);
  return is_bool(out) || is_bf16(out);
}

// The C operator of a binary op that C spells infix, else null.
const char* infix(Op op) {
  static const std::map<Op, const char*> kInfix = {
      {Op::ADD, " + "},  {Op::SUB, " - "},   {Op::MUL, " * "},    {Op::FDIV, " / "},
      {Op::IDIV, " / "}, {Op::MOD, " % "},   {Op::AND, " & "},    {Op::OR, " | "},
      {Op::XOR, " ^ "},  {Op::CMPLT, " < "}, {Op::CMPNE, " != "}, {Op::CMPEQ, " == "}};
  auto it = kInfix.find(op);
  return it == kInfix.end() ? nullptr : it->second;
}

// The libm name of a math op (float32 adds the "f" suffix), else null.
const char* math_name(Op op) {
  static const std::map<Op, const char*> kMath = {{Op::EXP2, "exp2"},   {Op::LOG2, "log2"},
                                                  {Op::SIN, "sin"},     {Op::SQRT, "sqrt"},
                                                  {Op::TRUNC, "trunc"}, {Op::POW, "pow"}};
  auto it = kMath.find(op);
  return it == kMath.end() ? nullptr : it->second;
}

// Conversions to a 16-bit float that round once from float64: float64 and the 32- and 64-bit
// ints (exact in double below 2**53), whose float32 step would round twice (clang calls
// __truncdfhf2 / __truncdfbf2 for these).
bool cast_via_double(DType in, DType out) {
  return is_half(out) && (in.scalar == Scalar::kFloat64 ||
                          (!dtypes::is_float(in) && !is_bool(in) && in.scalar_size() >= 4));
}

// Other conversions that go through float32, as round_to() does.
bool cast_via_float(DType in, DType out) {
  if (in.scalar == Scalar::kFloat32 || out.scalar == Scalar::kFloat32) return false;
  if (cast_via_double(in, out)) return false;
  return (is_half(out) && in.scalar != out.scalar) || is_bf16(in);
}

// The C dialect a Writer emits.
enum class Dialect { kClang, kOpenCl };

class Writer {
 public:
  Writer(const ProgramSpec& spec, Dialect d) : spec_(spec), cl_(d == Dialect::kOpenCl) {}
  std::string run();

 private:
  void analyze();
  void statement(const UOp* u);
  void line(const std::string& s) { body_ += std::string(2 * depth_, ' ') + s + "\n"; }
  std::string fresh(const std::string& prefix) {
    return prefix + std::to_string(counters_[prefix]++);
  }
  std::string type(DType t) {
    if (cl_) {  // OpenCL's vectors (2, 3, 4, 8, 16 lanes); bool vectors are bytes, as in memory
      std::string s = cl_scalar_type(is_bool(t) && t.count > 1 ? Scalar::kUint8 : t.scalar);
      return t.count == 1 ? s : s + std::to_string(t.count);
    }
    return t.count == 1 ? scalar_ctype(t.scalar) : vtype(t.scalar, t.count);
  }
  // Lane `i` of vector text `v`.
  std::string lane(const std::string& v, int i) const {
    if (!cl_) return v + "[" + std::to_string(i) + "]";
    return v + ".s" + "0123456789abcdef"[i];
  }
  // Half and bfloat16 values computed in float and rounded after each op: bfloat16 in clang's
  // C, both in OpenCL C.
  bool emulated(DType t) const { return is_bf16(t) || (cl_ && is_half(t)); }
  // The call rounding float `x` to `t` (an emulated type), marking the helper it needs.
  std::string round_call(DType t, const std::string& x, bool from_double = false);
  std::pair<std::string, Expr> cl_place(const UOp* index);
  std::string cl_access_load(const UOp* index, DType t);
  std::string cl_store(const UOp* index, DType t, const std::string& v);
  std::string cl_bitcast(DType in, DType out, const std::string& a);
  std::string vtype(Scalar s, int n, bool unaligned = false);
  std::string literal(DType t, double v, int64_t i);
  std::string literal(const UOp* c);
  Expr operand(const UOp* u);
  Expr value(const UOp* u);
  Expr alu(const UOp* u);
  Expr vector_alu(const UOp* u, const std::vector<std::string>& x);
  std::string scalar_alu(const UOp* u, DType out, DType in, const std::vector<std::string>& x);
  std::string cast(DType in, DType out, const std::string& a);
  std::string access(const UOp* index, DType t);
  Expr load(const UOp* u);

  const ProgramSpec& spec_;
  std::unordered_map<const UOp*, int> pos_;
  std::unordered_map<const UOp*, bool> inline_;
  std::unordered_map<const UOp*, std::string> names_;
  std::map<std::string, int> counters_;
  std::set<std::string> typedef_names_;
  std::set<std::string> loop_names_;
  std::vector<std::string> typedefs_;
  const bool cl_;
  std::set<std::string> helpers_;  // helper functions the body calls (kHelpers)
  std::string body_;
  int depth_ = 1;
};

std::string Writer::vtype(Scalar s, int n, bool unaligned) {
  if (unaligned) vtype(s, n);  // declared first, for readers
  std::string name = vector_stem(s) + std::to_string(n) + (unaligned ? "_v_u" : "_v");
  if (typedef_names_.insert(name).second) {
    std::string attr = "ext_vector_type(" + std::to_string(n) + ")";
    if (unaligned) attr += ", aligned(" + std::to_string(DType{s}.scalar_size()) + ")";
    typedefs_.push_back("typedef " + std::string(scalar_ctype(s)) + " " + name +
                        " __attribute__((" + attr + "));");
  }
  return name;
}

std::string Writer::literal(DType t, double v, int64_t i) {
  std::string s =
      dtypes::is_float(t) ? float_literal(t.scalar, v, cl_) : int_literal(t.scalar, i, cl_);
  return t.count == 1 ? s : std::string("(").append(type(t)).append(")(").append(s).append(")");
}

std::string Writer::literal(const UOp* c) {
  return literal(c->dtype(), c->const_value(), c->const_int());
}

// Decides which values are nested into their single user instead of getting a variable: pure
// values used once in the same loop body, and accumulator reads not crossing a write.
void Writer::analyze() {
  const auto& uops = spec_.uops;
  std::vector<int> loops_upto(uops.size());
  std::unordered_map<const UOp*, std::vector<int>> acc_stores;
  std::unordered_map<const UOp*, std::vector<std::pair<const UOp*, int>>> users;
  for (size_t i = 0; i < uops.size(); i++) {
    const UOp* u = uops[i].get();
    pos_[u] = static_cast<int>(i);
    bool loop = u->op() == Op::RANGE || u->op() == Op::ENDRANGE;
    loops_upto[i] = (i ? loops_upto[i - 1] : 0) + loop;
    if (u->op() == Op::ACC_STORE) acc_stores[u->src(0).get()].push_back(static_cast<int>(i));
    int repeats = lanewise(u, cl_) ? u->dtype().count : u->op() == Op::MAX ? 2 : 1;
    for (const UOpPtr& s : u->src()) users[s.get()].push_back({u, repeats});
  }
  std::unordered_map<const UOp*, std::vector<int>> emitted;  // where a value's text appears
  for (size_t i = uops.size(); i-- > 0;) {
    const UOp* u = uops[i].get();
    std::vector<int>& at = emitted[u];
    for (auto [user, repeats] : users[u])
      for (int r = 0; r < repeats; r++) {
        if (inline_[user])
          at.insert(at.end(), emitted[user].begin(), emitted[user].end());
        else
          at.push_back(pos_[user]);
      }
    bool same_loop = std::all_of(at.begin(), at.end(),
                                 [&](int e) { return loops_upto[e - 1] == loops_upto[i]; });
    Op op = u->op();
    if (op == Op::INDEX) {
      inline_[u] = true;
    } else if (op == Op::ACC_LOAD) {
      const auto& stores = acc_stores[u->src(0).get()];
      inline_[u] = std::none_of(stores.begin(), stores.end(), [&](int q) {
        return q > static_cast<int>(i) &&
               std::any_of(at.begin(), at.end(), [q](int e) { return q < e; });
      });
    } else if (is_alu(op) || op == Op::GEP || op == Op::VECTORIZE) {
      bool single = at.size() == 1 || (op == Op::GEP && !at.empty());
      inline_[u] = single && same_loop && keeps_range(u);
    }
  }
  // A value nested deeper than kMaxNesting gets a variable: compilers bound the parentheses of
  // one expression (OpenCL C compilers at clang's default of 256; a level adds up to three).
  // Giving a value a variable moves its text to its own position, which the checks above
  // allow too (same loop, no accumulator store in between).
  constexpr int kMaxNesting = 64;
  std::unordered_map<const UOp*, int> depth;
  for (const UOpPtr& p : uops) {
    const UOp* u = p.get();
    int d = 0;
    for (const UOpPtr& s : u->src())
      if (inline_[s.get()]) d = std::max(d, depth[s.get()]);
    depth[u] = d + 1;
    if (inline_[u] && u->op() != Op::INDEX && depth[u] > kMaxNesting) {
      inline_[u] = false;
      depth[u] = 0;
    }
  }
}

Expr Writer::operand(const UOp* u) {
  if (auto it = names_.find(u); it != names_.end()) return {it->second, true};
  if (u->op() == Op::CONST) {
    std::string s = literal(u);
    return {s, s[0] != '-' && s[0] != '('};
  }
  CHECK(inline_[u]) << op_name(u->op()) << " used before it is defined";
  return value(u);
}

Expr Writer::value(const UOp* u) {
  switch (u->op()) {
    case Op::LOAD:
      return load(u);
    case Op::ACC_LOAD:
      return operand(u->src(0).get());
    case Op::GEP: {
      const UOp* v = u->src(0).get();
      if (v->dtype().count == 1) return operand(v);
      return {lane(wrap(operand(v)), static_cast<int>(u->arg_as<int64_t>()))};
    }
    case Op::VECTORIZE: {
      std::string s = "(" + type(u->dtype()) + (cl_ ? ")(" : "){");
      for (size_t i = 0; i < u->src().size(); i++)
        s += (i ? ", " : "") + operand(u->src(i).get()).text;
      return compound(s + (cl_ ? ")" : "}"));
    }
    default:
      CHECK(is_alu(u->op())) << "C renderer: unexpected " << op_name(u->op());
      return alu(u);
  }
}

std::string Writer::round_call(DType t, const std::string& x, bool from_double) {
  std::string f = std::string(is_bf16(t) ? "to_bf16" : "to_half") + (from_double ? "_d" : "");
  helpers_.insert(f);
  return f + "(" + x + ")";
}

std::string Writer::cast(DType in, DType out, const std::string& a) {
  if (cl_ && emulated(out)) {  // float registers: round once, from double where C would
    if (cast_via_double(in, out)) return round_call(out, "(double)" + a, true);
    return round_call(out, "(float)" + a);
  }
  if (cast_via_double(in, out)) return "(" + type(out) + ")(double)" + a;
  std::string x = cast_via_float(in, out) ? "(float)" + a : a;
  if (is_bf16(out)) return round_call(out, x);
  return "(" + type(out) + ")" + x;
}

// OpenCL C reinterprets with as_<type>(); half and bfloat16 (float registers) go through
// their 16-bit patterns, bool through a byte.
std::string Writer::cl_bitcast(DType in, DType out, const std::string& a) {
  std::string bits = a;
  if (is_bf16(in)) {
    bits = "(ushort)(as_uint(" + a + ") >> 16)";
  } else if (is_half(in)) {
    helpers_.insert("half_bits");
    bits = "half_bits(" + a + ")";
  } else if (is_bool(in)) {
    bits = "(uchar)" + a;
  }
  if (is_bf16(out)) return "as_float((uint)as_ushort(" + bits + ") << 16)";
  if (is_half(out)) {
    helpers_.insert("half_from_bits");
    return "half_from_bits(as_ushort(" + bits + "))";
  }
  if (is_bool(out)) return "(bool)" + bits;
  return "as_" + type(out) + "(" + bits + ")";
}

std::string Writer::scalar_alu(const UOp* u,
                               DType out,
                               DType in,
                               const std::vector<std::string>& x) {
  Op op = u->op();
  const std::string& a = x[0];
  const std::string b = x.size() > 1 ? x[1] : "";
  if (emulated(out) && op != Op::WHERE && op != Op::MAX && op != Op::CAST && op != Op::BITCAST) {
    std::vector<std::string> f;  // compute in float32, then round once to the 16-bit type
    for (const std::string& s : x) f.push_back(cl_ ? s : "(float)" + s);
    return round_call(out, scalar_alu(u, dtypes::kFloat32, dtypes::kFloat32, f));
  }
  if (const char* sym = infix(op)) return a + sym + b;
  if (const char* name = math_name(op)) {
    std::string args = "(" + a + (b.empty() ? "" : ", " + b) + ")";
    if (cl_) return name + args;  // OpenCL's overloaded builtins
    return std::string("__builtin_") + name + (out.scalar == Scalar::kFloat64 ? "" : "f") + args;
  }
  switch (op) {
    case Op::NEG:
      return "-" + a;
    case Op::RECIP:
      return literal(out, 1, 1) + " / " + a;
    case Op::WHERE:
      return a + " ? " + b + " : " + x[2];
    case Op::MULACC:
      return a + " * " + b + " + " + x[2];
    case Op::MAX:
      if (dtypes::is_float(out))
        return "(" + a + " < " + b + " || " + b + " != " + b + ") ? " + b + " : " + a;
      return a + " < " + b + " ? " + b + " : " + a;
    case Op::SHL:
    case Op::SHR: {
      const UOp* amount = u->src(1).get();
      bool small = amount->is_const() && amount->const_int() >= 0 &&
                   amount->const_int() < out.scalar_size() * 8;
      const char* sym = op == Op::SHL ? " << " : " >> ";
      if (small && (op == Op::SHR || (dtypes::is_unsigned(out) && out.scalar_size() >= 4)))
        return a + sym + b;
      std::string wide = "(" +
                         type(op == Op::SHR && !dtypes::is_unsigned(out) ? dtypes::kInt64
                                                                         : DType{Scalar::kUint64}) +
                         ")";
      std::string u64 = "(" + type(DType{Scalar::kUint64}) + ")";
      return "(" + type(out) + ")(" + wide + a + sym + "(" + u64 + b + " & 63))";
    }
    case Op::CAST:
      return cast(in, out, a);
    case Op::BITCAST:
      if (cl_) return cl_bitcast(in, out, a);
      return "(union { " + type(in) + " from; " + type(out) + " to; }){.from = " + a + "}.to";
    default:
      UNREACHABLE() << "C renderer: " << op_name(op);
  }
}

Expr Writer::vector_alu(const UOp* u, const std::vector<std::string>& x) {
  Op op = u->op();
  DType out = u->dtype(), in = u->src(op == Op::WHERE ? 1 : 0)->dtype();
  const std::string& a = x[0];
  auto convert = [&](const std::string& v, DType t) {
    return "__builtin_convertvector(" + v + ", " + type(t) + ")";
  };
  switch (op) {
    case Op::CMPLT:
    case Op::CMPNE:
    case Op::CMPEQ:
      return {convert(scalar_alu(u, out, in, x), out)};
    case Op::MAX:
      if (dtypes::is_float(out))
        return compound("(" + a + " < " + x[1] + " | " + x[1] + " != " + x[1] + ") ? " + x[1] +
                        " : " + a);
      break;
    case Op::WHERE: {
      if (u->src(0)->dtype().count == 1) break;  // one condition for every lane
      int size = out.scalar_size();              // the condition must have the arms' lane width
      Scalar lane = size == 1   ? Scalar::kInt8
                    : size == 2 ? Scalar::kInt16
                    : size == 4 ? Scalar::kInt32
                                : Scalar::kInt64;
      DType mask = DType{lane}.vec(out.count);
      return compound(convert(a, mask) + " != 0 ? " + x[1] + " : " + x[2]);
    }
    case Op::RECIP:
      return compound(wrap({literal(out, 1, 1), false}) + " / " + a);
    case Op::SQRT:
      return {"__builtin_elementwise_sqrt(" + a + ")"};
    case Op::TRUNC:
      return {"__builtin_elementwise_trunc(" + a + ")"};
    case Op::CAST:
      if (is_bool(out)) return {convert(a + " != 0", out)};
      if (cast_via_double(in, out))
        return {convert(convert(a, dtypes::kFloat64.vec(out.count)), out)};
      if (cast_via_float(in, out))
        return {convert(convert(a, dtypes::kFloat32.vec(out.count)), out)};
      return {convert(a, out)};
    default:
      break;
  }
  return compound(scalar_alu(u, out, in, x));
}

Expr Writer::alu(const UOp* u) {
  DType out = u->dtype(), in = u->src(u->op() == Op::WHERE ? 1 : 0)->dtype();
  bool all_const =
      std::all_of(u->src().begin(), u->src().end(), [](const UOpPtr& s) { return s->is_const(); });
  if (!lanewise(u, cl_)) {
    std::vector<std::string> x;
    for (const UOpPtr& s : u->src()) x.push_back(wrap(operand(s.get())));
    if (all_const && out.count == 1 && !is_half(in))  // keep C from computing in int
      x[0] = "(" + type(in) + ")" + x[0];
    return out.count > 1 ? vector_alu(u, x) : compound(scalar_alu(u, out, in, x));
  }
  std::string s = "(" + type(out) + (cl_ ? ")(" : "){");
  auto lane_of = [&](const UOp* src, int lane) {
    if (src->is_const())
      return wrap({literal(src->dtype().base(), src->const_value(), src->const_int()), false});
    std::string v = wrap(operand(src));
    return src->dtype().count == 1 ? v : this->lane(v, lane);
  };
  for (int lane = 0; lane < out.count; lane++) {
    std::vector<std::string> x;
    for (const UOpPtr& src : u->src()) x.push_back(lane_of(src.get(), lane));
    s += (lane ? ", " : "") + scalar_alu(u, out.base(), in.base(), x);
  }
  return compound(s + (cl_ ? ")" : "}"));
}

std::string Writer::access(const UOp* index, DType t) {
  CHECK(index->op() == Op::INDEX && index->src(0)->op() == Op::DEFINE_GLOBAL)
      << "C renderer: memory op on " << op_name(index->op());
  const std::string& buf = names_.at(index->src(0).get());
  CHECK(index->src(1)->dtype().count == 1) << "C renderer: vector INDEX (gather)";
  Expr off = operand(index->src(1).get());
  if (t.count == 1) return buf + "[" + off.text + "]";
  std::string vt = vtype(is_bool(t) ? Scalar::kUint8 : t.scalar, t.count, true);
  return "*(" + vt + "*)(" + buf + " + " + wrap(off) + ")";
}

// The buffer and element index of a memory op, for OpenCL C.
std::pair<std::string, Expr> Writer::cl_place(const UOp* index) {
  CHECK(index->op() == Op::INDEX && index->src(0)->op() == Op::DEFINE_GLOBAL)
      << "OpenCL renderer: memory op on " << op_name(index->op());
  CHECK(index->src(1)->dtype().count == 1) << "OpenCL renderer: vector INDEX (gather)";
  return {names_.at(index->src(0).get()), operand(index->src(1).get())};
}

std::string Writer::cl_access_load(const UOp* index, DType t) {
  if (index->src(0)->op() == Op::DEFINE_LOCAL) {  // shared memory holds the register form
    const std::string& local = names_.at(index->src(0).get());
    Expr off = operand(index->src(1).get());
    if (t.count == 1) return local + "[" + off.text + "]";
    CHECK(!is_bool(t)) << "OpenCL renderer: a bool vector load of shared memory";
    return "vload" + std::to_string(t.count) + "(0, " + local + " + " + wrap(off) + ")";
  }
  auto [buf, off] = cl_place(index);
  std::string n = std::to_string(t.count);
  if (t.count == 1) {
    if (is_bf16(t)) return "as_float((uint)" + buf + "[" + off.text + "] << 16)";
    if (is_half(t)) return "vload_half(" + off.text + ", " + buf + ")";
    return (is_bool(t) ? "(bool)" : "") + buf + "[" + off.text + "]";
  }
  std::string at = "0, " + buf + " + " + wrap(off);
  if (is_bf16(t))
    return "as_float" + n + "(convert_uint" + n + "(vload" + n + "(" + at + ")) << 16)";
  if (is_half(t)) return "vload_half" + n + "(" + at + ")";
  return "vload" + n + "(" + at + ")";
}

std::string Writer::cl_store(const UOp* index, DType t, const std::string& v) {
  if (index->src(0)->op() == Op::DEFINE_LOCAL) {  // the register form, as loads expect
    const std::string& local = names_.at(index->src(0).get());
    Expr off = operand(index->src(1).get());
    if (t.count == 1) return local + "[" + off.text + "] = " + v + ";";
    CHECK(!is_bool(t)) << "OpenCL renderer: a bool vector store to shared memory";
    return "vstore" + std::to_string(t.count) + "(" + v + ", 0, " + local + " + " + wrap(off) +
           ");";
  }
  auto [buf, off] = cl_place(index);
  std::string n = std::to_string(t.count);
  if (t.count == 1) {
    if (is_half(t) && !is_bf16(t))
      return "vstore_half_rte(" + v + ", " + off.text + ", " + buf + ");";
    std::string x = is_bf16(t) ? "(ushort)(as_uint(" + v + ") >> 16)" : v;
    return buf + "[" + off.text + "] = " + x + ";";
  }
  std::string at = ", 0, " + buf + " + " + wrap(off) + ");";
  if (is_bf16(t))
    return "vstore" + n + "(convert_ushort" + n + "(as_uint" + n + "(" + v + ") >> 16)" + at;
  if (is_half(t)) return "vstore_half" + n + "_rte(" + v + at;
  return "vstore" + n + "(" + v + at;
}

Expr Writer::load(const UOp* u) {
  const UOp* index = u->src(0).get();
  DType t = u->dtype();
  if (cl_) {
    std::string v = cl_access_load(index, t);
    if (index->src().size() < 3) return compound(v);
    std::string alt = u->src().size() > 1 ? wrap(operand(u->src(1).get())) : literal(t, 0, 0);
    return compound(wrap(operand(index->src(2).get())) + " ? " + v + " : " + alt);
  }
  std::string v = access(index, t);
  // Bool vectors live in memory as bytes; clang has no ?: on bool vectors, so a masked one
  // selects on the bytes and converts after.
  bool bool_vec = t.count > 1 && is_bool(t);
  auto to_bool = [&](const std::string& x) {
    return bool_vec ? "__builtin_convertvector(" + x + ", " + type(t) + ")" : x;
  };
  if (index->src().size() < 3) return {to_bool(v), t.count == 1 || is_bool(t)};
  std::string alt = u->src().size() > 1 ? wrap(operand(u->src(1).get())) : literal(t, 0, 0);
  if (bool_vec) {
    std::string bytes = type(DType{Scalar::kUint8, t.count});
    alt = u->src().size() > 1 ? "__builtin_convertvector(" + alt + ", " + bytes + ")"
                              : "(" + bytes + ")(0)";
  }
  return compound(to_bool(wrap(operand(index->src(2).get())) + " ? " + v + " : " + alt));
}

void Writer::statement(const UOp* u) {
  switch (u->op()) {
    case Op::SINK:
    case Op::CONST:
    case Op::INDEX:
      return;
    case Op::DEFINE_GLOBAL: {
      int slot = static_cast<int>(u->arg_as<int64_t>());
      bool written = std::any_of(spec_.uops.begin(), spec_.uops.end(), [u](const UOpPtr& s) {
        return s->op() == Op::STORE && s->src(0)->src(0).get() == u;
      });
      names_[u] = "data" + std::to_string(slot);
      if (cl_) {
        std::string pt = std::string(written ? "" : "const ") + "__global " +
                         cl_memory_type(u->dtype().scalar) + "*";
        std::string n = std::to_string(slot);
        return line(pt + " restrict " + names_[u] + " = (" + pt + ")(buf" + n + " + off" + n +
                    ");");
      }
      std::string pt = std::string(written ? "" : "const ") + scalar_ctype(u->dtype().scalar) + "*";
      return line(pt + " restrict " + names_[u] + " = (" + pt + ")bufs[" + std::to_string(slot) +
                  "];");
    }
    case Op::DEFINE_LOCAL: {
      CHECK(cl_) << "C renderer: shared memory (DEFINE_LOCAL) on a CPU target";
      names_[u] = fresh("temp");
      return line("__local " + type(u->dtype().base()) + " " + names_[u] + "[" +
                  std::to_string(u->arg_as<int64_t>()) + "];");
    }
    case Op::SHFL_XOR:  // OpenCL C 1.2 has no sub-group exchange; the target has no warps
      CHECK(false) << "C renderer: a warp exchange (SHFL_XOR); the target's warp_size is 0";
      return;
    case Op::BARRIER:
      CHECK(cl_) << "C renderer: a work-group BARRIER on a CPU target";
      return line("barrier(CLK_LOCAL_MEM_FENCE);");
    case Op::DEFINE_VAR: {
      auto it = std::find(spec_.vars.begin(), spec_.vars.end(), u->arg_as<VarArg>());
      CHECK(it != spec_.vars.end()) << "DEFINE_VAR " << u->arg_as<VarArg>().name << " not in vars";
      size_t i = it - spec_.vars.begin();
      if (cl_) {  // every name prefixed: OpenCL C reserves many more words than C
        names_[u] = is_identifier(it->name) ? "var_" + it->name : "var" + std::to_string(i);
        return line("const long " + names_[u] + " = varg" + std::to_string(i) + ";");
      }
      names_[u] = var_name(it->name, i);
      return line("const int64_t " + names_[u] + " = vars[" + std::to_string(i) + "];");
    }
    case Op::SPECIAL: {
      const std::string& n = u->arg_as<VarArg>().name;
      if (cl_) {
        bool group = n.size() == 5 && n.rfind("gidx", 0) == 0,
             local = n.size() == 5 && n.rfind("lidx", 0) == 0;
        CHECK((group || local) && n[4] >= '0' && n[4] <= '2') << "OpenCL renderer: SPECIAL " << n;
        names_[u] = n;
        return line("const long " + n + " = " + (group ? "get_group_id(" : "get_local_id(") + n[4] +
                    ");");
      }
      CHECK(n == "core_lo" || n == "core_hi") << "C renderer: SPECIAL " << n;
      names_[u] = n;
      return;
    }
    case Op::RANGE: {
      int64_t id =
          std::holds_alternative<int64_t>(u->arg()) ? u->arg_as<int64_t>() : counters_["ridx"];
      std::string start = operand(u->src(0).get()).text, end = operand(u->src(1).get()).text;
      if (id < 0) {  // a bounds check: at most one iteration (GPU threads past the end)
        std::string name = fresh("tidx");
        line("const " + type(u->dtype()) + " " + name + " = " + start + ";");
        line("if (" + name + " < " + end + ") {");
        names_[u] = name;
        depth_++;
        return;
      }
      std::string name = "ridx" + std::to_string(id);
      if (!loop_names_.insert(name).second) name = fresh(name + "_");
      line("for (" + type(u->dtype()) + " " + name + " = " + start + "; " + name + " < " + end +
           "; " + name + "++) {");
      names_[u] = name;
      depth_++;
      return;
    }
    case Op::ENDRANGE:
      depth_--;
      return line("}");
    case Op::DEFINE_ACC:
      names_[u] = fresh("acc");
      return line(type(u->dtype().base().vec(u->dtype().count)) + " " + names_[u] + " = " +
                  operand(u->src(0).get()).text + ";");
    case Op::ACC_STORE:
      return line(names_.at(u->src(0).get()) + " = " + operand(u->src(1).get()).text + ";");
    case Op::STORE: {
      const UOp* index = u->src(0).get();
      DType t = u->src(1)->dtype();
      std::string v = operand(u->src(1).get()).text;
      std::string guard =
          index->src().size() > 2 ? "if (" + operand(index->src(2).get()).text + ") " : "";
      if (cl_) return line(guard + cl_store(index, t, v));
      if (t.count > 1 && is_bool(t))
        v = "__builtin_convertvector(" + v + ", " + vtype(Scalar::kUint8, t.count) + ")";
      return line(guard + access(index, t) + " = " + v + ";");
    }
    default: {
      if (inline_[u]) return;
      Op op = u->op();
      std::string prefix = op == Op::LOAD || op == Op::ACC_LOAD  ? "val"
                           : op == Op::CAST || op == Op::BITCAST ? "cast"
                           : op == Op::GEP                       ? "gep"
                           : op == Op::VECTORIZE                 ? "vec"
                                                                 : "alu";
      std::string text = value(u).text;
      names_[u] = fresh(prefix);
      return line(type(u->dtype()) + " " + names_[u] + " = " + text + ";");
    }
  }
}

std::string Writer::run() {
  CHECK(is_identifier(spec_.name)) << "kernel name '" << spec_.name << "' is not a C identifier";
  analyze();
  for (const UOpPtr& u : spec_.uops) statement(u.get());
  std::string helpers = helper_functions(helpers_, cl_);
  if (cl_) {
    std::string out;
    if (uses_double(spec_, helpers_)) out += "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n";
    out += helpers + "\n__kernel void " + spec_.name + "(";
    int nbufs = gpu_buffer_slots(spec_);
    std::string params;
    for (int b = 0; b < nbufs; b++)
      params +=
          "__global uchar* buf" + std::to_string(b) + ", ulong off" + std::to_string(b) + ", ";
    for (size_t i = 0; i < spec_.vars.size(); i++) params += "long varg" + std::to_string(i) + ", ";
    if (!params.empty()) params.resize(params.size() - 2);
    return out + params + ") {\n" + body_ + "}\n";
  }
  std::string out = "#include <stdint.h>\n";
  for (const std::string& t : typedefs_) out += t + "\n";
  out += helpers;
  out += "\nvoid " + spec_.name +
         "(void* const* bufs, const int64_t* vars, int64_t core_lo, int64_t core_hi) {\n";
  return out + body_ + "}\n";
}

}  // namespace

std::string CRenderer::render(const ProgramSpec& spec) const {
  return Writer(spec, Dialect::kClang).run();
}

std::string ClRenderer::render(const ProgramSpec& spec) const {
  return Writer(spec, Dialect::kOpenCl).run();
}

}  // namespace baregrad::compiler
