// Kernel ASTs the device and kernel tests share (slot 0 is the one written, as GraphLaunch
// expects, unless a function says otherwise).
#pragma once

#include <cstdint>

#include "compiler/ast.h"

namespace baregrad::testing {

// o = a + b over n floats.
inline compiler::UOpPtr add_ast(int64_t n) {
  using namespace compiler;
  auto o = global(0, dtypes::kFloat32), a = global(1, dtypes::kFloat32),
       b = global(2, dtypes::kFloat32);
  auto st = ShapeTracker::contiguous({n});
  return sink({store(o, st, load(a, st) + load(b, st))});
}

// o = a * a over n floats.
inline compiler::UOpPtr square_ast(int64_t n) {
  using namespace compiler;
  auto o = global(0, dtypes::kFloat32), a = global(1, dtypes::kFloat32);
  auto st = ShapeTracker::contiguous({n});
  return sink({store(o, st, load(a, st) * load(a, st))});
}

// c (m, n) = a (m, k) @ b (k, n), of dtype t, in slots 0, 1 and 2 (c is written).
inline compiler::UOpPtr matmul_ast(int64_t m, int64_t n, int64_t k, compiler::DType t) {
  using namespace compiler;
  auto a = global(0, t), b = global(1, t), c = global(2, t);
  auto la = load(a, strided({m, n, k}, {k, 0, 1}));
  auto lb = load(b, strided({m, n, k}, {0, 1, n}));
  auto prod = reduce_axis(Op::ADD, {2}, la * lb);
  return sink({store(c, strided({m, n, 1}, {n, 1, 0}), prod)});
}

// A 2-D convolution with padding 1 (stride 1): x (N, C, H, W) and w (O, C, K, K) into
// out (N, O, H, W) in slots 0, 1 and 2; the input is read through a padded view and a window
// view.
inline compiler::UOpPtr conv_ast(
    compiler::DType t, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t K) {
  using namespace compiler;
  const int64_t Hp = H + 2, Wp = W + 2;
  View pad;
  pad.shape = {N, C, Hp, Wp};
  pad.strides = {C * H * W, H * W, W, 1};
  pad.offset = -(W + 1);
  pad.mask = std::vector<std::pair<int64_t, int64_t>>{{0, N}, {0, C}, {1, H + 1}, {1, W + 1}};
  View win;
  win.shape = {N, O, H, W, C, K, K};
  win.strides = {C * Hp * Wp, 0, Wp, 1, Hp * Wp, Wp, 1};
  auto lx = load(global(0, t), ShapeTracker{{pad, win}});
  auto lw = load(global(1, t), strided({N, O, H, W, C, K, K}, {0, C * K * K, 0, 0, K * K, K, 1}));
  return sink(
      {store(global(2, t), strided({N, O, H, W, 1, 1, 1}, {O * H * W, H * W, W, 1, 0, 0, 0}),
             reduce_axis(Op::ADD, {4, 5, 6}, lx * lw))});
}

}  // namespace baregrad::testing
