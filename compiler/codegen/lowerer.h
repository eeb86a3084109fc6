// Internal to compiler/codegen: the Lowerer of lower_to_ranges (lower.h). lower.cc holds the
// loops, index math, loads, reductions and stores; lower_gpu.cc what GPU targets add: threads
// and work-groups, group reductions through shared memory and warp exchanges, staged operand
// tiles.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "compiler/codegen/lower.h"

namespace baregrad::compiler::lowering {

// Values of one AST node for one copy: a W-lane vector, or a scalar uniform across lanes.
struct Val {
  UOpPtr u;
  bool vec = false;
};

struct Ctx {
  // RANGE per loop axis (null for expand axes); a one-hot axis holds the index it samples.
  std::vector<UOpPtr> loops;
  UOpPtr gate;  // and-ed into the validity of every load (a one-hot index in range), or null
  bool vector_active = false;
  // UNROLL / UPCAST axes take their coordinate from `loops` (a work-group's copy of an
  // operand tile, where each thread copies elements at computed coordinates).
  bool expand_from_loops = false;
  UOpPtr staged;  // inside a STAGED reduction: the BARRIER after the tiles' copies
  int id = 0;
};

// The size of kernel axis `axis` as index math: a constant, or a launch scalar's expression.
UOpPtr axis_size(const Kernel& k, int axis);

class Lowerer {
 public:
  Lowerer(const Kernel& k, const TargetInfo& t) : k_(k), t_(t) {}

  Lowered run();

 private:
  AxisKind kind(int axis) const { return k_.kinds()[axis]; }
  bool is_expand(int axis) const {
    return kind(axis) == AxisKind::kUnroll || kind(axis) == AxisKind::kUpcast;
  }
  // GPU targets: an output axis mapped to threads rather than to a loop.
  bool is_thread_axis(int axis) const {
    return t_.gpu && (kind(axis) == AxisKind::kGlobal || kind(axis) == AxisKind::kLocal);
  }
  UOpPtr gpu_threads(Ctx& top);
  UOpPtr work_groups(Ctx& top);
  // GROUP_REDUCE: each thread's `partial` through shared memory, combined with `op`.
  UOpPtr group_combine(Op op, const UOpPtr& partial);
  int pick_vector_axis() const;
  UOpPtr make_range(int axis, const UOpPtr& parent, int64_t id);
  UOpPtr coord(const Ctx& ctx, const std::vector<int64_t>& c, int axis, int lane) const;
  std::pair<UOpPtr, UOpPtr> index(const ShapeTracker& st,
                                  const Ctx& ctx,
                                  const std::vector<int64_t>& c,
                                  int lane) const;
  UOpPtr sym_view_index(const SymView& v,
                        bool last,
                        const UOpPtr& idx,
                        const Ctx& ctx,
                        const std::vector<int64_t>& c,
                        int lane,
                        const std::function<void(UOpPtr)>& add_valid) const;
  Val lower(const UOpPtr& n, const Ctx& ctx, const std::vector<int64_t>& c);
  // `gate`, when given, is and-ed into the validity of every element loaded; `after`, when
  // given, is the BARRIER a shared-memory load runs after.
  Val lower_load(const UOpPtr& n,
                 const Ctx& ctx,
                 const std::vector<int64_t>& c,
                 const UOpPtr& gate = nullptr,
                 const UOpPtr& after = nullptr);
  // STAGED: the work-group's copies of every staged load's tile for the reduction context
  // `inner` (its loops made), into shared memory; returns the BARRIER after them.
  UOpPtr stage_tiles(const Ctx& inner);
  // A new shared-memory array of `elems` elements of `t` (distinct from every other one).
  UOpPtr define_local(DType t, int64_t elems) {
    return UOp::make(Op::DEFINE_LOCAL, t.as_ptr(), {UOp::index_const(next_local_++)}, elems);
  }
  Val lower_reduce(const UOpPtr& n, const Ctx& ctx, const std::vector<int64_t>& c);
  // The body of reduction `n` at its one-hot axes' indices (0 where one is out of range).
  Val lower_one_hot(const UOpPtr& n,
                    const std::vector<OneHotAxis>& hot,
                    const Ctx& inner,
                    const std::vector<int64_t>& c);
  bool has_outer_reduce() const { return k_.count(AxisKind::kOuterReduce) > 0; }
  Val accumulate(const UOpPtr& store, Val v, const Ctx& ctx, const std::vector<int64_t>& c);
  std::vector<UOpPtr> lower_store(const UOpPtr& n, const Ctx& ctx, const std::vector<int64_t>& c);
  UOpPtr widen(const Val& v) const;
  UOpPtr combine(Op op, std::vector<UOpPtr> vals) const;

  const Kernel& k_;
  const TargetInfo& t_;
  int vaxis_ = -1;
  int width_ = 1;
  int next_ctx_ = 1;
  int64_t next_loop_id_ = 0;
  int64_t next_local_ = 0;
  UOpPtr guard_;         // GPU targets: the bounds-check RANGE enclosing every loop, or null
  UOpPtr group_thread_;  // a GROUP_REDUCE kernel: the thread's index in its work-group
  // STAGED: per staged LOAD, the VIEW of its tile (a DEFINE_LOCAL) over the kernel shape, with
  // stride 0 off the tile's axes: what the LOAD reads instead of its buffer.
  std::map<const UOp*, UOpPtr> tiles_;
  std::array<int64_t, 3> grid_{1, 1, 1}, block_{1, 1, 1};
  std::map<std::tuple<const UOp*, int, std::vector<int64_t>>, Val> memo_;
  std::map<std::pair<const UOp*, int>, Ctx> reduce_ctx_;
};

}  // namespace baregrad::compiler::lowering
