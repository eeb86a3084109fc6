#include "compiler/codegen/reduce.h"

#include <cmath>

#include "base/check.h"
#include "compiler/pattern.h"

namespace baregrad::compiler {

UOpPtr reduce_identity(Op op, DType dtype) {
  switch (op) {
    case Op::ADD:
      return UOp::cnst(dtype, 0);
    case Op::MUL:
      return UOp::cnst(dtype, 1);
    case Op::MAX:
      if (dtypes::is_float(dtype)) return UOp::cnst(dtype, -INFINITY);
      if (dtypes::is_unsigned(dtype) || dtypes::is_bool(dtype)) return UOp::cnst(dtype, 0);
      return UOp::cnst(dtype, dtypes::min_value(dtype.base()));
    default:
      UNREACHABLE() << "no identity for reduce op " << op_name(op);
  }
  return nullptr;
}

UOpPtr lower_reduce(const UOpPtr& sink) {
  int64_t next_id = 0;
  PatternMatcher pm({{UPat::op(Op::REDUCE).named("r"),
                      [](const Match& m) -> UOpPtr {
                        const UOpPtr& r = m.node;
                        Op op = static_cast<Op>(r->arg_as<int64_t>());
                        int64_t& id = *static_cast<int64_t*>(m.ctx);
                        std::vector<UOpPtr> acc_src{reduce_identity(op, r->dtype())};
                        const UOpPtr& outer = r->src(1);  // ranges are listed outermost first
                        if (outer->src().size() > 2) acc_src.push_back(outer->src(2));
                        UOpPtr acc =
                            UOp::make(Op::DEFINE_ACC, r->dtype(), std::move(acc_src), id++);
                        std::vector<UOpPtr> load_src{acc};
                        for (size_t i = 1; i < r->src().size(); i++) load_src.push_back(r->src(i));
                        UOpPtr cur = UOp::make(Op::ACC_LOAD, r->dtype(), std::move(load_src));
                        UOpPtr next = UOp::alu(op, {cur, r->src(0)});
                        UOpPtr st = UOp::make(Op::ACC_STORE, dtypes::kVoid, {acc, next});
                        return UOp::make(Op::ACC_LOAD, r->dtype(), {acc, st});
                      }}},
                    "lower_reduce");
  RewriteOptions opts;
  opts.ctx = &next_id;
  return graph_rewrite(sink, pm, opts);
}

}  // namespace baregrad::compiler
