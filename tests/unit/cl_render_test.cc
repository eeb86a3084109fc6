// The OpenCL C dialect of the C renderer (compiler/render/cl_source.h) through ClTarget: the
// kernel ABI of cl_target.h, the float registers and memory forms of half and bfloat16, names
// OpenCL reserves, and the limits OpenCL C compilers have. What the text computes is checked by
// running it: the kernel, tensor and Python suites on DEV=CL.
#include <gtest/gtest.h>

#include <algorithm>

#include "base/error.h"
#include "compiler/ast.h"
#include "compiler/codegen/pipeline.h"
#include "compiler/target/cl_target.h"
#include "tests/kernels/test_asts.h"

namespace baregrad::compiler {
namespace {

std::string render(const UOpPtr& ast) {
  ClTarget target(cl_target_info(256), "test");
  return target.render(lower_kernel(ast, target.info()));
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// o = cast(a, to) over n elements of `from`.
UOpPtr cast_ast(DType from, DType to, int64_t n = 64) {
  auto o = global(0, to), a = global(1, from);
  auto st = ShapeTracker::contiguous({n});
  return sink({store(o, st, cast(load(a, st), to))});
}

TEST(ClRender, KernelTakesEveryBufferWithItsByteOffset) {
  std::string s = render(testing::add_ast(1000));
  EXPECT_TRUE(has(s,
                  "__kernel void E_1000(__global uchar* buf0, ulong off0, __global uchar* buf1, "
                  "ulong off1, __global uchar* buf2, ulong off2) {"))
      << s;
  EXPECT_TRUE(has(s, "__global float* restrict data0 = (__global float*)(buf0 + off0);")) << s;
  EXPECT_TRUE(has(s, "const __global float* restrict data1")) << s;
  EXPECT_TRUE(has(s, "get_group_id(0)")) << s;
  EXPECT_TRUE(has(s, "get_local_id(0)")) << s;
  EXPECT_FALSE(has(s, "int64_t")) << s;
  EXPECT_FALSE(has(s, "#pragma OPENCL EXTENSION cl_khr_fp64")) << s;  // no double here
}

TEST(ClRender, ThreadsPastTheEndAreGuardedByAnIf) {
  std::string s = render(testing::add_ast(1000));  // 8 work-groups of 128: 24 idle
  EXPECT_TRUE(has(s, "const long tidx0 = ")) << s;
  EXPECT_TRUE(has(s, "if (tidx0 < ")) << s;
  EXPECT_FALSE(has(s, "ridx-")) << s;
}

TEST(ClRender, HalfLivesInFloatRegistersAndMovesThroughVloadHalf) {
  std::string s = render(cast_ast(dtypes::kFloat32, dtypes::kFloat16));
  EXPECT_TRUE(has(s, "__global half* restrict data0")) << s;
  EXPECT_TRUE(has(s, "to_half((float)")) << s;
  EXPECT_TRUE(has(s, "vstore_half_rte(")) << s;
  EXPECT_TRUE(has(s, "static float to_half(float x)")) << s;
  s = render(cast_ast(dtypes::kFloat16, dtypes::kFloat32));
  EXPECT_TRUE(has(s, "vload_half(")) << s;
  EXPECT_FALSE(has(s, "_Float16")) << s;
}

TEST(ClRender, Bfloat16IsItsUpperHalfOfAFloat) {
  std::string s = render(cast_ast(dtypes::kFloat32, dtypes::kBFloat16));
  EXPECT_TRUE(has(s, "__global ushort* restrict data0")) << s;
  EXPECT_TRUE(has(s, "(ushort)(as_uint(")) << s;
  EXPECT_TRUE(has(s, "static float to_bf16(float x)")) << s;
  s = render(cast_ast(dtypes::kBFloat16, dtypes::kFloat32));
  EXPECT_TRUE(has(s, "as_float((uint)data1[")) << s;
}

TEST(ClRender, WideIntegersRoundToHalfOnceThroughDouble) {
  std::string s = render(cast_ast(dtypes::kInt64, dtypes::kFloat16));
  EXPECT_TRUE(has(s, "to_half_d((double)")) << s;
  EXPECT_TRUE(has(s, "#pragma OPENCL EXTENSION cl_khr_fp64 : enable")) << s;
  s = render(cast_ast(dtypes::kFloat64, dtypes::kBFloat16));
  EXPECT_TRUE(has(s, "to_bf16_d(")) << s;
  EXPECT_TRUE(has(s, "static float to_bf16(float x)")) << s;  // to_bf16_d calls it
}

TEST(ClRender, BoolBuffersAreBytes) {
  std::string s = render(cast_ast(dtypes::kFloat32, dtypes::kBool));
  EXPECT_TRUE(has(s, "__global uchar* restrict data0")) << s;
  EXPECT_FALSE(has(s, "_Bool")) << s;
}

TEST(ClRender, VarsAreParametersWithNamesOpenClDoesNotReserve) {
  auto o = global(0, dtypes::kFloat32), a = global(1, dtypes::kFloat32);
  auto st = ShapeTracker::contiguous({16});
  UOpPtr v = UOp::var("kernel", 0, 100);
  UOpPtr ast = sink({store(o, st, load(a, st) + cast(v, dtypes::kFloat32))});
  ClTarget target(cl_target_info(256), "test");
  ProgramSpec spec = lower_kernel(ast, target.info());
  ASSERT_EQ(spec.vars.size(), 1u);
  std::string s = target.render(spec);
  EXPECT_TRUE(has(s, "ulong off1, long varg0) {")) << s;
  EXPECT_TRUE(has(s, "const long var_kernel = varg0;")) << s;
}

// The deepest nesting of parentheses in `s`.
int paren_depth(const std::string& s) {
  int d = 0, most = 0;
  for (char c : s) {
    d += c == '(' ? 1 : c == ')' ? -1 : 0;
    most = std::max(most, d);
  }
  return most;
}

TEST(ClRender, DeepChainsStayUnderTheCompilersBracketLimit) {
  auto o = global(0, dtypes::kFloat32), a = global(1, dtypes::kFloat32);
  auto st = ShapeTracker::contiguous({16});
  UOpPtr x = load(a, st);
  for (int i = 0; i < 400; i++) x = x * const_like(x, 1.001) + const_like(x, 0.5);
  std::string s = render(sink({store(o, st, x)}));
  EXPECT_LT(paren_depth(s), 256) << "clang's OpenCL default -fbracket-depth";
}

// out[i] = sum or max over j of a[i, j].
UOpPtr row_reduce_ast(Op op, int64_t rows, int64_t cols) {
  auto in = global(1, dtypes::kFloat32), out = global(0, dtypes::kFloat32);
  auto red = reduce_axis(op, {1}, load(in, ShapeTracker::contiguous({rows, cols})));
  return sink({store(out, strided({rows, 1}, {1, 0}), red)});
}

TEST(ClRender, LongReductionsWithFewOutputsUseAWorkGroupAndSharedMemory) {
  ClTarget target(cl_target_info(256), "test");
  ProgramSpec spec = lower_kernel(row_reduce_ast(Op::ADD, 64, 4096), target.info());
  EXPECT_EQ(spec.local_size[0], 128);  // one work-group of 128 threads per output
  EXPECT_EQ(spec.global_size[0], 64);
  std::string s = target.render(spec);
  EXPECT_TRUE(has(s, "__local float temp0[128];")) << s;
  EXPECT_TRUE(has(s, "temp0[lidx0] = ")) << s;
  EXPECT_TRUE(has(s, "barrier(CLK_LOCAL_MEM_FENCE);")) << s;
  EXPECT_LT(s.find("temp0[lidx0] = "), s.find("barrier(")) << s;
  // Neighbouring threads read neighbouring elements: the thread index is the inner stride.
  EXPECT_TRUE(has(s, "(ridx0 * 128)) + lidx0]")) << s;
  // Many outputs or a short reduction: one thread per output, no shared memory.
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{65536, 4096}, {64, 128}})
    EXPECT_FALSE(
        has(target.render(lower_kernel(row_reduce_ast(Op::ADD, rows, cols), target.info())),
            "barrier("))
        << rows << "x" << cols;
}

TEST(GroupOpt, SplitsAReduceAxisIntoAWorkGroupAndExcludesWhatCannotJoinIt) {
  Kernel k(row_reduce_ast(Op::ADD, 64, 4096));
  ASSERT_EQ(k.str(), "(64:g, 4096:r)");
  std::string why;
  EXPECT_FALSE(k.legal({OptOp::kGroup, 0, 16}, &why)) << "a GLOBAL axis";
  EXPECT_FALSE(k.legal({OptOp::kGroup, 1, 24}, &why)) << "not a power of two";
  EXPECT_TRUE(has(why, "power of two")) << why;
  k.apply({OptOp::kGroup, 1, 128});
  EXPECT_EQ(k.str(), "(64:g, 32:r, 128:G)");
  EXPECT_FALSE(k.legal({OptOp::kUpcast, 0, 4}, &why));
  EXPECT_FALSE(k.legal({OptOp::kSplitReduce, 1, 4}, &why));
  EXPECT_FALSE(k.legal({OptOp::kGroup, 1, 2}, &why)) << "a second GROUP";
  EXPECT_TRUE(k.legal({OptOp::kUnroll, 1, 4}, &why)) << why;
  k.apply({OptOp::kUnroll, 1, 4});
  EXPECT_EQ(k.str(), "(64:g, 8:r, 128:G, 4:u)");
  // Two reductions in one kernel (a value minus its row max, summed): no GROUP.
  auto in = global(1, dtypes::kFloat32), out = global(0, dtypes::kFloat32);
  auto x = load(in, ShapeTracker::contiguous({64, 4096}));
  auto m = reduce_axis(Op::MAX, {1}, x);
  auto two =
      sink({store(out, strided({64, 1}, {1, 0}),
                  reduce_axis(Op::ADD, {1}, x - load(in, strided({64, 4096}, {4096, 0}))) + m)});
  Kernel k2(two);
  EXPECT_FALSE(k2.legal({OptOp::kGroup, 1, 128}, &why));
  EXPECT_TRUE(has(why, "exactly one reduction")) << why;
}

// GROUPTOP: the outer part of the split is the work-group, so thread t reduces the contiguous
// elements [32 t, 32 t + 32).
TEST(GroupOpt, GroupTopGivesEachThreadAContiguousSlice) {
  Kernel k(row_reduce_ast(Op::ADD, 64, 4096));
  k.apply({OptOp::kGroupTop, 1, 128});
  EXPECT_EQ(k.str(), "(64:g, 32:r, 128:G)");
  EXPECT_EQ(Kernel::stride(k.load_views()[0], 1), 1);
  EXPECT_EQ(Kernel::stride(k.load_views()[0], 2), 32);
  std::string why;
  EXPECT_FALSE(k.legal({OptOp::kGroupTop, 1, 2}, &why)) << "a second GROUP";
  ClTarget target(cl_target_info(256), "test");
  std::string src = target.render(lower_kernel(row_reduce_ast(Op::ADD, 64, 4096), target.info(),
                                               std::vector<Opt>{{OptOp::kGroupTop, 1, 128}}));
  EXPECT_TRUE(has(src, "= lidx0 * 32;")) << src;
}

// STAGE: both operands of a matmul are shared along a LOCAL axis, so both are staged; the
// OpenCL C copies them into two __local tiles (16-byte vloads from the buffers, vstores into
// the tiles), with a barrier at the top of each tile step and one after the copies, and reads
// the column tile with vload4.
TEST(StageOpt, StagesTheOperandsSharedAcrossTheWorkGroup) {
  Kernel k(testing::matmul_ast(64, 128, 32, dtypes::kFloat32));
  std::string why;
  EXPECT_FALSE(k.legal({OptOp::kStage, 2, 8}, &why));
  EXPECT_TRUE(has(why, "needs a LOCAL axis")) << why;
  std::vector<Opt> opts{
      {OptOp::kUpcast, 1, 4}, {OptOp::kUpcast, 0, 4}, {OptOp::kLocal, 0, 4}, {OptOp::kLocal, 1, 8}};
  for (const Opt& o : opts) k.apply(o);
  EXPECT_EQ(k.staged_loads(4).size(), 2u);
  k.apply({OptOp::kStage, 4, 8});
  opts.push_back({OptOp::kStage, 4, 8});
  EXPECT_EQ(k.str(), "(4:g, 4:g, 4:l, 8:l, 4:r, 8:s, 4:u, 4:u)");
  EXPECT_FALSE(k.legal({OptOp::kStage, 4, 2}, &why)) << "a second STAGE";
  EXPECT_FALSE(k.legal({OptOp::kSplitReduce, 4, 2}, &why));
  ClTarget target(cl_target_info(256), "test");
  ProgramSpec spec =
      lower_kernel(testing::matmul_ast(64, 128, 32, dtypes::kFloat32), target.info(), opts);
  EXPECT_EQ(spec.local_size, (std::array<int64_t, 3>{8, 4, 1}));
  EXPECT_EQ(spec.global_size, (std::array<int64_t, 3>{4, 4, 1}));
  std::string s = target.render(spec);
  EXPECT_TRUE(has(s, "__local float temp0[128];")) << s;  // A: 16 rows x 8 steps
  EXPECT_TRUE(has(s, "__local float temp1[256];")) << s;  // B: 8 steps x 32 columns
  size_t first = s.find("barrier("), second = s.find("barrier(", first + 1);
  ASSERT_NE(second, std::string::npos) << s;
  EXPECT_EQ(s.find("barrier(", second + 1), std::string::npos) << s;
  EXPECT_TRUE(has(s, "vstore4(")) << s;
  EXPECT_TRUE(has(s, "vload4(0, temp1 + ")) << s;
  EXPECT_LT(s.find("for (long ridx0"), first) << s;  // both inside the tile loop
}

TEST(ClRender, GroupIsRefusedWhereThereIsNoSharedMemory) {
  TargetInfo cpu;  // TargetInfo's defaults: the CPU
  try {
    lower_kernel(row_reduce_ast(Op::ADD, 4, 1024), cpu, std::vector<Opt>{{OptOp::kGroup, 1, 64}});
    FAIL() << "GROUP lowered on a target without shared memory";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "GROUP needs shared memory")) << e.what();
  }
}

TEST(ClRender, VectorsOpenClLacksAreRefusedByName) {
  ClTarget target(cl_target_info(256), "test");
  ProgramSpec spec;
  spec.name = "five";
  UOpPtr b = UOp::make(Op::DEFINE_GLOBAL, dtypes::kFloat32.as_ptr(), {}, int64_t{0});
  UOpPtr idx = UOp::make(Op::INDEX, dtypes::kFloat32.as_ptr(), {b, UOp::index_const(0)});
  UOpPtr v = UOp::make(Op::LOAD, dtypes::kFloat32.vec(5), {idx});
  spec.uops = {b, UOp::index_const(0), idx, v};
  spec.bufs = {{0, dtypes::kFloat32, 5, false}};
  Result<CompiledKernel> k = target.compile(spec);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(has(k.status().message(), "vectors of 5 lanes")) << k.status().to_string();
}

TEST(ClRender, WorkGroupsFollowTheDevicesLimit) {
  EXPECT_EQ(cl_target_info(4096).max_block, 128);
  EXPECT_EQ(cl_target_info(96).max_block, 64);  // a power of two at most the limit
  EXPECT_EQ(cl_target_info(1).max_block, 1);
  EXPECT_TRUE(cl_target_info(256).gpu);
}

}  // namespace
}  // namespace baregrad::compiler
