// UPat / PatternMatcher / graph_rewrite: the only way passes transform IR.
//
//   PatternMatcher pm({
//     {UPat::var("x") + UPat::cnst(0), [](const Match& m) { return m["x"]; }},
//   });
//   UOpPtr out = graph_rewrite(sink, pm);
//
// A rule's function returns the replacement, or null to decline. Sources of binary
// commutative ops are tried in both orders. A name bound twice must bind the same node.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "compiler/uop.h"

namespace baregrad::compiler {

class UPat;

// What a rule sees: the matched node, its named parts, and the caller's context.
// NOTE: bindings point into the pattern and the matched graph; a Match must not outlive either.
struct Match {
  UOpPtr node;
  std::vector<std::pair<const std::string*, const UOp*>> bound;
  void* ctx = nullptr;

  // The node bound to `name`; CHECK-fails when the pattern has no such name.
  UOpPtr operator[](std::string_view name) const;
  const UOp* get(std::string_view name) const;
};

class UPat {
 public:
  // Any node, bound to `name` when non-empty.
  static UPat var(std::string name = "", std::optional<DType> dtype = std::nullopt);
  // A CONST node, bound to `name`.
  static UPat cvar(std::string name = "", std::optional<DType> dtype = std::nullopt);
  // A CONST equal to `v` (any dtype).
  static UPat cnst(double v);
  // A node with op `op` and exactly these sources (any sources when `src` is not given).
  static UPat op(Op op, std::optional<std::vector<UPat>> src = std::nullopt, std::string name = "");
  // A node whose op is any of `ops`.
  static UPat ops(std::vector<Op> ops,
                  std::optional<std::vector<UPat>> src = std::nullopt,
                  std::string name = "");

  UPat&& named(std::string name) &&;
  UPat&& dtype(DType t) &&;
  UPat&& scalar(Scalar s) &&;  // matches that element type at any lane count
  UPat&& arg(Arg a) &&;
  UPat&& allow_extra_src() &&;  // the listed sources are a prefix of the node's
  UPat&& where(std::function<bool(const UOp*)> pred) &&;

  // True (and `m.bound` extended) when `n` matches; on failure `m.bound` is unchanged.
  bool match(const UOp* n, Match& m) const;
  // The ops this pattern can match at its root; empty means any.
  const std::vector<Op>& root_ops() const { return ops_; }

 private:
  std::vector<Op> ops_;
  std::optional<DType> dtype_;
  std::optional<Scalar> scalar_;
  std::optional<Arg> arg_;
  std::optional<std::vector<UPat>> src_;
  std::string name_;
  bool prefix_src_ = false;
  bool commutative_ = false;
  std::function<bool(const UOp*)> pred_;
  bool match_src(const UOp* n, Match& m, bool swap) const;
};

UPat operator+(UPat a, UPat b);
UPat operator-(UPat a, UPat b);
UPat operator*(UPat a, UPat b);
UPat operator/(UPat a, UPat b);  // IDIV
UPat operator%(UPat a, UPat b);
UPat operator+(UPat a, double b);
UPat operator*(UPat a, double b);
UPat operator/(UPat a, double b);
UPat operator%(UPat a, double b);
UPat alu_pat(Op op, std::vector<UPat> src);

using RewriteFn = std::function<UOpPtr(const Match&)>;

class PatternMatcher {
 public:
  PatternMatcher() = default;
  PatternMatcher(std::vector<std::pair<UPat, RewriteFn>> rules, std::string name = "");
  // The first non-null result of a rule matching `n`, or null.
  UOpPtr rewrite(const UOpPtr& n, void* ctx = nullptr) const;
  // This matcher's rules followed by `o`'s.
  PatternMatcher operator+(const PatternMatcher& o) const;
  const std::string& name() const { return name_; }
  size_t size() const { return rules_.size(); }

 private:
  void index();
  std::vector<std::pair<UPat, RewriteFn>> rules_;
  std::vector<std::vector<int>> by_op_;  // rule indices per op, in rule order
  std::string name_;
};

enum class RewriteOrder { kBottomUp, kTopDown };

struct RewriteOptions {
  RewriteOrder order = RewriteOrder::kBottomUp;
  // Repeat whole-graph passes until nothing changes (bounded; CHECK-fails if it never settles).
  bool fixed_point = false;
  void* ctx = nullptr;
};

// Rewrites every node reachable from `root` with `pm` until no rule applies to any node.
// Bottom-up rewrites sources first; top-down rewrites a node before its sources.
UOpPtr graph_rewrite(const UOpPtr& root, const PatternMatcher& pm, RewriteOptions opts = {});

}  // namespace baregrad::compiler
