// A small builder for kernel ASTs: a SINK of STOREs of expressions over LOADs and
// REDUCE_AXIS, every memory access described by a ShapeTracker over the kernel's full shape.
//
//   auto a = global(0, dtypes::kFloat32), out = global(1, dtypes::kFloat32);
//   auto x = load(a, ShapeTracker::contiguous({4, 8}));
//   auto s = reduce_axis(Op::ADD, {1}, x);
//   auto ast = sink({store(out, ShapeTracker::contiguous({4, 1}), s)});
#pragma once

#include <vector>

#include "compiler/uop.h"

namespace baregrad::compiler {

// Buffer parameter `slot` holding elements of `dtype`.
UOpPtr global(int slot, DType dtype);
// Loads `buf` through `st`.
UOpPtr load(const UOpPtr& buf, ShapeTracker st);
// The virtual buffer 0, 1, 2, ... of int `dtype` (an arange): load(iota(dt), st) is the index
// `st` computes, converted to `dt` (0 where st is masked). Lowering turns it into index math.
UOpPtr iota(DType dtype);
// Stores `value` into `buf` through `st`.
UOpPtr store(const UOpPtr& buf, ShapeTracker st, const UOpPtr& value);
// Reduces `value` over kernel `axes` with ADD, MUL or MAX; the result has size 1 there.
UOpPtr reduce_axis(Op op, std::vector<int> axes, const UOpPtr& value);
UOpPtr sink(std::vector<UOpPtr> stores);

// `s` (a Sym over Variables) as index math: DEFINE_VARs named after its Variables, with their
// bounds; a launch passes their values.
UOpPtr sym_index(const Sym& s);

// A strided view of `shape` (stride 0 broadcasts); optional mask gives padding.
ShapeTracker strided(std::vector<int64_t> shape, std::vector<int64_t> strides, int64_t offset = 0);
// The view a contiguous buffer of `shape` has when broadcast to `full` (dims of size 1 in
// `shape` get stride 0).
ShapeTracker broadcast_to(std::vector<int64_t> shape, std::vector<int64_t> full);

}  // namespace baregrad::compiler
