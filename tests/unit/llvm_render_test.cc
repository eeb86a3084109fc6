// LlvmIrRenderer + LlvmCompiler + ObjectLoader on hand-linearized programs, checked against
// float64 / int64 references (exec_alu_float / exec_alu_int).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "compiler/render/llvm_ir.h"
#include "compiler/target/llvm_target.h"
#include "drivers/cpu/iface_host.h"

namespace baregrad::compiler {
namespace {

using cpu::KernelFn;
using cpu::LoadedKernel;
using cpu::ObjectLoader;
constexpr DType kF32 = dtypes::kFloat32;
constexpr DType kI64 = dtypes::kIndex;

// Collects uops in the order they are made (the linear order), skipping repeats.
struct Prog {
  ProgramSpec spec;
  UOpPtr operator()(UOpPtr u) {
    for (const UOpPtr& p : spec.uops)
      if (p == u) return u;
    spec.uops.push_back(u);
    return u;
  }
  UOpPtr global(int slot, DType t) {
    spec.bufs.push_back({slot, t, 0, false});
    return (*this)(UOp::make(Op::DEFINE_GLOBAL, t.as_ptr(), {}, int64_t{slot}));
  }
  UOpPtr special(const char* name) {
    return (*this)(UOp::make(Op::SPECIAL, kI64, {}, VarArg{name, 0, 1 << 20}));
  }
  UOpPtr range(UOpPtr lo, UOpPtr hi) {
    return (*this)(UOp::make(Op::RANGE, kI64, {lo, hi}, int64_t(spec.uops.size())));
  }
  UOpPtr end(UOpPtr r) { return (*this)(UOp::make(Op::ENDRANGE, dtypes::kVoid, {r})); }
  UOpPtr index(UOpPtr buf, UOpPtr i, UOpPtr valid = {}) {
    std::vector<UOpPtr> src{buf, i};
    if (valid) src.push_back(valid);
    return (*this)(UOp::make(Op::INDEX, buf->dtype(), src));
  }
  UOpPtr load(UOpPtr idx, DType t) { return (*this)(UOp::make(Op::LOAD, t, {idx})); }
  UOpPtr store(UOpPtr idx, UOpPtr v) {
    return (*this)(UOp::make(Op::STORE, dtypes::kVoid, {idx, v}));
  }
};

LlvmCompiler& compiler() {
  static LlvmCompiler* cc = new LlvmCompiler();
  return *cc;
}

KernelFn build(const ProgramSpec& spec) {
  static ObjectLoader* loader = new ObjectLoader();
  std::string src = LlvmIrRenderer().render(spec);
  Result<std::string> obj = compiler().compile(src, spec.name);
  EXPECT_TRUE(obj.ok()) << obj.status().to_string();
  if (!obj.ok()) return nullptr;
  Result<LoadedKernel> fn = loader->load(*obj, spec.name);
  EXPECT_TRUE(fn.ok()) << fn.status().to_string();
  if (!fn.ok()) return nullptr;
  static auto* kept = new std::vector<std::shared_ptr<const void>>();  // code stays linked
  kept->push_back(fn->code);
  return fn->fn;
}

// Typed host buffers holding doubles (floats) or int64s (ints, bool) in a dtype's layout.
struct Buf {
  DType t;
  std::vector<uint8_t> bytes;
  Buf(DType type, size_t n) : t(type), bytes(n * type.scalar_size()) {}
  uint8_t* at(size_t i) { return bytes.data() + i * t.scalar_size(); }
  void* data() { return bytes.data(); }
  void set(size_t i, double v) {
    switch (t.scalar) {
      case Scalar::kFloat16:
        put(i, std::bit_cast<uint16_t>(static_cast<_Float16>(v)));
        break;
      case Scalar::kBFloat16:
        put(i, static_cast<uint16_t>(std::bit_cast<uint32_t>(float(round_to(t, v))) >> 16));
        break;
      case Scalar::kFloat32:
        put(i, static_cast<float>(v));
        break;
      case Scalar::kFloat64:
        put(i, v);
        break;
      default:
        set_int(i, static_cast<int64_t>(v));
    }
  }
  void set_int(size_t i, int64_t v) { std::memcpy(at(i), &v, t.scalar_size()); }
  double get(size_t i) {
    uint16_t h;
    switch (t.scalar) {
      case Scalar::kFloat16:
        std::memcpy(&h, at(i), 2);
        return std::bit_cast<_Float16>(h);
      case Scalar::kBFloat16:
        std::memcpy(&h, at(i), 2);
        return std::bit_cast<float>(uint32_t{h} << 16);
      case Scalar::kFloat32:
        return take<float>(i);
      case Scalar::kFloat64:
        return take<double>(i);
      case Scalar::kUint64:
        return static_cast<double>(static_cast<uint64_t>(get_int(i)));
      default:
        return static_cast<double>(get_int(i));
    }
  }
  int64_t get_int(size_t i) {
    int64_t v = 0;
    std::memcpy(&v, at(i), t.scalar_size());
    return wrap_int(t, v);  // sign- or zero-extends narrow ints
  }
  template <class T>
  void put(size_t i, T v) {
    std::memcpy(at(i), &v, sizeof(T));
  }
  template <class T>
  T take(size_t i) {
    T v;
    std::memcpy(&v, at(i), sizeof(T));
    return v;
  }
};

// c[i] = a[i] + b[i] over [core_lo, core_hi), `lanes` floats per iteration.
ProgramSpec vector_add(int lanes) {
  Prog p;
  p.spec.name = "vadd" + std::to_string(lanes);
  auto c = p.global(0, kF32), a = p.global(1, kF32), b = p.global(2, kF32);
  auto r = p.range(p.special("core_lo"), p.special("core_hi"));
  auto i = lanes == 1 ? r : p(r * lanes);
  DType t = kF32.vec(lanes);
  auto sum = p(p.load(p.index(a, i), t) + p.load(p.index(b, i), t));
  p.store(p.index(c, i), sum);
  p.end(r);
  return p.spec;
}

void check_vector_add(int lanes) {
  KernelFn fn = build(vector_add(lanes));
  ASSERT_NE(fn, nullptr);
  const int n = 1024;
  std::vector<float> a(n), b(n), c(n, -1.0f);
  for (int i = 0; i < n; i++) a[i] = 0.5f * i, b[i] = 1000.0f - i;
  void* bufs[] = {c.data(), a.data(), b.data()};
  fn(bufs, nullptr, 2, 10);  // a partial core range first
  EXPECT_EQ(c[2 * lanes - 1], -1.0f);
  EXPECT_EQ(c[2 * lanes], a[2 * lanes] + b[2 * lanes]);
  EXPECT_EQ(c[10 * lanes], -1.0f);
  fn(bufs, nullptr, 0, n / lanes);
  for (int i = 0; i < n; i++) ASSERT_EQ(c[i], double(a[i]) + double(b[i])) << i;
}

TEST(LlvmRender, ScalarLoopAddsArrays) { check_vector_add(1); }

TEST(LlvmRender, VectorLoopAddsArrays) { check_vector_add(16); }

TEST(LlvmRender, VectorLoopOptimizesToZmmVectors) {
  std::string src = LlvmIrRenderer().render(vector_add(16));
  Result<std::string> ir = compiler().optimized_ir(src);
  ASSERT_TRUE(ir.ok()) << ir.status().to_string();
  EXPECT_NE(ir->find("fadd contract <16 x float>"), std::string::npos) << *ir;
  if (compiler().features().find("+avx512f") == std::string::npos) GTEST_SKIP() << "no AVX-512";
  for (int lanes : {1, 16}) {
    Result<std::string> as = compiler().assembly(LlvmIrRenderer().render(vector_add(lanes)));
    ASSERT_TRUE(as.ok()) << as.status().to_string();
    EXPECT_NE(as->find("vaddps\t(%"), std::string::npos) << *as;
    EXPECT_NE(as->find("zmm"), std::string::npos) << "lanes " << lanes << ":\n" << *as;
  }
}

TEST(LlvmRender, AccumulatorSumsOverVarLength) {
  Prog p;
  p.spec.name = "sum";
  p.spec.vars = {VarArg{"n", 1, 4096}};
  auto out = p.global(0, kF32), a = p.global(1, kF32);
  auto n = p(UOp::var("n", 1, 4096));
  auto acc = p(UOp::make(Op::DEFINE_ACC, kF32, {UOp::cnst(kF32, 0.0)}, int64_t{0}));
  auto r = p.range(UOp::index_const(0), n);
  auto cur = p(UOp::make(Op::ACC_LOAD, kF32, {acc, r}));
  auto next = p(cur + p.load(p.index(a, r), kF32));
  p(UOp::make(Op::ACC_STORE, dtypes::kVoid, {acc, next}));
  auto end = p.end(r);
  auto total = p(UOp::make(Op::ACC_LOAD, kF32, {acc, end}));
  p.store(p.index(out, UOp::index_const(0)), total);
  KernelFn fn = build(p.spec);
  ASSERT_NE(fn, nullptr);
  std::vector<float> x(1000);
  for (int i = 0; i < 1000; i++) x[i] = std::sin(0.1 * i);
  float result = 0;
  void* bufs[] = {&result, x.data()};
  for (int64_t len : {1, 7, 1000}) {
    float expect = 0;
    for (int i = 0; i < len; i++) expect += x[i];  // sequential float order: no reassociation
    fn(bufs, &len, 0, 1);
    EXPECT_EQ(result, expect) << len;
  }
}

// A buffer of `n` floats ending at a PROT_NONE page: reading past it faults.
struct GuardedFloats {
  void* map;
  float* data;
  explicit GuardedFloats(int n) {
    long page = sysconf(_SC_PAGESIZE);
    map = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    mprotect(static_cast<char*>(map) + page, page, PROT_NONE);
    data = reinterpret_cast<float*>(static_cast<char*>(map) + page) - n;
  }
  ~GuardedFloats() { munmap(map, 2 * sysconf(_SC_PAGESIZE)); }
};

TEST(LlvmRender, MaskedLoadsDoNotTouchMemory) {
  for (int lanes : {1, 4}) {
    Prog p;
    p.spec.name = "masked" + std::to_string(lanes);
    auto out = p.global(0, kF32), a = p.global(1, kF32);
    auto r = p.range(UOp::index_const(0), UOp::index_const(16 / lanes));
    auto valid = p(lt(r, lanes == 1 ? 5 : 2));
    auto i = lanes == 1 ? r : p(r * lanes);
    auto v = p.load(p.index(a, i, valid), kF32.vec(lanes));
    auto alt = p(UOp::make(Op::LOAD, kF32, {p.index(a, i, valid), UOp::cnst(kF32, -1.0)}));
    p.store(p.index(out, i), v);
    if (lanes == 1) p.store(p.index(out, p(i + 16)), alt);
    p.end(r);
    KernelFn fn = build(p.spec);
    ASSERT_NE(fn, nullptr);
    int n = lanes == 1 ? 5 : 8;
    GuardedFloats a_buf(n);
    for (int k = 0; k < n; k++) a_buf.data[k] = 1.0f + k;
    std::vector<float> o(32, 42.0f);
    void* bufs[] = {o.data(), a_buf.data};
    fn(bufs, nullptr, 0, 1);
    for (int k = 0; k < 16; k++) EXPECT_EQ(o[k], k < n ? 1.0f + k : 0.0f) << lanes << " " << k;
    if (lanes == 1) {
      for (int k = 0; k < 16; k++) EXPECT_EQ(o[16 + k], k < n ? 1.0f + k : -1.0f) << k;
    }
  }
}

// out[i] = op(in0[i], ...) over `n` elements, `lanes` per iteration; WHERE's first input is bool.
ProgramSpec alu_spec(Op op, DType in, DType out, int arity, int lanes, int n) {
  static int id = 0;
  Prog p;
  p.spec.name = std::string("alu_") + op_name(op) + "_" + std::to_string(id++);
  auto o = p.global(0, out);
  std::vector<UOpPtr> bufs;
  for (int k = 0; k < arity; k++)
    bufs.push_back(p.global(k + 1, op == Op::WHERE && k == 0 ? dtypes::kBool : in));
  auto r = p.range(UOp::index_const(0), UOp::index_const(n / lanes));
  auto i = lanes == 1 ? r : p(r * lanes);
  std::vector<UOpPtr> src;
  for (auto& b : bufs) src.push_back(p.load(p.index(b, i), b->dtype().base().vec(lanes)));
  bool conv = op == Op::CAST || op == Op::BITCAST;
  auto v = p(conv ? UOp::make(op, out.vec(lanes), src) : UOp::alu(op, src));
  p.store(p.index(o, i), v);
  p.end(r);
  return p.spec;
}

// Runs op over `args` (one column per operand) and returns the outputs.
Buf run_alu(Op op, DType in, DType out, const std::vector<std::vector<double>>& args, int lanes) {
  int n = static_cast<int>(args[0].size());
  std::vector<Buf> bufs;
  std::vector<void*> ptrs;
  bufs.emplace_back(out, n);
  for (size_t k = 0; k < args.size(); k++) {
    bufs.emplace_back(op == Op::WHERE && k == 0 ? dtypes::kBool : in, n);
    for (int e = 0; e < n; e++) bufs.back().set(e, args[k][e]);
  }
  for (Buf& b : bufs) ptrs.push_back(b.data());
  KernelFn fn = build(alu_spec(op, in, out, static_cast<int>(args.size()), lanes, n));
  if (fn) fn(ptrs.data(), nullptr, 0, 1);
  return bufs[0];
}

TEST(LlvmRender, IntOpsMatchExecAluInt) {
  const double raw[] = {0, 1, -1, 7, -128, 127, 255, 3, -9223372036854775808.0, 100, -3, 64};
  for (DType t : {dtypes::kInt8, dtypes::kUint8, dtypes::kInt32, dtypes::kUint64, dtypes::kBool}) {
    std::vector<std::vector<double>> args(2);
    for (double a : raw) {
      for (double b : raw) {
        args[0].push_back(static_cast<double>(wrap_int(t, static_cast<int64_t>(a))));
        args[1].push_back(static_cast<double>(wrap_int(t, static_cast<int64_t>(b))));
      }
    }
    for (Op op : {Op::ADD, Op::SUB, Op::MUL, Op::IDIV, Op::MOD, Op::MAX, Op::CMPLT, Op::CMPNE,
                  Op::CMPEQ, Op::AND, Op::OR, Op::XOR, Op::SHL, Op::SHR}) {
      for (int lanes : {1, 4}) {
        DType out = is_comparison(op) ? dtypes::kBool : t;
        Buf got = run_alu(op, t, out, args, lanes);
        for (size_t e = 0; e < args[0].size(); e++) {
          int64_t x[] = {static_cast<int64_t>(args[0][e]), static_cast<int64_t>(args[1][e])};
          ASSERT_EQ(got.get_int(e), exec_alu_int(op, t, x))
              << op_name(op) << " " << t.name() << " x" << lanes << " (" << x[0] << ", " << x[1]
              << ")";
        }
      }
    }
  }
}

bool near(double got, double want, DType t, bool exact) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  if (exact || std::isinf(want)) return got == want;
  double eps = t.scalar == Scalar::kFloat16    ? 0x1p-10
               : t.scalar == Scalar::kBFloat16 ? 0x1p-7
               : t.scalar == Scalar::kFloat32  ? 0x1p-23
                                               : 0x1p-52;
  return std::abs(got - want) <= 4 * eps * std::max(std::abs(want), 1e-30);
}

TEST(LlvmRender, FloatOpsMatchExecAluFloat) {
  const double raw[] = {0, -0.0, 1.5, -2.25, 3, 0.1, 100, NAN, INFINITY, -7.5};
  for (DType t : {dtypes::kFloat16, dtypes::kBFloat16, dtypes::kFloat32, dtypes::kFloat64}) {
    std::vector<std::vector<double>> args(3);
    for (double a : raw) {
      for (double b : raw) {
        args[0].push_back(round_to(t, a));
        args[1].push_back(round_to(t, b));
        args[2].push_back(round_to(t, 0.3));
      }
    }
    for (Op op :
         {Op::ADD, Op::SUB, Op::MUL, Op::FDIV, Op::MAX, Op::CMPLT, Op::CMPNE, Op::CMPEQ, Op::NEG,
          Op::SQRT, Op::RECIP, Op::TRUNC, Op::EXP2, Op::LOG2, Op::SIN, Op::POW, Op::MULACC}) {
      int arity = op_arity(op);
      std::vector<std::vector<double>> used(args.begin(), args.begin() + arity);
      bool exact =
          op != Op::EXP2 && op != Op::LOG2 && op != Op::SIN && op != Op::POW && op != Op::MULACC;
      for (int lanes : {1, 4}) {
        Buf got = run_alu(op, t, is_comparison(op) ? dtypes::kBool : t, used, lanes);
        for (size_t e = 0; e < args[0].size(); e++) {
          double x[] = {args[0][e], args[1][e], args[2][e]};
          double want = exec_alu_float(op, t, std::span<const double>(x, arity));
          ASSERT_TRUE(near(got.get(e), want, t, exact))
              << op_name(op) << " " << t.name() << " x" << lanes << " (" << x[0] << ", " << x[1]
              << "): got " << got.get(e) << " want " << want;
        }
      }
    }
  }
}

TEST(LlvmRender, WhereSelectsPerLane) {
  for (DType t : {dtypes::kInt32, dtypes::kFloat16}) {
    std::vector<std::vector<double>> args = {{1, 0, 0, 1}, {1, 2, 3, 4}, {-1, -2, -3, -4}};
    Buf got = run_alu(Op::WHERE, t, t, args, 4);
    EXPECT_EQ(got.get(0), 1);
    EXPECT_EQ(got.get(1), -2);
    EXPECT_EQ(got.get(3), 4);
  }
}

TEST(LlvmRender, CastsConvertLikeC) {
  using namespace dtypes;
  struct Case {
    Op op;
    DType from, to;
    double in, out;
  };
  const Case cases[] = {
      {Op::CAST, kFloat32, kInt8, 3.7, 3},
      {Op::CAST, kFloat32, kInt8, -3.7, -3},
      {Op::CAST, kFloat32, kUint8, 200, 200},
      {Op::CAST, kFloat32, kUint32, 3e9, 3e9},
      {Op::CAST, kFloat32, kUint64, 0x1.8p63, 0x1.8p63},
      {Op::CAST, kFloat64, kInt64, -1e15, -1e15},
      {Op::CAST, kInt8, kUint64, -1, 0x1p64},
      {Op::CAST, kUint8, kInt32, 255, 255},
      {Op::CAST, kInt32, kFloat16, -5, -5},
      {Op::CAST, kUint64, kFloat64, -1, 0x1p64},
      {Op::CAST, kInt64, kFloat32, -(0x1p40 + 1), -0x1p40},
      {Op::CAST, kFloat64, kFloat32, 0.1, static_cast<float>(0.1)},
      {Op::CAST, kFloat16, kFloat32, 0.1, static_cast<double>(static_cast<_Float16>(0.1))},
      {Op::CAST, kBFloat16, kFloat16, 1.5, 1.5},
      {Op::CAST, kFloat16, kBFloat16, 3.0, 3.0},
      {Op::CAST, kFloat32, kBFloat16, 1.00390625, 1.0},
      {Op::CAST, kFloat32, kFloat16, 65520, INFINITY},
      {Op::CAST, kBool, kFloat32, 1, 1},
      {Op::CAST, kFloat32, kBool, 0, 0},
      {Op::CAST, kFloat32, kBool, -0.0, 0},
      {Op::CAST, kFloat32, kBool, NAN, 1},
      {Op::CAST, kInt32, kBool, 7, 1},
      {Op::CAST, kUint8, kBool, 255, 1},
      {Op::CAST, kBool, kInt8, 1, 1},
      {Op::CAST, kInt32, kInt8, 300, 44},
      {Op::CAST, kInt64, kUint16, -1, 65535},
      {Op::CAST, kUint32, kInt64, -1, 4294967295.0},
      {Op::BITCAST, kFloat32, kInt32, 1.0, 0x3F800000},
      {Op::BITCAST, kInt32, kFloat32, 0x40490FDB, static_cast<float>(3.14159274101257324)},
      {Op::BITCAST, kFloat16, kInt16, 1.0, 0x3C00},
      {Op::BITCAST, kUint64, kFloat64, 0x3FF0000000000000, 1.0},
  };
  for (const Case& c : cases) {
    for (int lanes : {1, 4}) {
      Buf got = run_alu(c.op, c.from, c.to, {std::vector<double>(4, c.in)}, lanes);
      for (int e = 0; e < 4; e++) {
        ASSERT_TRUE(near(got.get(e), c.out, c.to, true))
            << op_name(c.op) << " " << c.from.name() << " -> " << c.to.name() << " x" << lanes
            << " of " << c.in << ": got " << got.get(e);
      }
    }
  }
}

TEST(LlvmRender, NestedAndSiblingLoopsMultiplyMatrices) {
  const int n = 8;
  Prog p;
  p.spec.name = "matmul";
  auto c = p.global(0, kF32), a = p.global(1, kF32), b = p.global(2, kF32), d = p.global(3, kF32);
  auto zero = UOp::index_const(0), size = UOp::index_const(n);
  auto i = p.range(p.special("core_lo"), p.special("core_hi"));
  auto row = p(i * n);  // defined outside the k loop: it is used after that loop closes
  auto j = p.range(zero, size);
  auto acc = p(UOp::make(Op::DEFINE_ACC, kF32, {UOp::cnst(kF32, 0.0), i, j}, int64_t{0}));
  auto k = p.range(zero, size);
  auto x = p.load(p.index(a, p(row + k)), kF32);
  auto y = p.load(p.index(b, p(p(k * n) + j)), kF32);
  auto cur = p(UOp::make(Op::ACC_LOAD, kF32, {acc, k}));
  p(UOp::make(Op::ACC_STORE, dtypes::kVoid, {acc, p(UOp::alu(Op::MULACC, {x, y, cur}))}));
  auto end_k = p.end(k);
  p.store(p.index(c, p(row + j)), p(UOp::make(Op::ACC_LOAD, kF32, {acc, end_k})));
  p.end(j);
  p.end(i);
  auto s = p.range(zero, size);
  p.store(p.index(d, s), p(p(cast(s, kF32)) * UOp::cnst(kF32, 2.0)));
  p.end(s);
  KernelFn fn = build(p.spec);
  ASSERT_NE(fn, nullptr);
  std::vector<float> am(n * n), bm(n * n), cm(n * n), dv(n);
  for (int e = 0; e < n * n; e++) am[e] = 0.25f * (e % 7), bm[e] = 1.0f - 0.5f * (e % 3);
  void* bufs[] = {cm.data(), am.data(), bm.data(), dv.data()};
  fn(bufs, nullptr, 0, n);
  for (int r = 0; r < n; r++) {
    EXPECT_EQ(dv[r], 2.0f * r);
    for (int col = 0; col < n; col++) {
      double want = 0;
      for (int q = 0; q < n; q++) want += double(am[r * n + q]) * bm[q * n + col];
      EXPECT_NEAR(cm[r * n + col], want, 1e-5) << r << "," << col;
    }
  }
}

TEST(LlvmCompiler, ParseErrorsCarryTheNumberedSource) {
  Result<std::string> obj = compiler().compile("define void @k(\n  ret void\n", "k");
  ASSERT_FALSE(obj.ok());
  EXPECT_NE(obj.status().message().find("    1 | define void @k("), std::string::npos)
      << obj.status().message();
  EXPECT_NE(obj.status().message().find("    2 |   ret void"), std::string::npos);
}

TEST(LlvmCompiler, VerifierErrorsCarryTheNumberedSource) {
  const char* src =
      "define void @k(i1 %c) {\nentry:\n  br i1 %c, label %a, label %b\na:\n"
      "  %x = add i32 1, 2\n  br label %b\nb:\n  %y = add i32 %x, 1\n  ret void\n}\n";
  Result<std::string> obj = compiler().compile(src, "k");
  ASSERT_FALSE(obj.ok());
  EXPECT_NE(obj.status().message().find("does not dominate"), std::string::npos)
      << obj.status().message();
  EXPECT_NE(obj.status().message().find("    8 |   %y = add i32 %x, 1"), std::string::npos);
  EXPECT_FALSE(compiler().compile("define void @k() {\n  ret void\n}\n", "other").ok());
}

TEST(ObjectLoader, LoadsOneSymbolTwiceAndRejectsBadInput) {
  ObjectLoader loader;
  std::string src = LlvmIrRenderer().render(vector_add(1));
  Result<std::string> obj = compiler().compile(src, "vadd1");
  ASSERT_TRUE(obj.ok()) << obj.status().to_string();
  Result<LoadedKernel> f1 = loader.load(*obj, "vadd1"), f2 = loader.load(*obj, "vadd1");
  ASSERT_TRUE(f1.ok() && f2.ok()) << f1.status().to_string() << f2.status().to_string();
  EXPECT_NE(f1->fn, f2->fn);
  Result<LoadedKernel> missing = loader.load(*obj, "nosuch");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound) << missing.status().to_string();
  EXPECT_NE(missing.status().message().find("nosuch"), std::string::npos);
  Result<LoadedKernel> junk = loader.load("not an object", "vadd1");
  EXPECT_EQ(junk.status().code(), StatusCode::kInvalidArgument);
  Result<LoadedKernel> broken = loader.load(std::string("\x7f"
                                                        "ELF") +
                                                std::string(60, 'x'),
                                            "k");
  EXPECT_FALSE(broken.ok());
}

TEST(ObjectLoader, CompilesAndLoadsFromManyThreads) {
  ObjectLoader loader;
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int t = 0; t < 4; t++) {
    threads.emplace_back([&, t] {
      ProgramSpec spec = vector_add(t % 2 ? 16 : 1);
      Result<std::string> obj = compiler().compile(LlvmIrRenderer().render(spec), spec.name);
      if (!obj.ok()) return;
      Result<LoadedKernel> fn = loader.load(*obj, spec.name);
      std::vector<float> a(64, 1.0f), b(64, 2.0f), c(64, 0.0f);
      void* bufs[] = {c.data(), a.data(), b.data()};
      if (fn.ok()) fn->fn(bufs, nullptr, 0, t % 2 ? 4 : 64);
      if (fn.ok() && c[63] == 3.0f) good++;
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(good.load(), 4);
}

// Unloading: code stays callable while a copy of LoadedKernel::code lives, even after its loader
// is gone, and thousands of load/unload cycles keep working (each unlinks its object).
TEST(ObjectLoader, CodeLivesWhileHeldAndUnloadsWithItsLastCopy) {
  std::string src = LlvmIrRenderer().render(vector_add(1));
  Result<std::string> obj = compiler().compile(src, "vadd1");
  ASSERT_TRUE(obj.ok()) << obj.status().to_string();
  std::vector<float> a(64, 1.0f), b(64, 2.0f), c(64, 0.0f);
  void* bufs[] = {c.data(), a.data(), b.data()};
  LoadedKernel held;
  {
    ObjectLoader loader;
    for (int i = 0; i < 2000; i++) {
      Result<LoadedKernel> k = loader.load(*obj, "vadd1");
      ASSERT_TRUE(k.ok()) << k.status().to_string();
      held = std::move(*k);  // the previous one is unlinked here
    }
  }
  ASSERT_NE(held.fn, nullptr);
  held.fn(bufs, nullptr, 0, 64);
  EXPECT_EQ(c[0], 3.0f);
  EXPECT_EQ(c[63], 3.0f);
  held.code.reset();  // unlinks the last object, then the JIT
}

TEST(LlvmCompiler, CacheKeyNamesTheHost) {
  std::string key = compiler().cache_key();
  EXPECT_EQ(key.rfind("llvm19-" + compiler().triple() + "-" + compiler().cpu() + "-", 0), 0u)
      << key;
}

}  // namespace
}  // namespace baregrad::compiler
