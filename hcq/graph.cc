#include "hcq/graph.h"

#include <algorithm>
#include <functional>

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

// How a graph is laid out (all decided once, in create()):
//  - devs_[0] is the creating device; every device an item names gets a slot.
//  - One lane (a bound queue) per device and engine used; the creating device always has a
//    compute lane, lanes_[0]. A device's main lane is its first lane: it joins the device's
//    other lanes and signals the device's timeline. lanes_[0] also waits for every other
//    device's timeline before it signals its own, so the creating device's timeline reaching a
//    replay's value means the whole graph ran.
//  - With several lanes, each lane signals its progress signal (items done) after every item;
//    a lane waits on another lane's progress where an item depends on that lane's items.
// The timeline signals are recorded by reference, so a device whose timeline wrapped into a new
// epoch (Device::synchronize) gets its lanes recorded again before the next replay.
Result<std::unique_ptr<Graph>> Graph::create(Device& dev,
                                             std::vector<GraphItem> items,
                                             int num_vars) {
  std::unique_ptr<Graph> g(new Graph(num_vars));
  g->items_ = std::move(items);
  g->devs_.emplace_back().dev = &dev;
  auto slot_of = [&](Device* d) -> Result<int> {
    for (size_t s = 0; s < g->devs_.size(); s++)
      if (g->devs_[s].dev == d) return static_cast<int>(s);
    if (d->peer_group() != dev.peer_group())
      return unimplemented("graph of " + dev.name() + " (peer group " + dev.peer_group() +
                           ") with items on " + d->name() + " (peer group " + d->peer_group() +
                           "): a graph spans one peer group");
    g->devs_.emplace_back().dev = d;
    return static_cast<int>(g->devs_.size() - 1);
  };
  // Lanes: the creating device's compute lane first, then as the items need them.
  g->lanes_.emplace_back().dev = &dev;
  std::vector<int> has_copy_engine;  // per slot: -1 unknown, 0 no, 1 yes
  auto lane_of = [&](int slot, bool copy) {
    for (size_t l = 0; l < g->lanes_.size(); l++)
      if (g->lanes_[l].slot == slot && g->lanes_[l].copy == copy) return static_cast<int>(l);
    Lane& lane = g->lanes_.emplace_back();
    lane.dev = g->devs_[slot].dev;
    lane.slot = slot;
    lane.copy = copy;
    return static_cast<int>(g->lanes_.size() - 1);
  };
  g->item_lane_.resize(g->items_.size());
  for (size_t j = 0; j < g->items_.size(); j++) {
    GraphItem& it = g->items_[j];
    if (!it.dev) it.dev = &dev;
    ASSIGN_OR_RETURN(int slot, slot_of(it.dev));
    if (has_copy_engine.size() <= static_cast<size_t>(slot)) has_copy_engine.resize(slot + 1, -1);
    bool copy = false;
    if (it.kind == GraphItem::Kind::kCopy) {
      if (has_copy_engine[slot] < 0) has_copy_engine[slot] = it.dev->copy_queue() != nullptr;
      copy = has_copy_engine[slot] == 1;
    } else if (!it.prg) {
      return invalid_argument("graph item " + std::to_string(j) + ": exec without a program");
    }
    g->item_lane_[j] = lane_of(slot, copy);
  }
  if (g->lanes_.size() > 1) {
    for (Lane& l : g->lanes_) {
      ASSIGN_OR_RETURN(l.progress,
                       l.dev->new_signal(std::string("graph ") + (l.copy ? "copy" : "compute") +
                                         " progress on " + l.dev->name()));
    }
  }
  // Argument blocks, in the memory of the device that runs each launch.
  for (size_t j = 0; j < g->items_.size(); j++) {
    const GraphItem& it = g->items_[j];
    if (it.kind != GraphItem::Kind::kExec) {
      g->args_.emplace_back();
      continue;
    }
    size_t bytes = it.prg->args_prefix() + 8 * (it.bufs.size() + it.vars.size());
    ASSIGN_OR_RETURN(Buffer mem, it.dev->allocator().alloc(std::max<size_t>(bytes, 8),
                                                           {.host = true, .cpu_access = true}));
    g->devs_[g->lanes_[g->item_lane_[j]].slot].args_mem.push_back(mem);
    auto args =
        std::make_unique<ArgsState>(mem, it.prg->args_prefix(), static_cast<int>(it.bufs.size()),
                                    static_cast<int>(it.vars.size()));
    for (size_t b = 0; b < it.bufs.size(); b++) args->set_buf(static_cast<int>(b), it.bufs[b]);
    for (size_t v = 0; v < it.vars.size(); v++) args->set_var(static_cast<int>(v), it.vars[v]);
    g->args_.push_back(std::move(args));
  }
  g->vars_.assign(static_cast<size_t>(num_vars) + 2 * g->devs_.size(), 0);
  RETURN_IF_ERROR(g->record());
  return g;
}

Status Graph::record() {
  const size_t n = lanes_.size();
  for (Lane& l : lanes_) {
    l.q.reset();  // a bound queue's destructor waits for the device
    l.q = l.copy ? l.dev->copy_queue() : l.dev->compute_queue();
    l.count = 0;
    l.q->wait(l.dev->timeline(), prev_of(l.slot));
  }
  for (PerDevice& d : devs_) d.epoch = d.dev->timeline_epoch();
  deps_ = 0;
  // known[l * n + m]: the progress of lane m that lane l has seen by now, directly or through a
  // lane it waited for; seen[j]: lane item_lane_[j]'s row of `known` once item j is done.
  std::vector<int> known(n * n, 0);
  std::vector<std::vector<int>> seen(items_.size());
  std::vector<int> pos(items_.size());
  auto learn = [&](size_t l, const std::vector<int>& row) {
    for (size_t k = 0; k < n; k++) known[l * n + k] = std::max(known[l * n + k], row[k]);
  };
  for (size_t j = 0; j < items_.size(); j++) {
    const GraphItem& it = items_[j];
    const int l = item_lane_[j];
    if (n > 1) {
      // The last conflicting item of each other lane; a wait for it also covers what that item
      // had seen, so the waits are made latest first and skipped once covered.
      std::vector<int> need(n, -1);
      for (size_t i = 0; i < j; i++)
        if (item_lane_[i] != l && conflicts(items_[i], it))
          need[item_lane_[i]] = static_cast<int>(i);
      std::vector<int> by_item;
      for (size_t m = 0; m < n; m++)
        if (need[m] >= 0) by_item.push_back(need[m]);
      std::sort(by_item.rbegin(), by_item.rend());
      for (int i : by_item) {
        const size_t m = static_cast<size_t>(item_lane_[i]);
        if (known[l * n + m] >= pos[i] + 1) continue;
        lanes_[l].q->wait(*lanes_[m].progress, pos[i] + 1);
        deps_++;
        learn(static_cast<size_t>(l), seen[i]);
      }
    }
    HwQueue& q = *lanes_[l].q;
    if (it.kind == GraphItem::Kind::kExec)
      q.exec(*it.prg, *args_[j], it.grid, it.block);
    else
      q.copy(it.dst, it.src, it.bytes);
    pos[j] = lanes_[l].count++;
    if (n > 1) {
      q.signal(*lanes_[l].progress, pos[j] + 1);
      known[l * n + l] = pos[j] + 1;
      seen[j].assign(known.begin() + l * n, known.begin() + (l + 1) * n);
    }
  }
  // Joins: every device's main lane waits for its other lanes, then signals its timeline; the
  // creating device's main lane (lanes_[0]) signals last, after every other device's timeline.
  for (int s = static_cast<int>(devs_.size()) - 1; s >= 0; s--) {
    int main = -1;
    for (size_t l = 0; l < n; l++) {
      if (lanes_[l].slot != s) continue;
      if (main < 0) {
        main = static_cast<int>(l);
      } else if (lanes_[l].count > known[main * n + l]) {
        lanes_[main].q->wait(*lanes_[l].progress, lanes_[l].count);
      }
    }
    if (main < 0) continue;
    if (s == 0)
      for (size_t d = 1; d < devs_.size(); d++)
        lanes_[0].q->wait(devs_[d].dev->timeline(), self_of(static_cast<int>(d)));
    lanes_[main].q->signal(devs_[s].dev->timeline(), self_of(s));
  }
  for (Lane& l : lanes_) {
    RETURN_IF_ERROR(l.q->refusal());
    RETURN_IF_ERROR(l.q->bind());
  }
  return Status();
}

Graph::~Graph() {
  for (PerDevice& d : devs_) (void)d.dev->synchronize();
  lanes_.clear();
  args_.clear();
  for (PerDevice& d : devs_)
    for (const Buffer& b : d.args_mem) d.dev->allocator().free(b);
}

std::vector<Device*> Graph::devices() const {
  std::vector<Device*> out;
  for (const PerDevice& d : devs_) out.push_back(d.dev);
  return out;
}

Status Graph::replay(std::span<const int64_t> vars) {
  if (vars.size() != static_cast<size_t>(num_vars_))
    return invalid_argument("graph replay with " + std::to_string(vars.size()) + " values for " +
                            std::to_string(num_vars_) + " variables");
  for (PerDevice& d : devs_) RETURN_IF_ERROR(d.dev->error());
  // A timeline that wrapped since the recording is another signal: record again (the devices
  // are idle then, since only synchronize() wraps a timeline).
  bool stale = false;
  for (PerDevice& d : devs_) stale |= d.epoch != d.dev->timeline_epoch();
  if (stale) {
    for (PerDevice& d : devs_) RETURN_IF_ERROR(d.dev->synchronize());
    RETURN_IF_ERROR(record());
  }
  // Take every device's next timeline value under its submit lock, in address order so that two
  // graphs over the same devices cannot deadlock; publish everything under all the locks.
  std::vector<int> order(devs_.size());
  for (size_t s = 0; s < order.size(); s++) order[s] = static_cast<int>(s);
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return std::less<const Device*>()(devs_[a].dev, devs_[b].dev); });
  std::function<Status(size_t)> lock_from = [&](size_t k) -> Status {
    if (k == order.size()) return publish(vars);
    const int s = order[k];
    Result<uint64_t> v = devs_[s].dev->submit_with_timeline([&](uint64_t value) -> Status {
      vars_[num_vars_ + 2 * s] = static_cast<int64_t>(value - 1);
      vars_[num_vars_ + 2 * s + 1] = static_cast<int64_t>(value);
      return lock_from(k + 1);
    });
    RETURN_IF_ERROR(v.status());
    devs_[s].last_value = *v;
    return Status();
  };
  return lock_from(0);
}

Status Graph::publish(std::span<const int64_t> vars) {
  // The bound commands, argument blocks and progress signals are reused: the last replay must
  // be done. The creating device's timeline covers every lane of it.
  PerDevice& first = devs_[0];
  if (first.last_value && first.last_epoch == first.dev->timeline_epoch())
    RETURN_IF_ERROR(first.dev->timeline().wait(first.last_value));
  first.last_epoch = first.dev->timeline_epoch();
  for (Lane& l : lanes_)
    if (l.progress) l.progress->set(0);
  std::copy(vars.begin(), vars.end(), vars_.begin());
  // Lanes waited on are published before the lanes that wait, the creating device's last.
  for (size_t l = lanes_.size(); l-- > 0;) RETURN_IF_ERROR(lanes_[l].q->submit(vars_));
  return Status();
}

}  // namespace baregrad::hcq
