// A kernel AST at the shape level, and the explicit action space of optimizations on it.
// Every axis of the full shape has a kind; the axes are always ordered
//   [GLOBAL / OUTER_REDUCE..., LOCAL..., REDUCE..., GROUP_REDUCE / STAGED, UNROLL..., UPCAST...]
// GLOBAL, OUTER_REDUCE, LOCAL and REDUCE axes become loops (the first axis, always GLOBAL, is
// split across cores on the CPU, grid dims on GPUs); UNROLL and UPCAST axes are expanded into
// vector lanes / copies. An OUTER_REDUCE loop runs among the output loops: each of its
// iterations reduces a slice and accumulates it into the output buffer (K-blocking). A
// GROUP_REDUCE axis (GPU targets with shared memory) is the threads of a work-group: each
// reduces its slice, and the partial results are combined through shared memory. A STAGED axis
// (GPU targets) is the inner loop of a reduction whose operand tiles the work-group first
// copies into shared memory (matmul-like kernels: each element is loaded from global memory
// once per work-group instead of once per thread that uses it).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "compiler/target/target_info.h"
#include "compiler/uop.h"

namespace baregrad::compiler {

enum class AxisKind : uint8_t {
  kGlobal,
  kLocal,
  kReduce,
  kUnroll,
  kUpcast,
  kOuterReduce,
  kGroupReduce,
  kStaged
};
const char* axis_kind_name(AxisKind k);
// Position of a kind in the axis order (OUTER_REDUCE ranks with GLOBAL, GROUP_REDUCE and STAGED
// just after REDUCE).
int axis_rank(AxisKind k);
// A loop over output elements or over outer reduce slices (not LOCAL, not REDUCE).
inline bool is_outer_loop(AxisKind k) {
  return k == AxisKind::kGlobal || k == AxisKind::kOuterReduce;
}

enum class OptOp : uint8_t {
  kUpcast,       // split a GLOBAL axis; the inner `amt` becomes an UPCAST axis
  kUnroll,       // split a REDUCE axis; the inner `amt` becomes an UNROLL axis
  kLocal,        // split a GLOBAL axis; the inner `amt` becomes a LOCAL axis. On GPU targets
                 // the LOCAL axes are the work-group (at most 3, innermost = x; at most
                 // TargetInfo::max_block threads) and the GLOBAL axes the grid; elsewhere loops.
  kSwap,         // exchange loop axes `axis` and `amt` (same kind), changing the loop order
  kSplitReduce,  // split a REDUCE axis; the outer part becomes an OUTER_REDUCE loop placed
                 // after the GLOBAL loops (move it with kSwap). Needs every STORE to store a
                 // REDUCE_AXIS directly into a buffer the kernel does not load.
  kGroup,        // split a REDUCE axis; the inner `amt` (a power of two) becomes the GROUP_REDUCE
                 // axis: a work-group of `amt` threads per output, thread t reducing elements
                 // t, t + amt, ...; one reduction in the kernel, no LOCAL or UPCAST axes.
                 // Lowering needs a target with shared memory (TargetInfo::has_local).
  kGroupTop,     // GROUP with the outer `amt` as the GROUP_REDUCE axis: thread t reduces the
                 // contiguous slice [t * n / amt, (t + 1) * n / amt) of the n elements.
  kStage,        // split a REDUCE axis; the inner `amt` becomes the STAGED axis: each iteration
                 // of the outer part, the work-group copies the tiles of the staged loads
                 // (staged_loads) into shared memory, each thread a share; after a barrier the
                 // STAGED loop reads them there. Other REDUCE axes (a convolution's window)
                 // loop outside it, a tile copy per iteration. One reduction, at least one
                 // LOCAL axis, no GROUP_REDUCE, OUTER_REDUCE or one-hot axes; needs
                 // TargetInfo::has_local.
};

// One action; `axis` indexes the kernel's current shape.
struct Opt {
  OptOp op;
  int axis;
  int amt;
  bool operator==(const Opt&) const = default;
  std::string str() const;
};

// A reduced axis that a sum only samples at one computed position: REDUCE_AXIS(ADD) of
// WHERE(e == iota(axis) [&& ...], v, 0), with e an integer that does not depend on the axis
// (the one-hot sum that indexing with a tensor, gather and embedding build). The sum is v at
// axis = e, or 0 when e is outside the axis: lowering loads there instead of looping over the
// axis (tinygrad's reduce collapse of an arange).
struct OneHotAxis {
  int axis;
  UOpPtr index;  // e
};
// True when no value below `n` changes along kernel axis `axis`.
bool constant_along(const UOp* n, int axis);
// The one-hot axes of `reduce` (a REDUCE_AXIS) in a kernel of `shape`; each axis once.
std::vector<OneHotAxis> one_hot_axes(const UOp* reduce, const std::vector<int64_t>& shape);

class Kernel {
 public:
  // Analyses `ast` (a verified kernel AST): moves reduce axes last and merges dims that are
  // contiguous in every view. Throws baregrad::Error("[kernel] ...") when unsupported.
  explicit Kernel(const UOpPtr& ast);

  // The AST with views and reduce axes in terms of the current shape.
  const UOpPtr& ast() const { return ast_; }
  // Sizes; a symbolic axis (a Variable's size) shows its max here and its Sym in sym_shape()
  // (which is empty unless symbolic()).
  const std::vector<int64_t>& shape() const { return shape_; }
  const std::vector<Sym>& sym_shape() const { return sym_shape_; }
  bool sym_axis(int axis) const { return symbolic_ && !sym_shape_[axis].is_const(); }
  // True when some view carries a symbolic shadow (View::sym): sizes passed at launch.
  bool symbolic() const { return symbolic_; }
  const std::vector<AxisKind>& kinds() const { return kinds_; }
  const std::vector<Opt>& applied() const { return applied_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  // Number of axes of `kind`, and the index of the first of them (ndim() when none).
  int count(AxisKind kind) const;
  int first(AxisKind kind) const;
  // The ShapeTrackers of every LOAD and STORE, loads first; of the LOADs; of the STOREs.
  std::vector<ShapeTracker> views() const;
  std::vector<ShapeTracker> load_views() const;
  std::vector<ShapeTracker> store_views() const;
  // Stride of `axis` in `st`'s last view, or -1 when the view stack makes it non-affine.
  static int64_t stride(const ShapeTracker& st, int axis);
  // Whether the element `st` addresses can change along `axis` (its last view strides along it
  // or masks it; views with a symbolic shadow always can).
  static bool depends_on(const ShapeTracker& st, int axis);
  // True when `axis` carries no mask in any view (splitting it is legal).
  bool unmasked(int axis) const;
  // Whether `axis` can be vector lanes: unmasked, every load and store walks it with stride 0
  // or 1, and some with 1. With `scatter`, in a kernel that reduces, the stores and the loads
  // outside the reduction may walk it with any stride: they run once per output, after the
  // loop, so moving lanes one by one costs little there (a convolution whose lanes are output
  // channels, strided in NCHW, with a fused epilogue such as a ReLU's backward).
  bool vector_axis(int axis, bool scatter) const;
  // The LOADs a STAGE of reduce axis `axis` copies into shared memory: of a buffer, inside the
  // reduction, depending on `axis` and not on some LOCAL axis (so that several threads of a
  // work-group read each element). In AST order.
  std::vector<const UOp*> staged_loads(int axis) const;
  // True when partial reductions can accumulate in the output buffers (SPLIT_REDUCE).
  bool accumulates_in_output(std::string* why) const;

  // Applies `opt`; throws baregrad::Error("[opt] ...") naming the opt when it is not legal.
  void apply(const Opt& opt);
  // Whether `opt` is legal now (no throw).
  bool legal(const Opt& opt, std::string* why = nullptr) const;
  // The one-hot axes of every reduction in the AST (one_hot_axes above), whatever their kind.
  std::vector<OneHotAxis> one_hot_axes() const;
  std::string str() const;

 private:
  void map_views(const std::function<View(const View&)>& f);
  // Rebuilds the AST with each VIEW's tracker from `view_of` and every REDUCE_AXIS over
  // `reduce_axes`.
  void rebuild(const std::function<ShapeTracker(const UOp*)>& view_of,
               const std::vector<int>& reduce_axes);
  void permute(const std::vector<int>& perm);
  void merge_dims();
  void split_for_single_views(std::vector<int>& reduce_axes);
  void init_sym_shape();

  UOpPtr ast_;
  std::vector<int64_t> shape_;
  std::vector<Sym> sym_shape_;
  bool symbolic_ = false;
  std::vector<AxisKind> kinds_;
  std::vector<Opt> applied_;
};

// Hand-written heuristics: the opts to apply to `k` for `target`.
std::vector<Opt> hand_coded_optimizations(const Kernel& k, const TargetInfo& target);

}  // namespace baregrad::compiler
