#include "compiler/pattern.h"

#include <algorithm>
#include <unordered_map>

#include "base/check.h"

namespace baregrad::compiler {

// ---------------------------------------------------------------------------------------------
// Match

const UOp* Match::get(std::string_view name) const {
  for (auto& [n, u] : bound)
    if (*n == name) return u;
  return nullptr;
}

UOpPtr Match::operator[](std::string_view name) const {
  const UOp* u = get(name);
  CHECK(u != nullptr) << "pattern has no binding named '" << name << "'";
  return u->self();
}

// ---------------------------------------------------------------------------------------------
// UPat

UPat UPat::var(std::string name, std::optional<DType> dtype) {
  UPat p;
  p.name_ = std::move(name);
  p.dtype_ = dtype;
  return p;
}

UPat UPat::cvar(std::string name, std::optional<DType> dtype) {
  UPat p = var(std::move(name), dtype);
  p.ops_ = {Op::CONST};
  return p;
}

UPat UPat::cnst(double v) {
  UPat p;
  p.ops_ = {Op::CONST};
  p.pred_ = [v](const UOp* n) { return n->const_value() == v; };
  return p;
}

UPat UPat::op(Op op, std::optional<std::vector<UPat>> src, std::string name) {
  return ops({op}, std::move(src), std::move(name));
}

UPat UPat::ops(std::vector<Op> ops, std::optional<std::vector<UPat>> src, std::string name) {
  UPat p;
  p.commutative_ = src && src->size() == 2 &&
                   std::all_of(ops.begin(), ops.end(), [](Op o) { return is_commutative(o); });
  p.ops_ = std::move(ops);
  p.src_ = std::move(src);
  p.name_ = std::move(name);
  return p;
}

UPat&& UPat::named(std::string name) && {
  name_ = std::move(name);
  return std::move(*this);
}
UPat&& UPat::dtype(DType t) && {
  dtype_ = t;
  return std::move(*this);
}
UPat&& UPat::scalar(Scalar s) && {
  scalar_ = s;
  return std::move(*this);
}
UPat&& UPat::arg(Arg a) && {
  arg_ = std::move(a);
  return std::move(*this);
}
UPat&& UPat::allow_extra_src() && {
  prefix_src_ = true;
  return std::move(*this);
}
UPat&& UPat::where(std::function<bool(const UOp*)> pred) && {
  auto prev = std::move(pred_);
  pred_ = prev ? [prev, pred](const UOp* n) { return prev(n) && pred(n); } : std::move(pred);
  return std::move(*this);
}

bool UPat::match_src(const UOp* n, Match& m, bool swap) const {
  const auto& ps = *src_;
  size_t mark = m.bound.size();
  for (size_t i = 0; i < ps.size(); i++) {
    size_t j = swap ? 1 - i : i;
    if (!ps[i].match(n->src(j).get(), m)) {
      m.bound.resize(mark);
      return false;
    }
  }
  return true;
}

bool UPat::match(const UOp* n, Match& m) const {
  if (!ops_.empty() && std::find(ops_.begin(), ops_.end(), n->op()) == ops_.end()) return false;
  if (dtype_ && !(n->dtype() == *dtype_)) return false;
  if (scalar_ && (n->dtype().scalar != *scalar_ || n->dtype().ptr)) return false;
  if (arg_ && !(n->arg() == *arg_)) return false;
  if (src_) {
    size_t want = src_->size(), have = n->src().size();
    if (prefix_src_ ? have < want : have != want) return false;
  }
  if (pred_ && !pred_(n)) return false;
  size_t mark = m.bound.size();
  if (!name_.empty()) {
    if (const UOp* prev = m.get(name_)) {
      if (prev != n) return false;
    } else {
      m.bound.push_back({&name_, n});
    }
  }
  if (src_ && !match_src(n, m, false) && !(commutative_ && match_src(n, m, true))) {
    m.bound.resize(mark);
    return false;
  }
  return true;
}

UPat alu_pat(Op op, std::vector<UPat> src) { return UPat::op(op, std::move(src)); }
UPat operator+(UPat a, UPat b) { return alu_pat(Op::ADD, {std::move(a), std::move(b)}); }
UPat operator-(UPat a, UPat b) { return alu_pat(Op::SUB, {std::move(a), std::move(b)}); }
UPat operator*(UPat a, UPat b) { return alu_pat(Op::MUL, {std::move(a), std::move(b)}); }
UPat operator/(UPat a, UPat b) { return alu_pat(Op::IDIV, {std::move(a), std::move(b)}); }
UPat operator%(UPat a, UPat b) { return alu_pat(Op::MOD, {std::move(a), std::move(b)}); }
UPat operator+(UPat a, double b) { return std::move(a) + UPat::cnst(b); }
UPat operator*(UPat a, double b) { return std::move(a) * UPat::cnst(b); }
UPat operator/(UPat a, double b) { return std::move(a) / UPat::cnst(b); }
UPat operator%(UPat a, double b) { return std::move(a) % UPat::cnst(b); }

// ---------------------------------------------------------------------------------------------
// PatternMatcher

PatternMatcher::PatternMatcher(std::vector<std::pair<UPat, RewriteFn>> rules, std::string name)
    : rules_(std::move(rules)), name_(std::move(name)) {
  index();
}

void PatternMatcher::index() {
  by_op_.assign(kNumOps, {});
  for (int i = 0; i < static_cast<int>(rules_.size()); i++) {
    const auto& ops = rules_[i].first.root_ops();
    for (int o = 0; o < kNumOps; o++)
      if (ops.empty() || std::find(ops.begin(), ops.end(), static_cast<Op>(o)) != ops.end())
        by_op_[o].push_back(i);
  }
}

UOpPtr PatternMatcher::rewrite(const UOpPtr& n, void* ctx) const {
  Match m;
  m.ctx = ctx;
  for (int i : by_op_[static_cast<int>(n->op())]) {
    m.bound.clear();
    if (!rules_[i].first.match(n.get(), m)) continue;
    m.node = n;
    if (UOpPtr r = rules_[i].second(m)) return r;
  }
  return nullptr;
}

PatternMatcher PatternMatcher::operator+(const PatternMatcher& o) const {
  PatternMatcher out;
  out.rules_ = rules_;
  out.rules_.insert(out.rules_.end(), o.rules_.begin(), o.rules_.end());
  out.name_ = name_ + "+" + o.name_;
  out.index();
  return out;
}

// ---------------------------------------------------------------------------------------------
// graph_rewrite

namespace {
constexpr int kMaxRewritesPerNode = 10000;

class Rewriter {
 public:
  Rewriter(const PatternMatcher& pm, RewriteOptions opts) : pm_(pm), opts_(opts) {}

  UOpPtr run(const UOpPtr& n) {
    auto it = memo_.find(n.get());
    if (it != memo_.end()) return it->second;
    UOpPtr cur = n;
    if (opts_.order == RewriteOrder::kTopDown) cur = apply(cur);
    std::vector<UOpPtr> src;
    src.reserve(cur->src().size());
    bool changed = false;
    for (auto& s : cur->src()) {
      src.push_back(run(s));
      changed |= src.back() != s;
    }
    if (changed) cur = cur->with_src(std::move(src));
    // A rewritten node may enable rules on itself; its new sources are rewritten in turn.
    if (UOpPtr r = apply_once(cur)) cur = run(r);
    memo_[n.get()] = cur;
    keep_.push_back(n);
    return cur;
  }

 private:
  UOpPtr apply_once(const UOpPtr& n) {
    UOpPtr r = pm_.rewrite(n, opts_.ctx);
    return r && r != n ? r : nullptr;
  }
  UOpPtr apply(UOpPtr n) {
    for (int i = 0; i < kMaxRewritesPerNode; i++) {
      UOpPtr r = apply_once(n);
      if (!r) return n;
      n = r;
    }
    UNREACHABLE() << "graph_rewrite(" << pm_.name() << ") did not settle on " << op_name(n->op());
    return n;
  }

  const PatternMatcher& pm_;
  RewriteOptions opts_;
  std::unordered_map<const UOp*, UOpPtr> memo_;
  std::vector<UOpPtr> keep_;  // keeps memo keys alive so their addresses stay unique
};
}  // namespace

UOpPtr graph_rewrite(const UOpPtr& root, const PatternMatcher& pm, RewriteOptions opts) {
  UOpPtr cur = root;
  for (int pass = 0; pass < 1000; pass++) {
    UOpPtr next = Rewriter(pm, opts).run(cur);
    if (!opts.fixed_point || next == cur) return next;
    cur = next;
  }
  UNREACHABLE() << "graph_rewrite(" << pm.name() << ") fixed point not reached in 1000 passes";
  return cur;
}

}  // namespace baregrad::compiler
