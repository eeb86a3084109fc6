// Strided views: how a kernel's logical shape maps onto a buffer (tinygrad's ShapeTracker).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compiler/sym.h"

namespace baregrad::compiler {

struct View;

// A View whose fields are Syms (compiler/sym.h): one view for every value of its variables.
struct SymView {
  std::vector<Sym> shape;
  std::vector<Sym> strides;
  Sym offset;
  std::optional<std::vector<std::pair<Sym, Sym>>> mask;

  bool operator==(const SymView&) const = default;
  // Row-major strides of `shape` (size-1 dims: stride 0).
  static SymView contiguous(std::vector<Sym> shape);
  static SymView of(const View& v);
  // Every field evaluated at `b` (no shadow attached).
  View eval(const Bindings& b) const;
  // The kernel AST form, carrying this view as its shadow: sizes are their upper bounds, the
  // other fields their values with each variable at its max (code generation reads the shadow).
  View instantiate() const;
  // One past the largest buffer index any value of the variables can read (an upper bound;
  // 0 when nothing is read).
  int64_t extent_bound() const;
  bool is_symbolic() const;
  std::string str() const;
};

// One strided view: element [i0, i1, ...] lives at offset + sum(i_k * strides[k]) when every
// index is inside `mask` (half-open [lo, hi) per dim); outside it reads as the pad value.
struct View {
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  int64_t offset = 0;
  std::optional<std::vector<std::pair<int64_t, int64_t>>> mask;
  // Kernel ASTs of symbolic shapes only: the symbolic form these ints instantiate (each
  // variable at its max); code generation takes sizes, strides, offset and mask from it.
  std::shared_ptr<const SymView> sym = nullptr;

  bool operator==(const View& o) const;
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
    return of(View::contiguous(std::move(shape)));
  }
  // One view, moved in (ShapeTracker{{v}} copies it out of the initializer list).
  static ShapeTracker of(View v) {
    ShapeTracker st;
    st.views.push_back(std::move(v));
    return st;
  }
  const std::vector<int64_t>& shape() const { return views.back().shape; }
  std::string str() const;
};

uint64_t hash_value(const View& v);
uint64_t hash_value(const ShapeTracker& st);

}  // namespace baregrad::compiler
