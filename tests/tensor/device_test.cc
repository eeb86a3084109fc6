// The tensor layer on HCQ devices: realize and copies go through the CPU HCQ device's queues;
// DEV=NULL compiles and runs nothing.
#include <gtest/gtest.h>

#include "runtime/hcq_device.h"
#include "tests/tensor/test_util.h"

namespace baregrad::tensor {
namespace {
using namespace test_util;

hcq::Device& hcq_of(const Tensor& t) {
  auto* dev = dynamic_cast<runtime::HcqDevice*>(t.lazy().base->device.get());
  EXPECT_NE(dev, nullptr) << "not an HCQ device";
  return dev->hcq();
}

TEST(HcqRealize, CopiesAndKernelsRunOnTheDeviceTimeline) {
  Tensor a = Tensor::from_data({1, 2, 3}, {3}, kF64, "CPU");  // whatever DEV says
  hcq::Device& dev = hcq_of(a);
  uint64_t before = dev.timeline_value();
  Tensor b = Tensor::from_data({10, 20, 30}, {3}, kF64, "CPU");  // one copy submission
  EXPECT_EQ(dev.timeline_value(), before + 1);
  Tensor c = (a * b + 1).realize();  // one fused kernel
  EXPECT_EQ(dev.timeline_value(), before + 2);
  EXPECT_EQ(c.to_vector(), (Vec{11, 41, 91}));
  ASSERT_TRUE(dev.synchronize().ok());
  EXPECT_EQ(dev.timeline().value(), dev.timeline_value() - 1);
}

TEST(NullDevice, CompilesEveryKernelAndRunsNone) {
  Tensor a = Tensor::from_data({1, 2, 3, 4}, {2, 2}, dtypes::kFloat32, "NULL");
  Tensor y = (a.matmul(a).relu() + 1).sum({1});
  EXPECT_EQ(y.shape(), (Shape{2}));
  EXPECT_EQ(y.to_vector(), (Vec{0, 0}));  // nothing ran: reads give zeros
  hcq::Device& dev = hcq_of(y);
  EXPECT_EQ(dev.name(), "NULL");
  EXPECT_FALSE(dev.executes());
  EXPECT_TRUE(dev.synchronize().ok());
}

}  // namespace
}  // namespace baregrad::tensor
