// conv2d and pooling against direct float64 loops, and their gradients.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>

#include "base/error.h"
#include "compiler/codegen/lower.h"
#include "compiler/opt/kernel.h"
#include "compiler/view_ops.h"
#include "runtime/device.h"
#include "tensor/schedule.h"
#include "tensor/tensor.h"
#include "tests/tensor/test_util.h"

namespace baregrad::tensor {
namespace {

const DType kF64 = dtypes::kFloat64;

std::vector<double> uniform_vec(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> d(-1, 1);
  std::vector<double> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

struct ConvCase {
  int64_t n, c, h, w, o, k, stride, pad, dil, groups;
};

std::vector<double> conv_ref(const ConvCase& p,
                             const std::vector<double>& x,
                             const std::vector<double>& wt,
                             const std::vector<double>& b,
                             int64_t* oh_out,
                             int64_t* ow_out) {
  int64_t cg = p.c / p.groups, og = p.o / p.groups;
  int64_t oh = (p.h + 2 * p.pad - p.dil * (p.k - 1) - 1) / p.stride + 1;
  int64_t ow = (p.w + 2 * p.pad - p.dil * (p.k - 1) - 1) / p.stride + 1;
  *oh_out = oh;
  *ow_out = ow;
  std::vector<double> out(p.n * p.o * oh * ow, 0);
  for (int64_t n = 0; n < p.n; n++)
    for (int64_t o = 0; o < p.o; o++)
      for (int64_t y = 0; y < oh; y++)
        for (int64_t z = 0; z < ow; z++) {
          double acc = b.empty() ? 0 : b[o];
          int64_t g = o / og;
          for (int64_t ci = 0; ci < cg; ci++)
            for (int64_t i = 0; i < p.k; i++)
              for (int64_t j = 0; j < p.k; j++) {
                int64_t yy = y * p.stride + i * p.dil - p.pad,
                        zz = z * p.stride + j * p.dil - p.pad;
                if (yy < 0 || yy >= p.h || zz < 0 || zz >= p.w) continue;
                int64_t c = g * cg + ci;
                acc += x[((n * p.c + c) * p.h + yy) * p.w + zz] *
                       wt[((o * cg + ci) * p.k + i) * p.k + j];
              }
          out[((n * p.o + o) * oh + y) * ow + z] = acc;
        }
  return out;
}

TEST(Conv, Conv2dMatchesDirectLoops) {
  for (ConvCase p : {ConvCase{2, 3, 7, 6, 4, 3, 1, 1, 1, 1}, ConvCase{1, 4, 9, 9, 6, 3, 2, 0, 1, 2},
                     ConvCase{2, 2, 8, 7, 2, 2, 1, 2, 2, 1}, ConvCase{1, 1, 5, 5, 1, 5, 1, 0, 1, 1},
                     ConvCase{1, 3, 10, 8, 3, 3, 3, 1, 2, 3}}) {
    SCOPED_TRACE("conv " + std::to_string(p.c) + "->" + std::to_string(p.o) + " k" +
                 std::to_string(p.k) + " s" + std::to_string(p.stride) + " p" +
                 std::to_string(p.pad) + " d" + std::to_string(p.dil) + " g" +
                 std::to_string(p.groups));
    auto x = uniform_vec(p.n * p.c * p.h * p.w, 1),
         w = uniform_vec(p.o * p.c / p.groups * p.k * p.k, 2), b = uniform_vec(p.o, 3);
    int64_t oh, ow;
    auto want = conv_ref(p, x, w, b, &oh, &ow);
    Tensor y = Tensor::from_data(x, {p.n, p.c, p.h, p.w}, kF64)
                   .conv2d(Tensor::from_data(w, {p.o, p.c / p.groups, p.k, p.k}, kF64),
                           Tensor::from_data(b, {p.o}, kF64), p.stride, p.pad, p.dil, p.groups);
    ASSERT_EQ(y.shape(), (Shape{p.n, p.o, oh, ow}));
    auto got = y.to_vector();
    for (size_t i = 0; i < got.size(); i++) ASSERT_NEAR(got[i], want[i], 1e-12) << i;
  }
}

TEST(Conv, PoolingMatchesDirectLoops) {
  auto x = uniform_vec(2 * 3 * 6 * 7, 4);
  Tensor t = Tensor::from_data(x, {2, 3, 6, 7}, kF64);
  for (auto [k, s] : {std::pair<int64_t, int64_t>{2, 2}, {3, 1}, {3, 2}}) {
    int64_t oh = (6 - k) / s + 1, ow = (7 - k) / s + 1;
    std::vector<double> mx, av;
    for (int64_t nc = 0; nc < 6; nc++)
      for (int64_t y = 0; y < oh; y++)
        for (int64_t z = 0; z < ow; z++) {
          double m = -INFINITY, sum = 0;
          for (int64_t i = 0; i < k; i++)
            for (int64_t j = 0; j < k; j++) {
              double v = x[(nc * 6 + y * s + i) * 7 + z * s + j];
              m = std::max(m, v);
              sum += v;
            }
          mx.push_back(m);
          av.push_back(sum / (k * k));
        }
    auto gm = t.max_pool2d(k, s).to_vector(), ga = t.avg_pool2d(k, s).to_vector();
    ASSERT_EQ(gm.size(), mx.size());
    for (size_t i = 0; i < mx.size(); i++) {
      ASSERT_EQ(gm[i], mx[i]) << "max k" << k << " s" << s << " at " << i;
      ASSERT_NEAR(ga[i], av[i], 1e-12) << "avg k" << k << " s" << s << " at " << i;
    }
  }
}

TEST(Conv, GradientsMatchFiniteDifferences) {
  ConvCase p{1, 2, 5, 5, 2, 3, 2, 1, 1, 1};
  auto x = uniform_vec(50, 5), w = uniform_vec(36, 6), wl = uniform_vec(2 * 3 * 3, 7);
  auto loss = [&](const std::vector<double>& xv, const std::vector<double>& wv, Tensor* xt,
                  Tensor* wt) {
    Tensor a = Tensor::from_data(xv, {1, 2, 5, 5}, kF64),
           b = Tensor::from_data(wv, {2, 2, 3, 3}, kF64);
    if (xt) {
      a.requires_grad_();
      b.requires_grad_();
      *xt = a;
      *wt = b;
    }
    Tensor y = a.conv2d(b, std::nullopt, p.stride, p.pad).relu().max_pool2d(2, 1);
    return (y * Tensor::from_data(std::vector<double>(wl.begin(), wl.begin() + y.numel()),
                                  y.shape(), kF64))
        .sum();
  };
  Tensor xt = Tensor::zeros({1}), wt = Tensor::zeros({1});
  loss(x, w, &xt, &wt).backward();
  auto gx = xt.grad()->to_vector(), gw = wt.grad()->to_vector();
  const double eps = 1e-6;
  for (size_t i = 0; i < x.size(); i++) {
    auto xp = x, xm = x;
    xp[i] += eps;
    xm[i] -= eps;
    double num = (loss(xp, w, nullptr, nullptr).to_vector()[0] -
                  loss(xm, w, nullptr, nullptr).to_vector()[0]) /
                 (2 * eps);
    ASSERT_NEAR(gx[i], num, 1e-5) << "x " << i;
  }
  for (size_t i = 0; i < w.size(); i++) {
    auto wp = w, wm = w;
    wp[i] += eps;
    wm[i] -= eps;
    double num = (loss(x, wp, nullptr, nullptr).to_vector()[0] -
                  loss(x, wm, nullptr, nullptr).to_vector()[0]) /
                 (2 * eps);
    ASSERT_NEAR(gw[i], num, 1e-5) << "w " << i;
  }
}

TEST(Conv, BadShapesAreNamed) {
  Tensor x = Tensor::zeros({1, 3, 8, 8});
  try {
    (void)x.conv2d(Tensor::zeros({4, 2, 3, 3}));
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[conv2d] input (1, 3, 8, 8) has 3 channels; weight "
                                         "(4, 2, 3, 3) with groups=1 expects 2"),
              std::string::npos)
        << e.what();
  }
  try {
    (void)x.max_pool2d(9);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[pool] window 9"), std::string::npos) << e.what();
  }
}

// Per window axis: input size, kernel, stride, dilation.
struct Axis {
  int64_t i, k, s, d;
  int64_t o() const { return (i - d * (k - 1) - 1) / s + 1; }
};

// Disjoint windows (k <= s, d = 1, with and without a cut or padded tail), overlapping ones
// with unit stride (their own gradient), with a larger stride, dilated, mixed per axis, and a
// stride far beyond the axis.
TEST(Conv, WindowsAndTheirGradientMatchDirectIndexing) {
  std::vector<std::pair<Axis, Axis>> cases = {
      {{8, 2, 2, 1}, {6, 3, 3, 1}}, {{8, 2, 3, 1}, {5, 1, 2, 1}},  {{7, 3, 1, 1}, {6, 3, 1, 1}},
      {{9, 3, 1, 2}, {7, 2, 1, 3}}, {{9, 3, 2, 1}, {8, 3, 2, 1}},  {{7, 3, 1, 1}, {8, 2, 2, 1}},
      {{9, 3, 2, 2}, {5, 2, 7, 2}}, {{3, 2, 100, 2}, {4, 4, 1, 1}}};
  for (auto [a0, a1] : cases) {
    SCOPED_TRACE("axes i,k,s,d " + std::to_string(a0.i) + "," + std::to_string(a0.k) + "," +
                 std::to_string(a0.s) + "," + std::to_string(a0.d) + " and " +
                 std::to_string(a1.i) + "," + std::to_string(a1.k) + "," + std::to_string(a1.s) +
                 "," + std::to_string(a1.d));
    const int64_t b = 2, o0 = a0.o(), o1 = a1.o();
    auto xv = uniform_vec(b * a0.i * a1.i, 8), wv = uniform_vec(b * o0 * o1 * a0.k * a1.k, 9);
    Tensor x = Tensor::from_data(xv, {b, a0.i, a1.i}, kF64).requires_grad_();
    Tensor win = x.pool_windows({a0.k, a1.k}, {a0.s, a1.s}, {a0.d, a1.d});
    ASSERT_EQ(win.shape(), (Shape{b, o0, o1, a0.k, a1.k}));
    Tensor wt = Tensor::from_data(wv, win.shape(), kF64);
    Tensor gx = (win * wt).sum().gradient({x})[0];
    std::vector<double> want(wv.size()), want_g(xv.size(), 0);
    for (int64_t f = 0; f < static_cast<int64_t>(wv.size()); f++) {
      int64_t q1 = f % a1.k, q0 = f / a1.k % a0.k, y1 = f / (a1.k * a0.k) % o1,
              y0 = f / (a1.k * a0.k * o1) % o0, n = f / (a1.k * a0.k * o1 * o0);
      int64_t src = (n * a0.i + y0 * a0.s + q0 * a0.d) * a1.i + y1 * a1.s + q1 * a1.d;
      want[f] = xv[src];
      want_g[src] += wv[f];
    }
    EXPECT_EQ(win.to_vector(), want);
    auto got_g = gx.to_vector();
    for (size_t p = 0; p < got_g.size(); p++) ASSERT_NEAR(got_g[p], want_g[p], 1e-12) << p;
  }
}

// Windows of a buffer are one strided view of it (o*s + k*d per window axis), which the
// kernels load with plain index arithmetic.
TEST(Conv, WindowsOfABufferAreOneStridedView) {
  Tensor x = Tensor::rand({2, 3, 9, 8}).realize();
  auto view_of = [](const Tensor& t) { return compiler::simplify(t.lazy().st); };
  struct Case {
    const char* name;
    Tensor win;
    std::vector<int64_t> strides;
  };
  std::vector<Case> cases = {
      {"3x3 stride 1", x.pool_windows({3, 3}, {1, 1}, {1, 1}), {216, 72, 8, 1, 8, 1}},
      {"2x2 stride 2 (max_pool2d)", x.pool_windows({2, 2}, {2, 2}, {1, 1}), {216, 72, 16, 2, 8, 1}},
      {"3x3 stride 2", x.pool_windows({3, 3}, {2, 2}, {1, 1}), {216, 72, 16, 2, 8, 1}},
      {"3x3 dilation 2", x.pool_windows({3, 3}, {1, 1}, {2, 2}), {216, 72, 8, 1, 16, 2}},
      {"2x2 stride 3, padded tail", x.pool_windows({2, 2}, {3, 3}, {1, 1}), {216, 72, 24, 3, 8, 1}},
      {"3x3 stride 2 dilation 2", x.pool_windows({3, 3}, {2, 2}, {2, 2}), {216, 72, 16, 2, 16, 2}},
  };
  for (const Case& c : cases) {
    compiler::ShapeTracker st = view_of(c.win);
    ASSERT_EQ(st.views.size(), 1u) << c.name << ": " << st.str();
    EXPECT_EQ(st.views[0].strides, c.strides) << c.name << ": " << st.str();
    EXPECT_FALSE(st.views[0].mask) << c.name << ": " << st.str();
  }
  // A padded view's windows keep the padding as a view of its own: valid (o, k) pairs satisfy
  // p <= o*s + k*d < p + i, which no box mask expresses.
  Tensor padded = x.pad({{0, 0}, {0, 0}, {1, 1}, {1, 1}}).pool_windows({3, 3}, {2, 2}, {1, 1});
  EXPECT_EQ(view_of(padded).views.size(), 2u) << view_of(padded).str();
}

// Every load of every kernel: one view (no index decoding through a stack of views).
size_t multi_view_loads(const std::vector<Tensor>& ts) {
  std::vector<Lazy> lazies;
  for (const Tensor& t : ts) lazies.push_back(t.lazy());
  size_t n = 0;
  for (const ScheduleItem& item : create_schedule(lazies))
    for (const compiler::UOp* u : item.ast->toposort())
      if (u->op() == compiler::Op::LOAD)
        n += u->src(0)->arg_as<compiler::ShapeTracker>().views.size() > 1;
  return n;
}

TEST(Conv, ConvKernelsLoadOneViewEach) {
  // The digits CNN's forward: conv 3x3 padding 1, relu, 2x2 max pool, twice.
  Tensor x = Tensor::rand({4, 1, 8, 8}).requires_grad_();
  Tensor w1 = Tensor::rand({4, 1, 3, 3}).requires_grad_(), b1 = Tensor::rand({4}),
         w2 = Tensor::rand({8, 4, 3, 3}).requires_grad_();
  Tensor y = x.conv2d(w1, b1, 1, 1).relu().max_pool2d(2).conv2d(w2, std::nullopt, 1, 1);
  EXPECT_EQ(multi_view_loads({y.relu().max_pool2d(2).sum()}), 0u);
  // Its convolutions' backward. (max_pool2d's spreads each window's gradient over the window,
  // an upsampling h / k that is a second view by nature.)
  Tensor loss = x.conv2d(w1, b1, 1, 1).relu().conv2d(w2, std::nullopt, 1, 1).sum();
  EXPECT_EQ(multi_view_loads(loss.gradient({x, w1, w2})), 0u);
  // 3x3 stride 2 padding 1: forward and weight gradient (the input gradient of stride > 1
  // windows reduces over repeated copies through a stack of views).
  Tensor c = x.conv2d(w1, b1, 2, 1);
  EXPECT_EQ(multi_view_loads({c}), 0u);
  EXPECT_EQ(multi_view_loads(c.sum().gradient({w1})), 0u);
  // 3x3 dilation 2 padding 2: forward and both gradients.
  Tensor d = x.conv2d(w1, b1, 1, 2, 2);
  EXPECT_EQ(multi_view_loads({d}), 0u);
  EXPECT_EQ(multi_view_loads(d.sum().gradient({x, w1})), 0u);
}

}  // namespace
}  // namespace baregrad::tensor

namespace baregrad::tensor {
namespace {

// Stride-1 convolutions record their gradients as convolutions (dx: the flipped, transposed
// weights over the gradient padded by k-1-p; dw: the input over the batch): against central
// differences for non-square kernels, every padding up to k-1 (each axis), and a second
// derivative through gradient().
TEST(Conv, DirectGradientsMatchFiniteDifferences) {
  using test_util::check_grad;
  for (int64_t pad : {0, 1, 2}) {
    std::string name = "conv 2x3 pad " + std::to_string(pad);
    check_grad(name.c_str(),
               [pad](const std::vector<Tensor>& t) { return t[0].conv2d(t[1], t[2], 1, pad); },
               {{2, 3, 5, 6}, {2, 3, 3, 3}, {2}});
  }
  check_grad("conv 1x3 pad 0",
             [](const std::vector<Tensor>& t) { return t[0].conv2d(t[1], std::nullopt, 1, 0); },
             {{2, 2, 4, 5}, {3, 2, 1, 3}});
  check_grad("second order through conv2d",
             [](const std::vector<Tensor>& t) {
               Tensor y = t[0].conv2d(t[1], std::nullopt, 1, 1);
               return (y * y).sum().gradient({t[1]})[0];
             },
             {{1, 2, 4, 4}, {2, 2, 3, 3}});
}

}  // namespace
}  // namespace baregrad::tensor

namespace baregrad::tensor {
namespace {

// The hand-coded opts of `k` for a CPU target with AVX2 (32-byte vectors) and 2 threads.
std::string avx2_opts(const compiler::Kernel& k) {
  compiler::TargetInfo cpu;
  cpu.vector_bytes = 32;
  cpu.threads = 2;
  std::string got;
  for (const compiler::Opt& o : compiler::hand_coded_optimizations(k, cpu)) got += o.str() + " ";
  return got;
}

// The weights' stride along the output-channel axis (2) in a convolution kernel's loads: the
// view that walks the output channels (the input is broadcast along them).
int64_t weight_lane_stride(const compiler::Kernel& conv) {
  for (const auto& st : conv.load_views())
    if (compiler::Kernel::stride(st, 2) != 0) return compiler::Kernel::stride(st, 2);
  return 0;
}

// Direct loops in float64 at a few outputs of a stride-1, unpadded conv2d (times `scale`, of
// the output's shape, when given).
void expect_direct_conv(const Tensor& x,
                        const Tensor& w,
                        const Tensor& y,
                        const std::optional<Tensor>& scale = std::nullopt) {
  const Shape &xs = x.shape(), &wsh = w.shape(), &ysh = y.shape();
  std::vector<double> xv = x.to_vector(), wv = w.to_vector(), yv = y.to_vector();
  std::vector<double> sv = scale ? scale->to_vector() : std::vector<double>(y.numel(), 1.0);
  int64_t c = xs[1], h = xs[2], wd = xs[3], o = wsh[0], kh = wsh[2], kw = wsh[3];
  int64_t oh = ysh[2], ow = ysh[3];
  for (int64_t i : {int64_t{0}, int64_t{1000} % y.numel(), y.numel() - 1}) {
    int64_t n = i / (o * oh * ow), oc = i / (oh * ow) % o, oy = i / ow % oh, ox = i % ow;
    double want = 0;
    for (int64_t ci = 0; ci < c; ci++)
      for (int64_t ky = 0; ky < kh; ky++)
        for (int64_t kx = 0; kx < kw; kx++)
          want += xv[((n * c + ci) * h + oy + ky) * wd + ox + kx] *
                  wv[((oc * c + ci) * kh + ky) * kw + kx];
    want *= sv[i];
    EXPECT_NEAR(yv[i], want, 1e-4 * (1 + std::abs(want))) << i;
  }
}

// A CPU conv2d of x and w: `kernels` kernels, the last one the convolution, whose weights walk
// the output channels with `lane_stride` and whose AVX2 opts are `opts`; values against loops.
void expect_cpu_conv_kernel(const Shape& xs,
                            const Shape& ws,
                            size_t kernels,
                            int64_t lane_stride,
                            const std::string& opts) {
  Tensor x = Tensor::rand(xs, dtypes::kFloat32, "CPU").realize();
  Tensor w = Tensor::rand(ws, dtypes::kFloat32, "CPU").realize();
  Tensor y = x.conv2d(w);
  std::vector<ScheduleItem> items = create_schedule({y.lazy()});
  ASSERT_EQ(items.size(), kernels);
  compiler::Kernel conv(items.back().ast);
  EXPECT_EQ(weight_lane_stride(conv), lane_stride);
  EXPECT_EQ(avx2_opts(conv), opts);
  expect_direct_conv(x, w, y);
}

// The shape of a padded 3x3 convolution's kernels on a CPU target (AVX2, 32-byte vectors): the
// padding is written to memory by a kernel of its own, so the convolution's loads carry no mask,
// and the weights are copied to (C, KH, KW, O) memory, so the output channels are contiguous in
// them and become the vector lanes; the output width is the register tile (the weight vectors
// are reused across it), then the output channels give a second vector of copies.
TEST(Conv, CpuConvolutionLanesAreOutputChannels) {
  Tensor x = Tensor::rand({8, 16, 16, 16}, dtypes::kFloat32, "CPU").realize();
  Tensor w = Tensor::rand({32, 16, 3, 3}, dtypes::kFloat32, "CPU").realize();
  std::vector<ScheduleItem> items = create_schedule({x.conv2d(w, std::nullopt, 1, 1).lazy()});
  ASSERT_EQ(items.size(), 3u);  // the padding copy, the weights' copy, then the convolution
  compiler::Kernel conv(items[2].ast);
  ASSERT_EQ(conv.count(compiler::AxisKind::kReduce), 3);  // input channels, kh, kw
  EXPECT_EQ(weight_lane_stride(conv), 1);
  // axes: (batch, group, out channels, oh, ow | cin, kh, kw): 8 lanes of output channels, 8 of
  // ow, and 2 vectors of output channels: 16 accumulators
  EXPECT_EQ(avx2_opts(conv), "UPCAST(2, 8) UPCAST(4, 8) UPCAST(2, 2) ");
  // With AVX-512 the tile is 16 channels by 8 positions: the lowering makes the 16 channels the
  // lanes (full registers), not the 8 positions (half ones), though both are contiguous.
  compiler::TargetInfo avx512;
  avx512.threads = 2;
  compiler::Kernel tiled = conv;
  for (const compiler::Opt& o : compiler::hand_coded_optimizations(conv, avx512)) tiled.apply(o);
  compiler::Lowered low = compiler::lower_to_ranges(tiled, avx512);
  ASSERT_GE(low.vector_axis, 0);
  EXPECT_EQ(tiled.shape()[low.vector_axis], 16) << tiled.str();
  EXPECT_EQ(compiler::Kernel::stride(tiled.load_views()[1], low.vector_axis), 1) << tiled.str();
  for (const auto& st : conv.views())
    for (const auto& v : st.views) EXPECT_FALSE(v.mask.has_value()) << st.str();
}

// An output 6 wide fills no vector, but output channels do whatever the width: 6 positions by
// 2 vectors of 8 channels. Values against direct loops.
TEST(Conv, NarrowCpuConvolutionTilesItsWidthByChannelVectors) {
  // the weights' copy, then the convolution: 8 lanes of channels
  expect_cpu_conv_kernel({8, 64, 8, 8}, {64, 64, 3, 3}, 2, 1,
                         "UPCAST(2, 8) UPCAST(4, 6) UPCAST(2, 2) ");
}

// A convolution of under 2^23 multiply-adds (here 16 x 32 x 6 x 6 x 16 x 9) keeps the weights
// as given: the copy's launch would cost more than the lanes save.
TEST(Conv, SmallCpuConvolutionKeepsTheWeightLayout) {
  expect_cpu_conv_kernel({16, 16, 8, 8}, {32, 16, 3, 3}, 1, 144,
                         "UPCAST(4, 6) UPCAST(2, 4) UNROLL(6, 3) UNROLL(7, 3) ");
}

// Output channels that are no multiple of 8 keep the weights as given: the convolution gets a
// register tile of scalars, on the width (the weights are broadcast along it) and the output
// channels (the input is), and its 3x3 window is unrolled.
TEST(Conv, ConvolutionWithFewChannelsGetsAScalarTileAndAnUnrolledWindow) {
  // one kernel; axes (batch, group, out channels, oh, ow | cin, kh, kw): all 6 of ow, 3 output
  // channels (18 accumulators), then kh and kw unrolled
  expect_cpu_conv_kernel({4, 64, 8, 8}, {6, 64, 3, 3}, 1, 576,
                         "UPCAST(4, 6) UPCAST(2, 3) UNROLL(6, 3) UNROLL(7, 3) ");
}

// Lanes along the output channels are strided in an NCHW output: the store, and a load of
// the fused epilogue (here a product with another NCHW tensor), move them one by one once per
// output, which a CPU kernel that reduces allows; the loads inside the reduction may not be
// strided (the batch axis is no lane axis).
TEST(Conv, CpuLanesMayBeStridedOnlyOutsideTheReduction) {
  Tensor x = Tensor::rand({64, 16, 8, 8}, dtypes::kFloat32, "CPU").realize();
  Tensor w = Tensor::rand({32, 16, 3, 3}, dtypes::kFloat32, "CPU").realize();
  Tensor r = Tensor::rand({64, 32, 6, 6}, dtypes::kFloat32, "CPU").realize();
  Tensor y = x.conv2d(w) * r;
  std::vector<ScheduleItem> items = create_schedule({y.lazy()});
  ASSERT_EQ(items.size(), 2u);  // the weights' copy, then the convolution with its epilogue
  compiler::Kernel conv(items[1].ast);
  EXPECT_EQ(conv.load_views().size(), 3u);
  EXPECT_TRUE(conv.vector_axis(2, true));
  EXPECT_FALSE(conv.vector_axis(2, false));
  EXPECT_FALSE(conv.vector_axis(0, true));
  EXPECT_EQ(avx2_opts(conv), "UPCAST(2, 8) UPCAST(4, 6) UPCAST(2, 2) ");
  expect_direct_conv(x, w, y, r);
}

// The weight gradient of a CPU conv2d of x (N, C, H, W) with dy (N, O, OH, OW) of the output:
// the schedule's kernel that reduces over (N, OH, OW) and its AVX2 opts; values against loops.
std::string weight_gradient_opts(const Shape& xs, const Shape& ws) {
  Tensor x = Tensor::rand(xs, dtypes::kFloat32, "CPU").realize();
  Tensor w = Tensor::rand(ws, dtypes::kFloat32, "CPU").realize();
  w.requires_grad_();
  Tensor y = x.conv2d(w);
  Tensor dy = Tensor::rand(y.shape(), dtypes::kFloat32, "CPU").realize();
  Tensor dw = (y * dy).sum().gradient({w})[0];
  std::string opts;
  for (const ScheduleItem& item : create_schedule({dw.lazy()})) {
    compiler::Kernel k(item.ast);
    if (k.count(compiler::AxisKind::kReduce) == 3) opts = avx2_opts(k);
  }
  std::vector<double> xv = x.to_vector(), dyv = dy.to_vector(), dwv = dw.to_vector();
  int64_t n = xs[0], c = xs[1], h = xs[2], wd = xs[3], o = ws[0], kh = ws[2], kw = ws[3];
  int64_t oh = h - kh + 1, ow = wd - kw + 1;
  for (int64_t i : {int64_t{0}, dw.numel() / 3, dw.numel() - 1}) {  // (oc, ci, ky, kx) = i
    int64_t oc = i / (c * kh * kw), ci = i / (kh * kw) % c, ky = i / kw % kh, kx = i % kw;
    double want = 0;
    for (int64_t b = 0; b < n; b++)
      for (int64_t yy = 0; yy < oh; yy++)
        for (int64_t xx = 0; xx < ow; xx++)
          want += dyv[((b * o + oc) * oh + yy) * ow + xx] *
                  xv[((b * c + ci) * h + yy + ky) * wd + xx + kx];
    EXPECT_NEAR(dwv[i], want, 1e-3 * (1 + std::abs(want))) << i;
  }
  return opts;
}

// A weight gradient reduces over the whole batch into a few outputs, each output tile reading
// all of dy: its outermost reduce axis (the batch) is sliced outside the tile loops (SPLIT_REDUCE,
// then moved after the parallel axis), so each slice of images serves every tile from cache.
TEST(Conv, WeightGradientSlicesTheBatchOutsideItsTiles) {
  // axes (C, group, O, KH, KW | N, OH, OW): 8 lanes of O, 3 of KW, 2 vectors of O; 512 images
  // as 16 slices of 32
  EXPECT_EQ(weight_gradient_opts({512, 16, 8, 8}, {16, 16, 3, 3}),
            "UPCAST(2, 8) UPCAST(4, 3) UPCAST(2, 2) SPLIT_REDUCE(5, 32) SWAP(1, 5) ");
}

// When the schedule already split the batch into partial sums (an output axis), that axis
// moves outside the other tile loops for the same reason: dy changes along it. With enough of
// them it becomes the loop split across cores (each core then reads only its images).
TEST(Conv, WeightGradientPartialsLoopOutsideTheTiles) {
  // axes (C, group, O, partials, KH, KW | N/partials, OH, OW): the 32 partials (axis 3) go to 0
  EXPECT_EQ(weight_gradient_opts({512, 16, 10, 10}, {16, 16, 3, 3}),
            "UPCAST(2, 8) UPCAST(5, 3) UPCAST(2, 2) SWAP(0, 3) ");
}

// Max pooling's gradient reads the pooled values and the output gradient upsampled, a reshape
// of a broadcast view: rows of 8 over windows of 2. A reduction over it (BatchNorm's backward
// after a max pool) splits its axes into (4, 2) so every load is one strided view, with no
// division by the window size at each element. Values against loops.
TEST(Conv, PoolingGradientUnderAReductionLoadsSingleViews) {
  Tensor x = Tensor::rand({2, 3, 8, 8}, dtypes::kFloat32, "CPU").realize();
  x.requires_grad_();
  Tensor r = Tensor::rand({2, 3, 4, 4}, dtypes::kFloat32, "CPU").realize();
  Tensor g = (x.max_pool2d(2) * r).sum().gradient({x})[0];
  Tensor s = (g * x).sum({2, 3});
  bool reduces = false;
  for (const ScheduleItem& item : create_schedule({s.lazy()})) {
    compiler::Kernel k(item.ast);
    reduces |= k.count(compiler::AxisKind::kReduce) > 0;
    for (const auto& st : k.views()) EXPECT_EQ(st.views.size(), 1u) << st.str();
  }
  EXPECT_TRUE(reduces);
  std::vector<double> xv = x.to_vector(), rv = r.to_vector(), sv = s.to_vector();
  for (int64_t nc = 0; nc < 6; nc++) {
    double want = 0;
    for (int64_t y = 0; y < 8; y++)
      for (int64_t xx = 0; xx < 8; xx++) {
        double m = -1e30, v = xv[nc * 64 + y * 8 + xx];
        for (int64_t dy = 0; dy < 2; dy++)
          for (int64_t dx = 0; dx < 2; dx++)
            m = std::max(m, xv[nc * 64 + (y / 2 * 2 + dy) * 8 + xx / 2 * 2 + dx]);
        if (v == m) want += rv[nc * 16 + y / 2 * 4 + xx / 2] * v;
      }
    EXPECT_NEAR(sv[nc], want, 1e-4 * (1 + std::abs(want))) << nc;
  }
}

// A reshape whose shapes share no refinement ((6, 4) read as (4, 6) through a transpose) keeps
// its two views, and its values.
TEST(Conv, ReshapeWithoutACommonRefinementKeepsItsViews) {
  Tensor a = Tensor::rand({4, 6}, dtypes::kFloat32, "CPU").realize();
  Tensor s = a.permute({1, 0}).reshape({4, 6}).sum({1});
  std::vector<ScheduleItem> items = create_schedule({s.lazy()});
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(compiler::Kernel(items[0].ast).load_views()[0].views.size(), 2u);
  std::vector<double> av = a.to_vector(), sv = s.to_vector();
  for (int64_t i = 0; i < 4; i++) {
    double want = 0;
    for (int64_t j = 0; j < 6; j++) {
      int64_t flat = i * 6 + j, row = flat / 4, col = flat % 4;  // element (row, col) of a.T
      want += av[col * 6 + row];
    }
    EXPECT_NEAR(sv[i], want, 1e-5) << i;
  }
}

// GPU targets keep the weights as given (a thread per output needs no lanes): one kernel.
TEST(Conv, GpuConvolutionKeepsTheWeightLayout) {
  auto dev = runtime::get_device("MOCK+NV");
  if (!dev.ok()) GTEST_SKIP() << dev.status().message();
  Tensor x = Tensor::empty({2, 16, 8, 8}, dtypes::kFloat32, "MOCK+NV");
  Tensor w = Tensor::empty({32, 16, 3, 3}, dtypes::kFloat32, "MOCK+NV");
  std::vector<ScheduleItem> items = create_schedule({x.conv2d(w).lazy()});
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(weight_lane_stride(compiler::Kernel(items[0].ast)), 144);
}

}  // namespace
}  // namespace baregrad::tensor
