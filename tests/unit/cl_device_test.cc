// DEV=CL (runtime/cl) against the OpenCL platform of this machine (PoCL on CPU in CI): memory
// behind synthetic addresses, hand-written OpenCL C with the ABI of compiler/target/cl_target.h
// loaded through ClDevice::load, launches, graphs and errors. Skips without an OpenCL device.
#include "runtime/cl/cl_device.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

namespace baregrad::runtime {
namespace {

using compiler::BufferArg;
using compiler::CompiledKernel;
constexpr compiler::DType kF32 = compiler::dtypes::kFloat32;

// out[i] = in[i] + var0 over n floats; slot 0 is out, slot 1 in; each starts off<i> bytes into
// its buffer object.
constexpr const char* kAdd1 = R"(__kernel void add1(__global uchar* buf0, ulong off0,
                   __global uchar* buf1, ulong off1, long var0) {
  __global float* out = (__global float*)(buf0 + off0);
  __global const float* in = (__global const float*)(buf1 + off1);
  size_t i = get_global_id(0);
  out[i] = in[i] + (float)var0;
}
)";

// A kernel of `n` floats per slot, with `vars` vars, launched as n / block work-groups.
CompiledKernel kernel(
    const std::string& name, const std::string& source, int64_t n, uint32_t block, int vars = 1) {
  CompiledKernel k;
  k.spec.name = name;
  k.spec.bufs = {BufferArg{0, kF32, n, true}, BufferArg{1, kF32, n, false}};
  for (int v = 0; v < vars; v++) k.spec.vars.push_back({"var" + std::to_string(v), 0, 1000});
  k.spec.global_size = {n / block, 1, 1};
  k.spec.local_size = {block, 1, 1};
  k.binary.format = BinaryFormat::kOpenClC;
  k.binary.arch = "opencl";
  k.binary.entry = name;
  k.binary.code = source;
  k.binary.num_bufs = 2;
  k.binary.num_vars = vars;
  k.binary.buf_bytes = {static_cast<size_t>(n) * 4, static_cast<size_t>(n) * 4};
  k.binary.grid = {static_cast<uint32_t>(n / block), 1, 1};
  k.binary.block = {block, 1, 1};
  return k;
}

std::vector<float> iota(size_t n, float start) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

class ClDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<ClInfo> info = ClDevice::probe();
    if (!info.ok()) GTEST_SKIP() << "no OpenCL: " << info.status().to_string();
    size_t devices = 0;
    for (const ClPlatformInfo& p : info->platforms) devices += p.devices.size();
    if (devices == 0)
      GTEST_SKIP() << "no OpenCL device (" << info->platforms.size() << " platforms)";
    Result<std::unique_ptr<ClDevice>> d = ClDevice::create(0);
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    dev_ = std::move(*d);
  }
  void TearDown() override {
    if (!dev_) return;
    for (Buffer b : bufs_) dev_->free(b);
  }
  Buffer alloc(size_t bytes) {
    Result<Buffer> b = dev_->alloc(bytes);
    EXPECT_TRUE(b.ok()) << b.status().to_string();
    if (!b.ok()) return {};
    bufs_.push_back(*b);
    return *b;
  }
  std::shared_ptr<Program> load(CompiledKernel k) {
    Result<std::shared_ptr<Program>> p = dev_->load(std::move(k));
    EXPECT_TRUE(p.ok()) << p.status().to_string();
    return p.ok() ? *p : nullptr;
  }
  std::vector<float> read(Buffer b, size_t n) {
    std::vector<float> v(n);
    Status s = dev_->copy_out(v.data(), b, n * 4);
    EXPECT_TRUE(s.ok()) << s.to_string();
    return v;
  }

  std::unique_ptr<ClDevice> dev_;
  std::vector<Buffer> bufs_;
};

TEST_F(ClDeviceTest, ProbeListsTheDeviceItOpens) {
  Result<ClInfo> info = ClDevice::probe();
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->library, "libOpenCL.so.1");
  ASSERT_FALSE(info->platforms.empty());
  const ClDeviceInfo* first = nullptr;
  for (const ClPlatformInfo& p : info->platforms) {
    EXPECT_FALSE(p.name.empty());
    EXPECT_TRUE(p.version.starts_with("OpenCL ")) << p.version;
    if (!first && !p.devices.empty()) first = &p.devices[0];
  }
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->index, 0);
  EXPECT_EQ(first->name, dev_->info().name);
  EXPECT_GT(first->compute_units, 0u);
  EXPECT_GT(first->max_work_group_size, 0u);
  EXPECT_GT(first->global_mem, 0u);
  EXPECT_EQ(dev_->name(), "CL");
  EXPECT_EQ(dev_->target_info().name, "opencl");
  EXPECT_NE(dev_->compiler_key().find(first->driver_version), std::string::npos)
      << dev_->compiler_key();
  EXPECT_FALSE(dev_->host_addressable());
}

TEST_F(ClDeviceTest, CopiesRoundTripAtInteriorAddresses) {
  Buffer a = alloc(4096), b = alloc(1000), empty = alloc(0);
  ASSERT_TRUE(a.va && b.va && empty.va);
  EXPECT_EQ(a.va % 64, 0u);
  EXPECT_NE(empty.va, a.va);
  EXPECT_NE(empty.va, b.va);
  std::vector<uint8_t> src(4096);
  for (size_t i = 0; i < src.size(); i++) src[i] = static_cast<uint8_t>(i * 7 + 1);
  ASSERT_TRUE(dev_->copy_in(a, src.data(), src.size()).ok());
  // Bytes [100, 300) of a, read through an address inside it.
  std::vector<uint8_t> out(200);
  ASSERT_TRUE(dev_->copy_out(out.data(), Buffer{a.va + 100, 200}, 200).ok());
  EXPECT_EQ(0, std::memcmp(out.data(), src.data() + 100, 200));
  // Written at an interior address, the rest untouched.
  std::vector<uint8_t> patch(50, 0xab);
  ASSERT_TRUE(dev_->copy_in(Buffer{a.va + 1000, 50}, patch.data(), 50).ok());
  std::vector<uint8_t> all(4096);
  ASSERT_TRUE(dev_->copy_out(all.data(), a, 4096).ok());
  for (size_t i = 0; i < all.size(); i++)
    ASSERT_EQ(all[i], i >= 1000 && i < 1050 ? 0xab : src[i]) << "byte " << i;
  // copy(): a[2000, 2500) -> b[300, 800), asynchronous until synchronize().
  ASSERT_TRUE(dev_->copy(Buffer{b.va + 300, 500}, Buffer{a.va + 2000, 500}, 500).ok());
  ASSERT_TRUE(dev_->synchronize().ok());
  ASSERT_TRUE(dev_->copy_out(out.data(), Buffer{b.va + 300, 200}, 200).ok());
  EXPECT_EQ(0, std::memcmp(out.data(), src.data() + 2000, 200));
}

TEST_F(ClDeviceTest, CopiesOutsideAnAllocationAreInvalidArgument) {
  Buffer a = alloc(256);
  std::vector<uint8_t> out(512);
  Status past = dev_->copy_out(out.data(), Buffer{a.va + 200, 100}, 100);
  EXPECT_EQ(past.code(), StatusCode::kInvalidArgument) << past.to_string();
  EXPECT_NE(past.message().find("100 bytes at offset 200 of a buffer of 256 bytes"),
            std::string::npos)
      << past.message();
  Status bigger = dev_->copy_out(out.data(), a, 512);
  EXPECT_EQ(bigger.code(), StatusCode::kInvalidArgument) << bigger.to_string();
  Status unknown = dev_->copy_in(Buffer{0x1000, 16}, out.data(), 16);
  EXPECT_EQ(unknown.code(), StatusCode::kInvalidArgument) << unknown.to_string();
  EXPECT_NE(unknown.message().find("0x1000 is not in a buffer of CL"), std::string::npos)
      << unknown.message();
  Status copy = dev_->copy(a, Buffer{a.va + 128, 128}, 200);
  EXPECT_EQ(copy.code(), StatusCode::kInvalidArgument) << copy.to_string();
}

TEST_F(ClDeviceTest, LaunchAddsAVarAtBufferOffsets) {
  constexpr int64_t n = 256;
  std::shared_ptr<Program> prg = load(kernel("add1", kAdd1, n, 64));
  ASSERT_TRUE(prg);
  // Both slots start inside their allocations: 64 floats into `in`, 16 into `out`.
  Buffer in = alloc((n + 64) * 4), out = alloc((n + 32) * 4);
  std::vector<float> src = iota(n + 64, 0.5f);
  ASSERT_TRUE(dev_->copy_in(in, src.data(), src.size() * 4).ok());
  std::vector<float> zeros(n + 32, -1.0f);
  ASSERT_TRUE(dev_->copy_in(out, zeros.data(), zeros.size() * 4).ok());
  std::vector<Buffer> bufs = {Buffer{out.va + 64, n * 4}, Buffer{in.va + 256, n * 4}};
  std::vector<int64_t> vars = {7};
  Status s = dev_->launch(*prg, bufs, vars);
  ASSERT_TRUE(s.ok()) << s.to_string();
  std::vector<float> got = read(out, n + 32);
  for (int64_t i = 0; i < n + 32; i++) {
    float want = i < 16 || i >= 16 + n ? -1.0f : src[static_cast<size_t>(i - 16 + 64)] + 7.0f;
    ASSERT_EQ(got[static_cast<size_t>(i)], want) << "element " << i;
  }
}

TEST_F(ClDeviceTest, LaunchOfAThousandWorkGroups) {
  constexpr int64_t n = 1000 * 32;
  std::shared_ptr<Program> prg = load(kernel("add1", kAdd1, n, 32));
  ASSERT_TRUE(prg);
  Buffer in = alloc(n * 4), out = alloc(n * 4);
  std::vector<float> src = iota(n, -100.0f);
  ASSERT_TRUE(dev_->copy_in(in, src.data(), n * 4).ok());
  std::vector<Buffer> bufs = {out, in};
  std::vector<int64_t> vars = {-3};
  ASSERT_TRUE(dev_->launch(*prg, bufs, vars).ok());
  ASSERT_TRUE(dev_->synchronize().ok());
  std::vector<float> got = read(out, n);
  for (size_t i = 0; i < got.size(); i++) ASSERT_EQ(got[i], src[i] - 3.0f) << "element " << i;
}

TEST_F(ClDeviceTest, BuildFailureHasTheLogAndTheNumberedSource) {
  std::string bad = std::string(kAdd1).replace(std::string(kAdd1).find("out[i] ="), 8,
                                               "out[i] = undeclared_name +");
  Result<std::shared_ptr<Program>> p = dev_->load(kernel("add1", bad, 64, 64));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInternal);
  const std::string& msg = p.status().message();
  EXPECT_NE(msg.find("clBuildProgram failed: CL_BUILD_PROGRAM_FAILURE (-11)"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("undeclared_name"), std::string::npos) << msg;  // the log or the source
  EXPECT_NE(msg.find("out[i] = undeclared_name + in[i]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("compile add1 on CL"), std::string::npos) << msg;
}

TEST_F(ClDeviceTest, LoadRefusesAnotherBinaryFormat) {
  CompiledKernel k = kernel("add1", kAdd1, 64, 64);
  k.binary.format = BinaryFormat::kCubin;
  Result<std::shared_ptr<Program>> p = dev_->load(std::move(k));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("cubin"), std::string::npos) << p.status().message();
}

TEST_F(ClDeviceTest, GraphReplayRebindsItsInput) {
  constexpr int64_t n = 128;
  // Each launch writes slot 0 from slot 1 plus var0; a graph has no vars, so a kernel without.
  std::string add2 = std::string(kAdd1);
  add2.replace(add2.find(", long var0"), 11, "");
  add2.replace(add2.find("(float)var0"), 11, "2.0f");
  std::shared_ptr<Program> prg = load(kernel("add1", add2, n, 32, 0));
  ASSERT_TRUE(prg);
  Buffer x = alloc(n * 4), y = alloc(n * 4), tmp = alloc(n * 4), out = alloc(n * 4);
  std::vector<float> xs = iota(n, 1.0f), ys = iota(n, 1000.0f);
  ASSERT_TRUE(dev_->copy_in(x, xs.data(), n * 4).ok());
  ASSERT_TRUE(dev_->copy_in(y, ys.data(), n * 4).ok());
  // tmp = input0 + 2; out = tmp + 2.
  std::vector<GraphLaunch> launches = {{prg, {tmp, Buffer{}}, {-1, 0}},
                                       {prg, {out, tmp}, {-1, -1}}};
  Result<std::unique_ptr<Graph>> g = dev_->make_graph(launches, 1);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ((*g)->size(), 2u);
  for (auto [input, want] : {std::pair{x, xs}, std::pair{y, ys}}) {
    std::vector<Buffer> inputs = {input};
    Status s = (*g)->replay(inputs);
    ASSERT_TRUE(s.ok()) << s.to_string();
    std::vector<float> got = read(out, n);
    for (size_t i = 0; i < got.size(); i++) ASSERT_EQ(got[i], want[i] + 4.0f) << "element " << i;
  }
  std::vector<Buffer> small = {Buffer{x.va, 16}};
  Status s = (*g)->replay(small);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
}

TEST(ClDevice, MissingLibraryIsNotFoundNamingIt) {
  Result<std::unique_ptr<ClDevice>> d = ClDevice::create(0, "/nonexistent/libOpenCL-missing.so.1");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kNotFound);
  EXPECT_NE(d.status().message().find("/nonexistent/libOpenCL-missing.so.1"), std::string::npos)
      << d.status().message();
  Result<ClInfo> info = ClDevice::probe("libm.so.6");  // a library without the entry points
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), StatusCode::kNotFound);
  EXPECT_NE(info.status().message().find("clGetPlatformIDs"), std::string::npos)
      << info.status().message();
}

TEST(ClDevice, MissingIndexIsNotFoundListingTheDevices) {
  Result<ClInfo> info = ClDevice::probe();
  if (!info.ok()) GTEST_SKIP() << "no OpenCL: " << info.status().to_string();
  Result<std::unique_ptr<ClDevice>> d = ClDevice::create(999);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kNotFound);
  EXPECT_NE(d.status().message().find("no OpenCL device 999 (this machine has"), std::string::npos)
      << d.status().message();
}

TEST(ClDevice, ErrorNamesComeFromClH) {
  EXPECT_STREQ(cl::cl_error_name(CL_OUT_OF_RESOURCES), "CL_OUT_OF_RESOURCES");
  EXPECT_STREQ(cl::cl_error_name(CL_INVALID_DEVICE_PARTITION_COUNT),
               "CL_INVALID_DEVICE_PARTITION_COUNT");
  EXPECT_STREQ(cl::cl_error_name(-12345), "CL_UNKNOWN_ERROR");
  Status s = cl::cl_check(CL_MEM_OBJECT_ALLOCATION_FAILURE, "clCreateBuffer");
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "clCreateBuffer failed: CL_MEM_OBJECT_ALLOCATION_FAILURE (-4)");
}

}  // namespace
}  // namespace baregrad::runtime
