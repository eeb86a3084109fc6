// The DEV=CUDA tests' rig: the fake driver of tests/fakes (a TEST INSTRUMENT, not a GPU), its
// hooks, and a fixture with a CudaDevice over it that checks everything was released (used by
// cuda_device_test.cc and cuda_graph_test.cc). The fakes' paths come from meson.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <vector>

#include "base/check.h"
#include "compiler/ast.h"
#include "runtime/cuda/cuda_device.h"
#include "tests/fakes/fake_libcuda.h"

namespace baregrad::runtime::cuda_test {

inline constexpr compiler::DType kF32 = compiler::dtypes::kFloat32;
inline constexpr const char* kFakeCuda = BAREGRAD_FAKE_LIBCUDA;
inline constexpr const char* kFakeCublas = BAREGRAD_FAKE_LIBCUBLAS;

#define REQUIRE_PTXAS()                                                                     \
  do {                                                                                      \
    Result<compiler::Ptxas> p = compiler::Ptxas::find();                                    \
    if (!p.ok()) GTEST_SKIP() << "CUDA compile tests need ptxas: " << p.status().message(); \
  } while (0)

// dlsym of a hook in an already-loaded fake (dlopen of the same path gives the same handle).
template <class F>
F hook(const char* lib, const char* name) {
  void* h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
  if (!h) h = dlopen(lib, RTLD_NOW);
  CHECK(h) << dlerror();
  void* p = dlsym(h, name);
  CHECK(p) << name << ": " << dlerror();
  return reinterpret_cast<F>(p);
}

struct FakeCuda {
  FakeCudaResetFn reset = hook<FakeCudaResetFn>(kFakeCuda, "fake_cuda_reset");
  FakeCudaFailNextFn fail_next = hook<FakeCudaFailNextFn>(kFakeCuda, "fake_cuda_fail_next");
  FakeCudaLaunchCountFn launch_count =
      hook<FakeCudaLaunchCountFn>(kFakeCuda, "fake_cuda_launch_count");
  FakeCudaGetLaunchFn get_launch = hook<FakeCudaGetLaunchFn>(kFakeCuda, "fake_cuda_get_launch");
  FakeCudaCountFn calls = hook<FakeCudaCountFn>(kFakeCuda, "fake_cuda_calls");
  FakeCudaCountFn live = hook<FakeCudaCountFn>(kFakeCuda, "fake_cuda_live");
};

// Little-endian bytes of each value, 8 bytes each: a kernel's parameter area.
inline std::vector<uint8_t> le64(std::initializer_list<uint64_t> values) {
  std::vector<uint8_t> out;
  for (uint64_t v : values)
    for (int i = 0; i < 8; i++) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
  return out;
}

inline uint64_t addr(const Buffer& b) { return b.va; }

// A CudaDevice over the fake; on teardown every object the driver made has been released.
class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_.reset();
    Result<std::unique_ptr<CudaDevice>> d = CudaDevice::create(0, kFakeCuda);
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    dev_ = std::move(*d);
  }
  void TearDown() override {
    dev_.reset();
    for (const char* kind : {"allocations", "modules", "streams", "events", "primary_ctx_refs",
                             "graphs", "graph_execs"})
      EXPECT_EQ(fake_.live(kind), 0) << kind;
    fake_.reset();
  }
  FakeCuda fake_;
  std::unique_ptr<CudaDevice> dev_;
};

}  // namespace baregrad::runtime::cuda_test
