// Kernel ASTs built with the builder, compiled by each CPU backend (LLVM and C) and run on all
// cores, and compiled for the GPU and run on MOCK+NV and as OpenCL C on DEV=CL, checked against
// the float64 reference.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

#include "base/options.h"
#include "compiler/ast.h"
#include "compiler/codegen/pipeline.h"
#include "compiler/target/cl_target.h"
#include "runtime/cl/cl_device.h"
#include "runtime/device.h"
#include "runtime/hcq_device.h"
#include "tests/kernels/reference.h"
#include "tests/missing_tool.h"

namespace baregrad::testing {
namespace {
using namespace compiler;
using runtime::Buffer;
using runtime::Device;

std::vector<uint8_t> to_bytes(DType t, const std::vector<double>& v) {
  std::vector<uint8_t> out(v.size() * t.itemsize());
  for (size_t i = 0; i < v.size(); i++) {
    uint8_t* p = out.data() + i * t.itemsize();
    double x = v[i];
    switch (t.scalar) {
      case Scalar::kFloat64:
        std::memcpy(p, &x, 8);
        break;
      case Scalar::kFloat32: {
        float f = static_cast<float>(x);
        std::memcpy(p, &f, 4);
        break;
      }
      case Scalar::kFloat16: {
        _Float16 h = static_cast<_Float16>(x);
        std::memcpy(p, &h, 2);
        break;
      }
      case Scalar::kBFloat16: {
        uint32_t u = std::bit_cast<uint32_t>(static_cast<float>(round_to(t, x)));
        uint16_t h = static_cast<uint16_t>(u >> 16);
        std::memcpy(p, &h, 2);
        break;
      }
      default: {
        int64_t iv = wrap_int(t, static_cast<int64_t>(x));
        std::memcpy(p, &iv, t.itemsize());  // little-endian truncation
      }
    }
  }
  return out;
}

std::vector<double> from_bytes(DType t, const std::vector<uint8_t>& b) {
  std::vector<double> out(b.size() / t.itemsize());
  for (size_t i = 0; i < out.size(); i++) {
    const uint8_t* p = b.data() + i * t.itemsize();
    switch (t.scalar) {
      case Scalar::kFloat64:
        std::memcpy(&out[i], p, 8);
        break;
      case Scalar::kFloat32: {
        float f;
        std::memcpy(&f, p, 4);
        out[i] = f;
        break;
      }
      case Scalar::kFloat16: {
        _Float16 h;
        std::memcpy(&h, p, 2);
        out[i] = static_cast<double>(h);
        break;
      }
      case Scalar::kBFloat16: {
        uint16_t h;
        std::memcpy(&h, p, 2);
        out[i] = std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
        break;
      }
      default: {
        int64_t v = 0;
        std::memcpy(&v, p, t.itemsize());
        out[i] = static_cast<double>(wrap_int(t, v));
        if (dtypes::is_unsigned(t) && t.itemsize() == 8)
          out[i] = static_cast<double>(static_cast<uint64_t>(v));
      }
    }
  }
  return out;
}

struct Buf {
  DType dtype;
  std::vector<double> data;
};

class KernelTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    set_option_for_test("SPEC", "1");  // verify the IR between every pass
    auto dev = runtime::open_device(GetParam());
    if (!dev.ok() && !tests::missing_tool(dev.status()).empty())
      GTEST_SKIP() << GetParam() << " needs " << tests::missing_tool(dev.status()) << ": "
                   << dev.status().message();
    ASSERT_TRUE(dev.ok()) << dev.status().to_string();
    dev_ = *dev;
  }

  // Runs `ast` on the device and returns every buffer's contents afterwards.
  std::vector<std::vector<double>> run(const UOpPtr& ast,
                                       std::vector<Buf> bufs,
                                       const std::optional<std::vector<Opt>>& opts = std::nullopt) {
    auto prg = dev_->compile(ast, opts);
    EXPECT_TRUE(prg.ok()) << prg.status().to_string();
    if (!prg.ok()) return {};
    std::vector<Buffer> dbufs;
    for (auto& b : bufs) {
      auto bytes = to_bytes(b.dtype, b.data);
      Buffer d = *dev_->alloc(bytes.size());
      EXPECT_TRUE(dev_->copy_in(d, bytes.data(), bytes.size()).ok());
      dbufs.push_back(d);
    }
    Status s = dev_->launch(**prg, dbufs);
    EXPECT_TRUE(s.ok()) << s.to_string();
    std::vector<std::vector<double>> out;
    for (size_t i = 0; i < bufs.size(); i++) {
      std::vector<uint8_t> bytes(dbufs[i].bytes);
      EXPECT_TRUE(dev_->copy_out(bytes.data(), dbufs[i], bytes.size()).ok());
      out.push_back(from_bytes(bufs[i].dtype, bytes));
      dev_->free(dbufs[i]);
    }
    return out;
  }

  // Runs on the device and the reference; compares every buffer within `rtol`.
  void check(const UOpPtr& ast,
             std::vector<Buf> bufs,
             double rtol,
             const std::optional<std::vector<Opt>>& opts = std::nullopt) {
    // The device sees inputs rounded to their dtype; so does the reference.
    for (auto& b : bufs) b.data = from_bytes(b.dtype, to_bytes(b.dtype, b.data));
    std::vector<std::vector<double>> want;
    for (auto& b : bufs) want.push_back(b.data);
    reference_run(ast, want);
    auto got = run(ast, bufs, opts);
    ASSERT_EQ(got.size(), want.size());
    for (size_t b = 0; b < got.size(); b++)
      for (size_t i = 0; i < got[b].size(); i++) {
        double w = want[b][i], g = got[b][i];
        if (std::isnan(w)) {
          ASSERT_TRUE(std::isnan(g)) << "buffer " << b << " element " << i;
          continue;
        }
        ASSERT_NEAR(g, w, rtol * std::max(1.0, std::fabs(w)))
            << "buffer " << b << " element " << i << " dtype " << bufs[b].dtype.name();
      }
  }

  static std::vector<double> random(size_t n, DType t, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<double> v(n);
    for (auto& x : v) {
      if (dtypes::is_float(t))
        x = std::uniform_real_distribution<double>(-2, 2)(rng);
      else if (dtypes::is_unsigned(t))
        x = static_cast<double>(1 + rng() % 9);  // no wrap below 0
      else
        x = static_cast<double>(static_cast<int64_t>(rng() % 19) - 9);
    }
    return v;
  }

  static double tol(DType t, double terms = 1) {
    double eps = t == dtypes::kFloat64    ? 1e-15
                 : t == dtypes::kFloat32  ? 1.2e-7
                 : t == dtypes::kFloat16  ? 1e-3
                 : t == dtypes::kBFloat16 ? 8e-3
                                          : 0;
    return eps * 8 * std::max(1.0, std::sqrt(terms)) + (dtypes::is_float(t) ? 0 : 1e-9);
  }

  std::shared_ptr<Device> dev_;
};

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
class WorkGroupTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto opened = runtime::open_device(GetParam());
    if (!opened.ok() && !tests::missing_tool(opened.status()).empty())
      GTEST_SKIP() << GetParam() << " needs " << tests::missing_tool(opened.status());
    ASSERT_TRUE(opened.ok()) << opened.status().to_string();
    opened_ = *opened;
  }
  // Compiles and loads `spec` as it is, on either kind of device.
  Result<std::shared_ptr<runtime::Program>> load_spec(const ProgramSpec& spec) {
    runtime::Device* dev = opened_.get();
    if (auto* hcq = dynamic_cast<runtime::HcqDevice*>(dev)) {
      ASSIGN_OR_RETURN(CompiledKernel k, hcq->target().compile(spec));
      return hcq->load(std::move(k));
    }
    auto* cl = dynamic_cast<runtime::ClDevice*>(dev);
    if (!cl) return invalid_argument("not an HCQ or CL device: " + dev->name());
    ASSIGN_OR_RETURN(CompiledKernel k, ClTarget(cl->target_info(), "test").compile(spec));
    return cl->load(std::move(k));
  }
  std::shared_ptr<runtime::Device> opened_;
};

TEST_P(WorkGroupTest, AGroupSumWithoutItsBarrierIsWrong) {
  runtime::Device* dev = opened_.get();
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
    if (GetParam() == "MOCK+NV") {
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
  runtime::Device* dev = opened_.get();
  const int64_t m = 32, n = 32, k = 64;
  auto la = load(global(0, dtypes::kFloat32), strided({m, n, k}, {k, 0, 1}));
  auto lb = load(global(1, dtypes::kFloat32), strided({m, n, k}, {0, 1, n}));
  auto ast = sink({store(global(2, dtypes::kFloat32), strided({m, n, 1}, {n, 1, 0}),
                         reduce_axis(Op::ADD, {2}, la * lb))});
  ProgramSpec spec = lower_kernel(
      ast, dev->target_info(),
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
                         ::testing::Values("MOCK+NV", "CL"),
                         [](const auto& info) {
                           return info.param == "CL" ? std::string("cl") : std::string("mock_nv");
                         });

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

UOpPtr matmul_ast(int64_t m, int64_t n, int64_t k, DType t) {
  auto a = global(0, t), b = global(1, t), c = global(2, t);
  auto la = load(a, strided({m, n, k}, {k, 0, 1}));
  auto lb = load(b, strided({m, n, k}, {0, 1, n}));
  auto prod = reduce_axis(Op::ADD, {2}, la * lb);
  return sink({store(c, strided({m, n, 1}, {n, 1, 0}), prod)});
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

// A 2-D convolution with padding 1 (stride 1): x (N, C, H, W) and w (O, C, K, K) into
// out (N, O, H, W); the input is read through a padded view and a window view.
UOpPtr conv_ast(DType t, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t K) {
  const int64_t Hp = H + 2, Wp = W + 2;
  View pad;
  pad.shape = {N, C, Hp, Wp};
  pad.strides = {C * H * W, H * W, W, 1};
  pad.offset = -(W + 1);
  pad.mask = std::vector<std::pair<int64_t, int64_t>>{{0, N}, {0, C}, {1, H + 1}, {1, W + 1}};
  View win;
  win.shape = {N, O, H, W, C, K, K};
  win.strides = {C * Hp * Wp, 0, Wp, 1, Hp * Wp, Wp, 1};
  auto lx = load(global(0, t), ShapeTracker{{pad, win}});
  auto lw = load(global(1, t), strided({N, O, H, W, C, K, K}, {0, C * K * K, 0, 0, K * K, K, 1}));
  return sink(
      {store(global(2, t), strided({N, O, H, W, 1, 1, 1}, {O * H * W, H * W, W, 1, 0, 0, 0}),
             reduce_axis(Op::ADD, {4, 5, 6}, lx * lw))});
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
// The GPU lowering as OpenCL C, built and run by the system's OpenCL platform (PoCL in CI):
// work-groups executed for real.
INSTANTIATE_TEST_SUITE_P(Cl, KernelTest, ::testing::Values("CL"), [](const auto&) {
  return std::string("cl");
});
// DEV=NV, NV:<n>, CUDA or CUDA:<n> adds that GPU (on a machine that has one; none otherwise).
std::vector<std::string> gpu_from_env() {
  const std::string& d = options().dev;
  if (d.rfind("NV", 0) == 0 || d.rfind("CUDA", 0) == 0) return {d};
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
