#include "compiler/ast.h"

#include "base/check.h"

namespace baregrad::compiler {

UOpPtr global(int slot, DType dtype) {
  return UOp::make(Op::DEFINE_GLOBAL, dtype.as_ptr(), {}, int64_t{slot});
}

UOpPtr iota(DType dtype) {
  CHECK(dtypes::is_int(dtype)) << "iota of " << dtype.name();
  return UOp::make(Op::IOTA, dtype.as_ptr(), {});
}

UOpPtr load(const UOpPtr& buf, ShapeTracker st) {
  UOpPtr view = UOp::make(Op::VIEW, buf->dtype(), {buf}, std::move(st));
  return UOp::make(Op::LOAD, buf->dtype().base(), {view});
}

UOpPtr store(const UOpPtr& buf, ShapeTracker st, const UOpPtr& value) {
  UOpPtr view = UOp::make(Op::VIEW, buf->dtype(), {buf}, std::move(st));
  return UOp::make(Op::STORE, dtypes::kVoid, {view, value});
}

UOpPtr reduce_axis(Op op, std::vector<int> axes, const UOpPtr& value) {
  return UOp::make(Op::REDUCE_AXIS, value->dtype(), {value}, ReduceArg{op, std::move(axes)});
}

UOpPtr sym_index(const Sym& s) {
  UOpPtr out = UOp::index_const(0);
  for (const Sym::Term& t : s.terms()) {
    UOpPtr term = UOp::index_const(t.coeff);
    for (const SymVar& v : t.vars) term = term * UOp::var(v.name, v.min, v.max);
    out = out + term;
  }
  return out;
}

UOpPtr sink(std::vector<UOpPtr> stores) {
  return UOp::make(Op::SINK, dtypes::kVoid, std::move(stores));
}

ShapeTracker strided(std::vector<int64_t> shape, std::vector<int64_t> strides, int64_t offset) {
  CHECK_EQ(shape.size(), strides.size());
  View v;
  v.shape = std::move(shape);
  v.strides = std::move(strides);
  v.offset = offset;
  return ShapeTracker{{v}};
}

ShapeTracker broadcast_to(std::vector<int64_t> shape, std::vector<int64_t> full) {
  CHECK_EQ(shape.size(), full.size());
  std::vector<int64_t> strides = View::strides_for(shape);
  for (size_t i = 0; i < shape.size(); i++) {
    CHECK(shape[i] == full[i] || shape[i] == 1) << "cannot broadcast dim " << i;
    if (shape[i] != full[i]) strides[i] = 0;
  }
  return strided(std::move(full), std::move(strides));
}

}  // namespace baregrad::compiler
