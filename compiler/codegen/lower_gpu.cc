// What GPU targets add to the lowering (lowerer.h): one thread per output element or LOCAL
// work-groups on a 3-D grid, GROUP reductions combined through warp exchanges and shared
// memory, and STAGEd operand tiles copied into shared memory by the work-group.
#include <algorithm>
#include <bit>

#include "base/check.h"
#include "base/error.h"
#include "compiler/ast.h"
#include "compiler/codegen/lowerer.h"

namespace baregrad::compiler::lowering {

// Every thread stores its partial result at its index in a shared array; after a barrier,
// thread 0 alone reduces the array, and what follows (the store) runs in thread 0 alone: the
// reduction's loop sits in a bounds check that only thread 0 passes, which encloses the rest.
// On a target with warps (TargetInfo::warp_size), 32-bit partials are first combined across
// each warp by butterfly exchanges (SHFL_XOR), after which every lane holds its warp's total:
// the shared array then holds one entry per warp.
UOpPtr Lowerer::group_combine(Op op, const UOpPtr& partial) {
  int64_t n = k_.shape()[k_.first(AxisKind::kGroupReduce)];
  DType t = partial->dtype();
  UOpPtr value = partial, slot = group_thread_;
  int64_t warp = t_.warp_size;
  if (warp > 1 && t.count == 1 && !t.ptr && t.itemsize() == 4) {
    int64_t lanes = std::min(n, warp);
    for (int64_t mask = lanes / 2; mask >= 1; mask /= 2)
      value = UOp::alu(op, {value, UOp::make(Op::SHFL_XOR, t, {value}, mask)});
    n = std::max<int64_t>(1, n / warp);
    slot = n == 1 ? UOp::index_const(0) : group_thread_ / warp;  // same value from every lane
  }
  UOpPtr local = define_local(t, n);
  UOpPtr put =
      UOp::make(Op::STORE, dtypes::kVoid, {UOp::make(Op::INDEX, t.as_ptr(), {local, slot}), value});
  UOpPtr barrier = UOp::make(Op::BARRIER, dtypes::kVoid, {put});
  std::vector<UOpPtr> first_src{group_thread_, UOp::index_const(1)};  // thread 0 only
  if (guard_) first_src.push_back(guard_);
  UOpPtr first = UOp::make(Op::RANGE, dtypes::kIndex, std::move(first_src), -1 - next_loop_id_++);
  std::vector<UOpPtr> range_src{UOp::index_const(0), UOp::index_const(n), first};
  UOpPtr r = UOp::make(Op::RANGE, dtypes::kIndex, std::move(range_src), next_loop_id_++);
  UOpPtr get = UOp::make(Op::LOAD, t, {UOp::make(Op::INDEX, t.as_ptr(), {local, r}), barrier});
  return UOp::make(Op::REDUCE, t, {get, r}, static_cast<int64_t>(op));
}

// Every thread of the work-group (tid = its linear index over the LOCAL axes, T threads)
// copies elements tid, tid + T, ... (those below the tile's size) of each tile: the staged load's
// elements over the axes it walks among LOCAL, STAGED, UNROLL and UPCAST, at the work-group's
// GLOBAL and this iteration's REDUCE coordinates. The tile is laid out with its axes ordered by
// decreasing stride in the buffer, so neighbouring threads copy neighbouring elements. A barrier at
// the top of each iteration keeps the copies from overwriting a tile that slower threads still
// read.
UOpPtr Lowerer::stage_tiles(const Ctx& inner) {
  constexpr int64_t kMaxSharedBytes = 48 * 1024;
  int staged_axis = k_.first(AxisKind::kStaged);
  if (!t_.gpu || !t_.has_local)
    fail("lower",
         k_.str() + ": STAGE needs shared memory, which target " + t_.name + " does not have");
  UOpPtr tid = UOp::index_const(0);
  int64_t threads = 1;
  for (int a = 0; a < k_.ndim(); a++)
    if (kind(a) == AxisKind::kLocal) {
      tid = tid * k_.shape()[a] + inner.loops[a];
      threads *= k_.shape()[a];
    }
  // The loops over tiles (none with more than one iteration: no barrier needed). The barrier's
  // scope is the innermost: it runs at the top of every tile step.
  std::vector<UOpPtr> outer_loops;
  for (int a = 0; a < k_.ndim(); a++)
    if (kind(a) == AxisKind::kReduce && k_.shape()[a] > 1) outer_loops.push_back(inner.loops[a]);
  UOpPtr top = outer_loops.empty() ? nullptr : UOp::make(Op::BARRIER, dtypes::kVoid, outer_loops);
  std::vector<UOpPtr> copies;
  int64_t bytes = 0;
  for (const UOp* load : k_.staged_loads(staged_axis)) {
    const auto& st = load->src(0)->arg_as<ShapeTracker>();
    std::vector<int> axes;  // the tile's axes, outermost first
    for (int a = 0; a < k_.ndim(); a++)
      if ((kind(a) == AxisKind::kLocal || kind(a) == AxisKind::kStaged || is_expand(a)) &&
          Kernel::depends_on(st, a))
        axes.push_back(a);
    auto key = [&](int a) {  // non-affine (-1) sorts first
      int64_t s = Kernel::stride(st, a);
      return s < 0 ? INT64_MAX : std::abs(s);
    };
    std::stable_sort(axes.begin(), axes.end(), [&](int x, int y) { return key(x) > key(y); });
    int64_t elems = 1;
    for (int a : axes) elems *= k_.shape()[a];
    DType t = load->dtype();
    bytes += elems * std::max(1, t.itemsize());
    if (bytes > kMaxSharedBytes)
      fail("lower", k_.str() + ": staged tiles of " + std::to_string(bytes) + " bytes exceed the " +
                        std::to_string(kMaxSharedBytes) +
                        " bytes of shared memory a work-group may use");
    UOpPtr local = define_local(t, elems);
    std::vector<int64_t> strides(k_.ndim(), 0);
    int64_t inner_size = 1;
    for (size_t i = axes.size(); i-- > 0;) {
      strides[axes[i]] = inner_size;
      inner_size *= k_.shape()[axes[i]];
    }
    tiles_[load] = UOp::make(Op::VIEW, t, {local}, strided(k_.shape(), std::move(strides)));
    // Each thread copies `w` neighbours at once (a 16-byte access where aligned) when the
    // tile's innermost axis is contiguous in the buffer and the shares come out even.
    int64_t w = 1;
    bool plain = st.views.size() == 1 && !st.views[0].mask && !st.views[0].sym;
    if (plain && !axes.empty() && Kernel::stride(st, axes.back()) == 1 && !dtypes::is_bool(t))
      for (int64_t x = 16 / std::max(1, t.itemsize()); x >= 2 && w == 1; x /= 2)
        if (k_.shape()[axes.back()] % x == 0 && elems % (threads * x) == 0) w = x;
    std::vector<int64_t> c(k_.ndim(), 0);
    for (int64_t j = 0; j * threads * w < elems; j++) {
      UOpPtr e = j == 0 ? tid : tid + j * threads;
      if (w > 1) e = e * w;
      if ((j + 1) * threads * w > elems) {  // the threads past the tile's end copy nothing
        std::vector<UOpPtr> src{e, -maximum(-(e + 1), -UOp::index_const(elems))};
        if (!outer_loops.empty()) src.push_back(outer_loops.back());
        e = UOp::make(Op::RANGE, dtypes::kIndex, std::move(src), -1 - next_loop_id_++);
      }
      Ctx at = inner;
      at.id = next_ctx_++;
      at.vector_active = false;
      at.expand_from_loops = true;
      at.staged = nullptr;
      int64_t below = 1;
      for (size_t i = axes.size(); i-- > 0;) {
        int64_t size = k_.shape()[axes[i]];
        UOpPtr x = below == 1 ? e : e / below;
        at.loops[axes[i]] = i == 0 ? x : x % size;
        below *= size;
      }
      UOpPtr v;
      if (w == 1) {
        v = lower_load(load->self(), at, c).u;
      } else {  // one view, unmasked (`plain`): no valid
        const UOpPtr& buf = load->src(0)->src(0);
        UOpPtr idx = index(st, at, c, 0).first;
        v = UOp::make(Op::LOAD, t.vec(static_cast<int>(w)),
                      {UOp::make(Op::INDEX, buf->dtype(), {buf, idx})});
      }
      UOpPtr ix = UOp::make(Op::INDEX, local->dtype(), {local, e});
      copies.push_back(top ? UOp::make(Op::STORE, dtypes::kVoid, {ix, v, top})
                           : UOp::make(Op::STORE, dtypes::kVoid, {ix, v}));
    }
  }
  return UOp::make(Op::BARRIER, dtypes::kVoid, std::move(copies));
}

// One thread per element of the thread axes, flattened in axis order: the element index is
// gidx0 * block + lidx0. When the grid overshoots, a RANGE of one iteration (none past the
// end) encloses the kernel body as its bounds check. Returns that RANGE or null.
UOpPtr Lowerer::gpu_threads(Ctx& top) {
  constexpr int64_t kMaxGridX = (int64_t{1} << 31) - 1;
  std::vector<int> axes;
  int64_t n = 1;
  for (int a = 0; a < k_.ndim(); a++)
    if (is_thread_axis(a)) {
      axes.push_back(a);
      n *= k_.shape()[a];
    }
  CHECK(t_.max_block > 0 && std::has_single_bit(static_cast<unsigned>(t_.max_block)))
      << "TargetInfo::max_block " << t_.max_block << " is not a power of two";
  if (k_.count(AxisKind::kLocal)) return work_groups(top);
  int64_t block = std::min<int64_t>(t_.max_block,
                                    static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(n))));
  int64_t grid = std::max<int64_t>(1, (n + block - 1) / block);  // no elements: one idle thread
  // GROUP_REDUCE: one work-group per output element, its threads along the group axis.
  int group = k_.first(AxisKind::kGroupReduce);
  if (group < k_.ndim()) {
    if (k_.symbolic()) fail("lower", k_.str() + ": GROUP with symbolic sizes is not supported");
    block = k_.shape()[group];
    if (block > t_.max_block)
      fail("lower", k_.str() + ": GROUP of " + std::to_string(block) +
                        " threads exceeds the work-group limit " + std::to_string(t_.max_block) +
                        " of target " + t_.name);
    grid = std::max<int64_t>(1, n);
    group_thread_ = UOp::make(Op::SPECIAL, dtypes::kIndex, {}, VarArg{"lidx0", 0, block - 1});
    top.loops[group] = group_thread_;
  }
  if (grid > kMaxGridX)
    fail("lower", k_.str() + ": " + std::to_string(n) + " threads need " + std::to_string(grid) +
                      " blocks of " + std::to_string(block) + ", more than the grid limit " +
                      std::to_string(kMaxGridX));
  grid_ = {grid, 1, 1};
  block_ = {block, 1, 1};
  UOpPtr idx = UOp::make(Op::SPECIAL, dtypes::kIndex, {}, VarArg{"gidx0", 0, grid - 1});
  if (!group_thread_)
    idx = idx * block + UOp::make(Op::SPECIAL, dtypes::kIndex, {}, VarArg{"lidx0", 0, block - 1});
  int64_t threads = group_thread_ ? grid : grid * block;  // output elements the launch covers
  UOpPtr guard;
  Sym n_sym = n;  // the thread count as a Sym (symbolic axes: at most its max n)
  if (k_.symbolic()) {
    n_sym = 1;
    for (int a : axes) n_sym = n_sym * k_.sym_shape()[a];
  }
  if (threads > n || !n_sym.is_const()) {
    UOpPtr end = -maximum(-(idx + 1), -sym_index(n_sym));  // min(idx + 1, n)
    guard = UOp::make(Op::RANGE, dtypes::kIndex, {idx, end}, -1 - next_loop_id_++);
    idx = guard;
  }
  int64_t inner = 1;
  Sym inner_sym = 1;
  for (size_t i = axes.size(); i-- > 0;) {
    if (!n_sym.is_const()) {
      UOpPtr c = inner_sym == Sym(1) ? idx : idx / sym_index(inner_sym);
      top.loops[axes[i]] = i == 0 ? c : c % axis_size(k_, axes[i]);
      inner_sym = inner_sym * k_.sym_shape()[axes[i]];
      continue;
    }
    int64_t size = k_.shape()[axes[i]];
    UOpPtr c = inner == 1 ? idx : idx / inner;
    top.loops[axes[i]] = i == 0 ? c : c % size;
    inner *= size;
  }
  return guard;
}

// LOCAL axes: the work-group is exactly the LOCAL axes (the innermost is dimension x of the
// block, the next y, then z), the grid exactly the GLOBAL axes (the innermost is x, the next y,
// the rest flattened into z; all of them into x where y or z would pass 65535). No thread is
// past the end, so there is no bounds check: every thread reaches every barrier.
UOpPtr Lowerer::work_groups(Ctx& top) {
  constexpr int64_t kMaxGridX = (int64_t{1} << 31) - 1, kMaxGridYz = 65535;
  std::vector<int> locals, globals;
  for (int a = 0; a < k_.ndim(); a++) (kind(a) == AxisKind::kLocal ? locals : globals).push_back(a);
  std::erase_if(globals, [&](int a) { return kind(a) != AxisKind::kGlobal; });
  if (k_.symbolic())
    fail("lower", k_.str() + ": LOCAL work-groups with symbolic sizes are not supported");
  if (locals.size() > 3)
    fail("lower", k_.str() + ": " + std::to_string(locals.size()) +
                      " LOCAL axes; a work-group has at most 3 dimensions");
  int64_t threads = 1;
  for (int a : locals) threads *= k_.shape()[a];
  if (threads > t_.max_block)
    fail("lower", k_.str() + ": a work-group of " + std::to_string(threads) +
                      " threads (the LOCAL axes) exceeds the limit " +
                      std::to_string(t_.max_block) + " of target " + t_.name);
  for (size_t i = 0; i < locals.size(); i++) {
    int d = static_cast<int>(locals.size() - 1 - i);
    block_[d] = k_.shape()[locals[i]];
    top.loops[locals[i]] = UOp::make(Op::SPECIAL, dtypes::kIndex, {},
                                     VarArg{"lidx" + std::to_string(d), 0, block_[d] - 1});
  }
  // dims[d]: the GLOBAL axes of grid dimension d, outermost first.
  std::array<std::vector<int>, 3> dims;
  for (size_t i = 0; i < globals.size(); i++)  // outermost first: the outer ones share z
    dims[std::min<size_t>(globals.size() - 1 - i, 2)].push_back(globals[i]);
  auto size_of = [&](const std::vector<int>& axes) {
    int64_t n = 1;
    for (int a : axes) n *= k_.shape()[a];
    return n;
  };
  if (size_of(dims[1]) > kMaxGridYz || size_of(dims[2]) > kMaxGridYz) dims = {globals, {}, {}};
  if (size_of(dims[0]) > kMaxGridX)
    fail("lower", k_.str() + ": " + std::to_string(size_of(dims[0])) +
                      " work-groups, more than the grid limit " + std::to_string(kMaxGridX));
  for (int d = 0; d < 3; d++) {
    grid_[d] = size_of(dims[d]);
    UOpPtr id = UOp::make(Op::SPECIAL, dtypes::kIndex, {},
                          VarArg{"gidx" + std::to_string(d), 0, grid_[d] - 1});
    int64_t inner = 1;
    for (size_t i = dims[d].size(); i-- > 0;) {
      int64_t size = k_.shape()[dims[d][i]];
      UOpPtr c = inner == 1 ? id : id / inner;
      top.loops[dims[d][i]] = i == 0 ? c : c % size;
      inner *= size;
    }
  }
  return nullptr;
}

}  // namespace baregrad::compiler::lowering
