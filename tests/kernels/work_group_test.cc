// The GPU shapes of the kernel suite, on every device of the suite (CPU targets refuse what
// needs shared memory by name): vector lanes and aligned accesses, LOCAL work-groups, GROUP and
// GROUPTOP reductions, STAGEd operand tiles; and on the two work-group executors (MOCK+NV's
// fibers, PoCL), proof that a missing barrier changes the result.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "compiler/codegen/pipeline.h"
#include "compiler/target/cl_target.h"
#include "runtime/cl/cl_device.h"
#include "runtime/hcq_device.h"
#include "tests/kernels/kernel_test.h"

namespace baregrad::testing {
namespace {

// Elementwise kernels large enough for vector lanes per thread (16-byte accesses on GPU
// targets where the index is a proven multiple of the lanes), for 4-, 8- and 2-byte elements,
// and with an operand read from one element on (no alignment proof: lane by lane).
TEST_P(KernelTest, LargeElementwiseKernelsWithAndWithoutAlignedOperands) {
  for (DType t : {dtypes::kFloat32, dtypes::kFloat64, dtypes::kInt16})
    for (int64_t offset : {0, 1}) {
      SCOPED_TRACE(t.name() + " operand offset " + std::to_string(offset));
      const int64_t n = int64_t{1} << 17;
      auto la = load(global(0, t), strided({n}, {1}, offset)),
           lb = load(global(1, t), ShapeTracker::contiguous({n}));
      auto ast = sink({store(global(2, t), ShapeTracker::contiguous({n}), la * lb + la)});
      check(ast, {{t, random(n + 1, t, 7)}, {t, random(n, t, 8)}, {t, std::vector<double>(n, 0)}},
            tol(t, 2));
    }
}

// A kernel that assumes aligned buffer bases (ProgramSpec::buffer_align, 16 on NVIDIA) refuses
// a buffer that is not, at launch and at graph replay, naming the buffer and the alignment;
// a kernel that assumes only element alignment runs on such a buffer and is right.
TEST_P(KernelTest, LaunchChecksBufferAlignment) {
  const int64_t n = int64_t{1} << 17;
  auto ast = sink({store(global(1, dtypes::kFloat32), ShapeTracker::contiguous({n}),
                         load(global(0, dtypes::kFloat32), ShapeTracker::contiguous({n})) +
                             UOp::cnst(dtypes::kFloat32, 1))});
  auto prg = dev_->compile(ast);
  ASSERT_TRUE(prg.ok()) << prg.status().to_string();
  const int align = (*prg)->spec.buffer_align;
  EXPECT_EQ(align, dev_->target_info().buffer_align);
  Buffer in = *dev_->alloc(n * 4 + 64), out = *dev_->alloc(n * 4 + 64);
  std::vector<float> host(n + 16);
  for (size_t i = 0; i < host.size(); i++) host[i] = static_cast<float>(i % 1000);
  ASSERT_TRUE(dev_->copy_in(in, host.data(), host.size() * 4).ok());
  Buffer in4{in.va + 4, in.bytes - 4};  // element-aligned, not 16-byte aligned
  Status s = dev_->launch(**prg, std::vector<Buffer>{in4, out});
  if (align > 4) {
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("buffer 0 at 0x"), std::string::npos) << s.to_string();
    EXPECT_NE(s.message().find("is not aligned to " + std::to_string(align) + " bytes"),
              std::string::npos)
        << s.to_string();
    auto g = dev_->make_graph({{*prg, {in, out}, {0, -1}}}, 1);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    s = (*g)->replay(std::vector<Buffer>{in4});
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("input 0 at 0x"), std::string::npos) << s.to_string();
    ASSERT_TRUE((*g)->replay(std::vector<Buffer>{in}).ok());
    ASSERT_TRUE(dev_->synchronize().ok());
  } else {
    ASSERT_TRUE(s.ok()) << s.to_string();
    ASSERT_TRUE(dev_->synchronize().ok());
    std::vector<float> got(n);
    ASSERT_TRUE(dev_->copy_out(got.data(), out, n * 4).ok());
    for (int64_t i = 0; i < n; i++) ASSERT_EQ(got[i], host[i + 1] + 1) << "element " << i;
  }
  dev_->free(in);
  dev_->free(out);
}

// GROUP: each output's reduction split across a work-group and combined through shared
// memory, on targets that have it (DEV=CL); the others refuse the opt by name.
TEST_P(KernelTest, GroupReduction) {
  for (DType t : {dtypes::kFloat32, dtypes::kInt32, dtypes::kFloat16}) {
    for (auto [r, c, amt] : {std::tuple<int64_t, int64_t, int>{3, 4096, 128}, {5, 1000, 8}}) {
      for (Op op : {Op::ADD, Op::MAX}) {
        SCOPED_TRACE(t.name() + " " + std::to_string(r) + "x" + std::to_string(c) + " GROUP " +
                     std::to_string(amt) + " " + op_name(op));
        auto in = global(0, t), out = global(1, t);
        auto red = reduce_axis(op, {1}, load(in, ShapeTracker::contiguous({r, c})));
        auto ast = sink({store(out, strided({r, 1}, {1, 0}), red)});
        std::vector<Opt> opts{{OptOp::kGroup, 1, amt}};
        if (!dev_->target_info().has_local) {
          auto prg = dev_->compile(ast, opts);
          ASSERT_FALSE(prg.ok());
          EXPECT_NE(prg.status().message().find("GROUP needs shared memory"), std::string::npos)
              << prg.status().to_string();
          continue;
        }
        check(ast, {{t, random(r * c, t, 9)}, {t, std::vector<double>(r, 0)}},
              tol(t, static_cast<double>(c)) * (t == dtypes::kFloat16 ? 4 : 1), opts);
        // With each thread's slice unrolled (copies combined in registers first).
        opts.push_back({OptOp::kUnroll, 1, c / amt % 4 == 0 ? 4 : 5});
        check(ast, {{t, random(r * c, t, 10)}, {t, std::vector<double>(r, 0)}},
              tol(t, static_cast<double>(c)) * (t == dtypes::kFloat16 ? 4 : 1), opts);
        // GROUPTOP: each thread reduces a contiguous slice.
        check(ast, {{t, random(r * c, t, 11)}, {t, std::vector<double>(r, 0)}},
              tol(t, static_cast<double>(c)) * (t == dtypes::kFloat16 ? 4 : 1),
              std::vector<Opt>{{OptOp::kGroupTop, 1, amt}});
      }
    }
  }
}

// A missing barrier shows on both work-group executors: the fake NVIDIA GPU runs a block's
// threads one at a time up to each barrier (drivers/mock/nv_device/twin_target.cc), PoCL runs
// a work-group's work-items in a loop between barriers. With the barrier taken out of the
// program, thread 0 combines partials no other thread has written yet: NaN on MOCK+NV (its
// shared memory starts as NaNs), a wrong sum on PoCL.
class WorkGroupTest : public DeviceTest {
 protected:
  // Compiles and loads `spec` as it is, on either kind of device.
  Result<std::shared_ptr<runtime::Program>> load_spec(const ProgramSpec& spec) {
    runtime::Device* dev = dev_.get();
    if (auto* hcq = dynamic_cast<runtime::HcqDevice*>(dev)) {
      ASSIGN_OR_RETURN(CompiledKernel k, hcq->target().compile(spec));
      return hcq->load(std::move(k));
    }
    auto* cl = dynamic_cast<runtime::ClDevice*>(dev);
    if (!cl) return invalid_argument("not an HCQ or CL device: " + dev->name());
    ASSIGN_OR_RETURN(CompiledKernel k, ClTarget(cl->target_info(), "test").compile(spec));
    return cl->load(std::move(k));
  }
};

TEST_P(WorkGroupTest, AGroupSumWithoutItsBarrierIsWrong) {
  runtime::Device* dev = dev_.get();
  auto load_spec = [&](const ProgramSpec& spec) { return this->load_spec(spec); };
  const int64_t rows = 4, cols = 1024;
  auto red = reduce_axis(Op::ADD, {1},
                         load(global(1, dtypes::kFloat32), ShapeTracker::contiguous({rows, cols})));
  auto ast = sink({store(global(0, dtypes::kFloat32), strided({rows, 1}, {1, 0}), red)});
  // 128 threads: on NVIDIA 4 warps, each combined by warp exchanges, whose totals meet in
  // shared memory behind the barrier.
  ProgramSpec spec =
      lower_kernel(ast, dev->target_info(), std::vector<Opt>{{OptOp::kGroup, 1, 128}});
  std::vector<float> x(rows * cols);
  for (size_t i = 0; i < x.size(); i++) x[i] = static_cast<float>(i % 5);
  Buffer in = *dev->alloc(x.size() * 4), out = *dev->alloc(rows * 4);
  ASSERT_TRUE(dev->copy_in(in, x.data(), x.size() * 4).ok());
  auto sums = [&](const ProgramSpec& s) {
    std::vector<float> got(rows, -1);
    auto prg = load_spec(s);
    EXPECT_TRUE(prg.ok()) << prg.status().to_string();
    if (!prg.ok()) return got;
    EXPECT_TRUE(dev->launch(**prg, std::vector<Buffer>{out, in}).ok());
    EXPECT_TRUE(dev->synchronize().ok());
    EXPECT_TRUE(dev->copy_out(got.data(), out, rows * 4).ok());
    return got;
  };
  ProgramSpec racy = spec;
  racy.name += "_racy";
  std::erase_if(racy.uops, [](const UOpPtr& u) { return u->op() == Op::BARRIER; });
  ASSERT_EQ(racy.uops.size() + 1, spec.uops.size());
  std::vector<float> good = sums(spec), bad = sums(racy);
  int wrong = 0;
  for (int64_t r = 0; r < rows; r++) {
    double want = 0;
    for (int64_t c = 0; c < cols; c++) want += x[r * cols + c];
    EXPECT_EQ(good[r], want) << "row " << r;
    wrong += !(bad[r] == want);
    if (GetParam() == "MOCK+NV" || GetParam() == "MOCK+AMD") {
      EXPECT_TRUE(std::isnan(bad[r])) << "row " << r << ": " << bad[r];
    }
  }
  EXPECT_EQ(wrong, rows) << "a sum came out right without the barrier";
  dev->free(in);
  dev->free(out);
}

// A staged matmul (4 tiles along the reduction) without the barrier after its tile copies:
// threads read tiles that others have not written yet, or have overwritten already.
TEST_P(WorkGroupTest, AStagedMatmulWithoutItsBarriersIsWrong) {
  runtime::Device* dev = dev_.get();
  const int64_t m = 32, n = 32, k = 64;
  ProgramSpec spec = lower_kernel(
      matmul_ast(m, n, k, dtypes::kFloat32), dev->target_info(),
      std::vector<Opt>{{OptOp::kLocal, 1, 8}, {OptOp::kLocal, 0, 8}, {OptOp::kStage, 4, 16}});
  ASSERT_EQ(std::count_if(spec.uops.begin(), spec.uops.end(),
                          [](const UOpPtr& u) { return u->op() == Op::BARRIER; }),
            2);
  std::vector<float> a(m * k), b(k * n);
  for (size_t i = 0; i < a.size(); i++) a[i] = static_cast<float>(i % 7) - 3;
  for (size_t i = 0; i < b.size(); i++) b[i] = static_cast<float>(i % 5) - 2;
  Buffer da = *dev->alloc(a.size() * 4), db = *dev->alloc(b.size() * 4),
         dc = *dev->alloc(m * n * 4);
  ASSERT_TRUE(dev->copy_in(da, a.data(), a.size() * 4).ok());
  ASSERT_TRUE(dev->copy_in(db, b.data(), b.size() * 4).ok());
  auto product = [&](const ProgramSpec& s) {
    std::vector<float> got(m * n, -1);
    auto prg = load_spec(s);
    EXPECT_TRUE(prg.ok()) << prg.status().to_string();
    if (!prg.ok()) return got;
    EXPECT_TRUE(dev->launch(**prg, std::vector<Buffer>{da, db, dc}).ok());
    EXPECT_TRUE(dev->synchronize().ok());
    EXPECT_TRUE(dev->copy_out(got.data(), dc, got.size() * 4).ok());
    return got;
  };
  ProgramSpec racy = spec;
  racy.name += "_racy";
  std::erase_if(racy.uops, [](const UOpPtr& u) { return u->op() == Op::BARRIER; });
  std::vector<float> good = product(spec), bad = product(racy);
  int wrong = 0;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double want = 0;  // small integers: exact in float32
      for (int64_t r = 0; r < k; r++) want += a[i * k + r] * b[r * n + j];
      EXPECT_EQ(good[i * n + j], want) << i << ", " << j;
      wrong += !(bad[i * n + j] == want);
    }
  EXPECT_GT(wrong, m * n / 2) << "the product came out mostly right without the barriers";
  dev->free(da);
  dev->free(db);
  dev->free(dc);
}

INSTANTIATE_TEST_SUITE_P(Executors,
                         WorkGroupTest,
                         ::testing::Values("MOCK+NV", "MOCK+AMD", "CL"),
                         [](const auto& info) {
                           return info.param == "CL"         ? std::string("cl")
                                  : info.param == "MOCK+AMD" ? std::string("mock_amd")
                                                             : std::string("mock_nv");
                         });

// LOCAL axes: on GPU targets the work-group's dimensions (the grid is the GLOBAL axes, up to 3
// dimensions each); elsewhere loops. With register tiles and an unrolled reduction, a 3-axis
// elementwise kernel with a LOCAL axis on each of its axes, and a 4-axis one.
TEST_P(KernelTest, LocalWorkGroups) {
  DType t = dtypes::kFloat32;
  auto ast = matmul_ast(64, 96, 24, t);
  std::vector<Buf> bufs = {
      {t, random(64 * 24, t, 1)}, {t, random(24 * 96, t, 2)}, {t, std::vector<double>(64 * 96, 0)}};
  check(ast, bufs, tol(t, 24), std::vector<Opt>{{OptOp::kLocal, 0, 8}, {OptOp::kLocal, 1, 4}});
  check(ast, bufs, tol(t, 24),
        std::vector<Opt>{{OptOp::kUpcast, 1, 4},
                         {OptOp::kUpcast, 0, 2},
                         {OptOp::kLocal, 0, 4},
                         {OptOp::kLocal, 1, 8},
                         {OptOp::kUnroll, 4, 4}});
  auto e3 = sink({store(global(1, t), ShapeTracker::contiguous({6, 10, 12}),
                        load(global(0, t), strided({6, 10, 12}, {1, 6, 60})) * UOp::cnst(t, 3))});
  check(e3, {{t, random(720, t, 3)}, {t, std::vector<double>(720, 0)}}, tol(t),
        std::vector<Opt>{{OptOp::kLocal, 0, 2}, {OptOp::kLocal, 1, 5}, {OptOp::kLocal, 2, 4}});
  // Four GLOBAL axes: the outer two share grid dimension z.
  auto e4 =
      sink({store(global(1, t), ShapeTracker::contiguous({3, 4, 5, 8}),
                  load(global(0, t), strided({3, 4, 5, 8}, {1, 3, 12, 60})) - UOp::cnst(t, 1))});
  check(e4, {{t, random(480, t, 4)}, {t, std::vector<double>(480, 0)}}, tol(t),
        std::vector<Opt>{{OptOp::kLocal, 3, 4}});
  if (dev_->target_info().gpu) {  // the launch: blocks of the LOCAL axes, a grid of the rest
    auto prg = dev_->compile(
        e3, std::vector<Opt>{{OptOp::kLocal, 0, 2}, {OptOp::kLocal, 1, 5}, {OptOp::kLocal, 2, 4}});
    ASSERT_TRUE(prg.ok()) << prg.status().to_string();
    EXPECT_EQ((*prg)->spec.local_size, (std::array<int64_t, 3>{4, 5, 2}));
    EXPECT_EQ((*prg)->spec.global_size, (std::array<int64_t, 3>{3, 2, 3}));
    auto four = dev_->compile(e4, std::vector<Opt>{{OptOp::kLocal, 3, 4}});
    ASSERT_TRUE(four.ok()) << four.status().to_string();
    EXPECT_EQ((*four)->spec.local_size, (std::array<int64_t, 3>{4, 1, 1}));
    EXPECT_EQ((*four)->spec.global_size, (std::array<int64_t, 3>{2, 5, 12}));
    auto big = dev_->compile(ast, std::vector<Opt>{{OptOp::kLocal, 0, 16}, {OptOp::kLocal, 1, 16}});
    ASSERT_FALSE(big.ok());
    EXPECT_NE(big.status().message().find("a work-group of 256 threads"), std::string::npos)
        << big.status().to_string();
  }
}

// STAGE: operand tiles copied into shared memory by the work-group, then read there by the
// staged loop; with register tiles (vector lanes read from shared memory), one or several
// tiles along the reduction, bf16 operands and a single tile. Targets without shared memory
// refuse it by name.
TEST_P(KernelTest, StagedMatmul) {
  struct Run {
    DType t;
    int64_t m, n, k;
    std::vector<Opt> opts;
  };
  std::vector<Run> runs = {
      {dtypes::kFloat32,
       64,
       128,
       32,
       {{OptOp::kUpcast, 1, 4},
        {OptOp::kUpcast, 0, 4},
        {OptOp::kLocal, 1, 8},
        {OptOp::kLocal, 0, 4},
        {OptOp::kStage, 4, 8}}},
      {dtypes::kFloat32,
       32,
       48,
       40,
       {{OptOp::kLocal, 1, 16}, {OptOp::kLocal, 0, 4}, {OptOp::kStage, 4, 8}}},
      {dtypes::kFloat32,
       16,
       16,
       24,
       {{OptOp::kLocal, 1, 4}, {OptOp::kLocal, 0, 4}, {OptOp::kStage, 4, 24}}},
      {dtypes::kBFloat16,
       32,
       64,
       64,
       {{OptOp::kUpcast, 1, 4},
        {OptOp::kLocal, 1, 16},
        {OptOp::kLocal, 0, 8},
        {OptOp::kStage, 4, 16}}},
  };
  for (const Run& r : runs) {
    SCOPED_TRACE(r.t.name() + " " + std::to_string(r.m) + "x" + std::to_string(r.n) + "x" +
                 std::to_string(r.k));
    auto ast = matmul_ast(r.m, r.n, r.k, r.t);
    std::vector<Buf> bufs = {{r.t, random(r.m * r.k, r.t, 1)},
                             {r.t, random(r.k * r.n, r.t, 2)},
                             {r.t, std::vector<double>(r.m * r.n, 0)}};
    if (!dev_->target_info().has_local) {
      auto prg = dev_->compile(ast, r.opts);
      ASSERT_FALSE(prg.ok());
      EXPECT_NE(prg.status().message().find("STAGE needs shared memory"), std::string::npos)
          << prg.status().to_string();
      continue;
    }
    check(ast, bufs, tol(r.t, static_cast<double>(r.k)), r.opts);
  }
}

// STAGE of a convolution's input channels: the window axes loop outside the staged loop, a
// tile copy per step; the input tile is read through the padding mask (zeros off the edge),
// smaller than the work-group (the threads past its end copy nothing), with and without a
// register tile along the output width.
TEST_P(KernelTest, StagedConvolution) {
  DType t = dtypes::kFloat32;
  const int64_t N = 4, C = 8, H = 8, W = 8, O = 16, K = 3;
  auto ast = conv_ast(t, N, C, H, W, O, K);
  std::vector<Buf> bufs = {{t, random(N * C * H * W, t, 5)},
                           {t, random(O * C * K * K, t, 6)},
                           {t, std::vector<double>(N * O * H * W, 0)}};
  for (const std::vector<Opt>& opts :
       {std::vector<Opt>{{OptOp::kLocal, 0, 4}, {OptOp::kLocal, 1, 8}, {OptOp::kStage, 6, 4}},
        std::vector<Opt>{{OptOp::kUpcast, 3, 4},
                         {OptOp::kLocal, 1, 8},
                         {OptOp::kLocal, 0, 4},
                         {OptOp::kStage, 6, 4}}}) {
    SCOPED_TRACE(opts.size());
    if (!dev_->target_info().has_local) {
      auto prg = dev_->compile(ast, opts);
      ASSERT_FALSE(prg.ok());
      EXPECT_NE(prg.status().message().find("STAGE needs shared memory"), std::string::npos)
          << prg.status().to_string();
      continue;
    }
    check(ast, bufs, tol(t, static_cast<double>(C * K * K)), opts);
  }
}

}  // namespace
}  // namespace baregrad::testing
