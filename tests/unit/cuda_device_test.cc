// DEV=CUDA (runtime/cuda) against the fake driver and fake cuBLAS of tests/fakes: TEST
// INSTRUMENTS, not GPUs. They check what we hand the driver (symbols, call order, grid, block,
// the exact parameter bytes, RAII releases) and how its errors come back; nothing here ran on
// a real GPU, so the kernels' results on hardware are not checked. The fakes' paths come from
// meson (BAREGRAD_FAKE_LIBCUDA / BAREGRAD_FAKE_LIBCUBLAS); the compile tests need ptxas.
#include "runtime/cuda/cuda_device.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "base/options.h"
#include "runtime/cuda/cublas.h"
#include "tests/fakes/fake_libcublas.h"
#include "tests/unit/cuda_rig.h"
#include "tests/unit/nv_target_rig.h"

namespace baregrad::runtime {
namespace {

using namespace compiler;   // NOLINT: AST builders
using namespace cuda_test;  // NOLINT: the rig
using cuda::CudaApi;

struct FakeCublas {
  FakeCublasResetFn reset = hook<FakeCublasResetFn>(kFakeCublas, "fake_cublas_reset");
  FakeCublasFailNextFn fail_next = hook<FakeCublasFailNextFn>(kFakeCublas, "fake_cublas_fail_next");
  FakeCublasLastGemmFn last_gemm = hook<FakeCublasLastGemmFn>(kFakeCublas, "fake_cublas_last_gemm");
  FakeCublasLiveFn live_handles = hook<FakeCublasLiveFn>(kFakeCublas, "fake_cublas_live_handles");
};

// Sets option `name` for the scope (nullptr: its default), then restores it.
class ScopedOption {
 public:
  ScopedOption(const char* name, const char* value) : name_(name), old_(option_value(name)) {
    set_option_for_test(name, value ? value : "");
  }
  ~ScopedOption() { set_option_for_test(name_, old_); }

 private:
  const char* name_;
  std::string old_;
};

// out[37 x 53] = a[37 x 53] + b[53] broadcast: 1961 threads, so 16 blocks of 128.
UOpPtr add_broadcast() {
  auto a = global(0, kF32), b = global(1, kF32), o = global(2, kF32);
  auto v = load(a, ShapeTracker::contiguous({37, 53})) + load(b, broadcast_to({1, 53}, {37, 53}));
  return sink({store(o, ShapeTracker::contiguous({37, 53}), v)});
}

TEST(CudaApi, MissingLibraryIsNotFoundNamingIt) {
  Result<const CudaApi*> api = cuda::load_cuda_api("/nonexistent/libcuda-missing.so.1");
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), StatusCode::kNotFound);
  EXPECT_NE(api.status().message().find("/nonexistent/libcuda-missing.so.1"), std::string::npos);
  EXPECT_NE(api.status().message().find("No such file or directory"), std::string::npos)
      << "dlerror() is part of the message: " << api.status().message();
  {  // the override reaches CudaDevice
    ScopedOption option("BAREGRAD_LIBCUDA", "/nonexistent/override/libcuda.so");
    Result<std::unique_ptr<CudaDevice>> d = CudaDevice::create();
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.status().code(), StatusCode::kNotFound);
    EXPECT_NE(d.status().message().find("/nonexistent/override/libcuda.so"), std::string::npos)
        << d.status().message();
  }
  ScopedOption option("BAREGRAD_LIBCUDA", nullptr);
  Result<const CudaApi*> def = cuda::load_cuda_api();
  if (def.ok()) GTEST_SKIP() << "this machine has a CUDA driver: " << (*def)->path;
  EXPECT_EQ(def.status().code(), StatusCode::kNotFound);
  EXPECT_NE(def.status().message().find("libcuda.so.1"), std::string::npos)
      << def.status().message();
}

TEST(CudaApi, MissingSymbolIsNotFoundNamingIt) {
  Result<const CudaApi*> api = cuda::load_cuda_api("libm.so.6");
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), StatusCode::kNotFound);
  EXPECT_NE(api.status().message().find("libm.so.6 has no cuInit"), std::string::npos)
      << api.status().message();
  EXPECT_NE(api.status().message().find("undefined symbol: cuInit"), std::string::npos)
      << api.status().message();
}

// NVIDIA's own stub library (in every toolkit) exports every symbol we resolve; it answers
// CUDA_ERROR_STUB_LIBRARY to everything, including cuGetErrorName, so our own table names it.
TEST(CudaApi, EverySymbolResolvesInTheToolkitStubLibrary) {
  const char* stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (!std::filesystem::exists(stub)) GTEST_SKIP() << "no CUDA toolkit stub at " << stub;
  Result<const CudaApi*> api = cuda::load_cuda_api(stub);
  ASSERT_TRUE(api.ok()) << api.status().to_string();
  Result<CudaInfo> info = CudaDevice::probe(stub);
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(info.status().message(), "cuDriverGetVersion failed: CUDA_ERROR_STUB_LIBRARY");
}

TEST(CudaApi, CheckNamesTheCallAndTheError) {
  Result<const CudaApi*> api = cuda::load_cuda_api(kFakeCuda);
  ASSERT_TRUE(api.ok()) << api.status().to_string();
  EXPECT_TRUE((*api)->check(cuda::CUDA_SUCCESS, "cuInit").ok());
  Status s = (*api)->check(cuda::CUDA_ERROR_ILLEGAL_ADDRESS, "cuCtxSynchronize");
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message(),
            "cuCtxSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was "
            "encountered)");
  EXPECT_EQ((*api)->check(cuda::CUDA_ERROR_OUT_OF_MEMORY, "x").code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ((*api)->check(cuda::CUDA_ERROR_NOT_FOUND, "x").code(), StatusCode::kNotFound);
  // A value neither the driver nor we can name.
  EXPECT_EQ((*api)->check(12345, "cuInit").message(), "cuInit failed: CUresult 12345");
}

TEST(CudaApi, ProbeReportsTheFakesFacts) {
  Result<CudaInfo> info = CudaDevice::probe(kFakeCuda);
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->library, kFakeCuda);
  EXPECT_EQ(info->driver_version, 13000);
  EXPECT_EQ(info->driver_version_str(), "13.0");
  ASSERT_EQ(info->devices.size(), 1u);
  const CudaDeviceInfo& d = info->devices[0];
  EXPECT_EQ(d.ordinal, 0);
  EXPECT_EQ(d.name, "Fake CUDA GPU");
  EXPECT_EQ(d.cc_major, 9);
  EXPECT_EQ(d.cc_minor, 0);
  EXPECT_EQ(d.sm_count, 132);
  EXPECT_EQ(d.total_mem, size_t{80} << 30);
  EXPECT_EQ(d.cubin_sm, 90);
}

TEST(CudaApi, CubinSmIsTheHighestSupportedMinorOfTheMajor) {
  EXPECT_EQ(CudaDevice::cubin_sm(9, 0), 90);
  EXPECT_EQ(CudaDevice::cubin_sm(8, 6), 86);
  EXPECT_EQ(CudaDevice::cubin_sm(8, 8), 87);  // no sm_88: sm_87 cubins run on 8.8
  EXPECT_EQ(CudaDevice::cubin_sm(10, 3), 100);
  EXPECT_EQ(CudaDevice::cubin_sm(12, 1), 120);
  EXPECT_EQ(CudaDevice::cubin_sm(7, 0), 0);  // below sm_75
  EXPECT_EQ(CudaDevice::cubin_sm(6, 1), 0);
}

TEST(CudaApi, DeviceNamesSelectOrdinals) {
  EXPECT_EQ(CudaDevice::ordinal_of("CUDA"), 0);
  EXPECT_EQ(CudaDevice::ordinal_of("CUDA:0"), 0);
  EXPECT_EQ(CudaDevice::ordinal_of("CUDA:12"), 12);
  for (const char* bad : {"CUDA:", "CUDA:x", "CUDA:-1", "CUDA:1x", "CPU", "CUDA1", "cuda"})
    EXPECT_EQ(CudaDevice::ordinal_of(bad), std::nullopt) << bad;
}

TEST_F(CudaDeviceTest, NameTargetAndHostAddressability) {
  EXPECT_EQ(dev_->name(), "CUDA");
  EXPECT_EQ(dev_->target_info().name, "nv-sm_90");
  EXPECT_TRUE(dev_->target_info().gpu);
  EXPECT_FALSE(dev_->host_addressable());
  EXPECT_EQ(fake_.live("primary_ctx_refs"), 1);
  EXPECT_EQ(fake_.live("streams"), 1);
  EXPECT_NE(dev_->stream(), nullptr);
  Result<std::unique_ptr<CudaDevice>> none = CudaDevice::create(1, kFakeCuda);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(none.status().message(), "no CUDA device 1 (the driver reports 1)");
}

TEST_F(CudaDeviceTest, EnvironmentOverrideSelectsTheLibrary) {
  ScopedOption option("BAREGRAD_LIBCUDA", kFakeCuda);
  Result<std::unique_ptr<CudaDevice>> d = CudaDevice::create();
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ((*d)->api().path, kFakeCuda);
  EXPECT_EQ(fake_.live("primary_ctx_refs"), 2);
  d->reset();
  EXPECT_EQ(fake_.live("primary_ctx_refs"), 1);
}

TEST_F(CudaDeviceTest, AllocCopyInCopyOutRoundTripsBytes) {
  Result<Buffer> b = dev_->alloc(1000);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ(b->bytes, 1000u);
  EXPECT_EQ(addr(*b) % 64, 0u);
  EXPECT_EQ(fake_.live("allocations"), 1);
  std::vector<uint8_t> in(1000), out(1000, 0);
  for (size_t i = 0; i < in.size(); i++) in[i] = static_cast<uint8_t>(i * 7 + 3);
  ASSERT_TRUE(dev_->copy_in(*b, in.data(), in.size()).ok());
  // The fake's device memory is host memory: the bytes went to the buffer's address.
  EXPECT_EQ(std::memcmp(reinterpret_cast<const void*>(b->va), in.data(), in.size()), 0);
  ASSERT_TRUE(dev_->copy_out(out.data(), *b, out.size()).ok());
  EXPECT_EQ(out, in);
  std::vector<uint8_t> head(10, 0);
  ASSERT_TRUE(dev_->copy_out(head.data(), *b, head.size()).ok());
  EXPECT_EQ(head, std::vector<uint8_t>(in.begin(), in.begin() + 10));
  EXPECT_EQ(fake_.calls("cuMemcpyHtoD_v2"), 1);
  EXPECT_EQ(fake_.calls("cuMemcpyDtoH_v2"), 2);
  dev_->free(*b);
  EXPECT_EQ(fake_.live("allocations"), 0);
  dev_->free(Buffer{});  // ignored
  EXPECT_EQ(fake_.calls("cuMemFree_v2"), 1);
}

TEST_F(CudaDeviceTest, CopySizeChecksComeBeforeTheDriver) {
  Result<Buffer> b = dev_->alloc(1000);
  ASSERT_TRUE(b.ok());
  std::vector<uint8_t> host(1001);
  Status in = dev_->copy_in(*b, host.data(), 1001);
  EXPECT_EQ(in.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(in.message(), "copy_in of 1001 bytes into a buffer of 1000");
  Status out = dev_->copy_out(host.data(), *b, 1001);
  EXPECT_EQ(out.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out.message(), "copy_out of 1001 bytes from a buffer of 1000");
  EXPECT_EQ(fake_.calls("cuMemcpyHtoD_v2") + fake_.calls("cuMemcpyDtoH_v2"), 0);
  dev_->free(*b);
}

TEST_F(CudaDeviceTest, DeviceCopyMovesTheBytesOnTheStream) {
  Buffer src = *dev_->alloc(1000), dst = *dev_->alloc(1200);
  std::vector<uint8_t> in(1000), out(1200, 0);
  for (size_t i = 0; i < in.size(); i++) in[i] = static_cast<uint8_t>(i * 13 + 5);
  ASSERT_TRUE(dev_->copy_in(src, in.data(), in.size()).ok());
  std::vector<uint8_t> fill(1200, 0xee);
  ASSERT_TRUE(dev_->copy_in(dst, fill.data(), fill.size()).ok());
  Status s = dev_->copy(dst, src, 999);
  ASSERT_TRUE(s.ok()) << s.to_string();
  ASSERT_TRUE(dev_->synchronize().ok());
  ASSERT_TRUE(dev_->copy_out(out.data(), dst, out.size()).ok());
  // The first 999 bytes are src's; the rest of dst is untouched.
  std::vector<uint8_t> want = fill;
  std::memcpy(want.data(), in.data(), 999);
  EXPECT_EQ(out, want);
  EXPECT_EQ(fake_.calls("cuMemcpyDtoDAsync_v2"), 1);
  EXPECT_EQ(fake_.calls("cuMemcpyHtoD_v2"), 2);
  EXPECT_TRUE(dev_->copy(dst, src, 0).ok());  // nothing to move: no driver call
  EXPECT_EQ(fake_.calls("cuMemcpyDtoDAsync_v2"), 1);
  dev_->free(src);
  dev_->free(dst);
}

TEST_F(CudaDeviceTest, DeviceCopyChecksSizesBeforeTheDriver) {
  Buffer small = *dev_->alloc(100), big = *dev_->alloc(300);
  Status s = dev_->copy(big, small, 101);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "copy of 101 bytes from a buffer of 100 into a buffer of 300 on CUDA");
  s = dev_->copy(small, big, 200);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "copy of 200 bytes from a buffer of 300 into a buffer of 100 on CUDA");
  s = dev_->copy(Buffer{0, 300}, big, 10);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("(a null buffer)"), std::string::npos) << s.message();
  EXPECT_EQ(fake_.calls("cuMemcpyDtoDAsync_v2"), 0);
  // A driver refusal names the call.
  fake_.fail_next("cuMemcpyDtoDAsync_v2", cuda::CUDA_ERROR_INVALID_VALUE);
  s = dev_->copy(big, small, 100);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "cuMemcpyDtoDAsync_v2 failed: CUDA_ERROR_INVALID_VALUE (invalid argument)");
  dev_->free(small);
  dev_->free(big);
}

TEST_F(CudaDeviceTest, OutOfMemoryIsResourceExhaustedNamingTheCall) {
  fake_.fail_next("cuMemAlloc_v2", cuda::CUDA_ERROR_OUT_OF_MEMORY);
  Result<Buffer> b = dev_->alloc(4096);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(b.status().message(),
            "CUDA alloc of 4096 bytes: cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (out of "
            "memory)");
}

TEST_F(CudaDeviceTest, CompileLoadsTheCubinAndLaunchPassesGridBlockAndBufferAddresses) {
  REQUIRE_PTXAS();
  UOpPtr ast = add_broadcast();
  Result<std::shared_ptr<Program>> prg = dev_->compile(ast);
  ASSERT_TRUE(prg.ok()) << prg.status().to_string();
  EXPECT_EQ(fake_.live("modules"), 1);
  EXPECT_EQ(dev_->target_info().name, "nv-sm_90");
  EXPECT_EQ(&(*prg)->device(), dev_.get());
  const auto* kern = dynamic_cast<const CudaProgram*>(prg->get());
  ASSERT_NE(kern, nullptr);
  EXPECT_NE(kern->function, nullptr);
  // The driver's register count (the fake reads EIATTR_REGCOUNT from the cubin) is what
  // ptxas -v reports for the kernel NvTarget builds.
  Result<compiler::NvKernel> k = compiler::compile_nv(compiler::nv(90), ast);
  ASSERT_TRUE(k.ok()) << k.status().to_string();
  EXPECT_GT(kern->registers, 0);
  EXPECT_EQ(kern->registers, k->ptxas.registers);
  // Cached by AST: no second module.
  Result<std::shared_ptr<Program>> again = dev_->compile(ast);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->get(), prg->get());
  EXPECT_EQ(fake_.calls("cuModuleLoadData"), 1);

  std::vector<Buffer> bufs;
  for (size_t bytes : {37 * 53 * 4, 53 * 4, 37 * 53 * 4}) bufs.push_back(*dev_->alloc(bytes));
  ASSERT_TRUE(dev_->launch(**prg, bufs).ok());
  ASSERT_TRUE(dev_->synchronize().ok());
  ASSERT_EQ(fake_.launch_count(), 1);
  FakeCudaLaunch l;
  ASSERT_EQ(fake_.get_launch(0, &l), 0);
  EXPECT_EQ(std::string(l.function), (*prg)->spec.name);
  // 37 * 53 = 1961 threads in blocks of 128: 16 blocks.
  EXPECT_EQ(std::vector<uint32_t>(l.grid, l.grid + 3), (std::vector<uint32_t>{16, 1, 1}));
  EXPECT_EQ(std::vector<uint32_t>(l.block, l.block + 3), (std::vector<uint32_t>{128, 1, 1}));
  EXPECT_EQ(l.shared_bytes, 0u);
  EXPECT_EQ(l.stream, static_cast<void*>(dev_->stream()));
  EXPECT_EQ(std::vector<uint8_t>(l.params, l.params + l.param_bytes),
            le64({addr(bufs[0]), addr(bufs[1]), addr(bufs[2])}));
  for (const Buffer& b : bufs) dev_->free(b);
}

TEST_F(CudaDeviceTest, VarsFollowTheBufferAddressesAsInt64) {
  REQUIRE_PTXAS();
  auto s = UOp::var("s", -10, 10), t = UOp::var("t", 0, 100);
  auto a = global(0, kF32), o = global(1, kF32);
  auto v = load(a, ShapeTracker::contiguous({300})) * cast(s, kF32) + cast(t, kF32);
  Result<std::shared_ptr<Program>> prg =
      dev_->compile(sink({store(o, ShapeTracker::contiguous({300}), v)}));
  ASSERT_TRUE(prg.ok()) << prg.status().to_string();
  ASSERT_EQ((*prg)->spec.vars.size(), 2u);
  std::vector<int64_t> vars;
  for (const VarArg& var : (*prg)->spec.vars) vars.push_back(var.name == "s" ? -3 : 42);
  std::vector<Buffer> bufs = {*dev_->alloc(1200), *dev_->alloc(1200)};
  ASSERT_TRUE(dev_->launch(**prg, bufs, vars).ok());
  FakeCudaLaunch l;
  ASSERT_EQ(fake_.get_launch(0, &l), 0);
  EXPECT_EQ(std::vector<uint8_t>(l.params, l.params + l.param_bytes),
            le64({addr(bufs[0]), addr(bufs[1]), static_cast<uint64_t>(vars[0]),
                  static_cast<uint64_t>(vars[1])}));
  // -3 as int64 little-endian, spelled out.
  int neg = (*prg)->spec.vars[0].name == "s" ? 16 : 24;
  EXPECT_EQ(std::vector<uint8_t>(l.params + neg, l.params + neg + 8),
            (std::vector<uint8_t>{0xfd, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}));
  for (const Buffer& b : bufs) dev_->free(b);
}

TEST_F(CudaDeviceTest, LaunchChecksCountsAndSizesBeforeTheDriver) {
  REQUIRE_PTXAS();
  Result<std::shared_ptr<Program>> prg = dev_->compile(add_broadcast());
  ASSERT_TRUE(prg.ok()) << prg.status().to_string();
  const std::string& name = (*prg)->spec.name;
  Buffer big = *dev_->alloc(37 * 53 * 4), row = *dev_->alloc(53 * 4),
         short_row = *dev_->alloc(52 * 4);
  std::vector<Buffer> two = {big, row};
  Status s = dev_->launch(**prg, two);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "launch " + name + " on CUDA: expected 3 buffers, got 2");
  std::vector<Buffer> small = {big, short_row, big};
  s = dev_->launch(**prg, small);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "launch " + name + " on CUDA: buffer 1 (" + kF32.name() + ") needs 212 bytes, got 208");
  std::vector<Buffer> null_buf = {big, Buffer{0, 212}, big};
  EXPECT_EQ(dev_->launch(**prg, null_buf).code(), StatusCode::kInvalidArgument);
  std::vector<Buffer> ok = {big, row, big};
  std::vector<int64_t> one_var = {1};
  s = dev_->launch(**prg, ok, one_var);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "launch " + name + " on CUDA: expected 0 vars, got 1");
  EXPECT_EQ(fake_.calls("cuLaunchKernel"), 0);
  EXPECT_EQ(fake_.launch_count(), 0);
  for (const Buffer& b : {big, row, short_row}) dev_->free(b);
}

TEST_F(CudaDeviceTest, LaunchFailureSurfacesAtSynchronizeNamingTheCall) {
  REQUIRE_PTXAS();
  Result<std::shared_ptr<Program>> prg = dev_->compile(add_broadcast());
  ASSERT_TRUE(prg.ok()) << prg.status().to_string();
  std::vector<Buffer> bufs = {*dev_->alloc(37 * 53 * 4), *dev_->alloc(53 * 4),
                              *dev_->alloc(37 * 53 * 4)};
  ASSERT_TRUE(dev_->launch(**prg, bufs).ok());
  fake_.fail_next("cuStreamSynchronize", cuda::CUDA_ERROR_LAUNCH_FAILED);
  Status s = dev_->synchronize();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message(),
            "cuStreamSynchronize failed: CUDA_ERROR_LAUNCH_FAILED (unspecified launch failure)");
  // A failing launch call itself names the kernel too.
  fake_.fail_next("cuLaunchKernel", cuda::CUDA_ERROR_INVALID_VALUE);
  s = dev_->launch(**prg, bufs);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "launch " + (*prg)->spec.name +
                ": cuLaunchKernel failed: CUDA_ERROR_INVALID_VALUE (invalid argument)");
  EXPECT_TRUE(dev_->synchronize().ok());
  for (const Buffer& b : bufs) dev_->free(b);
}

TEST_F(CudaDeviceTest, ModuleErrorsNameTheCallAndLeakNoModule) {
  REQUIRE_PTXAS();
  UOpPtr ast = add_broadcast();
  fake_.fail_next("cuModuleGetFunction", cuda::CUDA_ERROR_NOT_FOUND);
  Result<std::shared_ptr<Program>> prg = dev_->compile(ast);
  ASSERT_FALSE(prg.ok());
  EXPECT_EQ(prg.status().code(), StatusCode::kNotFound);
  EXPECT_NE(prg.status().message().find(
                ": cuModuleGetFunction failed: CUDA_ERROR_NOT_FOUND (named symbol not found)"),
            std::string::npos)
      << prg.status().message();
  EXPECT_EQ(fake_.calls("cuModuleUnload"), 1);  // the loaded module went with the error
  EXPECT_EQ(fake_.live("modules"), 0);
  // Not cached: the next compile loads it.
  prg = dev_->compile(ast);
  ASSERT_TRUE(prg.ok()) << prg.status().to_string();
  // A driver refusing the image.
  ASSERT_TRUE(dev_->bind().ok());
  cuda::CUmodule m = nullptr;
  Status s = BG_CU(dev_->api(), cuModuleLoadData, &m, "not a cubin");
  EXPECT_EQ(s.message(),
            "cuModuleLoadData failed: CUDA_ERROR_INVALID_IMAGE (device kernel image is invalid)");
}

// Programs keep their module and the context alive past the device; the last owner releases.
TEST_F(CudaDeviceTest, ProgramsOutliveTheDeviceAndReleaseLast) {
  REQUIRE_PTXAS();
  Result<std::shared_ptr<Program>> prg = dev_->compile(add_broadcast());
  ASSERT_TRUE(prg.ok()) << prg.status().to_string();
  std::shared_ptr<Program> keep = *prg;
  prg = Status(StatusCode::kAborted, "dropped");
  dev_.reset();
  EXPECT_EQ(fake_.live("streams"), 0);
  EXPECT_EQ(fake_.live("modules"), 1);
  EXPECT_EQ(fake_.live("primary_ctx_refs"), 1);
  keep.reset();
  EXPECT_EQ(fake_.live("modules"), 0);
  EXPECT_EQ(fake_.live("primary_ctx_refs"), 0);
}

TEST_F(CudaDeviceTest, TimeMsIsTheEventIntervalAroundTheWork) {
  REQUIRE_PTXAS();
  Result<std::shared_ptr<Program>> prg = dev_->compile(add_broadcast());
  ASSERT_TRUE(prg.ok()) << prg.status().to_string();
  std::vector<Buffer> bufs = {*dev_->alloc(37 * 53 * 4), *dev_->alloc(53 * 4),
                              *dev_->alloc(37 * 53 * 4)};
  ASSERT_TRUE(dev_->launch(**prg, bufs).ok());  // before the start event: not counted
  Result<float> ms = dev_->time_ms([&] {
    RETURN_IF_ERROR(dev_->launch(**prg, bufs));
    return dev_->launch(**prg, bufs);
  });
  ASSERT_TRUE(ms.ok()) << ms.status().to_string();
  EXPECT_EQ(*ms, 2 * kFakeCudaLaunchMs);
  EXPECT_EQ(fake_.live("events"), 0);
  EXPECT_EQ(fake_.calls("cuEventSynchronize"), 1);
  for (const Buffer& b : bufs) dev_->free(b);
}

// ---- cuBLAS (fake_libcublas: column-major GemmEx on host memory) ----

class CudaCublasTest : public CudaDeviceTest {
 protected:
  void SetUp() override {
    CudaDeviceTest::SetUp();
    blas_.reset();
  }
  void TearDown() override {
    EXPECT_EQ(blas_.live_handles(), 0);
    CudaDeviceTest::TearDown();
  }
  Buffer upload(const void* data, size_t bytes) {
    Buffer b = *dev_->alloc(bytes);
    CHECK(dev_->copy_in(b, data, bytes).ok());
    return b;
  }
  FakeCublas blas_;
};

// A is 3 x 4, B is 4 x 5, both row-major; C = A x B computed here by the textbook loop.
struct Gemm345 {
  static constexpr int64_t m = 3, k = 4, n = 5;
  std::vector<float> a, b, want;
  Gemm345() : a(m * k), b(k * n), want(m * n, 0) {
    for (int64_t i = 0; i < m * k; i++) a[i] = static_cast<float>(i % 7 - 3);
    for (int64_t i = 0; i < k * n; i++) b[i] = static_cast<float>((i * 5) % 11 - 5);
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++)
        for (int64_t l = 0; l < k; l++) want[i * n + j] += a[i * k + l] * b[l * n + j];
  }
};

uint16_t bf16(float f) {  // exact for the small integers used here
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>(bits >> 16);
}

TEST_F(CudaCublasTest, RowMajorFp32GemmIsTheSwappedColumnMajorCall) {
  Gemm345 g;
  Buffer a = upload(g.a.data(), g.a.size() * 4), b = upload(g.b.data(), g.b.size() * 4);
  Buffer c = *dev_->alloc(g.m * g.n * 4);
  Status s = cublas_gemm(*dev_, GemmInput::kFp32, a, b, c, g.m, g.n, g.k, kFakeCublas);
  ASSERT_TRUE(s.ok()) << s.to_string();
  std::vector<float> got(g.m * g.n);
  ASSERT_TRUE(dev_->copy_out(got.data(), c, got.size() * 4).ok());
  EXPECT_EQ(got, g.want);
  FakeCublasGemm call;
  ASSERT_EQ(blas_.last_gemm(&call), 0);
  EXPECT_EQ(call.transa, cuda::CUBLAS_OP_N);
  EXPECT_EQ(call.transb, cuda::CUBLAS_OP_N);
  EXPECT_EQ(call.m, 5);  // column-major C^T = B^T A^T: n x m, inner k
  EXPECT_EQ(call.n, 3);
  EXPECT_EQ(call.k, 4);
  EXPECT_EQ(call.a, reinterpret_cast<void*>(b.va));
  EXPECT_EQ(call.lda, 5);
  EXPECT_EQ(call.b, reinterpret_cast<void*>(a.va));
  EXPECT_EQ(call.ldb, 4);
  EXPECT_EQ(call.c, reinterpret_cast<void*>(c.va));
  EXPECT_EQ(call.ldc, 5);
  EXPECT_EQ(call.a_type, 0);  // CUDA_R_32F
  EXPECT_EQ(call.c_type, 0);
  EXPECT_EQ(call.compute_type, 68);  // CUBLAS_COMPUTE_32F
  EXPECT_EQ(call.algo, -1);          // CUBLAS_GEMM_DEFAULT
  EXPECT_EQ(call.alpha, 1.0f);
  EXPECT_EQ(call.beta, 0.0f);
  EXPECT_EQ(call.stream, static_cast<void*>(dev_->stream()));
  for (const Buffer& x : {a, b, c}) dev_->free(x);
}

TEST_F(CudaCublasTest, Bf16InputsAccumulateIntoFp32) {
  Gemm345 g;
  std::vector<uint16_t> a16, b16;
  for (float f : g.a) a16.push_back(bf16(f));
  for (float f : g.b) b16.push_back(bf16(f));
  Buffer a = upload(a16.data(), a16.size() * 2), b = upload(b16.data(), b16.size() * 2);
  Buffer c = *dev_->alloc(g.m * g.n * 4);
  Result<std::unique_ptr<Cublas>> blas = Cublas::create(*dev_, kFakeCublas);
  ASSERT_TRUE(blas.ok()) << blas.status().to_string();
  ASSERT_TRUE((*blas)->gemm(GemmInput::kBf16, a, b, c, g.m, g.n, g.k).ok());
  std::vector<float> got(g.m * g.n);
  ASSERT_TRUE(dev_->copy_out(got.data(), c, got.size() * 4).ok());
  EXPECT_EQ(got, g.want);
  FakeCublasGemm call;
  ASSERT_EQ(blas_.last_gemm(&call), 0);
  EXPECT_EQ(call.a_type, 14);  // CUDA_R_16BF
  EXPECT_EQ(call.b_type, 14);
  EXPECT_EQ(call.c_type, 0);
  // bf16 A is 2 bytes an element: an fp32-sized check would pass a too-small buffer.
  Status small = (*blas)->gemm(GemmInput::kFp32, a, b, c, g.m, g.n, g.k);
  EXPECT_EQ(small.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(small.message(), "cublas gemm: A needs 48 bytes, got 24");
  blas->reset();
  for (const Buffer& x : {a, b, c}) dev_->free(x);
}

TEST_F(CudaCublasTest, ErrorsNameTheCallAndTheStatus) {
  Gemm345 g;
  Buffer a = upload(g.a.data(), g.a.size() * 4), b = upload(g.b.data(), g.b.size() * 4);
  Buffer c = *dev_->alloc(g.m * g.n * 4);
  blas_.fail_next("cublasGemmEx", cuda::CUBLAS_STATUS_NOT_SUPPORTED);
  Status s = cublas_gemm(*dev_, GemmInput::kFp32, a, b, c, g.m, g.n, g.k, kFakeCublas);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_EQ(s.message(), "cublasGemmEx failed: CUBLAS_STATUS_NOT_SUPPORTED");
  blas_.fail_next("cublasCreate_v2", cuda::CUBLAS_STATUS_NOT_INITIALIZED);
  s = cublas_gemm(*dev_, GemmInput::kFp32, a, b, c, g.m, g.n, g.k, kFakeCublas);
  EXPECT_EQ(s.message(), "cublasCreate_v2 failed: CUBLAS_STATUS_NOT_INITIALIZED");
  blas_.reset();
  s = cublas_gemm(*dev_, GemmInput::kFp32, a, b, c, g.m, g.n, 0, kFakeCublas);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  s = cublas_gemm(*dev_, GemmInput::kFp32, a, b, c, g.m, g.n + 1, g.k, kFakeCublas);
  EXPECT_EQ(s.message(), "cublas gemm: B needs 96 bytes, got 80");
  FakeCublasGemm call;
  EXPECT_EQ(blas_.last_gemm(&call), -1) << "refused arguments never reach cuBLAS";
  EXPECT_EQ(cuda::cublas_status_name(99), "cublasStatus_t 99");
  for (const Buffer& x : {a, b, c}) dev_->free(x);
}

TEST(CudaCublasLibrary, MissingLibraryIsNotFoundNamingIt) {
  Result<const cuda::CublasApi*> api = cuda::load_cublas_api("/nonexistent/libcublas.so.99");
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), StatusCode::kNotFound);
  EXPECT_NE(api.status().message().find("/nonexistent/libcublas.so.99"), std::string::npos);
  Result<const cuda::CublasApi*> wrong = cuda::load_cublas_api(kFakeCuda);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("has no cublasCreate_v2"), std::string::npos)
      << wrong.status().message();
}

// NVIDIA's libcublas (when the toolkit is installed) exports the four symbols we resolve.
TEST(CudaCublasLibrary, TheToolkitLibraryHasOurSymbols) {
  ScopedOption option("BAREGRAD_LIBCUBLAS", nullptr);
  Result<const cuda::CublasApi*> api = cuda::load_cublas_api();
  if (!api.ok()) GTEST_SKIP() << api.status().message();
  EXPECT_NE((*api)->path.find("libcublas.so"), std::string::npos);
  EXPECT_NE((*api)->cublasGemmEx, nullptr);
}

}  // namespace
}  // namespace baregrad::runtime
