// Kernel ASTs built with the builder, compiled by each CPU backend (LLVM and C) and run on all
// cores, and compiled for the GPU and run on MOCK+NV and as OpenCL C on DEV=CL, checked against
// the float64 reference. The GPU shapes (work-groups, shared memory, vector accesses) are in
// work_group_test.cc; the devices are instantiated here for both files.
#include "tests/kernels/kernel_test.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/options.h"
#include "compiler/ast.h"
#include "runtime/device.h"

namespace baregrad::testing {
namespace {

// out[i, j] = a[i, j] * b[j] + c[i], then max with a and a comparison-select: broadcasting
// in both directions, every elementwise dtype.
TEST_P(KernelTest, ElementwiseBroadcast) {
  int n;
  const DType* all = dtypes::all(&n);
  for (int di = 0; di < n; di++) {
    DType t = all[di];
    // fp8 rounds every op to its grid: tests/python/test_fp8.py checks it byte for byte.
    if (dtypes::is_bool(t) || dtypes::is_fp8(t)) continue;
    for (auto [r, c] : {std::pair<int64_t, int64_t>{37, 53}, {64, 48}, {8, 256}}) {
      SCOPED_TRACE(t.name() + " " + std::to_string(r) + "x" + std::to_string(c));
      auto a = global(0, t), b = global(1, t), cc = global(2, t), out = global(3, t);
      auto la = load(a, ShapeTracker::contiguous({r, c}));
      auto lb = load(b, broadcast_to({1, c}, {r, c}));
      auto lc = load(cc, broadcast_to({r, 1}, {r, c}));
      auto v = la * lb + lc;
      // The select compares inputs only, so rounding differences cannot flip it.
      v = where(lt(lb, lc), maximum(v, la), v - la);
      auto ast = sink({store(out, ShapeTracker::contiguous({r, c}), v)});
      check(ast,
            {{t, random(r * c, t, 1)},
             {t, random(c, t, 2)},
             {t, random(r, t, 3)},
             {t, std::vector<double>(r * c, 0)}},
            tol(t, 4));
    }
  }
}

// Sum and max over each axis and over both, for contiguous and odd shapes.
TEST_P(KernelTest, Reductions) {
  for (DType t : {dtypes::kFloat32, dtypes::kFloat64, dtypes::kInt32, dtypes::kFloat16}) {
    for (auto [r, c] : {std::pair<int64_t, int64_t>{48, 64}, {33, 17}, {4, 1024}}) {
      for (Op op : {Op::ADD, Op::MAX}) {
        for (std::vector<int> axes : {std::vector<int>{0}, {1}, {0, 1}}) {
          SCOPED_TRACE(t.name() + " " + std::to_string(r) + "x" + std::to_string(c) + " " +
                       op_name(op) + " axes " + std::to_string(axes.size() == 2 ? 2 : axes[0]));
          std::vector<int64_t> oshape = {r, c};
          for (int a : axes) oshape[a] = 1;
          auto in = global(0, t), out = global(1, t);
          auto red = reduce_axis(op, axes, load(in, ShapeTracker::contiguous({r, c})));
          auto st = strided(oshape, View::strides_for(oshape));
          auto ast = sink({store(out, st, red)});
          int64_t terms = (axes.size() == 2 ? r * c : axes[0] == 0 ? r : c);
          check(ast, {{t, random(r * c, t, 7)}, {t, std::vector<double>(r * c / terms, 0)}},
                tol(t, static_cast<double>(terms)) * (t == dtypes::kFloat16 ? 4 : 1));
        }
      }
    }
  }
}

TEST_P(KernelTest, Matmul) {
  for (DType t : {dtypes::kFloat32, dtypes::kFloat64}) {
    for (auto [m, n, k] :
         {std::tuple<int64_t, int64_t, int64_t>{64, 64, 48}, {13, 7, 11}, {32, 128, 64}}) {
      SCOPED_TRACE(t.name() + " " + std::to_string(m) + "x" + std::to_string(n) + "x" +
                   std::to_string(k));
      check(matmul_ast(m, n, k, t),
            {{t, random(m * k, t, 11)},
             {t, random(k * n, t, 12)},
             {t, std::vector<double>(m * n, 0)}},
            tol(t, static_cast<double>(k)));
    }
  }
}

// bf16 (and fp16) inputs multiplied and summed in fp32, stored as fp32 and as the input type:
// the mixed-precision matmul of bench's "matmul bf16" row. The reference rounds the inputs
// first, so only the fp32 accumulation (and the final rounding) differs.
TEST_P(KernelTest, MixedPrecisionMatmulAccumulatesInFloat32) {
  for (DType t : {dtypes::kBFloat16, dtypes::kFloat16}) {
    for (DType out : {dtypes::kFloat32, t}) {
      for (auto [m, n, k] :
           {std::tuple<int64_t, int64_t, int64_t>{64, 64, 256}, {13, 7, 11}, {32, 128, 64}}) {
        SCOPED_TRACE(t.name() + " -> " + out.name() + " " + std::to_string(m) + "x" +
                     std::to_string(n) + "x" + std::to_string(k));
        auto a = global(0, t), b = global(1, t), c = global(2, out);
        auto la = cast(load(a, strided({m, n, k}, {k, 0, 1})), dtypes::kFloat32);
        auto lb = cast(load(b, strided({m, n, k}, {0, 1, n})), dtypes::kFloat32);
        auto prod = cast(reduce_axis(Op::ADD, {2}, la * lb), out);
        check(sink({store(c, strided({m, n, 1}, {n, 1, 0}), prod)}),
              {{t, random(m * k, t, 13)},
               {t, random(k * n, t, 14)},
               {out, std::vector<double>(m * n, 0)}},
              // partial sums grow past 1: 4x the fp32 tolerance, still far
              // below one bf16/fp16 rounding of an accumulator (2^-8, 2^-11)
              out == t ? tol(t) : 4 * tol(dtypes::kFloat32, static_cast<double>(k)));
      }
    }
  }
}

// Explicit opts replace the heuristics and give the same answer.
TEST_P(KernelTest, MatmulExplicitOpts) {
  DType t = dtypes::kFloat32;
  auto ast = matmul_ast(32, 64, 16, t);
  std::vector<Buf> bufs = {
      {t, random(32 * 16, t, 1)}, {t, random(16 * 64, t, 2)}, {t, std::vector<double>(32 * 64, 0)}};
  check(ast, bufs, tol(t, 16), std::vector<Opt>{});
  check(ast, bufs, tol(t, 16),
        std::vector<Opt>{{OptOp::kUpcast, 1, 16},
                         {OptOp::kUpcast, 0, 4},
                         {OptOp::kUnroll, 2, 4},
                         {OptOp::kSwap, 0, 1}});
}

// K-blocking: the reduce axis is split and its outer part loops among the output loops,
// accumulating partial sums (or maxima) in the output buffer.
TEST_P(KernelTest, SplitReduceAccumulatesInOutput) {
  DType t = dtypes::kFloat32;
  std::vector<Buf> bufs = {{t, random(32 * 16, t, 1)},
                           {t, random(16 * 64, t, 2)},
                           {t, std::vector<double>(32 * 64, 7)}};  // stale output must not leak
  std::vector<Opt> opts{{OptOp::kUpcast, 1, 16},
                        {OptOp::kUpcast, 0, 4},
                        {OptOp::kSwap, 0, 1},
                        {OptOp::kSplitReduce, 2, 4},
                        {OptOp::kSwap, 1, 2}};
  check(matmul_ast(32, 64, 16, t), bufs, tol(t, 16), opts);
  auto in = global(0, t), out = global(1, t);
  auto mx = reduce_axis(Op::MAX, {1}, load(in, ShapeTracker::contiguous({48, 64})));
  check(sink({store(out, strided({48, 1}, {1, 0}), mx)}),
        {{t, random(48 * 64, t, 3)}, {t, std::vector<double>(48, 100)}}, 0,
        std::vector<Opt>{{OptOp::kSplitReduce, 1, 8}});
}

TEST_P(KernelTest, SplitReduceNeedsAStoredReduction) {
  DType t = dtypes::kFloat32;
  auto in = global(0, t), out = global(1, t);
  auto s = reduce_axis(Op::ADD, {1}, load(in, ShapeTracker::contiguous({8, 64}))) * UOp::cnst(t, 2);
  auto prg = dev_->compile(sink({store(out, strided({8, 1}, {1, 0}), s)}),
                           std::vector<Opt>{{OptOp::kSplitReduce, 1, 8}});
  ASSERT_FALSE(prg.ok());
  EXPECT_NE(prg.status().message().find("SPLIT_REDUCE(1, 8)"), std::string::npos);
  EXPECT_NE(prg.status().message().find("not the reduction itself"), std::string::npos)
      << prg.status().to_string();
}

TEST_P(KernelTest, IllegalOptIsRejectedWithItsName) {
  auto prg = dev_->compile(matmul_ast(32, 64, 16, dtypes::kFloat32),
                           std::vector<Opt>{{OptOp::kUpcast, 0, 5}});
  ASSERT_FALSE(prg.ok());
  EXPECT_NE(prg.status().message().find("UPCAST(0, 5)"), std::string::npos)
      << prg.status().to_string();
  EXPECT_NE(prg.status().message().find("does not divide"), std::string::npos);
}

TEST_P(KernelTest, Conv2dPadded) {
  DType t = dtypes::kFloat32;
  const int64_t N = 2, C = 3, H = 10, W = 12, O = 4, K = 3;
  check(conv_ast(t, N, C, H, W, O, K),
        {{t, random(N * C * H * W, t, 5)},
         {t, random(O * C * K * K, t, 6)},
         {t, std::vector<double>(N * O * H * W, 0)}},
        tol(t, 27));
}

// out[i, j] = sum over r of where(idx[i] == r, a[r, j], 0): indexing with a tensor. Lowered
// as one load of a at row idx[i] (no loop over r; 0 for rows outside a), checked against the
// reference, which loops over every r. The program has no loop of r's size.
TEST_P(KernelTest, OneHotSumLoadsAtTheIndex) {
  DType f = dtypes::kFloat32, i32 = dtypes::kInt32;
  for (auto [n, rows, cols] : {std::tuple<int64_t, int64_t, int64_t>{7, 6, 9}, {16, 40, 32}}) {
    SCOPED_TRACE(std::to_string(n) + " x " + std::to_string(rows) + " x " + std::to_string(cols));
    auto idx = global(0, i32), a = global(1, f), out = global(2, f);
    auto hit = UOp::alu(Op::CMPEQ, {load(idx, strided({n, rows, cols}, {1, 0, 0})),
                                    load(iota(i32), strided({n, rows, cols}, {0, 1, 0}))});
    auto body = where(hit, load(a, strided({n, rows, cols}, {0, cols, 1})), UOp::cnst(f, 0));
    auto ast =
        sink({store(out, strided({n, 1, cols}, {cols, 0, 1}), reduce_axis(Op::ADD, {1}, body))});
    std::vector<double> ix;
    for (int64_t k = 0; k < n; k++) ix.push_back(static_cast<double>(k * 5 % (rows + 3)) - 1);
    check(ast, {{i32, ix}, {f, random(rows * cols, f, 5)}, {f, std::vector<double>(n * cols, 9)}},
          tol(f));
    auto prg = dev_->compile(ast);
    ASSERT_TRUE(prg.ok()) << prg.status().to_string();
    for (const UOpPtr& u : (*prg)->spec.uops)
      EXPECT_FALSE(u->op() == Op::RANGE && u->src(1)->op() == Op::CONST &&
                   u->src(1)->const_value() == static_cast<double>(rows))
          << "a loop over the " << rows << " rows";
  }
}

// A table read at two computed coordinates (an AND of one-hots, written as AND or as the
// scheduler's where(a, b, false)), through a cast, in int32: one load, no loop over either axis.
TEST_P(KernelTest, TwoAxisOneHotSumThroughACast) {
  DType u8 = dtypes::kUint8, i32 = dtypes::kInt32, i64 = dtypes::kInt64;
  int64_t n = 9, r0 = 12, r1 = 13;
  for (bool as_where : {false, true}) {
    SCOPED_TRACE(as_where ? "where(a, b, false)" : "a && b");
    auto i0 = global(0, i64), i1 = global(1, i64), x = global(2, u8), out = global(3, i32);
    auto at = [&](const UOpPtr& b, std::vector<int64_t> strides) {
      return load(b, strided({n, r0, r1}, std::move(strides)));
    };
    auto e0 = UOp::alu(Op::CMPEQ, {at(i0, {1, 0, 0}), at(iota(i64), {0, 1, 0})});
    auto e1 = UOp::alu(Op::CMPEQ, {at(iota(i64), {0, 0, 1}), at(i1, {1, 0, 0})});
    auto hit = as_where ? where(e0, e1, UOp::cnst(dtypes::kBool, false)) : logical_and(e0, e1);
    auto body = cast(where(hit, at(x, {0, r1, 1}), UOp::cnst(u8, 0)), i32);
    auto ast =
        sink({store(out, strided({n, 1, 1}, {1, 0, 0}), reduce_axis(Op::ADD, {1, 2}, body))});
    std::vector<double> a, b;
    for (int64_t k = 0; k < n; k++) {
      a.push_back(static_cast<double>(k % (r0 + 1)));  // r0: out of range
      b.push_back(static_cast<double>((k * 3) % r1));
    }
    std::vector<double> table;
    for (int64_t k = 0; k < r0 * r1; k++) table.push_back(static_cast<double>(k * 11 % 256));
    check(ast, {{i64, a}, {i64, b}, {u8, table}, {i32, std::vector<double>(n, 7)}}, 0);
    auto prg = dev_->compile(ast);
    ASSERT_TRUE(prg.ok()) << prg.status().to_string();
    for (const UOpPtr& u : (*prg)->spec.uops)
      for (int64_t r : {r0, r1})
        EXPECT_FALSE(u->op() == Op::RANGE && u->src(1)->op() == Op::CONST &&
                     u->src(1)->const_value() == static_cast<double>(r))
            << "a loop over an axis of " << r;
  }
}

TEST_P(KernelTest, MalformedAstIsRejectedByTheVerifier) {
  auto a = global(0, dtypes::kFloat32), b = global(1, dtypes::kInt32),
       out = global(2, dtypes::kFloat32);
  auto bad =
      UOp::make(Op::ADD, dtypes::kFloat32,
                {load(a, ShapeTracker::contiguous({4})), load(b, ShapeTracker::contiguous({4}))});
  auto prg = dev_->compile(sink({store(out, ShapeTracker::contiguous({4}), bad)}));
  ASSERT_FALSE(prg.ok());
  EXPECT_NE(prg.status().message().find("ADD"), std::string::npos) << prg.status().to_string();
}

TEST_P(KernelTest, LaunchChecksBuffers) {
  auto prg = dev_->compile(matmul_ast(8, 8, 8, dtypes::kFloat32));
  ASSERT_TRUE(prg.ok());
  Buffer small = *dev_->alloc(16);
  Status s = dev_->launch(**prg, std::vector<Buffer>{small, small, small});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("needs 256 bytes, got 16"), std::string::npos) << s.to_string();
  s = dev_->launch(**prg, std::vector<Buffer>{small});
  EXPECT_NE(s.message().find("expected 3 buffers, got 1"), std::string::npos) << s.to_string();
  dev_->free(small);
}

INSTANTIATE_TEST_SUITE_P(Cpu, KernelTest, ::testing::Values("CPU", "CPU:C"), [](const auto& info) {
  return info.param == "CPU" ? "llvm" : "clang";
});
// The GPU lowering through the NVIDIA driver: cubins from ptxas, launched on MOCK+NV, where the
// fake GPU runs each kernel's host twin with the grid, block and constant bank of its QMD.
INSTANTIATE_TEST_SUITE_P(Nv, KernelTest, ::testing::Values("MOCK+NV"), [](const auto&) {
  return std::string("mock_nv");
});
// The GPU lowering through the AMD driver: code objects from LLVM AMDGPU and ld.lld, dispatched
// through PM4 on MOCK+AMD, where the fake GPU runs each kernel's host twin with the grid, block
// and kernarg segment it decodes.
INSTANTIATE_TEST_SUITE_P(Amd, KernelTest, ::testing::Values("MOCK+AMD"), [](const auto&) {
  return std::string("mock_amd");
});
// The GPU lowering as OpenCL C, built and run by the system's OpenCL platform (PoCL in CI):
// work-groups executed for real.
INSTANTIATE_TEST_SUITE_P(Cl, KernelTest, ::testing::Values("CL"), [](const auto&) {
  return std::string("cl");
});
// DEV=NV, NV:<n>, AMD, AMD:<n>, CUDA or CUDA:<n> adds that GPU (on a machine that has one; none
// otherwise).
std::vector<std::string> gpu_from_env() {
  const std::string& d = options().dev;
  if (d.rfind("NV", 0) == 0 || d.rfind("CUDA", 0) == 0 || d.rfind("AMD", 0) == 0) return {d};
  return {};
}
INSTANTIATE_TEST_SUITE_P(Gpu,
                         KernelTest,
                         ::testing::ValuesIn(gpu_from_env()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == ':') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace baregrad::testing
