// Tensor::assign: in-place updates of realized buffers, with realize-before-overwrite.
#include <algorithm>
#include <cstdlib>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "base/error.h"
#include "compiler/view_ops.h"
#include "tensor/jit.h"
#include "tensor/schedule.h"
#include "tensor/tensor.h"

namespace baregrad::tensor {
namespace {
using BasePtr = std::shared_ptr<LazyBase>;

// Every unrealized base `roots` depend on, the roots included.
std::unordered_set<const LazyBase*> ancestors(const std::vector<Lazy>& roots) {
  std::unordered_set<const LazyBase*> seen;
  std::vector<const LazyBase*> stack;
  for (auto& r : roots) stack.push_back(r.base.get());
  while (!stack.empty()) {
    const LazyBase* b = stack.back();
    stack.pop_back();
    if (b->realized || !seen.insert(b).second) continue;
    for (auto& s : b->srcs) stack.push_back(s.base.get());
  }
  return seen;
}

// The live, unrealized tensors built on `olds` (directly or not) that nothing live reads and
// that are not among `exclude`: realizing them computes everything still reading `olds`.
// Every caller overwrites `olds` next: the droppable gradients reading them are dropped here
// (LazyBase::droppable), and count as no readers.
std::vector<Lazy> pending_readers(const std::vector<LazyBase*>& olds,
                                  const std::unordered_set<const LazyBase*>& exclude) {
  std::vector<Lazy> tops;
  std::unordered_set<const LazyBase*> seen;
  std::vector<BasePtr> stack;
  auto push_readers = [&](LazyBase* b) {
    bool any = false;
    for (auto& w : b->readers) {
      BasePtr r = w.lock();
      if (!r || r->realized) continue;
      if (r->droppable && !exclude.count(r.get())) {
        r->dropped = true;
        r->srcs.clear();
        continue;
      }
      any = true;
      if (seen.insert(r.get()).second) stack.push_back(r);
    }
    return any;
  };
  for (LazyBase* o : olds) push_readers(o);
  while (!stack.empty()) {
    BasePtr b = std::move(stack.back());
    stack.pop_back();
    // Held by nothing but this walk (a dropped gradient was its last reader): never read.
    bool live_readers = push_readers(b.get());
    if (b.use_count() == 1) continue;
    if (!live_readers && !exclude.count(b.get()))
      tops.push_back(Lazy{b, ShapeTracker::contiguous(b->shape)});
  }
  return tops;
}

// What assign() does with the lazy work still reading `old`'s buffer (pending_readers: tops
// outside `exclude`, the new values' own graph) before it overwrites that buffer. A top no
// larger than the buffer is computed now (appended to `targets`): it is cheap, and an
// accumulator that reads a weight every step stays bounded. Larger tops (activations that an
// autograd graph holds, most often never read again) are left lazy and the copy of the buffer
// they will read is returned (repoint_readers() gives it to them after the assign); computing
// them instead could cost a convolution each.
std::optional<Lazy> save_readers(const BasePtr& old,
                                 const std::unordered_set<const LazyBase*>& exclude,
                                 std::vector<Lazy>& targets) {
  std::vector<Lazy> tops = pending_readers({old.get()}, exclude);
  int64_t limit = old->numel() * old->dtype.itemsize();
  bool large = false;
  for (Lazy& t : tops) {
    if (t.base->numel() * t.base->dtype.itemsize() <= limit)
      targets.push_back(std::move(t));
    else
      large = true;
  }
  if (!large) return std::nullopt;
  return lazy_contiguous(Lazy{old, ShapeTracker::contiguous(old->shape)}, old->dtype);
}

// Makes the unrealized bases that read `old` directly read `copy` (its contents before an
// assign) instead.
void repoint_readers(LazyBase& old, const BasePtr& copy) {
  for (auto& w : old.readers) {
    BasePtr r = w.lock();
    if (!r || r->realized) continue;
    bool moved = false;
    for (Lazy& s : r->srcs)
      if (s.base.get() == &old) {
        s.base = copy;
        moved = true;
      }
    if (moved) copy->readers.push_back(r);
  }
}

// True when `s` reads, at every index where it is valid, the buffer element that `w` (one
// view, no mask) names at that index: the strides agree over every dim the valid box spans
// more than once, and both name the same element at the box's first corner. a + a[:, :2].pad(..)
// reads each element of `a` where it writes it, or nothing.
bool same_where_valid(const ShapeTracker& s, const ShapeTracker& w) {
  ShapeTracker a = compiler::simplify(s), b = compiler::simplify(w);
  if (a == b) return true;
  if (a.views.size() != 1 || b.views.size() != 1 || b.views[0].mask) return false;
  const compiler::View &x = a.views[0], &y = b.views[0];
  if (x.shape != y.shape) return false;
  int64_t at_x = x.offset, at_y = y.offset;
  for (size_t d = 0; d < x.shape.size(); d++) {
    int64_t lo = x.mask ? (*x.mask)[d].first : 0, hi = x.mask ? (*x.mask)[d].second : x.shape[d];
    if (hi <= lo) return true;  // nothing valid: nothing read
    if (hi - lo > 1 && x.strides[d] != y.strides[d]) return false;
    at_x += x.strides[d] * lo;
    at_y += y.strides[d] * lo;
  }
  return at_x == at_y;
}

// True when every read of `buf` in the unrealized graph of `v` is of the element that the
// kernel writing `v` through `target` (a view of `buf`'s base; whole: its base view) writes at
// that index, or of nothing there (padding): elementwise work down to the read, no reduction
// in between. The update can then overwrite `buf` in place, each element read before it is
// written by the same lane.
bool reads_in_place(const Lazy& v, const DeviceBuffer* buf, const Lazy& target) {
  std::set<std::pair<const LazyBase*, bool>> seen;
  bool whole = target.is_base_view();
  auto visit = [&](auto& self, const Lazy& l, bool ident) -> bool {
    const LazyBase* b = l.base.get();
    if (b->realized) {
      if (b->realized.get() != buf) return true;
      if (!ident || b->dtype.itemsize() != target.base->dtype.itemsize()) return false;
      if (l.sym || target.sym) return whole && l.is_base_view();
      return same_where_valid(l.st, target.st);
    }
    ident = ident && l.is_base_view();
    if (!seen.insert({b, ident}).second) return true;
    bool src_ident = ident && b->kind != LazyKind::kReduce;
    for (auto& s : b->srcs)
      if (!self(self, s, src_ident)) return false;
    return true;
  };
  return visit(visit, v, true);
}

// The buffers the unrealized graph of `v` reads.
std::unordered_set<const DeviceBuffer*> buffers_read(const Lazy& v) {
  std::unordered_set<const DeviceBuffer*> out;
  std::unordered_set<const LazyBase*> seen;
  std::vector<const LazyBase*> stack{v.base.get()};
  while (!stack.empty()) {
    const LazyBase* b = stack.back();
    stack.pop_back();
    if (!seen.insert(b).second) continue;
    if (b->realized) {
      out.insert(b->realized.get());
      continue;
    }
    for (auto& s : b->srcs) stack.push_back(s.base.get());
  }
  return out;
}

// True when `st` maps distinct indices to distinct elements inside its base: one view, no mask
// (padding), no broadcast dims, and strides that do not make dims overlap.
bool writes_distinct(const ShapeTracker& st) {
  ShapeTracker s = compiler::simplify(st);
  if (s.views.size() != 1 || s.views[0].mask) return false;
  const compiler::View& v = s.views[0];
  std::vector<std::pair<int64_t, int64_t>> dims;  // |stride|, size
  for (size_t i = 0; i < v.shape.size(); i++) {
    if (v.shape[i] <= 1) continue;
    if (v.strides[i] == 0) return false;
    dims.push_back({std::abs(v.strides[i]), v.shape[i]});
  }
  std::sort(dims.begin(), dims.end());
  for (size_t i = 1; i < dims.size(); i++)
    if (dims[i].first < dims[i - 1].first * dims[i - 1].second) return false;
  return true;
}

// A pending bitcast of something with storage (not of a constant): writes into all of it go to
// its source, so that the tensor it reinterprets sees them.
bool bitcast_of_storage(const Lazy& l) {
  if (!is_bitcast_view(l)) return false;
  const LazyBase& src = *l.base->srcs[0].base;
  return !(src.kind == LazyKind::kConst && !src.realized);
}

bool is_whole_buffer(const Lazy& l) {
  return l.is_base_view() && l.base->realized && !l.base->overwritten;
}
}  // namespace

void Tensor::assign(const Tensor& value) {
  // A view of another tensor's buffer (t[1:] += 1, t.bitcast(uint32)) writes into it, as
  // setitem does.
  if (bitcast_of_storage(lazy())) return write_view(value, "assign");
  if (!lazy().is_base_view() && lazy().base->kind != LazyKind::kConst)
    return write_view(value, "assign");
  assign_all({{*this, value}});
}

void Tensor::write_view(const Tensor& value, const char* op) {
  if (value.shape() != shape() || value.dtype() != dtype())
    fail(op, "value of shape " + shape_str(value.shape()) + " " + value.dtype().name() +
                 " for a tensor of shape " + shape_str(shape()) + " " + dtype().name());
  if (value.lazy().base->device != lazy().base->device)
    fail(op, "value on " + value.lazy().base->device->name() + " for a tensor on " +
                 lazy().base->device->name());
  if (bitcast_of_storage(lazy())) {  // into the tensor whose bits this one reads
    Tensor src(lazy().base->srcs[0]);
    return src.write_view(value.bitcast(src.dtype()), op);
  }
  BasePtr base = lazy().base;
  if (base->kind == LazyKind::kConst && !base->realized) {
    // Lazy work reading the constant keeps its old value; other views of it throw when read.
    std::vector<Lazy> pending = pending_readers({base.get()}, ancestors({value.lazy()}));
    if (!pending.empty()) run_schedule(create_schedule(pending));
    assign_all({{*this, value}});
    base->overwritten = true;
    return;
  }
  if (base->overwritten)
    fail(op, "a view of shape " + shape_str(shape()) +
                 " of a buffer that assign() has overwritten since the view was taken: take the "
                 "view again from the assigned tensor");
  if (numel() == 0) return;  // nothing to write (a KV cache update of 0 tokens, say)
  // The selected elements themselves (t[2:4] += 1 stores t[2:4] back after updating it).
  if (value.lazy().base == base && !value.lazy().sym && !lazy().sym &&
      compiler::simplify(value.lazy().st) == compiler::simplify(lazy().st))
    return;
  if (!writes_distinct(lazy().st))
    fail(op, "cannot write through this view of shape " + shape_str(shape()) +
                 " (padded, broadcast or a reshape of a permuted view) into its base of "
                 "shape " +
                 shape_str(base->shape) + ": make a .contiguous() copy first");
  if (!base->realized) {
    // A buffer made now would be another one at every replay.
    if (auto* capture = detail::jit_capture())
      capture->reject(std::string(op) + " on a view of shape " + shape_str(shape()) +
                      " whose base is not a realized buffer (a replay could not update it)");
    run_schedule(create_schedule({Lazy{base, ShapeTracker::contiguous(base->shape)}}));
  }
  // The value may read the base at other elements than it writes: compute it aside, unless it
  // does not read the buffer at all (t[i] = 5) or reads the whole buffer only element for element.
  Lazy v = value.lazy();
  std::vector<Lazy> targets;
  bool in_place = !buffers_read(v).count(base->realized.get()) ||
                  reads_in_place(v, base->realized.get(), lazy());
  if (!in_place) {
    v = lazy_contiguous(v, v.dtype());
    targets.push_back(v);
  }
  Lazy n = lazy_contiguous(v, v.dtype());
  n.base->write_into = base->realized;
  n.base->write_view = lazy().st;
  n.base->write_view_sym = lazy().sym;
  std::vector<Lazy> readers = pending_readers({base.get()}, ancestors({n}));
  readers.insert(readers.end(), targets.begin(), targets.end());
  readers.push_back(n);
  run_schedule(create_schedule(readers));
  n.base->overwritten = true;  // its buffer is the base's, in the base's layout
  base->version++;
}

void Tensor::assign_all(const std::vector<std::pair<Tensor, Tensor>>& updates) {
  struct Update {
    Lazy value;
    std::shared_ptr<DeviceBuffer> buf;  // null: not in place
    BasePtr old;
    bool aside = false;  // computed into a temporary first, then copied in
  };
  std::vector<Update> ups;
  std::unordered_set<const TensorImpl*> targets_seen;
  std::unordered_map<const DeviceBuffer*, size_t> by_buffer;
  for (auto& [target, value] : updates) {
    if (value.shape() != target.shape() || value.dtype() != target.dtype())
      fail("assign", "value of shape " + shape_str(value.shape()) + " " + value.dtype().name() +
                         " for a tensor of shape " + shape_str(target.shape()) + " " +
                         target.dtype().name());
    if (value.lazy().base->device != target.lazy().base->device)
      fail("assign", "value on " + value.lazy().base->device->name() + " for a tensor on " +
                         target.lazy().base->device->name());
    if (!targets_seen.insert(target.impl_.get()).second)
      fail("assign", "the same tensor of shape " + shape_str(target.shape()) +
                         " is assigned twice in one assign_all");
    const Lazy& old = target.lazy();
    Update u{value.lazy(), nullptr, nullptr, false};
    if (is_whole_buffer(old)) {
      u.buf = old.base->realized;
      u.old = old.base;
      if (!by_buffer.emplace(u.buf.get(), ups.size()).second)
        fail("assign", "two tensors assigned in one assign_all share one buffer (shape " +
                           shape_str(target.shape()) + ")");
      // Reading its own buffer at other elements than it writes: compute it aside.
      u.aside = !reads_in_place(u.value, u.buf.get(), old);
    } else if (auto* capture = detail::jit_capture()) {
      capture->reject("assign to a tensor of shape " + shape_str(target.shape()) +
                      " that is not a whole realized buffer (a replay could not update it)");
    }
    ups.push_back(std::move(u));
  }
  // An update reading another's buffer must run before it; those in a cycle go aside.
  std::vector<std::vector<size_t>> next(ups.size());
  std::vector<size_t> indegree(ups.size(), 0);
  for (size_t i = 0; i < ups.size(); i++) {
    if (!ups[i].buf || ups[i].aside) continue;
    for (const DeviceBuffer* b : buffers_read(ups[i].value)) {
      auto j = by_buffer.find(b);
      if (j == by_buffer.end() || j->second == i) continue;
      next[i].push_back(j->second);
      indegree[j->second]++;
    }
  }
  std::vector<size_t> ready;
  for (size_t i = 0; i < ups.size(); i++)
    if (indegree[i] == 0) ready.push_back(i);
  std::vector<bool> ordered(ups.size(), false);
  while (!ready.empty()) {
    size_t i = ready.back();
    ready.pop_back();
    ordered[i] = true;
    for (size_t j : next[i])
      if (--indegree[j] == 0) ready.push_back(j);
  }
  std::vector<Lazy> news, extra;
  std::vector<BasePtr> olds;
  for (size_t i = 0; i < ups.size(); i++) {
    Update& u = ups[i];
    Lazy v = u.value;
    if (u.buf && (u.aside || !ordered[i])) {
      v = lazy_contiguous(v, v.dtype());
      extra.push_back(v);
    }
    // Always a new base: the target must never share a buffer with the value's tensor.
    Lazy n = lazy_contiguous(v, v.dtype());
    n.base->write_into = u.buf;
    news.push_back(n);
    if (u.old) olds.push_back(u.old);
  }
  std::unordered_set<const LazyBase*> exclude = ancestors(news);
  std::vector<Lazy> targets;
  std::vector<std::pair<BasePtr, Lazy>> snapshots;
  for (const BasePtr& o : olds)
    if (std::optional<Lazy> copy = save_readers(o, exclude, targets)) {
      snapshots.push_back({o, *copy});
      targets.push_back(*copy);
    }
  targets.insert(targets.end(), extra.begin(), extra.end());
  targets.insert(targets.end(), news.begin(), news.end());
  run_schedule(create_schedule(targets));
  for (auto& [o, snap] : snapshots) repoint_readers(*o, snap.base);
  for (const BasePtr& o : olds) o->overwritten = true;
  // A value still lazy (new_a in `a.assign(new_a)`) would read the buffers just overwritten:
  // it becomes a read of what was assigned, which later assigns realize before overwriting.
  for (size_t i = 0; i < ups.size(); i++) {
    const Lazy& v = ups[i].value;
    if (v.base->realized || v.base->kind == LazyKind::kConst || v.base == news[i].base ||
        !v.is_base_view() || v.sym)
      continue;
    v.base->kind = LazyKind::kCast;
    v.base->op = Op::CAST;  // a plain read of what was assigned (never a BITCAST)
    v.base->axes.clear();
    v.base->srcs = {news[i]};
    v.base->force_kernel = false;
    news[i].base->readers.push_back(v.base);
  }
  for (size_t i = 0; i < updates.size(); i++) {
    TensorImpl& t = *updates[i].first.impl_;
    t.lazy = news[i];
    t.node.reset();
  }
}

}  // namespace baregrad::tensor
