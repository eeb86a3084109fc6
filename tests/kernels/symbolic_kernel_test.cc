// Kernels over symbolic shapes (views with a SymView shadow): compiled once, launched with the
// Variable's value as a launch scalar, on each CPU backend and MOCK+NV; and a concrete kernel
// beside them. The oracle is a plain loop in double over the same indices.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "base/options.h"
#include "compiler/ast.h"
#include "compiler/opt/kernel.h"
#include "compiler/sym_view.h"
#include "runtime/device.h"
#include "tests/kernels/kernel_test.h"
#include "tests/missing_tool.h"

namespace baregrad::testing {
namespace {
using namespace compiler;
using runtime::Buffer;
using runtime::Device;

const SymVar kI{"i", 1, 10};

class SymbolicKernelTest : public DeviceTest {
 protected:
  void TearDown() override {
    for (const Buffer& b : bufs_) dev_->free(b);
  }
  Buffer upload(const std::vector<float>& v) {
    Buffer b = *dev_->alloc(v.size() * 4);
    EXPECT_TRUE(dev_->copy_in(b, v.data(), b.bytes).ok());
    bufs_.push_back(b);
    return b;
  }
  std::vector<float> download(const Buffer& b) {
    std::vector<float> v(b.bytes / 4);
    EXPECT_TRUE(dev_->copy_out(v.data(), b, b.bytes).ok());
    return v;
  }
  // The program's launch scalars: `i` by name; the kernel has no other.
  static std::vector<int64_t> vars(const runtime::Program& p, int64_t i) {
    std::vector<int64_t> out;
    for (const VarArg& v : p.spec.vars) {
      EXPECT_EQ(v.name, "i");
      out.push_back(i);
    }
    return out;
  }
  std::vector<Buffer> bufs_;
};

std::vector<float> ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t k = 0; k < n; k++) v[k] = static_cast<float>((k * 7) % 13) - 6.0f;
  return v;
}

// out[r] = sum(a[r, :i]) for a (4, 10): one program serves i = 1, 3, 7 and 10.
TEST_P(SymbolicKernelTest, SumOverAVariableLengthCompilesOnce) {
  Sym i = Sym::var(kI);
  SymTracker a_st = *sym_shrink(SymTracker::contiguous({4, 10}), {{0, 4}, {0, i}});
  UOpPtr a = global(1, kF32), out = global(0, kF32);
  UOpPtr ast = sink({store(out, ShapeTracker::contiguous({4, 1}),
                           reduce_axis(Op::ADD, {1}, load(a, a_st.instantiate())))});
  auto prg = dev_->compile(ast);
  ASSERT_TRUE(prg.ok()) << prg.status().to_string();
  ASSERT_EQ((*prg)->spec.vars.size(), 1u);
  std::vector<float> host = ramp(40);
  Buffer da = upload(host), dout = upload(std::vector<float>(4, -1));
  for (int64_t n : {1, 3, 7, 10}) {
    ASSERT_TRUE(dev_->launch(**prg, std::vector<Buffer>{dout, da}, vars(**prg, n)).ok());
    std::vector<float> got = download(dout);
    for (int r = 0; r < 4; r++) {
      double want = 0;
      for (int c = 0; c < n; c++) want += host[r * 10 + c];
      EXPECT_NEAR(got[r], want, 1e-4) << "i=" << n << " row " << r;
    }
  }
}

// out (i, 3) contiguous = 2 * a[2:2+i, :3] of a (12, 5), plus a padded (masked) read of b:
// b = buffer[1:1+i], padded by one element on each side and read at [-1, i-1). Unmasked, row 0
// would read buffer[0] (99).
TEST_P(SymbolicKernelTest, ElementwiseWithSymbolicOffsetAndMask) {
  Sym i = Sym::var(kI);
  SymTracker a_st = *sym_shrink(SymTracker::contiguous({12, 5}), {{2, i + 2}, {0, 3}});
  SymTracker b_st = *sym_shrink(SymTracker::contiguous({11}), {{1, i + 1}});
  b_st = *sym_pad(b_st, {{1, 1}});     // (i+2,)
  b_st = *sym_shrink(b_st, {{0, i}});  // b[-1 .. i-1)
  b_st = *sym_reshape(b_st, {i, 1});
  b_st = *sym_expand(b_st, {i, 3});
  SymTracker out_st = SymTracker::contiguous({i, 3});
  UOpPtr a = global(1, kF32), b = global(2, kF32), out = global(0, kF32);
  UOpPtr v = load(a, a_st.instantiate()) * UOp::cnst(kF32, 2) + load(b, b_st.instantiate());
  UOpPtr ast = sink({store(out, out_st.instantiate(), v)});
  auto prg = dev_->compile(ast);
  ASSERT_TRUE(prg.ok()) << prg.status().to_string();
  std::vector<float> ha = ramp(60), hb = ramp(11);
  hb[0] = 99;
  Buffer da = upload(ha), db = upload(hb), dout = upload(std::vector<float>(30, -100));
  for (int64_t n : {1, 4, 10}) {
    ASSERT_TRUE(dev_->launch(**prg, std::vector<Buffer>{dout, da, db}, vars(**prg, n)).ok());
    std::vector<float> got = download(dout);
    for (int r = 0; r < n; r++)
      for (int c = 0; c < 3; c++) {
        double pad = r == 0 ? 0.0 : hb[r];
        EXPECT_NEAR(got[r * 3 + c], 2.0 * ha[(r + 2) * 5 + c] + pad, 1e-5)
            << "i=" << n << " at " << r << "," << c;
      }
  }
}

// A reshape that merges a symbolic dim with a constant one re-indexes through a second view:
// (i, 4) -> (4 * i,), permuted first so no single view expresses it.
TEST_P(SymbolicKernelTest, ReshapeThroughTwoViews) {
  Sym i = Sym::var(kI);
  SymTracker st = sym_permute(SymTracker::contiguous({4, i}), {1, 0});  // (i, 4), strides (1, i)
  st = *sym_reshape(st, {i * 4});
  ASSERT_EQ(st.views.size(), 2u);
  UOpPtr a = global(1, kF32), out = global(0, kF32);
  UOpPtr ast =
      sink({store(out, SymTracker::contiguous({i * 4}).instantiate(), load(a, st.instantiate()))});
  auto prg = dev_->compile(ast);
  ASSERT_TRUE(prg.ok()) << prg.status().to_string();
  std::vector<float> ha = ramp(40);
  Buffer da = upload(ha), dout = upload(std::vector<float>(40, -100));
  for (int64_t n : {2, 9}) {
    ASSERT_TRUE(dev_->launch(**prg, std::vector<Buffer>{dout, da}, vars(**prg, n)).ok());
    std::vector<float> got = download(dout);
    for (int r = 0; r < n; r++)
      for (int c = 0; c < 4; c++)
        EXPECT_EQ(got[r * 4 + c], ha[c * n + r]) << "i=" << n << " at " << r << "," << c;
    EXPECT_EQ(got[n * 4], -100) << "wrote past 4*i";
  }
}

// A kernel without Variables beside them: on a GPU its grid overshoots 1000 threads and the
// bounds check must stop at 1000, not at a symbolic count (a regression seen on MOCK+NV).
TEST_P(SymbolicKernelTest, ConcreteKernelsStillCoverEveryElement) {
  UOpPtr a = global(1, kF32), out = global(0, kF32);
  UOpPtr ast = sink({store(out, ShapeTracker::contiguous({1000}),
                           load(a, ShapeTracker::contiguous({1000})) * UOp::cnst(kF32, 2))});
  auto prg = dev_->compile(ast);
  ASSERT_TRUE(prg.ok()) << prg.status().to_string();
  std::vector<float> ha = ramp(1000);
  Buffer da = upload(ha), dout = upload(std::vector<float>(1000, -100));
  ASSERT_TRUE(dev_->launch(**prg, std::vector<Buffer>{dout, da}).ok());
  std::vector<float> got = download(dout);
  for (int k = 0; k < 1000; k++) ASSERT_EQ(got[k], 2 * ha[k]) << "element " << k;
}

// Opts never split a symbolic axis, and the kernel keeps it as its own loop.
TEST(SymbolicKernel, OptsLeaveSymbolicAxesWhole) {
  Sym i = Sym::var({"i", 1, 64});
  SymTracker a_st = *sym_shrink(SymTracker::contiguous({8, 64}), {{0, 8}, {0, i}});
  UOpPtr ast = sink({store(global(0, kF32), ShapeTracker::contiguous({8, 1}),
                           reduce_axis(Op::ADD, {1}, load(global(1, kF32), a_st.instantiate())))});
  Kernel k(ast);
  ASSERT_TRUE(k.symbolic());
  ASSERT_EQ(k.ndim(), 2);
  EXPECT_EQ(k.sym_shape()[1], i);
  EXPECT_EQ(k.shape()[1], 64);  // its max
  std::string why;
  EXPECT_FALSE(k.legal({OptOp::kUnroll, 1, 4}, &why));
  EXPECT_NE(why.find("symbolic"), std::string::npos) << why;
  EXPECT_TRUE(k.legal({OptOp::kUpcast, 0, 4}));
  EXPECT_EQ(k.str(), "(8:g, i:r)");
}

INSTANTIATE_TEST_SUITE_P(Cpu,
                         SymbolicKernelTest,
                         ::testing::Values("CPU", "CPU:C", "MOCK+NV", "MOCK+AMD", "CL"),
                         [](const auto& info) {
                           return info.param == "CPU"        ? std::string("llvm")
                                  : info.param == "CPU:C"    ? std::string("clang")
                                  : info.param == "MOCK+NV"  ? std::string("mock_nv")
                                  : info.param == "MOCK+AMD" ? std::string("mock_amd")
                                                             : std::string("cl");
                         });

}  // namespace
}  // namespace baregrad::testing
