#include "tests/cts/backends.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <sstream>
#include <vector>

#include "base/format.h"
#include "base/options.h"
#include "drivers/null/device.h"
#include "drivers/null/program.h"

namespace baregrad::cts {

const std::vector<Backend>& backends() {
  static const std::vector<Backend> all = [] {
    std::vector<Backend> v = {
        {
            .name = "cpu",
            .open = []() -> Result<std::unique_ptr<hcq::Device>> {
              ASSIGN_OR_RETURN(auto d, cpu::Device::create(2));
              return std::unique_ptr<hcq::Device>(std::move(d));
            },
            .program = [](const ProgramRequest& r) -> std::unique_ptr<hcq::Program> {
              return std::make_unique<cpu::Program>(r.name, r.fn, r.buf_bytes, r.num_vars);
            },
            .add_one_binary = [](hcq::Device&, std::vector<std::shared_ptr<void>>*)
                -> Result<Binary> { return cpu_add_one_binary("cts_add_one"); },
            .unsupported = {},
        },
        {
            .name = "null",
            .open = []() -> Result<std::unique_ptr<hcq::Device>> {
              ASSIGN_OR_RETURN(auto d, null::Device::create());
              return std::unique_ptr<hcq::Device>(std::move(d));
            },
            .program = [](const ProgramRequest& r) -> std::unique_ptr<hcq::Program> {
              return std::make_unique<null::Program>(r.name, static_cast<int>(r.buf_bytes.size()),
                                                     r.num_vars);
            },
            .add_one_binary = [](hcq::Device&, std::vector<std::shared_ptr<void>>*)
                -> Result<Binary> { return cpu_add_one_binary("cts_add_one"); },
            .unsupported = {{"execution",
                             "NULL executes no command: waits, copies and kernels are no-ops"},
                            {"address checks",
                             "NULL device memory is address space only; copies are not checked"},
                            {"command buffer", "NULL records no command words"},
                            {"binary checks",
                             "NULL loads any binary as a program that never runs (DEV=NULL "
                             "compiles for the CPU and runs nothing)"}},
        },
    };
#if BAREGRAD_HAS_MOCK_NV
    for (Backend& b : nv_backends()) v.push_back(std::move(b));
#endif
#if BAREGRAD_HAS_MOCK_AMD
    for (Backend& b : amd_backends()) v.push_back(std::move(b));
#endif
    return v;
  }();
  return all;
}

void PrintTo(const Backend& b, std::ostream* os) { *os << b.name; }

// ---- fixture -------------------------------------------------------------------------------

void Cts::SetUp() {
  if (!GetParam().missing_tool.empty())
    GTEST_SKIP() << GetParam().name << " needs " << GetParam().missing_tool;
  CTS_ASSERT_OK_AND_ASSIGN(dev_, GetParam().open());
}

void Cts::TearDown() {
  keep_.clear();  // the test's programs are gone
  for (auto& [d, b] : buffers_) d->allocator().free(b);
  buffers_.clear();
  args_.clear();
  others_.clear();
  dev_.reset();
}

std::string Cts::unsupported_reason(const std::string& feature) const {
  auto it = GetParam().unsupported.find(feature);
  if (it == GetParam().unsupported.end()) return "";
  return GetParam().name + " does not support " + feature + ": " + it->second;
}

Result<std::unique_ptr<hcq::Device>> Cts::open_foreign() {
  for (const Backend& b : backends()) {
    if (b.name == GetParam().name) continue;
    ASSIGN_OR_RETURN(std::unique_ptr<hcq::Device> d, b.open());
    if (d->peer_group() != dev().peer_group()) return d;
  }
  return not_found("no backend outside the peer group of " + GetParam().name);
}

Result<hcq::Device*> Cts::open_another() {
  ASSIGN_OR_RETURN(auto d, GetParam().open());
  others_.push_back(std::move(d));
  return others_.back().get();
}

Result<hcq::Buffer> Cts::alloc(hcq::Device& d, size_t bytes, hcq::BufferSpec spec) {
  ASSIGN_OR_RETURN(hcq::Buffer b, d.allocator().alloc(bytes, spec));
  buffers_.emplace_back(&d, b);
  return b;
}

std::unique_ptr<hcq::Program> Cts::program(
    hcq::Device& d, std::string name, KernelFn fn, std::vector<size_t> buf_bytes, int num_vars) {
  return GetParam().program({d, std::move(name), fn, std::move(buf_bytes), num_vars, &keep_});
}

Result<hcq::ArgsState*> Cts::args_for(hcq::Device& d, const hcq::Program& prg) {
  size_t bytes = prg.args_prefix() + 8 * static_cast<size_t>(prg.num_bufs() + prg.num_vars());
  ASSIGN_OR_RETURN(hcq::Buffer mem,
                   alloc(d, std::max<size_t>(bytes, 8), {.host = true, .cpu_access = true}));
  return &args_.emplace_back(mem, prg.args_prefix(), prg.num_bufs(), prg.num_vars());
}

void launch(hcq::HwQueue& q, const hcq::Program& prg, const hcq::ArgsState& args, uint32_t items) {
  q.exec(prg, args, {items, 1, 1}, {1, 1, 1});
}

// ---- helpers ---------------------------------------------------------------------------

Result<Binary> cpu_add_one_binary(const std::string& entry) {
  // clang runs once per entry in a process.
  static std::mutex mu;
  static std::map<std::string, std::string> done;
  std::lock_guard lock(mu);
  Binary b;
  b.format = BinaryFormat::kHostElf;
  b.arch = host_arch();
  b.entry = entry;
  b.id = "cts:" + entry;
  b.num_bufs = 1;
  b.buf_bytes = {16};
  b.grid = {4, 1, 1};
  if (auto it = done.find(entry); it != done.end()) {
    b.code = it->second;
    return b;
  }
  std::string cc = options().cc.empty() ? "clang-19" : options().cc;
  char dir[] = "/tmp/baregrad-cts-XXXXXX";
  if (!::mkdtemp(dir)) return internal("cts: mkdtemp: " + std::string(std::strerror(errno)));
  std::string in = std::string(dir) + "/k.c", out = std::string(dir) + "/k.o",
              log = std::string(dir) + "/log";
  std::ofstream(in) << "#include <stdint.h>\nvoid " << entry
                    << "(void* const* bufs, const int64_t* vars, int64_t lo, int64_t hi) {\n"
                       "  (void)vars;\n  int32_t* a = (int32_t*)bufs[0];\n"
                       "  for (int64_t i = lo; i < hi; i++) a[i] += 1;\n}\n";
  std::string cmd = cc + " -O2 -fPIC -c -o '" + out + "' '" + in + "' >'" + log + "' 2>&1";
  int rc = std::system(cmd.c_str());
  std::ifstream obj(out, std::ios::binary);
  b.code.assign(std::istreambuf_iterator<char>(obj), {});
  std::stringstream why;
  why << std::ifstream(log).rdbuf();
  for (const std::string& f : {in, out, log}) ::unlink(f.c_str());
  ::rmdir(dir);
  if (rc != 0 || b.code.empty())
    return not_found("cts: " + cc + " could not compile add_one (" + std::to_string(rc) +
                     "): " + why.str());
  done[entry] = b.code;
  return b;
}

int64_t va_of(const hcq::Buffer& b) { return static_cast<int64_t>(b.va); }

// The copy queue, or the compute queue on a device without a copy engine.
std::unique_ptr<hcq::HwQueue> copy_or_compute_queue(hcq::Device& d) {
  std::unique_ptr<hcq::HwQueue> q = d.copy_queue();
  return q ? std::move(q) : d.compute_queue();
}

// Checks that every later call on the failed `d` reports `err` (`buf` is a buffer of `d`).
void expect_sticky(hcq::Device& d, const Status& err, const hcq::Buffer& buf) {
  auto same = [&err](const Status& s, const char* what) {
    EXPECT_EQ(s.code(), err.code()) << what << ": " << s;
    EXPECT_EQ(s.message(), err.message()) << what;
  };
  EXPECT_TRUE(d.failed());
  same(d.error(), "error()");
  same(d.synchronize(), "synchronize()");
  auto q = d.compute_queue();
  same(d.submit_on_timeline(*q, [](hcq::HwQueue&) {}).status(), "submit_on_timeline()");
  same(q->submit(), "HwQueue::submit()");
  std::vector<uint8_t> bytes(buf.size);
  same(d.allocator().copy_in(buf, bytes.data(), buf.size), "copy_in()");
  same(d.allocator().copy_out(bytes.data(), buf, buf.size), "copy_out()");
  auto sig = d.new_signal("cts after the fault");
  ASSERT_TRUE(sig.ok()) << sig.status();
  auto t0 = Clock::now();
  same((*sig)->wait(1), "Signal::wait()");
  EXPECT_LT(ms_since(t0), 5000) << "a wait on a failed device returns at once";
}

// A copy round trip and a kernel on `d`.
void expect_works(hcq::Device& d, const hcq::Program& prg, hcq::ArgsState& args, hcq::Buffer b) {
  std::vector<int32_t> in = {1, 2, 3, 4}, out(4);
  ASSERT_EQ(b.size, 16u);
  args.set_buf(0, va_of(b));
  CTS_ASSERT_OK(d.allocator().copy_in(b, in.data(), 16));
  auto q = d.compute_queue();
  CTS_ASSERT_OK(d.submit_on_timeline(*q, [&](hcq::HwQueue& hq) { launch(hq, prg, args, 4); }));
  CTS_ASSERT_OK(d.allocator().copy_out(out.data(), b, 16));
  EXPECT_EQ(out, (std::vector<int32_t>{2, 3, 4, 5}));
}

// ---- kernels -------------------------------------------------------------------------------

void add_one(void* const* bufs, const int64_t*, int64_t lo, int64_t hi) {
  auto* a = static_cast<int32_t*>(bufs[0]);
  for (int64_t i = lo; i < hi; i++) a[i] += 1;
}

void reverse_double(void* const* bufs, const int64_t* vars, int64_t lo, int64_t hi) {
  auto* dst = static_cast<int32_t*>(bufs[0]);
  const auto* src = static_cast<const int32_t*>(bufs[1]);
  for (int64_t i = lo; i < hi; i++) dst[i] = src[vars[0] - 1 - i] * 2;
}

void append_log(void* const* bufs, const int64_t* vars, int64_t, int64_t) {
  auto* log = static_cast<int64_t*>(bufs[0]);
  log[1 + log[0]] = vars[0];
  log[0] += 1;
}

void store_var(void* const* bufs, const int64_t* vars, int64_t, int64_t) {
  static_cast<int64_t*>(bufs[0])[0] = vars[0];
}

void increment(void* const* bufs, const int64_t*, int64_t, int64_t) {
  static_cast<int64_t*>(bufs[0])[0] += 1;
}

// ---- data ----------------------------------------------------------------------------------

std::unique_ptr<uint8_t[]> random_bytes(size_t n, uint64_t seed) {
  auto out = std::make_unique_for_overwrite<uint8_t[]>(n);
  uint64_t x = seed;
  auto next = [&x] {
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t r = next();
    std::memcpy(out.get() + i, &r, 8);
  }
  for (; i < n; i++) out[i] = static_cast<uint8_t>(next());
  return out;
}

::testing::AssertionResult same_bytes(const void* a, const void* b, size_t n) {
  if (std::memcmp(a, b, n) == 0) return ::testing::AssertionSuccess();
  const auto* x = static_cast<const uint8_t*>(a);
  const auto* y = static_cast<const uint8_t*>(b);
  size_t i = 0;
  while (x[i] == y[i]) i++;
  return ::testing::AssertionFailure() << "the " << n << " bytes first differ at offset " << i
                                       << ": " << int{x[i]} << " vs. " << int{y[i]};
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace baregrad::cts
