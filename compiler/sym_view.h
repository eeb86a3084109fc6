// Movement ops on symbolic trackers: the shadow that a tensor whose shape holds a Variable keeps
// beside its concrete ShapeTracker (the values at its current binding).
//
// The tensor layer checks every argument with the concrete ops of view_ops.h first, so these
// ops only decide whether the result can be described for every value of the variables. When
// it cannot (a comparison the bounds do not decide, a size-1 dim that is only 1 for some
// values) they return nullopt and the tensor continues with concrete sizes: its kernels are
// then compiled for the current values, correct but not shared across values.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "compiler/view.h"

namespace baregrad::compiler {

struct SymTracker {
  std::vector<SymView> views;
  // The values of the variables it was made with (merged along every op).
  Bindings vals;

  bool operator==(const SymTracker&) const = default;
  const std::vector<Sym>& shape() const { return views.back().shape; }
  static SymTracker contiguous(std::vector<Sym> shape, Bindings vals = {});
  static SymTracker of(const ShapeTracker& st);
  // The kernel AST form: each view instantiated at the variables' max, carrying its shadow.
  ShapeTracker instantiate() const;
  // The tracker at the current values.
  ShapeTracker eval() const;
  bool is_symbolic() const;
  std::string str() const;
};

// Merges `b` into `a`; a Variable bound to two values throws Error("[op] ...").
void merge_bindings(std::string_view op, Bindings& a, const Bindings& b);

std::optional<SymTracker> sym_reshape(const SymTracker& st, const std::vector<Sym>& shape);
SymTracker sym_permute(const SymTracker& st, const std::vector<int>& order);
std::optional<SymTracker> sym_expand(const SymTracker& st, const std::vector<Sym>& shape);
std::optional<SymTracker> sym_pad(const SymTracker& st,
                                  const std::vector<std::pair<Sym, Sym>>& before_after);
std::optional<SymTracker> sym_shrink(const SymTracker& st,
                                     const std::vector<std::pair<Sym, Sym>>& ranges);
SymTracker sym_flip(const SymTracker& st, const std::vector<bool>& axes);
// `outer` read through `inner` (a consumer's view of a base that is itself a view).
SymTracker sym_compose(const SymTracker& inner, const SymTracker& outer);

}  // namespace baregrad::compiler
