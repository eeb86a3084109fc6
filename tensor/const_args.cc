#include "tensor/const_args.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "base/check.h"
#include "base/error.h"
#include "base/options.h"
#include "compiler/passes/lift_consts.h"

namespace baregrad::tensor {
namespace {

using compiler::UOp;
using compiler::UOpPtr;

struct Template {
  UOpPtr key;                   // keeps the template AST (the map's key) alive
  std::vector<int64_t> first;   // the values it was first compiled with
  std::vector<size_t> varying;  // constants seen with another value, ascending
  uint64_t version = 0;         // bumped when `varying` grows
  // What every AST of this template compiles at `version` (its other constants all have their
  // first values): computed once per version, not once per AST.
  UOpPtr use;
  uint64_t use_version = 0;
};

struct Seen {
  UOpPtr ast;          // keeps the key alive, so the address is not reused
  KernelPlan shifted;  // shift_views() of `ast` (its bits unused)
  std::vector<UOpPtr> consts;
  std::vector<int64_t> bits;
  std::shared_ptr<Template> tpl;  // null: no liftable constant
  uint64_t version = 0;
  UOpPtr use;
};

struct State {
  std::mutex mu;
  std::unordered_map<const UOp*, std::shared_ptr<Template>> templates;
  std::unordered_map<const UOp*, Seen> seen;
};

State& state() {
  static State* s = new State();  // never destroyed: realizes can run during static teardown
  return *s;
}

// Marks the constants whose value differs from the template's first values.
void note_values(Template& t, const std::vector<int64_t>& bits) {
  bool grew = false;
  for (size_t i = 0; i < bits.size(); i++) {
    if (bits[i] == t.first[i]) continue;
    auto it = std::lower_bound(t.varying.begin(), t.varying.end(), i);
    if (it != t.varying.end() && *it == i) continue;
    t.varying.insert(it, i);
    grew = true;
  }
  if (grew) t.version++;
}

// `ast` (one of t's ASTs, with liftable constants `consts`) with t's varying constants lifted.
UOpPtr lifted(Template& t, const UOpPtr& ast, const std::vector<UOpPtr>& consts) {
  if (!t.use || t.use_version != t.version) {
    t.use = compiler::lift_consts(ast, consts, t.varying);
    t.use_version = t.version;
  }
  return t.use;
}

}  // namespace

size_t max_records() { return static_cast<size_t>(std::max(16, options().program_cache_size)); }

KernelPlan plan_kernel(const UOpPtr& ast, bool inline_all) {
  if (inline_all) return {ast, {}, {}};
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.seen.find(ast.get());
  if (it == s.seen.end()) {
    if (s.seen.size() >= max_records()) s.seen.clear();
    Seen e;
    e.ast = ast;
    e.shifted = shift_views(ast);
    const UOpPtr& shifted = e.shifted.ast;
    e.consts = compiler::liftable_consts(shifted);
    e.use = shifted;
    if (!e.consts.empty()) {
      e.bits.reserve(e.consts.size());
      for (const UOpPtr& c : e.consts) e.bits.push_back(compiler::const_bits(*c));
      std::vector<size_t> all(e.consts.size());
      for (size_t i = 0; i < all.size(); i++) all[i] = i;
      UOpPtr key = compiler::lift_consts(shifted, e.consts, all);
      auto t = s.templates.find(key.get());
      if (t == s.templates.end()) {
        if (s.templates.size() >= max_records()) s.templates.clear();
        auto tpl = std::make_shared<Template>();
        tpl->key = key;
        tpl->first = e.bits;
        t = s.templates.emplace(key.get(), std::move(tpl)).first;
      } else {
        note_values(*t->second, e.bits);
      }
      e.tpl = t->second;
      e.use = lifted(*e.tpl, shifted, e.consts);
      e.version = e.tpl->version;
    }
    it = s.seen.emplace(ast.get(), std::move(e)).first;
  }
  Seen& e = it->second;
  if (e.tpl && e.version != e.tpl->version) {  // another AST of this shape varied a constant
    e.use = lifted(*e.tpl, e.shifted.ast, e.consts);
    e.version = e.tpl->version;
  }
  return {e.use, e.bits, e.shifted.shifts};
}

KernelPlan shift_views(const UOpPtr& ast) {
  constexpr int64_t kAlign = 64;  // bytes
  struct Slot {
    std::vector<UOpPtr> views;
    int64_t min_offset = INT64_MAX;
    int itemsize = 0;
    bool ok = true;
  };
  std::map<int, Slot> slots;
  for (const UOp* n : ast->toposort()) {
    if (n->op() != compiler::Op::VIEW || n->src(0)->op() != compiler::Op::DEFINE_GLOBAL) continue;
    Slot& s = slots[static_cast<int>(n->src(0)->arg_as<int64_t>())];
    const auto& st = n->arg_as<compiler::ShapeTracker>();
    s.itemsize = n->dtype().base().itemsize();
    if (st.views.size() != 1 || st.views[0].sym) {
      s.ok = false;
      continue;
    }
    s.min_offset = std::min(s.min_offset, st.views[0].offset);
    s.views.push_back(n->self());
  }
  KernelPlan out{ast, {}, {}};
  std::vector<std::pair<UOpPtr, UOpPtr>> repl;
  for (auto& [slot, s] : slots) {
    if (!s.ok || s.views.empty() || s.itemsize <= 0 || kAlign % s.itemsize != 0) continue;
    int64_t unit = kAlign / s.itemsize;  // elements
    int64_t shift = s.min_offset / unit * unit;
    if (shift <= 0) continue;
    for (const UOpPtr& v : s.views) {
      compiler::ShapeTracker st = v->arg_as<compiler::ShapeTracker>();
      st.views[0].offset -= shift;
      repl.emplace_back(v, UOp::make(compiler::Op::VIEW, v->dtype(), v->src(), std::move(st)));
    }
    out.shifts.emplace_back(slot, shift * s.itemsize);
  }
  if (!repl.empty()) out.ast = ast->substitute(repl);
  return out;
}

std::vector<int64_t> launch_vars(const compiler::ProgramSpec& spec,
                                 const KernelPlan& plan,
                                 const compiler::Bindings& vals) {
  std::vector<int64_t> vars;
  vars.reserve(spec.vars.size());
  for (const compiler::VarArg& v : spec.vars) {
    if (auto it = vals.find(v.name); it != vals.end()) {
      vars.push_back(it->second);
      continue;
    }
    int i = compiler::lifted_index(v.name);
    if (i < 0 || static_cast<size_t>(i) >= plan.bits.size())
      fail("realize", "kernel " + spec.name + " has a scalar argument '" + v.name +
                          "' that no constant of its AST provides");
    vars.push_back(plan.bits[i]);
  }
  return vars;
}

ConstArgStats const_arg_stats() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  ConstArgStats st;
  st.templates = s.templates.size();
  for (const auto& [k, t] : s.templates) st.lifted += !t->varying.empty();
  return st;
}

void clear_const_args() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.seen.clear();
  s.templates.clear();
}

}  // namespace baregrad::tensor
