// The kernels every GPU compile test builds (NVIDIA in nvptx_test.cc, AMD in amdgpu_test.cc): each
// with its buffers' dtypes and contents, its vars, and the tolerance against the float64
// reference, plus the byte codecs the tests move buffers with.
#pragma once

#include <bit>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "base/check.h"
#include "compiler/ast.h"
#include "tests/kernels/test_asts.h"

namespace baregrad::compiler::gpu_cases {

constexpr DType kF32 = dtypes::kFloat32;
constexpr DType kI32 = dtypes::kInt32;
constexpr DType kBF16 = dtypes::kBFloat16;

inline std::vector<uint8_t> encode(DType t, const std::vector<double>& v) {
  std::vector<uint8_t> out(v.size() * t.itemsize());
  for (size_t i = 0; i < v.size(); i++) {
    if (t == kF32) {
      float f = static_cast<float>(v[i]);
      std::memcpy(&out[i * 4], &f, 4);
    } else if (t == kI32) {
      int32_t x = static_cast<int32_t>(v[i]);
      std::memcpy(&out[i * 4], &x, 4);
    } else if (t == kBF16) {  // round to nearest even (the values here are finite)
      uint32_t f = std::bit_cast<uint32_t>(static_cast<float>(v[i]));
      auto h = static_cast<uint16_t>((f + 0x7fff + ((f >> 16) & 1)) >> 16);
      std::memcpy(&out[i * 2], &h, 2);
    } else {
      CHECK(t == dtypes::kFloat64) << t.name();
      std::memcpy(&out[i * 8], &v[i], 8);
    }
  }
  return out;
}

inline std::vector<double> decode(DType t, const std::vector<uint8_t>& b) {
  std::vector<double> out(b.size() / t.itemsize());
  for (size_t i = 0; i < out.size(); i++) {
    if (t == kF32) {
      float f;
      std::memcpy(&f, &b[i * 4], 4);
      out[i] = f;
    } else if (t == kI32) {
      int32_t x;
      std::memcpy(&x, &b[i * 4], 4);
      out[i] = x;
    } else if (t == kBF16) {
      uint16_t h;
      std::memcpy(&h, &b[i * 2], 2);
      out[i] = std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
    } else {
      std::memcpy(&out[i], &b[i * 8], 8);
    }
  }
  return out;
}

struct Case {
  std::string what;
  UOpPtr ast;
  std::vector<DType> types;               // by slot
  std::vector<std::vector<double>> data;  // by slot (inputs, and outputs' initial values)
  double rtol = 0;
  std::vector<std::pair<UOpPtr, int64_t>> vars;  // DEFINE_VAR nodes and their values
};

inline Case make(std::string what,
                 UOpPtr ast,
                 std::vector<DType> types,
                 std::vector<std::vector<double>> data,
                 double rtol,
                 std::vector<std::pair<UOpPtr, int64_t>> vars = {}) {
  return {std::move(what), std::move(ast), std::move(types),
          std::move(data), rtol,           std::move(vars)};
}

inline std::vector<double> random(size_t n, DType t, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> v(n);
  for (auto& x : v)
    x = t == kI32 ? static_cast<double>(static_cast<int64_t>(rng() % 41) - 20)
                  : static_cast<double>(
                        static_cast<float>(std::uniform_real_distribution<double>(-2, 2)(rng)));
  return v;
}

// Occurrences of `what` in `text` (PTX instructions, say).
inline int count(const std::string& text, const std::string& what) {
  int c = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) c++;
  return c;
}

inline std::vector<Case> cases() {
  std::vector<Case> out;
  auto a = global(0, kF32), b = global(1, kF32), o2 = global(2, kF32), o1 = global(1, kF32);
  {  // elementwise with a broadcast operand; 1961 threads: the last block is partial
    auto la = load(a, ShapeTracker::contiguous({37, 53})),
         lb = load(b, broadcast_to({1, 53}, {37, 53}));
    out.push_back(
        make("add_broadcast", sink({store(o2, ShapeTracker::contiguous({37, 53}), la + lb)}),
             {kF32, kF32, kF32},
             {random(37 * 53, kF32, 1), random(53, kF32, 2), std::vector<double>(37 * 53)}, 1e-6));
  }
  {  // 4096 threads: whole blocks, no bounds check
    auto la = load(a, ShapeTracker::contiguous({4096}));
    out.push_back(make("scale_4096",
                       sink({store(o1, ShapeTracker::contiguous({4096}), la * UOp::cnst(kF32, 3))}),
                       {kF32, kF32}, {random(4096, kF32, 3), std::vector<double>(4096)}, 1e-6));
  }
  for (int axis : {0, 1}) {  // sum over each axis of 33 x 17: an in-thread loop per output
    std::vector<int64_t> os = {33, 17};
    os[axis] = 1;
    auto red = reduce_axis(Op::ADD, {axis}, load(a, ShapeTracker::contiguous({33, 17})));
    out.push_back(make("sum_axis" + std::to_string(axis),
                       sink({store(o1, strided(os, View::strides_for(os)), red)}), {kF32, kF32},
                       {random(33 * 17, kF32, 4), std::vector<double>(os[0] * os[1])}, 1e-5));
  }
  {  // max over everything: one thread
    auto red = reduce_axis(Op::MAX, {0, 1}, load(a, ShapeTracker::contiguous({48, 64})));
    out.push_back(make("max_all", sink({store(o1, strided({1, 1}, {0, 0}), red)}), {kF32, kF32},
                       {random(48 * 64, kF32, 5), std::vector<double>(1)}, 0));
  }
  {  // matmul 13 x 7 x 11
    auto la = load(a, strided({13, 7, 11}, {11, 0, 1})),
         lb = load(b, strided({13, 7, 11}, {0, 1, 7}));
    out.push_back(make(
        "matmul",
        sink({store(o2, strided({13, 7, 1}, {7, 1, 0}), reduce_axis(Op::ADD, {2}, la * lb))}),
        {kF32, kF32, kF32},
        {random(13 * 11, kF32, 6), random(11 * 7, kF32, 7), std::vector<double>(13 * 7)}, 1e-5));
  }
  {  // compare and select
    auto la = load(a, ShapeTracker::contiguous({1000})),
         lb = load(b, ShapeTracker::contiguous({1000}));
    auto v = where(lt(la, lb), la * UOp::cnst(kF32, 2), lb - la);
    v = where(ne(la, lb), v, UOp::cnst(kF32, 7));
    out.push_back(make(
        "where_compare", sink({store(o2, ShapeTracker::contiguous({1000}), v)}), {kF32, kF32, kF32},
        {random(1000, kF32, 8), random(1000, kF32, 9), std::vector<double>(1000)}, 1e-6));
  }
  {  // two vars: out = a * s + t
    auto s = UOp::var("s", -10, 10), t = UOp::var("t", 0, 100);
    auto la = load(a, ShapeTracker::contiguous({300}));
    auto v = la * cast(s, kF32) + cast(t, kF32);
    out.push_back(make("vars", sink({store(o1, ShapeTracker::contiguous({300}), v)}), {kF32, kF32},
                       {random(300, kF32, 10), std::vector<double>(300)}, 1e-6,
                       {{s, -3}, {t, 42}}));
  }
  {  // int32: division, compare-select, max
    auto ia = global(0, kI32), ib = global(1, kI32), io = global(2, kI32);
    auto la = load(ia, ShapeTracker::contiguous({513})),
         lb = load(ib, ShapeTracker::contiguous({513}));
    auto v = maximum((la * lb + UOp::cnst(kI32, 7)) / UOp::cnst(kI32, 3),
                     where(lt(la, lb), la * UOp::cnst(kI32, 2), -lb));
    out.push_back(
        make("int_math", sink({store(io, ShapeTracker::contiguous({513}), v)}), {kI32, kI32, kI32},
             {random(513, kI32, 11), random(513, kI32, 12), std::vector<double>(513)}, 0));
  }
  {  // transcendentals in software (no libdevice)
    auto la = load(a, ShapeTracker::contiguous({700})),
         lb = load(b, ShapeTracker::contiguous({700}));
    auto v = UOp::alu(Op::EXP2, {la}) + UOp::alu(Op::SIN, {lb * UOp::cnst(kF32, 5)});
    out.push_back(
        make("exp2_sin", sink({store(o2, ShapeTracker::contiguous({700}), v)}), {kF32, kF32, kF32},
             {random(700, kF32, 13), random(700, kF32, 14), std::vector<double>(700)}, 2e-6));
  }
  {  // bf16 inputs, fp32 products and sum: the mixed-precision matmul (bf16 arithmetic is
     // native from sm_90; LLVM widens it to fp32 on sm_80)
    auto ba = global(0, kBF16), bb = global(1, kBF16);
    auto la = cast(load(ba, strided({24, 40, 72}, {72, 0, 1})), kF32),
         lb = cast(load(bb, strided({24, 40, 72}, {0, 1, 40})), kF32);
    auto rounded = [](std::vector<double> v) { return decode(kBF16, encode(kBF16, v)); };
    out.push_back(make(
        "matmul_bf16",
        sink({store(o2, strided({24, 40, 1}, {40, 1, 0}), reduce_axis(Op::ADD, {2}, la * lb))}),
        {kBF16, kBF16, kF32},
        {rounded(random(24 * 72, kF32, 15)), rounded(random(72 * 40, kF32, 16)),
         std::vector<double>(24 * 40)},
        1e-5));
  }
  return out;
}

}  // namespace baregrad::compiler::gpu_cases
