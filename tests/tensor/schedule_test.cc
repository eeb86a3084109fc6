// The scheduler's fusion decisions: kernel counts for canonical graphs.
#include "tensor/schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "runtime/device.h"
#include "tensor/tensor.h"

namespace baregrad::tensor {
namespace {

size_t kernels(const Tensor& t) { return create_schedule({t.lazy()}).size(); }

Tensor input(Shape s) { return Tensor::zeros(s).contiguous().realize(); }

TEST(Schedule, ElementwiseChainIntoReductionIsOneKernel) {
  Tensor a = input({16, 16}), b = input({16, 16}), c = input({16});
  EXPECT_EQ(kernels((a * b + c).relu().sum()), 1u);
}

TEST(Schedule, ElementwiseChainIsOneKernel) {
  Tensor a = input({8, 8});
  EXPECT_EQ(kernels(((a + 1.0) * a - a.exp()).sqrt().transpose()), 1u);
}

TEST(Schedule, SoftmaxIsAtMostThreeKernels) {
  Tensor x = input({4, 32});
  Tensor e = (x - x.max({-1}, true)).exp();
  EXPECT_LE(kernels(e / e.sum({-1}, true)), 3u);
}

// A sum over 16M elements is at most two kernels on every device (the tensor suite runs on
// DEV=CPU, MOCK+NV and CL); on GPU targets with shared memory the first is a group reduction
// (a work-group per partial sum, combined through shared memory behind a barrier).
TEST(Schedule, ALargeSumIsAtMostTwoKernelsAndAGroupReductionOnGpus) {
  Tensor x = input({4096, 4096});
  std::vector<ScheduleItem> items = create_schedule({x.sum().lazy()});
  ASSERT_GE(items.size(), 1u);
  EXPECT_LE(items.size(), 2u);
  auto dev = runtime::get_device();
  ASSERT_TRUE(dev.ok()) << dev.status().to_string();
  const compiler::TargetInfo& info = (*dev)->target_info();
  ASSERT_TRUE(items[0].ast);
  auto prg = (*dev)->compile(items[0].ast);
  ASSERT_TRUE(prg.ok()) << prg.status().to_string();
  bool group = false;
  for (const compiler::UOpPtr& u : (*prg)->spec.uops) group |= u->op() == compiler::Op::BARRIER;
  EXPECT_EQ(group, info.gpu && info.has_local) << (*dev)->name() << ": " << (*prg)->spec.name;
  if (group) {
    EXPECT_GT((*prg)->spec.local_size[0], 1) << (*prg)->spec.name;
  }
}

TEST(Schedule, MatmulIsOneKernelAndBiasReluFuses) {
  Tensor a = input({8, 16}), w = input({16, 4}), bias = input({4});
  EXPECT_EQ(kernels(a.matmul(w)), 1u);
  // the reduction is read unchanged by the bias add only through a broadcast of the bias
  EXPECT_EQ(kernels((a.matmul(w) + bias).relu()), 1u);
}

TEST(Schedule, PaddedElementwiseFusesWithThePadsZerosPutBack) {
  // exp(x) padded with zeros must not become exp(0) = 1 in the pad.
  Tensor x = Tensor::from_data({0, 1, 2, 3}, {4}, dtypes::kFloat32);
  Tensor y = x.exp().pad({{1, 1}}).contiguous();
  EXPECT_EQ(kernels(y), 1u);
  std::vector<double> v = y.to_vector();
  ASSERT_EQ(v.size(), 6u);
  EXPECT_EQ(v[0], 0.0);
  EXPECT_EQ(v[1], 1.0);  // exp(0) inside the pad
  EXPECT_NEAR(v[4], std::exp(3.0), 1e-4);
  EXPECT_EQ(v[5], 0.0);
  // Read by a reduction (each element read many times, as by a convolution), it gets a buffer.
  EXPECT_EQ(kernels(x.exp().pad({{1, 1}}).sum({0})), 2u);
}

TEST(Schedule, PaddedIntegerDivisionIsRealizedFirst) {
  // Outside the pad its loads read 0: an integer division by them would trap.
  Tensor a = Tensor::from_data({7, 8, 9}, {3}, dtypes::kInt32);
  Tensor b = Tensor::from_data({2, 4, 3}, {3}, dtypes::kInt32);
  Tensor y = a.idiv(b).pad({{2, 0}}).contiguous();
  EXPECT_EQ(kernels(y), 2u);
  EXPECT_EQ(y.to_vector(), (std::vector<double>{0, 0, 3, 2, 3}));
}

TEST(Schedule, RealizedInputsAreNotRecomputed) {
  Tensor a = input({8});
  Tensor b = (a + 1.0).realize();
  EXPECT_EQ(kernels(b * 2.0), 1u);
  EXPECT_EQ(kernels(b), 0u);
}

}  // namespace
}  // namespace baregrad::tensor

namespace baregrad::tensor {
namespace {

// A constant read through padding is where(valid, c, 0) inside the reading kernel: no buffer and
// no kernel of its own, also through several views each with a mask (a pad, a reshape that
// needs a second view, another pad), checked against values worked out by hand.
TEST(Schedule, PaddedConstantReadsZerosInThePad) {
  Tensor x = input({4}) + 1.0;
  Tensor sum = Tensor::ones({2}).pad({{1, 1}}) + x;
  EXPECT_EQ(kernels(sum), 1u);
  EXPECT_EQ(sum.to_vector(), (std::vector<double>{1, 2, 2, 1}));
  // [0 7 7 7 7 0] as 2x3, then padded: rows [0 0 7 7], [0 7 7 0], [0 0 0 0]
  Tensor multi = Tensor::full({4}, 7).pad({{1, 1}}).reshape({2, 3}).pad({{0, 1}, {1, 0}});
  Tensor m = multi.contiguous();
  EXPECT_EQ(kernels(m), 1u);
  EXPECT_EQ(m.to_vector(), (std::vector<double>{0, 0, 7, 7, 0, 7, 7, 0, 0, 0, 0, 0}));
  // transposed, reshaped across the pad, shrunk and flipped
  Tensor t = Tensor::full({2, 2}, 3)
                 .pad({{1, 0}, {0, 1}})
                 .transpose()
                 .reshape({9})
                 .shrink({{1, 8}})
                 .flip({0});
  // padded 3x3: [0 0 0],[3 3 0],[3 3 0]; transposed: [0 3 3],[0 3 3],[0 0 0]; flat[1:8] reversed
  EXPECT_EQ((t + 0.0).to_vector(), (std::vector<double>{0, 0, 3, 3, 0, 3, 3}));
  Tensor y = Tensor::from_data({1, 2, 3, 4}, {4}, dtypes::kFloat64);
  y.requires_grad_();
  y.shrink({{0, 2}}).sum().backward();  // the gradient pads a constant
  EXPECT_EQ(y.grad()->to_vector(), (std::vector<double>{1, 1, 0, 0}));
}

TEST(Schedule, ReducingAnEmptyAxisGivesTheIdentity) {
  Tensor x = Tensor::from_data(std::vector<double>(16, 3), {4, 4}, dtypes::kFloat64);
  EXPECT_EQ(x.shrink({{4, 4}, {0, 4}}).sum({0}).to_vector(), std::vector<double>(4, 0));
  EXPECT_EQ(Tensor::from_data({}, {0, 4}).max({0}).to_vector(), std::vector<double>(4, -INFINITY));
  EXPECT_EQ(x.shrink({{0, 4}, {0, 0}}).matmul(x.shrink({{0, 0}, {0, 4}})).to_vector(),
            std::vector<double>(16, 0));
}

// A reduction of 32768 or more elements per output is split: a first kernel of d partial
// results per output (d a divisor of the largest reduce axis, up to 256, 4096 on GPUs), then a
// second one combining them. The results match a float64 sum within fp32 rounding of 2^20
// terms (1e-2; one element left out would be off by 0.5 on average), the max exactly; an axis
// without a divisor in [8, size / 16] stays one kernel.
TEST(Schedule, LargeReductionsSplitIntoTwoKernelsThatAgreeWithTheReference) {
  std::mt19937_64 rng(5);
  auto data = [&](size_t n) {
    std::vector<double> v(n);
    for (auto& x : v) x = std::uniform_real_distribution<double>(-1, 1)(rng);
    return v;
  };
  auto sum64 = [](const std::vector<double>& v, size_t begin, size_t end) {
    double s = 0;
    for (size_t i = begin; i < end; i++) s += static_cast<double>(static_cast<float>(v[i]));
    return s;
  };
  std::vector<double> v = data(size_t{1} << 20);
  Tensor x = Tensor::from_data(v, {1 << 20}).realize();
  EXPECT_EQ(kernels(x.sum()), 2u);
  EXPECT_EQ(kernels(x.max()), 2u);
  EXPECT_EQ(kernels(x.reshape({4, 1 << 18}).sum({1})), 2u);
  EXPECT_EQ(kernels(x.reshape({64, 1 << 14}).sum({1})), 1u);  // 16384 per output: not split
  EXPECT_NEAR(x.sum().to_vector()[0], sum64(v, 0, v.size()), 1e-2);
  double mx = -1;
  for (double e : v) mx = std::max(mx, static_cast<double>(static_cast<float>(e)));
  EXPECT_EQ(x.max().to_vector()[0], mx);
  std::vector<double> rows = x.reshape({4, 1 << 18}).sum({1}).to_vector();
  ASSERT_EQ(rows.size(), 4u);
  for (size_t r = 0; r < 4; r++)
    EXPECT_NEAR(rows[r], sum64(v, r << 18, (r + 1) << 18), 1e-2) << "row " << r;
  // Both axes reduced, the largest split: a transposed view reduced over everything.
  Tensor t = x.reshape({512, 2048}).transpose();
  EXPECT_EQ(kernels(t.sum()), 2u);
  EXPECT_NEAR(t.sum().to_vector()[0], sum64(v, 0, v.size()), 1e-2);
  // 65537 elements (a prime): no divisor, one kernel.
  std::vector<double> p = data(65537);
  Tensor y = Tensor::from_data(p, {65537}).realize();
  EXPECT_EQ(kernels(y.sum()), 1u);
  EXPECT_NEAR(y.sum().to_vector()[0], sum64(p, 0, p.size()), 1e-2);
}

TEST(Schedule, PaddingAnEmptyTensor) {
  EXPECT_EQ(Tensor::zeros({0}).contiguous().pad({{1, 1}}).to_vector(), (std::vector<double>{0, 0}));
}

// A chain far deeper than the C++ stack could recurse over: built, scheduled (in kernels of a
// bounded depth), run, differentiated and destroyed without overflowing the stack.
TEST(Schedule, DeepChainsAreCutIntoKernelsOfBoundedDepth) {
  Tensor x = Tensor::from_data({0.5}, {1}).realize();
  Tensor y = x;
  for (int i = 0; i < 5000; i++) y = y + 1.0;
  EXPECT_EQ(kernels(y), 10u);  // 5000 ops in kernels of at most 512
  EXPECT_EQ(y.to_vector()[0], 5000.5);
  constexpr int kOps = 300000;
  Tensor z = x;
  for (int i = 0; i < kOps; i++) z = z + 1.0;
  EXPECT_EQ(z.to_vector()[0], 0.5 + kOps);
}

TEST(Schedule, DeepGradientChain) {
  Tensor x = Tensor::from_data({2.0}, {1});
  x.requires_grad_(true);
  Tensor y = x;
  for (int i = 0; i < 100000; i++) y = y * 1.0;
  y.sum().backward();
  ASSERT_TRUE(x.grad().has_value());
  EXPECT_EQ(x.grad()->to_vector()[0], 1.0);
}

// x = x + x, 60 times: 60 nodes, 2**60 paths. Each node is visited once (it used to be walked
// once per path, which never finished).
TEST(Schedule, SharedSubexpressionsAreWalkedOncePerNode) {
  Tensor y = Tensor::from_data({1.0}, {1}).realize();
  for (int i = 0; i < 60; i++) y = y + y;
  EXPECT_EQ(kernels(y), 1u);
  EXPECT_EQ(y.to_vector()[0], std::ldexp(1.0, 60));
}

}  // namespace
}  // namespace baregrad::tensor
