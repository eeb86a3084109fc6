// The kernel suite's fixture (tests/kernels/kernel_test.cc, work_group_test.cc): a device per
// parameter (CPU, CPU:C, MOCK+NV, CL, and a GPU named by DEV), kernel ASTs run there and checked
// against the float64 reference; DeviceTest, the device opened (or the test skipped) per
// parameter, which the other kernel-suite fixtures share.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>

#include "base/options.h"
#include "compiler/ast.h"
#include "runtime/device.h"
#include "tests/kernels/reference.h"
#include "tests/kernels/test_asts.h"
#include "tests/missing_tool.h"

namespace baregrad::testing {
using namespace compiler;

inline constexpr DType kF32 = dtypes::kFloat32;
using runtime::Buffer;
using runtime::Device;

inline std::vector<uint8_t> to_bytes(DType t, const std::vector<double>& v) {
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

inline std::vector<double> from_bytes(DType t, const std::vector<uint8_t>& b) {
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

// The device its parameter names, opened with SPEC=1 (the IR verified between every pass); the
// test skips, naming what is missing, where the machine lacks a tool or platform the device
// needs (ptxas, an OpenCL platform).
class DeviceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    set_option_for_test("SPEC", "1");
    auto dev = runtime::open_device(GetParam());
    if (!dev.ok() && !tests::missing_tool(dev.status()).empty())
      GTEST_SKIP() << GetParam() << " needs " << tests::missing_tool(dev.status()) << ": "
                   << dev.status().message();
    ASSERT_TRUE(dev.ok()) << dev.status().to_string();
    dev_ = *dev;
  }

  std::shared_ptr<Device> dev_;
};

class KernelTest : public DeviceTest {
 protected:
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
};

}  // namespace baregrad::testing
