// The HCQ conformance suite's harness: the backends it runs on (and what each cannot do), the
// per-backend fixture, CPU-ABI test kernels and byte-pattern helpers.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "base/format.h"
#include "base/status.h"
#include "drivers/cpu/device.h"
#include "drivers/cpu/program.h"
#include "hcq/hcq.h"

namespace baregrad::cts {

inline constexpr size_t kMiB = size_t{1} << 20;

// A kernel with the CPU ABI (see cpu::Program): backends that execute run it, the
// others only record a program of the same arity.
using KernelFn = cpu::Program::Fn;

// What a test asks of a backend's program: `fn`'s behaviour, on `dev`.
struct ProgramRequest {
  hcq::Device& dev;
  std::string name;
  KernelFn fn;
  std::vector<size_t> buf_bytes;  // buf_bytes[i] bounds buffer i's use
  int num_vars;
  std::vector<std::shared_ptr<void>>* keep;  // what must outlive the program (the test's)
};

struct Backend {
  std::string name;
  std::function<Result<std::unique_ptr<hcq::Device>>()> open;
  // A program of this backend with the request's behaviour.
  std::function<std::unique_ptr<hcq::Program>(const ProgramRequest& r)> program;
  // add_one (over int32, 16 bytes of buffer 0) as a Binary that `dev`'s load_program() takes;
  // what must outlive the program goes to *keep. NotFound when the tool that makes it (clang,
  // ptxas) is missing. Backends without binaries list "binaries" as unsupported.
  std::function<Result<Binary>(hcq::Device& dev, std::vector<std::shared_ptr<void>>* keep)>
      add_one_binary;
  std::map<std::string, std::string> unsupported;  // feature -> why
  // Non-empty when a tool the backend needs is missing (ptxas): every test skips with it.
  std::string missing_tool = "";
};

// Every backend present in this build.
const std::vector<Backend>& backends();
void PrintTo(const Backend& b, std::ostream* os);

// ---- status assertions ---------------------------------------------------------------------

#define CTS_ASSERT_OK(expr)                                                \
  do {                                                                     \
    ::baregrad::Status cts_status_ = ::baregrad::detail::to_status(expr);  \
    ASSERT_TRUE(cts_status_.ok()) << #expr << " returned " << cts_status_; \
  } while (0)
#define CTS_EXPECT_OK(expr)                                                \
  do {                                                                     \
    ::baregrad::Status cts_status_ = ::baregrad::detail::to_status(expr);  \
    EXPECT_TRUE(cts_status_.ok()) << #expr << " returned " << cts_status_; \
  } while (0)
// `lhs` = the value of the Result `expr`, or the test fails and returns.
#define CTS_ASSERT_OK_AND_ASSIGN(lhs, expr) \
  CTS_ASSIGN_IMPL(BG_CONCAT(cts_result_, __LINE__), lhs, expr)
#define CTS_ASSIGN_IMPL(tmp, lhs, expr)                           \
  auto tmp = (expr);                                              \
  ASSERT_TRUE(tmp.ok()) << #expr << " returned " << tmp.status(); \
  lhs = std::move(tmp).value()
// Skips the test (with the backend's reason) unless the backend supports `feature`.
#define CTS_REQUIRE(feature)                                                 \
  if (std::string cts_why_ = unsupported_reason(feature); !cts_why_.empty()) \
  GTEST_SKIP() << cts_why_

// Instantiates `suite` (a fixture derived from Cts) on every backend, named after it.
#define CTS_INSTANTIATE(suite)                         \
  INSTANTIATE_TEST_SUITE_P(                            \
      Backend, suite, ::testing::ValuesIn(backends()), \
      [](const ::testing::TestParamInfo<Backend>& info) { return info.param.name; })

// ---- the fixture ---------------------------------------------------------------------------

// One test on one backend: a fresh device per test; buffers, argument blocks and extra devices
// made through it are released after the test body (after its queues and signals).
class Cts : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override;
  void TearDown() override;

  hcq::Device& dev() { return *dev_; }
  // "" when the backend supports `feature`, else "<backend> does not support <feature>: why".
  std::string unsupported_reason(const std::string& feature) const;
  // A device of the first other backend in a different peer group (one this device's queues
  // and allocator cannot reach); NotFound when every backend shares this one's.
  Result<std::unique_ptr<hcq::Device>> open_foreign();
  // Another device of this backend, alive until the test ends.
  Result<hcq::Device*> open_another();
  // Tracks a buffer of `d` so that it is freed when the test ends.
  Result<hcq::Buffer> alloc(hcq::Device& d, size_t bytes, hcq::BufferSpec spec = {});
  Result<hcq::Buffer> alloc(size_t bytes, hcq::BufferSpec spec = {}) {
    return alloc(dev(), bytes, spec);
  }
  // A program of this backend (see Backend::program) for dev(), or for `d`.
  std::unique_ptr<hcq::Program> program(std::string name,
                                        KernelFn fn,
                                        std::vector<size_t> buf_bytes,
                                        int num_vars) {
    return program(dev(), std::move(name), fn, std::move(buf_bytes), num_vars);
  }
  std::unique_ptr<hcq::Program> program(
      hcq::Device& d, std::string name, KernelFn fn, std::vector<size_t> buf_bytes, int num_vars);
  // add_one as a Binary of this backend (see Backend::add_one_binary) for dev().
  Result<Binary> add_one_binary() { return GetParam().add_one_binary(dev(), &keep_); }
  // An argument block for `prg` in CPU-visible memory of `d`, alive until the test ends.
  Result<hcq::ArgsState*> args_for(hcq::Device& d, const hcq::Program& prg);
  Result<hcq::ArgsState*> args_for(const hcq::Program& prg) { return args_for(dev(), prg); }

 private:
  std::unique_ptr<hcq::Device> dev_;
  std::vector<std::unique_ptr<hcq::Device>> others_;
  std::vector<std::pair<hcq::Device*, hcq::Buffer>> buffers_;
  std::deque<hcq::ArgsState> args_;
  std::vector<std::shared_ptr<void>> keep_;  // ProgramRequest::keep
};

#if BAREGRAD_HAS_MOCK_NV
// The NVIDIA backends (tests/cts/nv_backend.cc): mock_nv (code-less programs whose twins run
// the CPU-ABI kernels), mock_nv_cubin (the kernels as PTX, assembled by ptxas and loaded from
// the cubin, the twins registered at their code; when ptxas is found) and nv (the same cubins
// on GPU 0 through /dev/nvidiactl; when it exists and ptxas is found).
std::vector<Backend> nv_backends();
// The PTX of a CTS kernel (add_one, reverse_double, append_log, store_var, increment) for
// sm_<sm> as kernel `entry` (a PTX identifier), and its cubin from ptxas.
std::string cts_ptx(KernelFn fn, int sm, const std::string& entry);
Result<std::vector<uint8_t>> cts_cubin(KernelFn fn, int sm, const std::string& entry);
#endif

#if BAREGRAD_HAS_MOCK_AMD
// The AMD backends (tests/cts/amd_backend.cc): mock_amd (the kernels as LLVM IR, compiled by
// clang and linked by ld.lld into HSA code objects for gfx1100, loaded by the AMD device over
// the fake KFD and GPU, their twins registered for their Binaries; skipped without ld.lld) and
// amd (the same code objects on GPU 0 through /dev/kfd; when it exists and the tools are found).
std::vector<Backend> amd_backends();
#endif

// add_one with the CPU ABI as a host ELF object from clang (options().cc), as kernel `entry`.
Result<Binary> cpu_add_one_binary(const std::string& entry);

// Records a launch of `prg` over `items` grid.x items (the CPU ABI's [lo, hi) range).
void launch(hcq::HwQueue& q, const hcq::Program& prg, const hcq::ArgsState& args, uint32_t items);

// A buffer's device address as a recorded value.
int64_t va_of(const hcq::Buffer& b);
// The copy queue, or the compute queue on a device without a copy engine.
std::unique_ptr<hcq::HwQueue> copy_or_compute_queue(hcq::Device& d);
// Checks that every later call on the failed `d` reports `err` (`buf` is a buffer of `d`).
void expect_sticky(hcq::Device& d, const Status& err, const hcq::Buffer& buf);
// Checks a copy round trip and `prg` (add_one over 4 int32) with `args` on `d`; `b` is 16 bytes.
void expect_works(hcq::Device& d, const hcq::Program& prg, hcq::ArgsState& args, hcq::Buffer b);

// ---- test kernels (CPU ABI) ----------------------------------------------------------------

// a[i] += 1 over int32 elements.
void add_one(void* const* bufs, const int64_t* vars, int64_t lo, int64_t hi);
// dst[i] = src[vars[0] - 1 - i] * 2 over int32 (bufs: dst, src): item i reads what another
// core wrote in an earlier launch.
void reverse_double(void* const* bufs, const int64_t* vars, int64_t lo, int64_t hi);
// Appends vars[0] to the int64 log {count, entries...} (grid 1).
void append_log(void* const* bufs, const int64_t* vars, int64_t lo, int64_t hi);
// out[0] = vars[0] (int64, grid 1).
void store_var(void* const* bufs, const int64_t* vars, int64_t lo, int64_t hi);
// counter[0] += 1 (int64, grid 1).
void increment(void* const* bufs, const int64_t* vars, int64_t lo, int64_t hi);

// ---- data ----------------------------------------------------------------------------------

// `n` pseudo-random bytes from `seed` (splitmix64), the same on every run.
std::unique_ptr<uint8_t[]> random_bytes(size_t n, uint64_t seed);
// Success when a and b hold the same `n` bytes, else the first differing offset and bytes.
::testing::AssertionResult same_bytes(const void* a, const void* b, size_t n);

using Clock = std::chrono::steady_clock;
// Milliseconds since `t0`.
double ms_since(Clock::time_point t0);

}  // namespace baregrad::cts
