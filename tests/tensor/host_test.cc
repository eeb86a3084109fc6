// Host data in and out of tensors (tensor_host.cc), error kinds and the global counters.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <optional>

#include "base/error.h"
#include "runtime/device.h"
#include "tensor/counters.h"
#include "tensor/jit.h"
#include "tensor/lazy.h"
#include "tensor/tensor.h"

namespace baregrad::tensor {
namespace {

template <class T>
std::vector<uint8_t> raw(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

TEST(HostData, Int64AndUint64RoundTripExactly) {
  // Values no double holds: a trip through to_vector() would round them.
  std::vector<int64_t> i = {(1LL << 62) + 1, std::numeric_limits<int64_t>::min(), -3};
  std::vector<uint64_t> u = {~0ULL, (1ULL << 63) + 5, 7};
  auto bi = raw(i), bu = raw(u);
  EXPECT_EQ(Tensor::from_bytes(bi.data(), bi.size(), {3}, dtypes::kInt64).to_bytes(), bi);
  EXPECT_EQ(Tensor::from_bytes(bu.data(), bu.size(), {3}, dtypes::kUint64).to_bytes(), bu);
}

TEST(HostData, ToBytesOfAViewIsRowMajor) {
  auto b = raw(std::vector<int32_t>{0, 1, 2, 3, 4, 5});
  Tensor t = Tensor::from_bytes(b.data(), b.size(), {2, 3}, dtypes::kInt32).transpose();
  EXPECT_EQ(t.to_bytes(), raw(std::vector<int32_t>{0, 3, 1, 4, 2, 5}));
}

TEST(HostData, FromBytesRejectsASizeMismatchAsAValueError) {
  auto b = raw(std::vector<float>{1, 2, 3});
  try {
    Tensor::from_bytes(b.data(), 8, {3}, dtypes::kFloat32);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kValue) << e.what();
  }
}

TEST(HostData, HostViewReadsTheDeviceBufferInPlaceWithStrides) {
  auto b = raw(std::vector<float>{0, 1, 2, 3, 4, 5});
  Tensor t = Tensor::from_bytes(b.data(), b.size(), {2, 3}, dtypes::kFloat32);
  auto v = t.transpose().host_view();
  auto dev = runtime::get_device(t.device());
  ASSERT_TRUE(dev.ok()) << dev.status();
  if (!(*dev)->host_addressable()) {  // GPU memory: no view, the data comes by copy
    EXPECT_FALSE(v.has_value());
    EXPECT_EQ(t.to_bytes(), b);
    return;
  }
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->shape, (Shape{3, 2}));
  EXPECT_EQ(v->strides, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(v->data, t.host_view()->data);  // the same memory, no copy
  const auto* f = static_cast<const float*>(v->data);
  EXPECT_EQ(f[1 * 1 + 1 * 3], 4.0f);  // element [1][1] of the transpose
  // A view sees in-place updates once the device is done (host_view() waits for it), and
  // keeps the buffer alive after the tensor is gone.
  std::optional<Tensor> owner = Tensor::from_bytes(b.data(), b.size(), {6}, dtypes::kFloat32);
  auto kept = owner->host_view();
  owner->assign(Tensor::full({6}, 9, dtypes::kFloat32));
  EXPECT_EQ(owner->host_view()->data, kept->data);
  owner.reset();
  EXPECT_EQ(static_cast<const float*>(kept->data)[5], 9.0f);
}

// from_blob uses the caller's memory in place on devices that address host memory: a kernel
// reads what the memory holds when it runs and writes into it; the memory is never released by
// the device; other devices refuse by name.
TEST(HostData, FromBlobUsesTheCallersMemoryInPlace) {
  std::vector<float> mem{1, 2, 3, 4, 5, 6};
  auto dev = runtime::get_device("");
  ASSERT_TRUE(dev.ok()) << dev.status();
  if (!(*dev)->host_addressable()) {
    try {
      Tensor::from_blob(mem.data(), {6}, dtypes::kFloat32);
      ADD_FAILURE() << "from_blob on " << (*dev)->name() << " did not throw";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cannot use host memory in place"), std::string::npos)
          << e.what();
    }
    return;
  }
  {
    Tensor t = Tensor::from_blob(mem.data(), {2, 3}, dtypes::kFloat32);
    EXPECT_EQ((t * 2.0).to_vector(), (std::vector<double>{2, 4, 6, 8, 10, 12}));
    mem[5] = 60;  // no copy: the next kernel sees it
    EXPECT_EQ((t + 0.5).to_vector()[5], 60.5);
    t.assign(t.transpose().contiguous().reshape({2, 3}) * 10.0);
    ASSERT_TRUE((*dev)->synchronize().ok());
    EXPECT_EQ(mem, (std::vector<float>{10, 40, 20, 50, 30, 600}));
    // memory that already is one of the device's buffers is refused rather than aliased
    Tensor owned = Tensor::from_bytes(mem.data(), 24, {6}, dtypes::kFloat32).realize();
    auto view = owned.host_view();
    ASSERT_TRUE(view.has_value());
    try {
      Tensor::from_blob(const_cast<void*>(view->data), {6}, dtypes::kFloat32);
      ADD_FAILURE() << "from_blob of a device buffer did not throw";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("overlaps a buffer of"), std::string::npos) << e.what();
    }
  }
  // the tensor is gone and the memory is the caller's, unchanged
  EXPECT_EQ(mem[0], 10);
  EXPECT_THROW(Tensor::from_blob(nullptr, {2}, dtypes::kFloat32), Error);
  EXPECT_EQ(Tensor::from_blob(nullptr, {0, 2}, dtypes::kFloat32).numel(), 0);
}

TEST(HostData, HostViewOfAPaddedViewIsNone) {
  Tensor t = Tensor::full({2}, 1, dtypes::kFloat32).contiguous().realize().pad({{1, 1}});
  EXPECT_FALSE(t.host_view().has_value());
}

TEST(HostData, ToAnotherDeviceCopiesAndTheGradientFlowsBack) {
  Tensor x = Tensor::from_data({1, 2}, {2}).requires_grad_();
  std::string other = x.device() == "CPU" ? "CPU:C" : "CPU";
  Tensor y = x.to(other);
  EXPECT_EQ(y.device(), other);
  (y * 3.0).sum().backward();
  ASSERT_TRUE(x.grad().has_value());
  EXPECT_EQ(x.grad()->device(), x.device());
  EXPECT_EQ(x.grad()->to_vector(), (std::vector<double>{3, 3}));
}

TEST(HostData, ToAnotherDeviceIsLazy) {
  // A copy is a node of the graph, realized after its source, not a read to the host at the
  // call (which cut undecided gradients and could not be captured by TinyJit).
  Tensor x = Tensor::from_data({1, 2, 3}, {3}).contiguous().realize();
  std::string other = x.device() == "CPU" ? "CPU:1" : "CPU";
  Tensor y = (x * 2.0).to(other);
  EXPECT_EQ(y.lazy().base->kind, LazyKind::kCopy);
  EXPECT_FALSE(y.lazy().base->realized);
  EXPECT_EQ((y + 1.0).to_vector(), (std::vector<double>{3, 5, 7}));
  EXPECT_EQ(y.lazy().base->realized->device->name(), other);
}

TEST(HostData, JitReplaysACopyBetweenDevices) {
  Tensor probe = Tensor::from_data({0}, {1});
  std::string other = probe.device() == "CPU" ? "CPU:1" : "CPU";
  TinyJit jit([&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{(in[0].to(other) + 1.0).realize()};
  });
  for (int i = 0; i < 4; i++) {
    double v = i * 10;
    Tensor out = jit({Tensor::from_data({v, v + 1}, {2})})[0];
    EXPECT_EQ(out.device(), other);
    EXPECT_EQ(out.to_vector(), (std::vector<double>{v + 1, v + 2})) << "call " << i;
  }
  EXPECT_TRUE(jit.captured());
  EXPECT_EQ(jit.kernel_count(), 1u);  // the copy is a step of its own, not a kernel
}

TEST(HostData, SetGradReplacesAndClears) {
  Tensor x = Tensor::from_data({1, 2}, {2}).requires_grad_();
  x.set_grad(Tensor::full({2}, 5, dtypes::kFloat32));
  EXPECT_EQ(x.grad()->to_vector(), (std::vector<double>{5, 5}));
  x.set_grad(std::nullopt);
  EXPECT_FALSE(x.grad().has_value());
}

TEST(ErrorKinds, MisuseCarriesTheKindPythonRaises) {
  auto kind_of = [](auto fn) -> std::optional<ErrorKind> {
    try {
      fn();
    } catch (const Error& e) {
      return e.kind();
    }
    return std::nullopt;
  };
  Tensor t = Tensor::full({2, 3}, 1, dtypes::kFloat32);
  EXPECT_EQ(kind_of([&] { t.reshape({4}); }), ErrorKind::kValue);
  EXPECT_EQ(kind_of([&] { t + Tensor::full({4}, 1, dtypes::kFloat32); }), ErrorKind::kValue);
  EXPECT_EQ(kind_of([&] { t[int64_t{5}]; }), ErrorKind::kIndex);
  EXPECT_EQ(kind_of([&] { t.sum({2}); }), ErrorKind::kIndex);
  EXPECT_EQ(kind_of([&] { t.bitwise_and(t); }), ErrorKind::kType);
  EXPECT_EQ(kind_of([&] { Tensor(t).requires_grad_().sum({1}).backward(); }), ErrorKind::kRuntime);
  EXPECT_EQ(Error("op", "m").kind(), ErrorKind::kRuntime);  // the default
}

TEST(GlobalCounters, CountLaunchesAndLiveMemory) {
  counters().reset();
  int64_t before = counters().mem_used.load();
  {
    Tensor t = (Tensor::from_data(std::vector<double>(256, 1), {256}) + 1.0).realize();
    EXPECT_EQ(counters().kernel_count.load(), 1);
    EXPECT_GT(counters().global_mem.load(), 0);
    EXPECT_EQ(counters().mem_used.load() - before, 256 * 4);  // the input was freed
  }
  EXPECT_EQ(counters().mem_used.load(), before);  // freed with the last reference
  counters().reset();
  EXPECT_EQ(counters().kernel_count.load(), 0);
}

}  // namespace
}  // namespace baregrad::tensor
