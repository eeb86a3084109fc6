// Strided views: how a kernel's logical shape maps onto a buffer (tinygrad's ShapeTracker).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace baregrad::compiler {

// One strided view: element [i0, i1, ...] lives at offset + sum(i_k * strides[k]) when every
// index is inside `mask` (half-open [lo, hi) per dim); outside it reads as the pad value.
struct View {
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  int64_t offset = 0;
  std::optional<std::vector<std::pair<int64_t, int64_t>>> mask;

  bool operator==(const View&) const = default;
  // A row-major contiguous view of `shape`.
  static View contiguous(std::vector<int64_t> shape);
  // Row-major strides of `shape`; size-1 dims get stride 0.
  static std::vector<int64_t> strides_for(const std::vector<int64_t>& shape);
  // The element count; throws Error("[view] ...") when it does not fit int64.
  int64_t numel() const;
  // True when this view is exactly the row-major layout of its shape.
  bool is_contiguous() const;
  std::string str() const;
};

// A stack of views; the last one is applied to the kernel's indices first and the result is
// re-indexed through the earlier ones. One view covers everything the CPU path builds now.
struct ShapeTracker {
  std::vector<View> views;

  bool operator==(const ShapeTracker&) const = default;
  static ShapeTracker contiguous(std::vector<int64_t> shape) {
    return ShapeTracker{{View::contiguous(std::move(shape))}};
  }
  const std::vector<int64_t>& shape() const { return views.back().shape; }
  std::string str() const;
};

uint64_t hash_value(const View& v);
uint64_t hash_value(const ShapeTracker& st);

}  // namespace baregrad::compiler
