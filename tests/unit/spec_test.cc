#include "compiler/spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/unit/index_const.h"

namespace baregrad::compiler {
namespace {

using ::testing::HasSubstr;

UOpPtr global(int slot, DType t = dtypes::kFloat32) {
  return UOp::make(Op::DEFINE_GLOBAL, t.as_ptr(), {}, int64_t{slot});
}
UOpPtr view(const UOpPtr& buf, std::vector<int64_t> shape) {
  return UOp::make(Op::VIEW, buf->dtype(), {buf}, ShapeTracker::contiguous(std::move(shape)));
}
UOpPtr load(const UOpPtr& v) { return UOp::make(Op::LOAD, dtypes::kFloat32, {v}); }
UOpPtr store(const UOpPtr& dst, const UOpPtr& val) {
  return UOp::make(Op::STORE, dtypes::kVoid, {dst, val});
}
UOpPtr sink(std::vector<UOpPtr> src) { return UOp::make(Op::SINK, dtypes::kVoid, std::move(src)); }
UOpPtr reduce(const UOpPtr& x, Op op, std::vector<int> axes) {
  return UOp::make(Op::REDUCE_AXIS, x->dtype(), {x}, ReduceArg{op, std::move(axes)});
}

// out[i, 0] = sum_j a[i, j] * b[i, j]
UOpPtr reduce_kernel(std::vector<int> axes, std::vector<int64_t> out_shape = {4, 1}) {
  UOpPtr prod = load(view(global(1), {4, 8})) * load(view(global(2), {4, 8}));
  return sink({store(view(global(0), out_shape), reduce(prod, Op::ADD, std::move(axes)))});
}

std::string message(const Status& s) { return s.ok() ? "OK" : s.message(); }

TEST(Spec, WellFormedKernelsPass) {
  UOpPtr add = sink({store(view(global(0), {4, 8}),
                           load(view(global(1), {4, 8})) + load(view(global(2), {4, 8})))});
  EXPECT_TRUE(verify_kernel_ast(add).ok()) << message(verify_kernel_ast(add));
  EXPECT_TRUE(verify_kernel_ast(reduce_kernel({1})).ok())
      << message(verify_kernel_ast(reduce_kernel({1})));
}

TEST(Spec, MixedDtypeAluIsRejected) {
  UOpPtr bad = UOp::make(Op::ADD, dtypes::kFloat32,
                         {UOp::cnst(dtypes::kFloat32, 1), UOp::cnst_int(dtypes::kInt32, 2)});
  Status s = verify_expr(bad);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "spec: ADD float32 has sources of different dtypes (float32, int32)");
  UOpPtr kernel = sink({store(view(global(0), {4}), bad)});
  EXPECT_THAT(message(verify_kernel_ast(kernel)),
              HasSubstr("ADD float32 has sources of different"));
}

TEST(Spec, NodeRules) {
  auto f = UOp::cnst(dtypes::kFloat32, 1.0);
  auto i = UOp::cnst_int(dtypes::kInt32, 1);
  auto b = lt(i, i);
  EXPECT_THAT(message(verify_expr(UOp::make(Op::ADD, dtypes::kFloat32, {f}))),
              HasSubstr("ADD float32 has 1 sources, expected 2"));
  EXPECT_THAT(message(verify_expr(UOp::make(Op::CONST, dtypes::kFloat32, {}, int64_t{1}))),
              HasSubstr("CONST float32 1 has an arg whose type does not match"));
  EXPECT_THAT(message(verify_expr(UOp::make(Op::CMPLT, dtypes::kInt32, {i, i}))),
              HasSubstr("CMPLT int32 is a comparison that does not give bool"));
  EXPECT_THAT(message(verify_expr(UOp::make(Op::WHERE, dtypes::kInt32, {i, i, i}))),
              HasSubstr("WHERE int32 has a condition that is not bool"));
  EXPECT_TRUE(verify_expr(where(b, i, i)).ok());
  EXPECT_THAT(message(verify_expr(UOp::make(Op::DEFINE_GLOBAL, dtypes::kFloat32, {}, int64_t{0}))),
              HasSubstr("DEFINE_GLOBAL float32 0 has a dtype that is not a pointer"));
  EXPECT_THAT(message(verify_expr(UOp::make(Op::MOD, dtypes::kFloat32, {f, f}))),
              HasSubstr("MOD float32 is an integer op on floats"));
  EXPECT_THAT(message(verify_expr(UOp::make(Op::BITCAST, dtypes::kInt64, {f}))),
              HasSubstr("BITCAST int64 bitcasts between sizes (float32)"));
}

TEST(Spec, StoreNotThroughViewIsRejected) {
  UOpPtr kernel = sink({store(global(0), load(view(global(1), {4})))});
  EXPECT_THAT(message(verify_kernel_ast(kernel)),
              HasSubstr("STORE void does not go through a VIEW"));
  UOpPtr loads_buffer =
      sink({store(view(global(0), {4}), UOp::make(Op::LOAD, dtypes::kFloat32, {global(1)}))});
  EXPECT_THAT(message(verify_kernel_ast(loads_buffer)),
              HasSubstr("LOAD float32 does not go through a VIEW"));
  EXPECT_THAT(message(verify_kernel_ast(sink({load(view(global(1), {4}))}))),
              HasSubstr("SINK void has a source that is not a STORE"));
}

TEST(Spec, ReduceAxisRules) {
  EXPECT_THAT(message(verify_kernel_ast(reduce_kernel({2}))),
              HasSubstr("REDUCE_AXIS float32 ADD axes=(2) reduces axis 2 outside the kernel's 2"));
  EXPECT_THAT(message(verify_kernel_ast(reduce_kernel({1, 1}))), HasSubstr("reduces axis 1 twice"));
  EXPECT_THAT(message(verify_kernel_ast(reduce_kernel({1}, {4, 8}))),
              HasSubstr("has size 8 on reduced axis 1"));
  UOpPtr x = load(view(global(1), {4, 8}));
  UOpPtr bad_op = sink({store(view(global(0), {4, 1}), reduce(x, Op::SUB, {1}))});
  EXPECT_THAT(message(verify_kernel_ast(bad_op)), HasSubstr("reduces with a bad op"));
}

TEST(Spec, ViewShapesMustMatchTheKernel) {
  UOpPtr rank = sink({store(view(global(0), {4, 8}), load(view(global(1), {32})))});
  EXPECT_THAT(message(verify_kernel_ast(rank)), HasSubstr("has 1 dims, the kernel has 2"));
  UOpPtr dim = sink({store(view(global(0), {4, 8}), load(view(global(1), {4, 7})))});
  EXPECT_THAT(message(verify_kernel_ast(dim)), HasSubstr("has dim 1 = 7, the kernel has 8"));
  UOpPtr dtype = sink({store(view(global(0, dtypes::kInt32), {4}), load(view(global(1), {4})))});
  EXPECT_THAT(message(verify_kernel_ast(dtype)),
              HasSubstr("stores float32 into a buffer of int32"));
}

TEST(Spec, LoweredRules) {
  UOpPtr buf = global(0);
  auto index = [&](UOpPtr i, std::vector<UOpPtr> extra = {}) {
    std::vector<UOpPtr> src{buf, std::move(i)};
    for (auto& e : extra) src.push_back(e);
    return UOp::make(Op::INDEX, buf->dtype(), std::move(src));
  };
  UOpPtr good = sink({store(index(c64(3)), UOp::cnst(dtypes::kFloat32, 1))});
  EXPECT_TRUE(verify_lowered(good).ok()) << message(verify_lowered(good));
  UOpPtr i32 =
      sink({store(index(UOp::cnst_int(dtypes::kInt32, 3)), UOp::cnst(dtypes::kFloat32, 1))});
  EXPECT_THAT(message(verify_lowered(i32)), HasSubstr("has an index that is not int64"));
  UOpPtr valid = UOp::make(Op::LOAD, dtypes::kFloat32, {index(c64(3), {c64(1)})});
  EXPECT_THAT(message(verify_lowered(sink({store(index(c64(0)), valid)}))),
              HasSubstr("has a valid that is not bool"));
  EXPECT_THAT(message(verify_lowered(reduce_kernel({1}))), HasSubstr("survives lowering"));
}

TEST(Spec, LinearRules) {
  UOpPtr r0 = UOp::make(Op::RANGE, dtypes::kIndex, {c64(0), c64(4)}, int64_t{0});
  UOpPtr r1 = UOp::make(Op::RANGE, dtypes::kIndex, {c64(0), c64(8)}, int64_t{1});
  auto end = [](const UOpPtr& r) { return UOp::make(Op::ENDRANGE, dtypes::kVoid, {r}); };
  std::vector<UOpPtr> good{c64(0), c64(4), c64(8), r0, r1, end(r1), end(r0)};
  EXPECT_TRUE(verify_linear(good).ok()) << message(verify_linear(good));
  std::vector<UOpPtr> crossed{c64(0), c64(4), c64(8), r0, r1, end(r0), end(r1)};
  EXPECT_THAT(message(verify_linear(crossed)),
              HasSubstr("does not close the innermost open RANGE"));
  std::vector<UOpPtr> open{c64(0), c64(4), r0};
  EXPECT_THAT(message(verify_linear(open)), HasSubstr("is never closed"));
  std::vector<UOpPtr> early{c64(0), r0, c64(4), end(r0)};
  EXPECT_THAT(message(verify_linear(early)), HasSubstr("uses CONST int64 4 before it is defined"));
  UOpPtr x = UOp::cnst(dtypes::kFloat32, 1.0);
  std::vector<UOpPtr> acc{x, UOp::make(Op::ACC_STORE, dtypes::kVoid, {x, x})};
  EXPECT_THAT(message(verify_linear(acc)),
              HasSubstr("ACC_STORE void does not target a DEFINE_ACC"));
}

}  // namespace
}  // namespace baregrad::compiler
