// Small kernel ASTs the device tests share (slot 0 is the one written, as GraphLaunch expects).
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

}  // namespace baregrad::testing
