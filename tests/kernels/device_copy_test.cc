// runtime::Device::copy (device to device) on the HCQ devices: the CPU device (its copy engine
// runs on its own thread) and MOCK+NV (the NVIDIA driver's copy queue on the fake GPU). Copies
// must move exactly the bytes asked, be ordered after earlier launches and before later ones on
// the device's timeline, and refuse sizes past either buffer. DEV=NULL accepts copies and runs
// none.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "base/check.h"
#include "compiler/ast.h"
#include "runtime/device.h"
#include "tests/kernels/kernel_test.h"
#include "tests/kernels/test_asts.h"
#include "tests/missing_tool.h"

namespace baregrad::testing {
namespace {
using namespace compiler;
using runtime::Buffer;
using runtime::Device;

constexpr int64_t kN = 1 << 18;  // 1 MiB of floats: a copy racing the kernel would see stale data
constexpr size_t kBytes = kN * 4;

class DeviceCopyTest : public DeviceTest {
 protected:
  void TearDown() override {
    for (const Buffer& b : bufs_) dev_->free(b);
  }
  Buffer alloc(size_t bytes) {
    Result<Buffer> b = dev_->alloc(bytes);
    CHECK(b.ok()) << b.status().to_string();
    bufs_.push_back(*b);
    return *b;
  }
  template <class T>
  Buffer upload(const std::vector<T>& v) {
    Buffer b = alloc(v.size() * sizeof(T));
    EXPECT_TRUE(dev_->copy_in(b, v.data(), b.bytes).ok());
    return b;
  }
  template <class T>
  std::vector<T> download(const Buffer& b) {
    std::vector<T> v(b.bytes / sizeof(T));
    Status s = dev_->copy_out(v.data(), b, b.bytes);
    EXPECT_TRUE(s.ok()) << s.to_string();
    return v;
  }
  std::vector<Buffer> bufs_;
};

TEST_P(DeviceCopyTest, CopiesExactlyTheBytesAsked) {
  std::vector<uint8_t> src_bytes(1000), fill(1200, 0xee);
  for (size_t i = 0; i < src_bytes.size(); i++) src_bytes[i] = static_cast<uint8_t>(i * 13 + 5);
  Buffer src = upload(src_bytes), dst = upload(fill);
  // 999 bytes into dst at offset 100 (a view): bytes around the range stay as they were.
  Buffer view{dst.va + 100, 1100};
  Status s = dev_->copy(view, src, 999);
  ASSERT_TRUE(s.ok()) << s.to_string();
  ASSERT_TRUE(dev_->synchronize().ok());
  std::vector<uint8_t> want = fill;
  std::memcpy(want.data() + 100, src_bytes.data(), 999);
  EXPECT_EQ(download<uint8_t>(dst), want);
  EXPECT_TRUE(dev_->copy(dst, src, 0).ok());
  EXPECT_EQ(download<uint8_t>(dst), want);
}

// launch(src = a + b), copy(dst <- src), launch(out = dst * dst) with no wait between them: dst
// and out hold the kernels' results only if each step waited for the one before.
TEST_P(DeviceCopyTest, IsOrderedBetweenLaunches) {
  std::vector<float> a(kN), b(kN), stale(kN, -7.0f), want_sum(kN), want_sq(kN);
  for (int64_t i = 0; i < kN; i++) {
    a[i] = static_cast<float>(i % 1000) * 0.5f;
    b[i] = 3.0f - static_cast<float>(i % 77);
    want_sum[i] = a[i] + b[i];  // exact in fp32
    want_sq[i] = want_sum[i] * want_sum[i];
  }
  auto add = dev_->compile(add_ast(kN));
  ASSERT_TRUE(add.ok()) << add.status().to_string();
  auto square = dev_->compile(square_ast(kN));
  ASSERT_TRUE(square.ok()) << square.status().to_string();
  Buffer da = upload(a), db = upload(b), src = upload(stale), dst = upload(stale),
         out = upload(stale);
  ASSERT_TRUE(dev_->synchronize().ok());
  for (int round = 0; round < 3; round++) {
    ASSERT_TRUE(dev_->launch(**add, std::vector<Buffer>{src, da, db}).ok());
    ASSERT_TRUE(dev_->copy(dst, src, kBytes).ok());
    ASSERT_TRUE(dev_->launch(**square, std::vector<Buffer>{out, dst}).ok());
    ASSERT_TRUE(dev_->synchronize().ok());
    EXPECT_EQ(download<float>(dst), want_sum) << "round " << round;
    EXPECT_EQ(download<float>(out), want_sq) << "round " << round;
    // Reset for the next round so that a stale result cannot pass.
    ASSERT_TRUE(dev_->copy_in(src, stale.data(), kBytes).ok());
    ASSERT_TRUE(dev_->copy_in(dst, stale.data(), kBytes).ok());
    ASSERT_TRUE(dev_->copy_in(out, stale.data(), kBytes).ok());
  }
}

TEST_P(DeviceCopyTest, RefusesSizesPastEitherBuffer) {
  Buffer small = alloc(100), big = alloc(300);
  const std::string on = " on " + dev_->name();
  Status s = dev_->copy(big, small, 101);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "copy of 101 bytes from a buffer of 100 into a buffer of 300" + on);
  s = dev_->copy(small, big, 200);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "copy of 200 bytes from a buffer of 300 into a buffer of 100" + on);
  s = dev_->copy(big, Buffer{0, 300}, 8);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "copy of 8 bytes from a buffer of 300 into a buffer of 300" + on + " (a null buffer)");
  EXPECT_TRUE(dev_->synchronize().ok()) << "a refused copy leaves the device usable";
}

INSTANTIATE_TEST_SUITE_P(Hcq,
                         DeviceCopyTest,
                         ::testing::Values("CPU", "MOCK+NV", "MOCK+AMD"),
                         [](const auto& info) {
                           return info.param == "CPU"       ? std::string("cpu")
                                  : info.param == "MOCK+NV" ? std::string("mock_nv")
                                                            : std::string("mock_amd");
                         });

TEST(NullDeviceCopy, AcceptsCopiesAndRunsNone) {
  auto dev = runtime::open_device("NULL");
  ASSERT_TRUE(dev.ok()) << dev.status().to_string();
  Buffer a = *(*dev)->alloc(64), b = *(*dev)->alloc(64);
  EXPECT_TRUE((*dev)->copy(b, a, 64).ok());
  EXPECT_TRUE((*dev)->synchronize().ok());
  Status s = (*dev)->copy(b, a, 65);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "copy of 65 bytes from a buffer of 64 into a buffer of 64 on NULL");
  (*dev)->free(a);
  (*dev)->free(b);
}

}  // namespace
}  // namespace baregrad::testing
