// Hand-written optimization choices for CPU-like targets. Each step only picks Opts from the
// explicit action space in kernel.h, so a search can replace this file later.
#include <algorithm>

#include "compiler/opt/kernel.h"

namespace baregrad::compiler {
namespace {

// Reduction slice of the K-blocking step: 1024 fp32 rows of a 32-wide tile are 128 KiB, well
// inside L2.
constexpr int kReduceSlice = 1024;

bool try_apply(Kernel& k, const Opt& o, std::vector<Opt>& opts) {
  if (!k.legal(o)) return false;
  k.apply(o);
  opts.push_back(o);
  return true;
}

bool has_stride(const Kernel& k, int axis, int64_t stride) {
  for (const auto& st : k.views())
    if (Kernel::stride(st, axis) == stride) return true;
  return false;
}

// Scalar accumulators a register tile without vector lanes keeps (of 32 registers).
constexpr int kScalarTile = 24;

int widest_element(const Kernel& k) {
  int w = 1;
  for (const UOp* n : k.ast()->toposort())
    if (n->op() == Op::VIEW)  // fp8 elements are computed as float32: 4 bytes of work each
      w = std::max(w, dtypes::is_fp8(n->dtype()) ? 4 : n->dtype().base().itemsize());
  return w;
}

// Threads a GPU kernel keeps at least, when tiling trades threads for work per thread: 256
// blocks of 128, enough to cover the SMs of a large GPU with a few blocks each.
constexpr int64_t kGpuMinThreads = 32768;

// A reduction at least this long, in a kernel with fewer outputs than kGpuMinThreads, is
// split across a work-group (GROUP) on targets with shared memory.
constexpr int64_t kGroupMinReduce = 256;

// Shared-memory operand tiles for a reduction register-tiled along output axes `outer` and
// `inner` (a matmul's rows and columns, each operand broadcast along one of them): a LOCAL
// work-group over both, whose operands are copied into shared memory 16 (or 8, or 4) reduction
// steps at a time (STAGE), so that each element is read from global memory once per
// work-group instead of once per thread row or column. The work-group is 8 x 16 (x along the
// inner axis, so neighbouring threads store neighbouring outputs), else the first smaller one
// whose opts are legal; all the opts or none. Convolutions (whose register tile is over the
// output's rows and columns, along which the input is not broadcast) are left to the search
// until their staged shapes have been timed on a GPU.
std::vector<Opt> stage_operands(const Kernel& k, int outer, int inner, const TargetInfo& target) {
  const std::pair<int, int> sizes[] = {{8, 16}, {16, 8}, {8, 8}, {4, 16}, {4, 8}, {8, 4}};
  for (auto [x, y] : sizes) {
    if (x * y > target.max_block) continue;
    Kernel trial = k;
    std::vector<Opt> opts;
    // The outer axis first: the inner one becomes the innermost LOCAL axis (dimension x).
    if (!try_apply(trial, {OptOp::kLocal, outer, x}, opts) ||
        !try_apply(trial, {OptOp::kLocal, inner, y}, opts))
      continue;
    int r = -1;  // the longest REDUCE axis
    for (int i = trial.first(AxisKind::kReduce); i < trial.ndim(); i++)
      if (trial.kinds()[i] == AxisKind::kReduce && (r < 0 || trial.shape()[i] > trial.shape()[r]))
        r = i;
    for (int amt : {16, 8, 4})
      if (r >= 0 && try_apply(trial, {OptOp::kStage, r, amt}, opts)) return opts;
  }
  return {};
}

// GPU targets: one thread per output element, except that
// - a kernel with few outputs and a long reduction (a sum over a large axis) on a target with
//   shared memory gets a work-group per output (GROUP): up to 128 threads each reduce a strided
//   slice (neighbouring threads read neighbouring elements) and combine through shared memory;
// - a reduction reading operands that are broadcast along output axes (a matmul) gets a
//   register tile of up to 4 x 4 outputs per thread: each loaded element then feeds 4
//   multiply-adds instead of 1. The tile's contiguous axis becomes vector lanes, the other one
//   copies.
// - an elementwise kernel with enough elements, on a target with aligned buffers
//   (TargetInfo::buffer_align), gets vector lanes along an axis that every load and store walks
//   contiguously (or not at all): up to 16 bytes per thread in one instruction.
// - that register-tiled reduction gets shared-memory operand tiles where the target has shared
//   memory: a LOCAL work-group over the two tiled axes (8 x 16 threads where the sizes allow)
//   and a STAGE of its longest reduce axis.
std::vector<Opt> gpu_optimizations(Kernel k, const TargetInfo& target) {
  std::vector<Opt> opts;
  int64_t threads = 1;
  for (int a = 0; a < k.ndim(); a++)
    if (k.kinds()[a] == AxisKind::kGlobal) threads *= k.shape()[a];
  if (k.count(AxisKind::kReduce) == 0) {
    // Only where buffers are aligned for 16-byte accesses: PoCL (DEV=CL on a CPU) vectorizes
    // across work-items itself and ran the 4M-element elementwise bench row at 14 GB/s with
    // lanes per work-item against 26 GB/s without.
    int lanes = std::max(1, std::min(target.vector_bytes, target.buffer_align) / widest_element(k));
    if (lanes < 2 || threads / lanes < kGpuMinThreads) return opts;
    for (int a = k.ndim() - 1; a >= 0; a--)  // the innermost such axis
      if (k.kinds()[a] == AxisKind::kGlobal && k.vector_axis(a, false) &&
          try_apply(k, {OptOp::kUpcast, a, lanes}, opts))
        break;
    return opts;
  }
  if (target.has_local && threads < kGpuMinThreads)
    for (int a = k.ndim() - 1; a >= 0; a--) {  // the innermost long reduction
      if (k.kinds()[a] != AxisKind::kReduce || k.shape()[a] < kGroupMinReduce) continue;
      for (int amt = std::min(128, target.max_block); amt >= 16; amt /= 2)
        if (try_apply(k, {OptOp::kGroup, a, amt}, opts)) return opts;
      break;
    }
  int tiles = 0;
  std::vector<int> tiled;  // the register-tiled axes, innermost first
  for (int a = k.first(AxisKind::kReduce) - 1; a >= 0 && tiles < 2; a--) {  // innermost first
    if (k.kinds()[a] != AxisKind::kGlobal || !has_stride(k, a, 0)) continue;
    if (threads / 4 < kGpuMinThreads) break;
    if (try_apply(k, {OptOp::kUpcast, a, 4}, opts)) {
      threads /= 4;
      tiles++;
      tiled.push_back(a);
    }
  }
  if (target.has_local && tiles == 2) {
    std::vector<Opt> more = stage_operands(k, tiled[1], tiled[0], target);
    opts.insert(opts.end(), more.begin(), more.end());
  }
  return opts;
}

}  // namespace

std::vector<Opt> hand_coded_optimizations(const Kernel& in, const TargetInfo& target) {
  Kernel k = in;
  std::vector<Opt> opts;
  if (k.ndim() == 0) return opts;  // a single element: nothing to choose
  if (target.gpu) return gpu_optimizations(k, target);
  bool reduce = k.count(AxisKind::kReduce) > 0;
  int lanes = std::max(1, target.vector_bytes / widest_element(k));

  // 1. Vector lanes: a contiguous output axis, else a contiguous reduce axis.
  int vec_global = -1;
  bool vec_reduce = false;
  for (int w = lanes; w >= 4 && vec_global < 0 && !vec_reduce; w /= 2) {
    for (int a = 0; a < k.first(AxisKind::kReduce) && vec_global < 0; a++)
      if (k.vector_axis(a, true) && try_apply(k, {OptOp::kUpcast, a, w}, opts)) vec_global = a;
    for (int a = k.first(AxisKind::kReduce); a < k.ndim() && vec_global < 0 && !vec_reduce; a++)
      if (k.kinds()[a] == AxisKind::kReduce && k.vector_axis(a, false) &&
          try_apply(k, {OptOp::kUnroll, a, w}, opts))
        vec_reduce = true;
  }

  // 2. Register tiles: reuse broadcast operands across upcast rows, keeping the accumulators
  //    within the register file.
  int copies = 1;
  if (reduce && vec_global >= 0) {
    // The tile axis is one the vector-loaded operands (contiguous along the lanes) are
    // broadcast along, so each of their vector loads feeds every row of the tile: a matmul's
    // rows; a convolution's output channels, not its batch (which reuses only the weights).
    // The innermost such axis: with lanes along a convolution's output channels (weights
    // laid out channels-last), its output width, whose input elements share cache lines.
    std::vector<ShapeTracker> loads = k.load_views();
    const int lanes_axis = k.ndim() - 1;  // the UPCAST axis step 1 made: the vector lanes
    int tile = -1;
    for (int a = k.first(AxisKind::kReduce) - 1; a >= 0 && tile < 0; a--) {
      if (a == vec_global || k.shape()[a] < 2 || !has_stride(k, a, 0)) continue;
      bool reuses_vectors = true, vector_loads = false;
      for (const auto& st : loads) {
        if (Kernel::stride(st, lanes_axis) != 1) continue;
        vector_loads = true;
        reuses_vectors = reuses_vectors && Kernel::stride(st, a) == 0;
      }
      if (vector_loads && reuses_vectors) tile = a;
    }
    for (int a = 0; a < k.first(AxisKind::kReduce); a++) {
      if (a == vec_global || !has_stride(k, a, 0) || (tile >= 0 && a != tile)) continue;
      for (int amt : {8, 6, 5, 4, 3, 2})
        if (try_apply(k, {OptOp::kUpcast, a, amt}, opts)) {
          copies *= amt;
          break;
        }
      break;
    }
    if (has_stride(k, vec_global, 0) && copies * 2 <= target.registers / 2)
      if (try_apply(k, {OptOp::kUpcast, vec_global, 2}, opts)) copies *= 2;
  }
  // A dot-product-shaped reduction (lanes along the reduce axis, A @ B.T): tile the output
  //    over operands broadcast along it, so each loaded vector feeds several accumulators.
  if (reduce && vec_reduce) {
    int tiled = 0;
    for (int a = 0; a < k.first(AxisKind::kReduce) && tiled < 2; a++) {
      if (!has_stride(k, a, 0)) continue;
      for (int amt : {4, 2})
        if (try_apply(k, {OptOp::kUpcast, a, amt}, opts)) {
          copies *= amt;
          tiled++;
          break;
        }
    }
  }
  // 2c. No vector axis (output rows too short for the lanes: a convolution over 6x6 or 10x10):
  //     a register tile of scalars instead, on two output axes along which different operands
  //     are broadcast (a convolution's width, along which the weights are, and its output
  //     channels, along which the input is), so that each element loaded feeds every copy
  //     along the other axis. Then the short window axes (3x3) are unrolled: no loop of 3.
  if (reduce && vec_global < 0 && !vec_reduce) {
    std::vector<ShapeTracker> loads = k.load_views();
    auto broadcast_mask = [&](int a) {
      uint64_t m = 0;
      for (size_t i = 0; i < loads.size() && i < 64; i++)
        if (Kernel::stride(loads[i], a) == 0) m |= uint64_t{1} << i;
      return m;
    };
    uint64_t first_mask = 0;
    for (int a = k.first(AxisKind::kReduce) - 1; a >= 0; a--) {  // innermost first
      uint64_t m = broadcast_mask(a);
      if (m == 0 || k.shape()[a] < 2 || (first_mask && !(m & ~first_mask))) continue;
      for (int amt : {8, 6, 5, 4, 3, 2})
        if (copies * amt <= kScalarTile && try_apply(k, {OptOp::kUpcast, a, amt}, opts)) {
          copies *= amt;
          break;
        }
      if (first_mask) break;
      if (copies > 1) first_mask = m;
    }
    for (int a = k.first(AxisKind::kReduce); a < k.ndim(); a++)
      if (k.kinds()[a] == AxisKind::kReduce && k.shape()[a] <= 4 && copies * k.shape()[a] <= 256)
        if (try_apply(k, {OptOp::kUnroll, a, static_cast<int>(k.shape()[a])}, opts)) {
          copies *= static_cast<int>(k.shape()[a]);
          a = k.first(AxisKind::kReduce) - 1;  // the axes moved: look again from the start
        }
  }
  // 3. More independent work per iteration where no tile was made.
  if (copies == 1) {
    if (vec_global >= 0)
      try_apply(k, {OptOp::kUpcast, vec_global, 4}, opts);
    else if (vec_reduce)
      try_apply(k, {OptOp::kUnroll, k.first(AxisKind::kReduce), 4}, opts);
  }
  // 4. Loop order: with a reduction, the innermost output loop is the one whose tile is
  //    narrowest, so the wide operand panel stays in cache across it.
  //    A window reduction (a convolution: several reduce axes) keeps its batch loop first
  //    instead: each image's input stays in cache across the output-channel tiles.
  if (reduce && k.first(AxisKind::kReduce) >= 2 && vec_global >= 0 && vec_global != 0 &&
      k.count(AxisKind::kReduce) == 1)
    try_apply(k, {OptOp::kSwap, 0, vec_global}, opts);
  // 5. K-blocking: a register-tiled reduction longer than a cache-sized slice loops over
  //    slices outside the row loop, so each slice of the wide operand stays in L1/L2 while
  //    every row tile uses it; partial results accumulate in the output.
  //    A window reduction (a weight gradient: batch x rows x columns) slices its outermost
  //    reduce axis: each slice of images is read by every output tile while in cache, rather
  //    than every tile streaming all the images.
  int r = k.first(AxisKind::kReduce);
  int slice = 0;
  if (copies > 1 && k.count(AxisKind::kReduce) == 1 && k.shape()[r] >= 2 * kReduceSlice)
    slice = kReduceSlice;
  if (copies > 1 && k.count(AxisKind::kReduce) > 1) {
    int64_t rest = 1;  // the other reduce axes' iterations
    for (int a = r + 1; a < k.ndim(); a++)
      if (k.kinds()[a] == AxisKind::kReduce) rest *= k.shape()[a];
    if (rest * k.shape()[r] >= 2 * kReduceSlice)
      for (int64_t d = 2; d < k.shape()[r] && slice == 0; d++)
        if (k.shape()[r] % d == 0 && d * rest >= kReduceSlice) slice = static_cast<int>(d);
  }
  if (slice > 0 && try_apply(k, {OptOp::kSplitReduce, r, slice}, opts)) {
    int outer = k.first(AxisKind::kReduce) - 1;  // the new loop ends the output-loop block
    if (outer > 1) try_apply(k, {OptOp::kSwap, 1, outer}, opts);
  }
  // 5b. An output axis along which the vector operand itself changes (a weight gradient's
  //     partial sums over slices of the batch) goes outside the other tile loops: each slice
  //     of that operand then serves every tile of the slice while in cache. It becomes the
  //     loop split across cores when it has a few iterations per core (the partial sums are
  //     separate outputs), else the loop after it.
  if (copies > 1 && k.count(AxisKind::kReduce) > 1 && vec_global >= 0) {
    int lanes = k.first(AxisKind::kUpcast), after = 1;
    while (after < k.ndim() && k.kinds()[after] == AxisKind::kOuterReduce) after++;
    std::vector<ShapeTracker> loads = k.load_views();
    for (int a = 1; a < k.first(AxisKind::kReduce); a++) {
      if (k.kinds()[a] != AxisKind::kGlobal || a == vec_global) continue;
      bool walks = false;
      for (const auto& st : loads)
        walks |= Kernel::stride(st, lanes) == 1 && Kernel::stride(st, a) != 0;
      if (walks) {
        int to = k.shape()[a] >= 4 * target.threads ? 0 : after;
        if (to != a) try_apply(k, {OptOp::kSwap, to, a}, opts);
        break;
      }
    }
  }
  // 6. The first loop is split across cores: make it one with enough iterations.
  if (k.shape()[0] < target.threads) {
    int best = 0;
    for (int a = 1; a < k.ndim(); a++)
      if (k.kinds()[a] == AxisKind::kGlobal && k.shape()[a] > k.shape()[best]) best = a;
    if (best != 0) try_apply(k, {OptOp::kSwap, 0, best}, opts);
  }
  return opts;
}

}  // namespace baregrad::compiler
