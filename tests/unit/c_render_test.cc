// CRenderer + ClangCompiler: hand-built linear programs are rendered, compiled with clang, loaded
// with ObjectLoader and run; results are checked against exec_alu_* / interp's convert().
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <set>

#include "base/options.h"
#include "base/timer.h"
#include "compiler/interp.h"
#include "compiler/render/c_source.h"
#include "compiler/target/clang_target.h"
#include "drivers/cpu/iface_host.h"

namespace baregrad::compiler {
namespace {

using cpu::KernelFn;

// Collects a linear program; add() lists a node's unlisted sources before it.
class Kernel {
 public:
  explicit Kernel(std::string name) { spec_.name = std::move(name); }
  UOpPtr add(const UOpPtr& u) {
    if (listed_.count(u.get())) return u;
    for (const UOpPtr& s : u->src()) add(s);
    listed_.insert(u.get());
    spec_.uops.push_back(u);
    return u;
  }
  UOpPtr buf(int slot, DType t) {
    return add(UOp::make(Op::DEFINE_GLOBAL, t.as_ptr(), {}, int64_t{slot}));
  }
  UOpPtr var(const std::string& name) {
    spec_.vars.push_back({name, 0, 1 << 20});
    return add(UOp::var(name, 0, 1 << 20));
  }
  UOpPtr range(const UOpPtr& start, const UOpPtr& end, int64_t id, UOpPtr outer = {}) {
    std::vector<UOpPtr> src{start, end};
    if (outer) src.push_back(outer);
    return add(UOp::make(Op::RANGE, dtypes::kIndex, src, id));
  }
  UOpPtr core_range() {
    auto special = [](const char* n) {
      return UOp::make(Op::SPECIAL, dtypes::kIndex, {}, VarArg{n, 0, 1 << 20});
    };
    return range(special("core_lo"), special("core_hi"), 0);
  }
  void end(const UOpPtr& r) { add(UOp::make(Op::ENDRANGE, dtypes::kVoid, {r})); }
  UOpPtr load(
      const UOpPtr& b, const UOpPtr& idx, int lanes = 1, UOpPtr valid = {}, UOpPtr alt = {}) {
    std::vector<UOpPtr> src{b, idx};
    if (valid) src.push_back(valid);
    std::vector<UOpPtr> load_src{UOp::make(Op::INDEX, b->dtype(), src)};
    if (alt) load_src.push_back(alt);
    return add(UOp::make(Op::LOAD, b->dtype().base().vec(lanes), load_src));
  }
  UOpPtr store(const UOpPtr& b, const UOpPtr& idx, const UOpPtr& v) {
    return add(
        UOp::make(Op::STORE, dtypes::kVoid, {UOp::make(Op::INDEX, b->dtype(), {b, idx}), v}));
  }
  const ProgramSpec& spec() const { return spec_; }

 private:
  ProgramSpec spec_;
  std::set<const UOp*> listed_;
};

cpu::ObjectLoader& loader() {
  static auto* l = new cpu::ObjectLoader();
  return *l;
}

// Renders, compiles and loads `spec`; null (and a test failure) on error.
KernelFn build(const ProgramSpec& spec, std::string* src) {
  *src = CRenderer().render(spec);
  Result<std::string> obj = ClangCompiler().compile(*src, spec.name);
  if (!obj.ok()) {
    ADD_FAILURE() << obj.status().to_string();
    return nullptr;
  }
  Result<cpu::LoadedKernel> fn = loader().load(*obj, spec.name);
  if (!fn.ok()) ADD_FAILURE() << fn.status().to_string() << "\n" << *src;
  if (!fn.ok()) return nullptr;
  static auto* kept = new std::vector<std::shared_ptr<const void>>();  // code stays linked
  kept->push_back(fn->code);
  return fn->fn;
}

DType bits_type(DType t) {
  int size = t.scalar_size();
  return size == 1   ? dtypes::kUint8
         : size == 2 ? dtypes::kUint16
         : size == 4 ? dtypes::kUint32
                     : dtypes::kUint64;
}

// Host memory for `n` elements of `t` (with slack so pointers can be misaligned).
struct HostBuf {
  HostBuf(DType t, size_t n) : t(t), bytes(n * t.scalar_size() + 64) {}
  void set(size_t i, const Value& v) {
    uint64_t bits = static_cast<uint64_t>(reinterpret(convert(v, t), bits_type(t)).i);
    std::memcpy(bytes.data() + i * t.scalar_size(), &bits, t.scalar_size());
  }
  Value get(size_t i) const {
    uint64_t bits = 0;
    std::memcpy(&bits, bytes.data() + i * t.scalar_size(), t.scalar_size());
    return reinterpret(make_int_value(bits_type(t), static_cast<int64_t>(bits)), t);
  }
  DType t;
  std::vector<uint8_t> bytes;
};

bool same(const Value& got, const Value& want, double tol) {
  if (!dtypes::is_float(want.dtype)) return got.i == want.i;
  if (std::isnan(want.f)) return std::isnan(got.f);
  if (got.f == want.f) return true;
  return std::isfinite(want.f) && std::abs(got.f - want.f) <= tol * std::max(1.0, std::abs(want.f));
}

double tolerance(DType t) {
  switch (t.scalar) {
    case Scalar::kFloat64:
      return 1e-12;
    case Scalar::kFloat32:
      return 1e-5;
    case Scalar::kFloat16:
      return 2e-3;
    default:
      return 2e-2;
  }
}

// Deterministic inputs covering each dtype's edge values.
std::vector<Value> inputs(DType t, int n, uint64_t seed) {
  static const double kFloats[] = {1.5,  -2.25, 0.0,  -0.0,  INFINITY, -INFINITY, NAN, 3.0,
                                   0.1,  1e-3,  100., -7.5,  65504.0,  0.75,      2.0, -1.0,
                                   1e30, 0.5,   42.7, 127.0, -0.5,     5.25,      8.0, 300.0};
  std::mt19937_64 rng(seed * 131 + static_cast<uint64_t>(t.scalar));
  std::vector<Value> out;
  for (int i = 0; i < n; i++) {
    uint64_t r = rng();
    if (dtypes::is_float(t)) {
      out.push_back(make_value(t, kFloats[r % std::size(kFloats)]));
    } else {
      const int64_t kEdges[] = {0,
                                1,
                                -1,
                                2,
                                7,
                                127,
                                -128,
                                255,
                                32767,
                                -32768,
                                std::numeric_limits<int32_t>::min(),
                                std::numeric_limits<int64_t>::max(),
                                std::numeric_limits<int64_t>::min(),
                                1000003};
      int64_t x = r % 3 == 0 ? kEdges[(r >> 8) % std::size(kEdges)] : static_cast<int64_t>(rng());
      out.push_back(make_int_value(t, x));
    }
  }
  return out;
}

std::vector<Op> ops_for(DType t) {
  if (dtypes::is_float(t))
    return {Op::ADD,   Op::SUB,   Op::MUL, Op::FDIV,  Op::MAX,   Op::CMPLT,
            Op::CMPNE, Op::CMPEQ, Op::NEG, Op::RECIP, Op::SQRT,  Op::TRUNC,
            Op::EXP2,  Op::LOG2,  Op::SIN, Op::POW,   Op::WHERE, Op::MULACC};
  if (dtypes::is_bool(t))
    return {Op::ADD, Op::SUB, Op::MUL, Op::MAX, Op::CMPLT, Op::CMPNE, Op::CMPEQ,
            Op::AND, Op::OR,  Op::XOR, Op::NEG, Op::WHERE, Op::MULACC};
  return {Op::ADD,   Op::SUB,   Op::MUL,    Op::IDIV, Op::MOD, Op::MAX, Op::CMPLT,
          Op::CMPNE, Op::CMPEQ, Op::AND,    Op::OR,   Op::XOR, Op::SHL, Op::SHR,
          Op::NEG,   Op::WHERE, Op::MULACC, Op::SHL,  Op::SHR};  // the last two shift by a constant
}

// Every ALU op of dtype `t` at `lanes` lanes, against exec_alu_int / exec_alu_float.
void check_ops(DType t, int lanes) {
  SCOPED_TRACE(t.name() + " x" + std::to_string(lanes));
  constexpr int kN = 48;
  std::vector<Op> ops = ops_for(t);
  Kernel k("ops_" + t.name() + "_" + std::to_string(lanes));
  UOpPtr bufs[3] = {k.buf(0, t), k.buf(1, t), k.buf(2, t)};
  std::vector<UOpPtr> outs;
  for (size_t j = 0; j < ops.size(); j++)
    outs.push_back(k.buf(3 + static_cast<int>(j), is_comparison(ops[j]) ? dtypes::kBool : t));
  UOpPtr r = k.core_range();
  UOpPtr idx = lanes == 1 ? r : r * lanes;
  UOpPtr a = k.load(bufs[0], idx, lanes), b = k.load(bufs[1], idx, lanes);
  UOpPtr c = k.load(bufs[2], idx, lanes);
  for (size_t j = 0; j < ops.size(); j++) {
    Op op = ops[j];
    bool by_const = j + 2 >= ops.size() && (op == Op::SHL || op == Op::SHR);
    UOpPtr v = op_arity(op) == 1 ? UOp::alu(op, {a})
               : op == Op::WHERE ? UOp::alu(op, {lt(a, b), b, a})
               : op == Op::MULACC
                   ? UOp::alu(op, {a, b, c})
                   : UOp::alu(op, {a, by_const ? UOp::cnst_int(t.vec(lanes), 3) : b});
    k.store(outs[j], idx, v);
  }
  k.end(r);
  std::vector<Value> in[3] = {inputs(t, kN, 1), inputs(t, kN, 2), inputs(t, kN, 3)};
  for (int i = 0; i < kN; i++) {  // keep IDIV / MOD defined in C
    Value& d = in[1][i];
    if (dtypes::is_int(t) && (d.i == 0 || (d.i == -1 && !dtypes::is_unsigned(t))))
      d = make_int_value(t, 3);
  }
  std::vector<HostBuf> host;
  for (int s = 0; s < 3; s++) {
    host.emplace_back(t, kN);
    for (int i = 0; i < kN; i++) host.back().set(i, in[s][i]);
  }
  for (Op op : ops) host.emplace_back(is_comparison(op) ? dtypes::kBool : t, kN);
  std::string src;
  KernelFn fn = build(k.spec(), &src);
  ASSERT_NE(fn, nullptr);
  std::vector<void*> ptrs;
  for (HostBuf& h : host) ptrs.push_back(h.bytes.data());
  fn(ptrs.data(), nullptr, 0, kN / lanes);
  for (size_t j = 0; j < ops.size(); j++) {
    Op op = ops[j];
    bool by_const = j + 2 >= ops.size() && (op == Op::SHL || op == Op::SHR);
    bool approx =
        op == Op::EXP2 || op == Op::LOG2 || op == Op::SIN || op == Op::POW || op == Op::MULACC;
    for (int i = 0; i < kN; i++) {
      const Value &x = in[0][i], &y = in[1][i], &z = in[2][i];
      Value want;
      if (dtypes::is_float(t)) {
        double cond = exec_alu_float(Op::CMPLT, t, std::vector<double>{x.f, y.f});
        std::vector<double> args = op == Op::WHERE ? std::vector<double>{cond, y.f, x.f}
                                                   : std::vector<double>{x.f, y.f, z.f};
        double res = exec_alu_float(op, t, std::span(args).first(std::max(op_arity(op), 1)));
        want = is_comparison(op) ? make_int_value(dtypes::kBool, res != 0) : Value{t, res, 0};
      } else {
        int64_t cond = exec_alu_int(Op::CMPLT, t, std::vector<int64_t>{x.i, y.i});
        std::vector<int64_t> args = op == Op::WHERE
                                        ? std::vector<int64_t>{cond, y.i, x.i}
                                        : std::vector<int64_t>{x.i, by_const ? 3 : y.i, z.i};
        int64_t res = exec_alu_int(op, t, std::span(args).first(std::max(op_arity(op), 1)));
        want = make_int_value(is_comparison(op) ? dtypes::kBool : t, res);
      }
      Value got = host[3 + j].get(i);
      ASSERT_TRUE(same(got, want, approx ? tolerance(t) : 0))
          << op_name(op) << " element " << i << ": x=" << x.f << " y=" << y.f << " z=" << z.f
          << " got " << got.f << " (" << got.i << ") want " << want.f << " (" << want.i << ")\n"
          << src;
    }
  }
}

const DType kAllTypes[] = {dtypes::kBool,   dtypes::kInt8,    dtypes::kUint8,    dtypes::kInt16,
                           dtypes::kUint16, dtypes::kInt32,   dtypes::kUint32,   dtypes::kInt64,
                           dtypes::kUint64, dtypes::kFloat16, dtypes::kBFloat16, dtypes::kFloat32,
                           dtypes::kFloat64};

TEST(CRender, EveryAluOpOfEveryDtypeMatchesTheReference) {
  for (DType t : kAllTypes) {
    check_ops(t, 1);
    check_ops(t, 4);
  }
}

// Every CAST (and a BITCAST to the same-size unsigned type) against interp's convert().
void check_casts(DType from, int lanes) {
  SCOPED_TRACE(from.name() + " x" + std::to_string(lanes));
  constexpr int kN = 48;
  Kernel k("cast_" + from.name() + "_" + std::to_string(lanes));
  UOpPtr in = k.buf(0, from);
  std::vector<DType> to;
  for (DType t : kAllTypes)
    if (t != from) to.push_back(t);
  std::vector<UOpPtr> outs;
  for (size_t j = 0; j <= to.size(); j++)
    outs.push_back(k.buf(1 + static_cast<int>(j), j < to.size() ? to[j] : bits_type(from)));
  UOpPtr r = k.core_range();
  UOpPtr idx = lanes == 1 ? r : r * lanes;
  UOpPtr a = k.load(in, idx, lanes);
  for (size_t j = 0; j < to.size(); j++) k.store(outs[j], idx, cast(a, to[j].vec(lanes)));
  k.store(outs.back(), idx, UOp::make(Op::BITCAST, bits_type(from).vec(lanes), {a}));
  k.end(r);
  std::vector<Value> values = inputs(from, kN, 7);
  std::vector<HostBuf> host{HostBuf(from, kN)};
  for (int i = 0; i < kN; i++) host[0].set(i, values[i]);
  for (DType t : to) host.emplace_back(t, kN);
  host.emplace_back(bits_type(from), kN);
  std::string src;
  KernelFn fn = build(k.spec(), &src);
  ASSERT_NE(fn, nullptr);
  std::vector<void*> ptrs;
  for (HostBuf& h : host) ptrs.push_back(h.bytes.data());
  fn(ptrs.data(), nullptr, 0, kN / lanes);
  for (int i = 0; i < kN; i++) {
    const Value& x = values[i];
    for (size_t j = 0; j < to.size(); j++) {
      bool int_target = !dtypes::is_float(to[j]) && !dtypes::is_bool(to[j]);
      double tr = std::trunc(x.f);
      if (dtypes::is_float(from) && int_target &&
          (std::isnan(x.f) || tr < dtypes::min_value(to[j]) || tr > dtypes::max_value(to[j])))
        continue;  // undefined in C
      Value got = host[1 + j].get(i), want = convert(x, to[j]);
      ASSERT_TRUE(same(got, want, 0))
          << "to " << to[j].name() << " element " << i << ": " << x.f << " (" << x.i << ") got "
          << got.f << " (" << got.i << ") want " << want.f << "\n"
          << src;
    }
    Value bits = reinterpret(x, bits_type(from));
    ASSERT_EQ(host.back().get(i).i, bits.i) << "bitcast element " << i << "\n" << src;
  }
}

TEST(CRender, CastsAndBitcastsMatchInterpConvert) {
  for (DType t : kAllTypes) {
    check_casts(t, 1);
    check_casts(t, 4);
  }
}

Kernel elementwise_add(int lanes) {
  Kernel k(lanes == 1 ? "add_f32" : "add_f32x" + std::to_string(lanes));
  UOpPtr out = k.buf(0, dtypes::kFloat32), x = k.buf(1, dtypes::kFloat32);
  UOpPtr y = k.buf(2, dtypes::kFloat32);
  UOpPtr r = k.core_range();
  UOpPtr idx = lanes == 1 ? r : r * lanes;
  UOpPtr a = k.load(x, idx, lanes), b = k.load(y, idx, lanes);
  k.store(out, idx, a + b);
  k.end(r);
  return k;
}

TEST(CRender, ElementwiseAddIsReadableAndRunsOverItsCoreRange) {
  std::string src;
  KernelFn fn = build(elementwise_add(1).spec(), &src);
  ASSERT_NE(fn, nullptr);
  EXPECT_NE(src.find("void add_f32(void* const* bufs, const int64_t* vars, int64_t core_lo, "
                     "int64_t core_hi) {"),
            std::string::npos)
      << src;
  EXPECT_NE(src.find("  float* restrict data0 = (float*)bufs[0];"), std::string::npos) << src;
  EXPECT_NE(src.find("  const float* restrict data1 = (const float*)bufs[1];"), std::string::npos);
  EXPECT_NE(src.find("  for (int64_t ridx0 = core_lo; ridx0 < core_hi; ridx0++) {"),
            std::string::npos)
      << src;
  EXPECT_NE(src.find("    float val0 = data1[ridx0];"), std::string::npos) << src;
  EXPECT_NE(src.find("    data0[ridx0] = val0 + val1;"), std::string::npos) << src;
  std::vector<float> a(37), b(37), c(37, -1.0f);
  for (int i = 0; i < 37; i++) a[i] = static_cast<float>(i), b[i] = 0.5f * static_cast<float>(i);
  void* bufs[] = {c.data(), a.data(), b.data()};
  fn(bufs, nullptr, 0, 10);
  fn(bufs, nullptr, 10, 30);
  for (int i = 0; i < 37; i++) EXPECT_EQ(c[i], i < 30 ? 1.5f * static_cast<float>(i) : -1.0f) << i;
}

TEST(CRender, VectorizedAddUsesUnalignedExtVectorAccess) {
  std::string src;
  KernelFn fn = build(elementwise_add(16).spec(), &src);
  ASSERT_NE(fn, nullptr);
  EXPECT_NE(src.find("typedef float float16_v __attribute__((ext_vector_type(16)));"),
            std::string::npos)
      << src;
  EXPECT_NE(src.find("typedef float float16_v_u __attribute__((ext_vector_type(16), aligned(4)));"),
            std::string::npos)
      << src;
  EXPECT_NE(src.find("    int64_t alu0 = ridx0 * 16;"), std::string::npos) << src;
  EXPECT_NE(src.find("    float16_v val0 = *(float16_v_u*)(data1 + alu0);"), std::string::npos)
      << src;
  std::vector<float> a(64 + 1), b(64 + 1), c(64 + 1);
  for (int i = 0; i < 65; i++) a[i] = static_cast<float>(i), b[i] = static_cast<float>(2 * i);
  void* bufs[] = {c.data() + 1, a.data() + 1, b.data() + 1};  // misaligned on purpose
  fn(bufs, nullptr, 0, 4);
  for (int i = 1; i < 65; i++) EXPECT_EQ(c[i], 3.0f * static_cast<float>(i)) << i;
}

TEST(CRender, RowSumReductionWithAccumulatorAndVariableLength) {
  Kernel k("row_sum");
  UOpPtr out = k.buf(0, dtypes::kFloat32), in = k.buf(1, dtypes::kFloat32);
  UOpPtr n = k.var("n");
  UOpPtr r0 = k.core_range();
  UOpPtr acc = k.add(UOp::make(Op::DEFINE_ACC, dtypes::kFloat32,
                               {UOp::cnst(dtypes::kFloat32, 0), r0}, int64_t{0}));
  UOpPtr r1 = k.range(UOp::index_const(0), n, 1, r0);
  UOpPtr v = k.load(in, r0 * n + r1);
  UOpPtr cur = UOp::make(Op::ACC_LOAD, dtypes::kFloat32, {acc, r1});
  UOpPtr st = k.add(UOp::make(Op::ACC_STORE, dtypes::kVoid, {acc, cur + v}));
  k.end(r1);
  k.store(out, r0, UOp::make(Op::ACC_LOAD, dtypes::kFloat32, {acc, st}));
  k.end(r0);
  std::string src;
  KernelFn fn = build(k.spec(), &src);
  ASSERT_NE(fn, nullptr);
  EXPECT_NE(src.find("  const int64_t n = vars[0];"), std::string::npos) << src;
  EXPECT_NE(src.find("    float acc0 = 0.0f;"), std::string::npos) << src;
  EXPECT_NE(src.find("    for (int64_t ridx1 = 0; ridx1 < n; ridx1++) {"), std::string::npos)
      << src;
  EXPECT_NE(src.find("      acc0 = acc0 + val0;"), std::string::npos) << src;
  EXPECT_NE(src.find("    data0[ridx0] = acc0;"), std::string::npos) << src;
  std::vector<float> data(3 * 100), sums(3, -1);
  for (int i = 0; i < 300; i++) data[i] = static_cast<float>(i % 100);
  void* bufs[] = {sums.data(), data.data()};
  int64_t vars[] = {100};
  fn(bufs, vars, 0, 3);
  for (float s : sums) EXPECT_EQ(s, 4950.0f);
  vars[0] = 0;
  fn(bufs, vars, 0, 3);
  for (float s : sums) EXPECT_EQ(s, 0.0f);
}

TEST(CRender, MaskedLoadNeverTouchesMemoryWhenInvalid) {
  for (int lanes : {1, 4}) {
    Kernel k("masked_" + std::to_string(lanes));
    UOpPtr out = k.buf(0, dtypes::kFloat32), in = k.buf(1, dtypes::kFloat32);
    UOpPtr r = k.core_range();
    UOpPtr valid = lt(UOp::index_const(0), r);  // group 0 is masked
    UOpPtr far = where(valid, UOp::index_const(0), UOp::index_const(int64_t{1} << 40));
    UOpPtr idx = (r - 1) * lanes + far;
    UOpPtr alt = lanes == 1 ? UOp::cnst(dtypes::kFloat32, -1) : UOpPtr();
    k.store(out, r * lanes, k.load(in, idx, lanes, valid, alt));
    k.end(r);
    std::string src;
    KernelFn fn = build(k.spec(), &src);
    ASSERT_NE(fn, nullptr);
    EXPECT_NE(src.find(lanes == 1 ? " ? data1[" : " ? *(float4_v_u*)(data1 + "), std::string::npos)
        << src;
    std::vector<float> x = {10, 20, 30, 40}, y(8, 7);
    void* bufs[] = {y.data(), x.data()};
    fn(bufs, nullptr, 0, lanes == 1 ? 5 : 2);
    std::vector<float> want = lanes == 1 ? std::vector<float>{-1, 10, 20, 30, 40, 7, 7, 7}
                                         : std::vector<float>{0, 0, 0, 0, 10, 20, 30, 40};
    EXPECT_EQ(y, want) << src;
  }
}

TEST(CRender, GepAndVectorizeShuffleLanes) {
  Kernel k("shuffle");
  UOpPtr sum = k.buf(0, dtypes::kFloat32), rev = k.buf(1, dtypes::kFloat32);
  UOpPtr in = k.buf(2, dtypes::kFloat32);
  UOpPtr r = k.core_range();
  UOpPtr v = k.load(in, r * 4, 4);
  auto gep = [&](int l) { return UOp::make(Op::GEP, dtypes::kFloat32, {v}, int64_t{l}); };
  k.store(sum, r, gep(3) + gep(0));
  k.store(rev, r * 4,
          UOp::make(Op::VECTORIZE, dtypes::kFloat32.vec(4), {gep(3), gep(2), gep(1), gep(0)}));
  k.end(r);
  std::string src;
  KernelFn fn = build(k.spec(), &src);
  ASSERT_NE(fn, nullptr);
  EXPECT_NE(src.find("(float4_v){val0[3], val0[2], val0[1], val0[0]}"), std::string::npos) << src;
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8}, s(2), rv(8);
  void* bufs[] = {s.data(), rv.data(), x.data()};
  fn(bufs, nullptr, 0, 2);
  EXPECT_EQ(s, (std::vector<float>{5, 13}));
  EXPECT_EQ(rv, (std::vector<float>{4, 3, 2, 1, 8, 7, 6, 5}));
}

TEST(CRender, ConstantsKeepTheirExactValues) {
  const std::pair<DType, double> kFloats[] = {{dtypes::kFloat32, INFINITY},
                                              {dtypes::kFloat32, -INFINITY},
                                              {dtypes::kFloat32, NAN},
                                              {dtypes::kFloat32, -0.0},
                                              {dtypes::kFloat32, 0.1},
                                              {dtypes::kFloat32, 1e-45},
                                              {dtypes::kFloat32, 3.4028234663852886e38},
                                              {dtypes::kFloat64, 0.1},
                                              {dtypes::kFloat64, 5e-324},
                                              {dtypes::kFloat64, -INFINITY},
                                              {dtypes::kFloat64, NAN},
                                              {dtypes::kFloat16, 0.1},
                                              {dtypes::kFloat16, 65504},
                                              {dtypes::kFloat16, -INFINITY},
                                              {dtypes::kFloat16, 6e-8},
                                              {dtypes::kBFloat16, 0.1},
                                              {dtypes::kBFloat16, NAN},
                                              {dtypes::kBFloat16, 3e38}};
  const std::pair<DType, int64_t> kInts[] = {{dtypes::kInt64, std::numeric_limits<int64_t>::min()},
                                             {dtypes::kInt64, std::numeric_limits<int64_t>::max()},
                                             {dtypes::kUint64, -1},
                                             {dtypes::kInt32, std::numeric_limits<int32_t>::min()},
                                             {dtypes::kUint32, 4294967295},
                                             {dtypes::kInt8, -128},
                                             {dtypes::kBool, 1}};
  Kernel k("constants");
  std::vector<HostBuf> host;
  std::vector<Value> want;
  int slot = 0;
  auto add = [&](const UOpPtr& c, const Value& w) {
    host.emplace_back(c->dtype().base(), c->dtype().count);
    UOpPtr b = k.buf(slot++, c->dtype().base());
    k.store(b, UOp::index_const(0), c);
    want.push_back(w);
  };
  for (auto [t, v] : kFloats) add(UOp::cnst(t, v), make_value(t, v));
  for (auto [t, v] : kInts) add(UOp::cnst_int(t, v), make_int_value(t, v));
  add(UOp::cnst(dtypes::kFloat32.vec(4), -INFINITY), make_value(dtypes::kFloat32, -INFINITY));
  std::string src;
  KernelFn fn = build(k.spec(), &src);
  ASSERT_NE(fn, nullptr);
  for (const char* s : {"__builtin_inff()", "-__builtin_inff()", "__builtin_nanf(\"\")", "0.1f",
                        "0.1f16", "(__bf16)0.1f", "(float4_v)(-__builtin_inff())"})
    EXPECT_NE(src.find(s), std::string::npos) << s << "\n" << src;
  std::vector<void*> ptrs;
  for (HostBuf& h : host) ptrs.push_back(h.bytes.data());
  fn(ptrs.data(), nullptr, 0, 1);
  for (size_t i = 0; i < host.size(); i++) {
    EXPECT_TRUE(same(host[i].get(0), want[i], 0)) << i << "\n" << src;
    if (dtypes::is_float(want[i].dtype) && want[i].f == 0) {
      EXPECT_EQ(std::signbit(host[i].get(0).f), std::signbit(want[i].f)) << i;
    }
  }
}

TEST(ClangCompiler, CompileErrorCarriesDiagnosticsAndNumberedSource) {
  std::string src = CRenderer().render(elementwise_add(1).spec());
  size_t at = src.find("data1[ridx0]");
  ASSERT_NE(at, std::string::npos);
  src.replace(at, 12, "data1[[ridx0]");
  Result<std::string> obj = ClangCompiler().compile(src, "add_f32");
  ASSERT_FALSE(obj.ok());
  const std::string& msg = obj.status().message();
  EXPECT_EQ(obj.status().code(), StatusCode::kInternal);
  EXPECT_NE(msg.find("error:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("-ffp-contract=fast"), std::string::npos) << msg;
  EXPECT_NE(msg.find(options().cc), std::string::npos) << msg;
  EXPECT_NE(msg.find(numbered_source(src)), std::string::npos) << msg;
}

TEST(ClangCompiler, MissingCompilerNamesThePath) {
  set_option_for_test("CPU_CC", "/nonexistent/cc");
  ClangCompiler cc;
  set_option_for_test("CPU_CC", "");
  Result<std::string> obj = cc.compile("int x;\n", "k");
  ASSERT_FALSE(obj.ok());
  EXPECT_EQ(obj.status().code(), StatusCode::kNotFound);
  EXPECT_NE(obj.status().message().find("'/nonexistent/cc'"), std::string::npos)
      << obj.status().message();
}

TEST(ClangCompiler, HungCompilerIsKilledAtTheTimeout) {
  std::string dir = std::filesystem::temp_directory_path() / "bg_c_render_test_hang";
  std::filesystem::create_directories(dir);
  std::string script = dir + "/hang.sh";
  std::ofstream(script) << "#!/bin/sh\nexec sleep 30\n";
  chmod(script.c_str(), 0755);
  double start = now_ms();
  Result<std::string> obj = ClangCompiler(script, 300).compile("int x;\n", "k");
  EXPECT_LT(now_ms() - start, 5000);
  ASSERT_FALSE(obj.ok());
  EXPECT_EQ(obj.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(obj.status().message().find("killed"), std::string::npos) << obj.status().message();
  std::filesystem::remove_all(dir);
}

TEST(ClangCompiler, CacheKeyNamesVersionFlagsAndCpu) {
  std::string key = ClangCompiler().cache_key();
  EXPECT_EQ(key.rfind("clang:", 0), 0u) << key;
  EXPECT_NE(key.find("clang version"), std::string::npos) << key;
  EXPECT_NE(key.find("-march=native"), std::string::npos) << key;
  EXPECT_NE(key.find("cpu:"), std::string::npos) << key;
  EXPECT_NE(ClangCompiler("/nonexistent/cc").cache_key(), key);
}

}  // namespace
}  // namespace baregrad::compiler
