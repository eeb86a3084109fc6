#include "hcq/graph.h"

namespace baregrad::hcq {
namespace {

bool overlap(const Access& a, const Access& b) {
  if (a.va.symbolic() || b.va.symbolic()) return a.va.var == b.va.var;
  auto a0 = static_cast<uint64_t>(a.va.imm), b0 = static_cast<uint64_t>(b.va.imm);
  return a0 < b0 + b.bytes && b0 < a0 + a.bytes;
}

bool any_overlap(const std::vector<Access>& x, const std::vector<Access>& y) {
  for (const Access& a : x)
    for (const Access& b : y)
      if (overlap(a, b)) return true;
  return false;
}

// Whether `later` must wait for `earlier`: read-after-write, write-after-read or -write.
bool conflicts(const GraphItem& earlier, const GraphItem& later) {
  return any_overlap(earlier.writes, later.reads) || any_overlap(earlier.writes, later.writes) ||
         any_overlap(earlier.reads, later.writes);
}
}  // namespace

Result<std::unique_ptr<Graph>> Graph::create(Device& dev,
                                             std::vector<GraphItem> items,
                                             int num_vars) {
  std::unique_ptr<Graph> g(new Graph(dev, num_vars));
  g->items_ = std::move(items);
  g->vars_.assign(static_cast<size_t>(num_vars) + 2, 0);
  const Value prev = Value::sym(num_vars), self = Value::sym(num_vars + 1);
  g->queues_[0] = dev.compute_queue();
  bool copies = false;
  for (const GraphItem& it : g->items_) copies |= it.kind == GraphItem::Kind::kCopy;
  if (copies) g->queues_[1] = dev.copy_queue();
  auto queue_of = [&](const GraphItem& it) {
    return it.kind == GraphItem::Kind::kCopy && g->queues_[1] ? 1 : 0;
  };
  bool two = g->queues_[1] != nullptr;
  for (int q = 0; q < (two ? 2 : 1); q++) {
    ASSIGN_OR_RETURN(g->progress_[q],
                     dev.new_signal(q == 0 ? "graph compute progress" : "graph copy progress"));
    g->queues_[q]->wait(dev.timeline(), prev);
  }
  // Position of each item in its queue; the last item of queue q each item must wait for.
  std::vector<int> pos(g->items_.size());
  int count[2] = {0, 0};
  for (size_t j = 0; j < g->items_.size(); j++) {
    const GraphItem& it = g->items_[j];
    int q = queue_of(it);
    pos[j] = count[q]++;
    if (two) {
      int wait_for = -1;
      for (size_t i = 0; i < j; i++)
        if (queue_of(g->items_[i]) != q && conflicts(g->items_[i], it)) wait_for = pos[i];
      if (wait_for >= 0) {
        g->queues_[q]->wait(*g->progress_[1 - q], wait_for + 1);
        g->deps_++;
      }
    }
    HwQueue& hq = *g->queues_[q];
    if (it.kind == GraphItem::Kind::kExec) {
      if (!it.prg)
        return invalid_argument("graph item " + std::to_string(j) + ": exec without a program");
      size_t bytes = it.prg->args_prefix() + 8 * (it.bufs.size() + it.vars.size());
      ASSIGN_OR_RETURN(Buffer mem, dev.allocator().alloc(std::max<size_t>(bytes, 8),
                                                         {.host = true, .cpu_access = true}));
      g->args_mem_.push_back(mem);
      auto args =
          std::make_unique<ArgsState>(mem, it.prg->args_prefix(), static_cast<int>(it.bufs.size()),
                                      static_cast<int>(it.vars.size()));
      for (size_t b = 0; b < it.bufs.size(); b++) args->set_buf(static_cast<int>(b), it.bufs[b]);
      for (size_t v = 0; v < it.vars.size(); v++) args->set_var(static_cast<int>(v), it.vars[v]);
      hq.exec(*it.prg, *args, it.grid, it.block);
      g->args_.push_back(std::move(args));
    } else {
      hq.copy(it.dst, it.src, it.bytes);
    }
    if (two) hq.signal(*g->progress_[q], pos[j] + 1);
  }
  if (two) g->queues_[0]->wait(*g->progress_[1], count[1]);  // the copies are done too
  g->queues_[0]->signal(dev.timeline(), self);
  for (auto& q : g->queues_) {
    if (!q) continue;
    RETURN_IF_ERROR(q->refusal());
    RETURN_IF_ERROR(q->bind());
  }
  return g;
}

Graph::~Graph() {
  (void)dev_.synchronize();
  for (auto& q : queues_) q.reset();
  args_.clear();
  for (const Buffer& b : args_mem_) dev_.allocator().free(b);
}

Status Graph::replay(std::span<const int64_t> vars) {
  if (vars.size() != static_cast<size_t>(num_vars_))
    return invalid_argument("graph replay with " + std::to_string(vars.size()) + " values for " +
                            std::to_string(num_vars_) + " variables");
  Result<uint64_t> v = dev_.submit_with_timeline([&](uint64_t value) -> Status {
    // The bound commands and argument blocks are patched in place: the last replay must be done.
    if (last_value_ && last_epoch_ == dev_.timeline_epoch())
      RETURN_IF_ERROR(dev_.timeline().wait(last_value_));
    for (auto& p : progress_)
      if (p) p->set(0);
    std::copy(vars.begin(), vars.end(), vars_.begin());
    vars_[num_vars_] = static_cast<int64_t>(value - 1);
    vars_[num_vars_ + 1] = static_cast<int64_t>(value);
    if (queues_[1]) RETURN_IF_ERROR(queues_[1]->submit(vars_));
    return queues_[0]->submit(vars_);
  });
  RETURN_IF_ERROR(v.status());
  last_value_ = *v;
  last_epoch_ = dev_.timeline_epoch();
  return Status();
}

}  // namespace baregrad::hcq
