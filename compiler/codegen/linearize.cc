#include "compiler/codegen/linearize.h"

#include <algorithm>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "base/check.h"
#include "base/error.h"

namespace baregrad::compiler {
namespace {

class Linearizer {
 public:
  explicit Linearizer(const UOpPtr& sink) : sink_(sink), topo_(sink->toposort()) {
    for (size_t i = 0; i < topo_.size(); i++) order_[topo_[i]] = static_cast<int>(i);
  }

  std::vector<UOpPtr> run() {
    for (const UOp* n : topo_) scope_[n] = compute_scope(n);
    for (const UOp* n : topo_) {
      if (n == sink_.get()) continue;
      std::vector<const UOp*> pn = path(n);
      add_member(pn, n);
      for (auto& s : n->src()) add_edges(path(s.get()), s.get(), pn, n);
    }
    emit(nullptr);
    return std::move(out_);
  }

 private:
  static const UOp* parent(const UOp* range) {
    return range->src().size() > 2 ? range->src(2).get() : nullptr;
  }
  int depth(const UOp* r) const { return r ? 1 + depth(parent(r)) : 0; }

  // The deeper of two scopes; they must lie on one chain of nested loops.
  const UOp* deeper(const UOp* a, const UOp* b, const UOp* n) const {
    if (depth(a) < depth(b)) std::swap(a, b);
    const UOp* x = a;
    while (x && x != b) x = parent(x);
    if (x != b)
      fail("linearize", std::string(op_name(n->op())) + " depends on loops that do not nest");
    return a;
  }

  const UOp* compute_scope(const UOp* n) const {
    if (n->op() == Op::RANGE) return n;
    const UOp* s = nullptr;
    for (size_t i = 0; i < n->src().size(); i++) {
      const UOp* x = n->src(i).get();
      // ACC_LOAD's non-RANGE sources only order it; they do not pull it into their loops.
      if (n->op() == Op::ACC_LOAD && i > 0 && x->op() != Op::RANGE) continue;
      const UOp* sx = scope_.at(x);
      // A BARRIER waits for shared-memory STOREs outside the bounds checks (RANGEs of at most
      // one iteration, negative ids) that enclose them: every thread must reach it.
      if (n->op() == Op::BARRIER)
        while (sx && sx->arg_as<int64_t>() < 0) sx = parent(sx);
      s = deeper(s, sx, n);
    }
    return s;
  }

  // The loop chain a node's membership is decided by: [outermost .. its block], where the
  // block of a RANGE is its parent (the RANGE is a member there, the header of its own block).
  std::vector<const UOp*> path(const UOp* n) const {
    std::vector<const UOp*> p;
    for (const UOp* r = n->op() == Op::RANGE ? parent(n) : scope_.at(n); r; r = parent(r))
      p.push_back(r);
    std::reverse(p.begin(), p.end());
    return p;
  }

  // The member of block p[i-1] (root for i = 0) containing node n with path p.
  static const UOp* member(const std::vector<const UOp*>& p, size_t level, const UOp* n) {
    return level < p.size() ? p[level] : n;
  }

  void add_member(const std::vector<const UOp*>& p, const UOp* n) {
    members_[p.empty() ? nullptr : p.back()].push_back(n);
  }

  void add_edges(const std::vector<const UOp*>& ps,
                 const UOp* s,
                 const std::vector<const UOp*>& pn,
                 const UOp* n) {
    for (size_t level = 0; level <= std::min(ps.size(), pn.size()); level++) {
      if (level > 0 && ps[level - 1] != pn[level - 1]) return;  // different blocks from here
      const UOp* block = level == 0 ? nullptr : pn[level - 1];
      if (s == block) return;  // the loop header is already open
      const UOp* ms = member(ps, level, s);
      const UOp* mn = member(pn, level, n);
      if (ms != mn) {
        if (edges_[block][ms].insert(mn).second) indeg_[block][mn]++;
        return;
      }
    }
  }

  void emit(const UOp* block) {
    auto& mem = members_[block];
    std::sort(mem.begin(), mem.end());
    mem.erase(std::unique(mem.begin(), mem.end()), mem.end());
    auto cmp = [&](const UOp* a, const UOp* b) { return order_.at(a) > order_.at(b); };
    std::priority_queue<const UOp*, std::vector<const UOp*>, decltype(cmp)> ready(cmp);
    for (const UOp* m : mem)
      if (indeg_[block][m] == 0) ready.push(m);
    size_t done = 0;
    while (!ready.empty()) {
      const UOp* m = ready.top();
      ready.pop();
      done++;
      out_.push_back(m->self());
      if (m->op() == Op::RANGE) {
        emit(m);
        out_.push_back(UOp::make(Op::ENDRANGE, dtypes::kVoid, {m->self()}));
      }
      for (const UOp* next : edges_[block][m])
        if (--indeg_[block][next] == 0) ready.push(next);
    }
    CHECK_EQ(done, mem.size()) << "linearize: dependency cycle inside a loop";
  }

  UOpPtr sink_;
  std::vector<const UOp*> topo_;
  std::unordered_map<const UOp*, int> order_;
  std::unordered_map<const UOp*, const UOp*> scope_;
  std::unordered_map<const UOp*, std::vector<const UOp*>> members_;
  std::unordered_map<const UOp*, std::unordered_map<const UOp*, std::unordered_set<const UOp*>>>
      edges_;
  std::unordered_map<const UOp*, std::unordered_map<const UOp*, int>> indeg_;
  std::vector<UOpPtr> out_;
};

}  // namespace

std::vector<UOpPtr> linearize(const UOpPtr& sink) { return Linearizer(sink).run(); }

}  // namespace baregrad::compiler
