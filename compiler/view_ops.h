// Movement ops of the lazy tensor layer: pure functions on ShapeTracker that re-index a buffer
// without copying it. Each returns a tracker of the new logical shape whose views are canonical
// (size-1 dims have stride 0, a full mask is dropped, an all-padding view has strides 0 and
// empty masks, a zero-size tracker is one contiguous view). Invalid user arguments throw
// baregrad::Error with the op name ("reshape", "permute", ...); a tracker without views is a bug.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "compiler/view.h"

namespace baregrad::compiler {

// The same elements in row-major order under `shape` (same element count); replaces the last
// view when one view can express it, else pushes a contiguous view.
ShapeTracker reshape(const ShapeTracker& st, const std::vector<int64_t>& shape);
// Axis d of the result is axis order[d] of `st`; `order` must be a permutation of the axes.
ShapeTracker permute(const ShapeTracker& st, const std::vector<int>& order);
// Broadcasts size-1 axes to `shape` (stride 0); every other axis keeps its size.
ShapeTracker expand(const ShapeTracker& st, const std::vector<int64_t>& shape);
// Adds (before, after) >= 0 positions per axis that read as the pad value (masked out).
ShapeTracker pad(const ShapeTracker& st,
                 const std::vector<std::pair<int64_t, int64_t>>& before_after);
// Keeps positions [lo, hi) of each axis, 0 <= lo <= hi <= size.
ShapeTracker shrink(const ShapeTracker& st, const std::vector<std::pair<int64_t, int64_t>>& ranges);
// Reverses the axes d where axes[d] is true.
ShapeTracker flip(const ShapeTracker& st, const std::vector<bool>& axes);
// The same mapping with adjacent views merged wherever one view expresses both; never adds views.
ShapeTracker simplify(const ShapeTracker& st);
// True for one row-major view at offset 0 without mask.
bool is_contiguous(const ShapeTracker& st);
// One past the largest buffer index an unmasked position of the first view can read (0 when
// none can): exact for one view, an upper bound for a stack.
int64_t real_size(const ShapeTracker& st);

}  // namespace baregrad::compiler
