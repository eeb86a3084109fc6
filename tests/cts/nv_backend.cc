// The conformance suite's NVIDIA backends: mock_nv, mock_nv_cubin and nv (see backends.h).
// On a GPU the CTS kernels must be device code: each CPU-ABI kernel has a PTX twin here, written
// by hand to the same contract (item i = ctaid.x * ntid.x + tid.x over grid.x * block.x items;
// parameters: one 8-byte address per buffer, then one 8-byte value per scalar), assembled by
// ptxas for the device's sm and loaded from the cubin with nv::Program::load.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <tuple>

#include "base/check.h"
#include "base/format.h"
#include "base/options.h"
#include "drivers/mock/nv_device/mock_nv.h"
#include "drivers/nv/cubin.h"
#include "drivers/nv/device.h"
#include "drivers/nv/program.h"
#include "tests/cts/backends.h"

namespace baregrad::cts {
namespace {

// The fake GPU's twin of a CPU-ABI kernel: constant bank 0 holds, from the program's parameter
// offset (*prefix), one 8-byte address per buffer then one 8-byte value per scalar. Each buffer
// must lie in one allocation of the device for `buf_bytes[i]` bytes (else an MMU fault, as
// drivers/cpu reports it); the kernel runs over grid.x * block.x items on the host addresses
// behind them.
mock::MockKernel cpu_abi_twin(const ProgramRequest& r, std::shared_ptr<size_t> prefix) {
  int num_bufs = static_cast<int>(r.buf_bytes.size()), num_vars = r.num_vars;
  return [fn = r.fn, buf_bytes = r.buf_bytes, num_bufs, num_vars, name = r.name, prefix](
             const mock::LaunchInfo& li, hcq::Device& dev, mock::TwinMemory& mem) -> Status {
    size_t need = *prefix + 8 * static_cast<size_t>(num_bufs + num_vars);
    if (li.cbank0.size() < need)
      return invalid_argument("kernel '" + name + "': constant bank 0 of " +
                              std::to_string(li.cbank0.size()) + " bytes, " + std::to_string(need) +
                              " needed");
    std::vector<void*> bufs(static_cast<size_t>(num_bufs));
    std::vector<int64_t> vars(static_cast<size_t>(num_vars) + 1);
    for (int b = 0; b < num_bufs; b++) {
      uint64_t va;
      std::memcpy(&va, li.cbank0.data() + *prefix + 8 * b, 8);
      size_t n = std::max<size_t>(buf_bytes[b], 1);
      auto owner = dev.allocator().find(va);
      auto host = mem.resolve(va, n);
      if (!owner || va + n > owner->va + owner->size || !host)
        return mem.mmu_fault(
            va, false,
            "kernel '" + name + "' buffer " + std::to_string(b) + " (" + std::to_string(n) +
                " bytes) is outside every allocation" +
                (owner ? " (it starts inside one of " + std::to_string(owner->size) + " bytes at " +
                             hex(owner->va) + ")"
                       : ""));
      bufs[b] = *host;
    }
    if (num_vars) std::memcpy(vars.data(), li.cbank0.data() + *prefix + 8 * num_bufs, 8 * num_vars);
    fn(bufs.data(), vars.data(), 0, int64_t{li.grid.x} * li.block.x);
    return Status();
  };
}

std::unique_ptr<hcq::Program> mock_nv_program(const ProgramRequest& r) {
  auto prefix = std::make_shared<size_t>(0);
  auto prg = mock::mock_program(r.name, static_cast<int>(r.buf_bytes.size()), r.num_vars,
                                cpu_abi_twin(r, prefix));
  *prefix = prg->args_prefix();
  return prg;
}

// ---- the kernels as PTX ----------------------------------------------------------------------

// Registers and the item index %r4 (ctaid.x * ntid.x + tid.x) every kernel starts with.
constexpr const char* kPrologue = R"(
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<12>;
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %tid.x;
  mad.lo.s32 %r4, %r1, %r2, %r3;
)";

struct PtxKernel {
  KernelFn fn;
  bool first_item_only;  // the CPU ABI's grid-1 kernels: every other item returns at once
  const char* params;
  const char* body;
};

const PtxKernel kNvKernels[] = {
    {add_one, false, ".param .u64 a", R"(
  ld.param.u64 %rd1, [a];
  cvta.to.global.u64 %rd1, %rd1;
  mul.wide.s32 %rd2, %r4, 4;
  add.s64 %rd3, %rd1, %rd2;
  ld.global.u32 %r5, [%rd3];
  add.s32 %r5, %r5, 1;
  st.global.u32 [%rd3], %r5;
)"},
    {reverse_double, false, ".param .u64 dst, .param .u64 src, .param .u64 n", R"(
  ld.param.u64 %rd1, [dst];
  ld.param.u64 %rd2, [src];
  ld.param.u64 %rd3, [n];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  cvt.s64.s32 %rd4, %r4;
  sub.s64 %rd5, %rd3, %rd4;
  sub.s64 %rd5, %rd5, 1;
  shl.b64 %rd5, %rd5, 2;
  add.s64 %rd6, %rd2, %rd5;
  ld.global.u32 %r5, [%rd6];
  shl.b32 %r5, %r5, 1;
  shl.b64 %rd7, %rd4, 2;
  add.s64 %rd8, %rd1, %rd7;
  st.global.u32 [%rd8], %r5;
)"},
    {append_log, true, ".param .u64 log, .param .u64 v", R"(
  ld.param.u64 %rd1, [log];
  ld.param.u64 %rd2, [v];
  cvta.to.global.u64 %rd1, %rd1;
  ld.global.u64 %rd3, [%rd1];
  add.s64 %rd4, %rd3, 1;
  shl.b64 %rd5, %rd4, 3;
  add.s64 %rd6, %rd1, %rd5;
  st.global.u64 [%rd6], %rd2;
  st.global.u64 [%rd1], %rd4;
)"},
    {store_var, true, ".param .u64 out, .param .u64 v", R"(
  ld.param.u64 %rd1, [out];
  ld.param.u64 %rd2, [v];
  cvta.to.global.u64 %rd1, %rd1;
  st.global.u64 [%rd1], %rd2;
)"},
    {increment, true, ".param .u64 c", R"(
  ld.param.u64 %rd1, [c];
  cvta.to.global.u64 %rd1, %rd1;
  ld.global.u64 %rd2, [%rd1];
  add.s64 %rd2, %rd2, 1;
  st.global.u64 [%rd1], %rd2;
)"},
};

const PtxKernel* ptx_kernel(KernelFn fn) {
  for (const PtxKernel& k : kNvKernels)
    if (k.fn == fn) return &k;
  return nullptr;
}

// ptxas: $PTXAS, else $CUDA_PATH/bin, /usr/local/cuda/bin, /usr/bin; "" when none. The order of
// compiler::Ptxas::find(), which the CTS does not call: linking the compiler (and LLVM) into
// the conformance binary would triple the ThreadSanitizer build of `bare test`.
std::string ptxas_path() {
  std::vector<std::string> paths;
  if (!options().ptxas.empty()) {
    paths.push_back(options().ptxas);
  } else {
    if (!options().cuda_path.empty()) paths.push_back(options().cuda_path + "/bin/ptxas");
    paths.push_back("/usr/local/cuda/bin/ptxas");
    paths.push_back("/usr/bin/ptxas");
  }
  for (const std::string& p : paths)
    if (::access(p.c_str(), X_OK) == 0) return p;
  return "";
}

}  // namespace

std::string cts_ptx(KernelFn fn, int sm, const std::string& entry) {
  const PtxKernel* k = ptx_kernel(fn);
  CHECK(k) << "no PTX twin of CTS kernel '" << entry << "' (tests/cts/nv_backend.cc)";
  std::ostringstream s;
  // The PTX ISA that introduced the newest targets; 7.8 covers sm_75..sm_90.
  s << ".version "
    << (sm >= 120   ? "8.7"
        : sm >= 100 ? "8.6"
                    : "7.8")
    << "\n.target sm_" << sm << "\n.address_size 64\n\n.visible .entry " << entry << "("
    << k->params << ") {" << kPrologue
    << (k->first_item_only ? "  setp.ne.s32 %p1, %r4, 0;\n  @%p1 bra DONE;\n" : "") << k->body
    << (k->first_item_only ? "DONE:\n" : "") << "  ret;\n}\n";
  return s.str();
}

Result<std::vector<uint8_t>> cts_cubin(KernelFn fn, int sm, const std::string& entry) {
  // ptxas runs once per kernel, arch and name in a process.
  static std::mutex mu;
  static std::map<std::tuple<KernelFn, int, std::string>, std::vector<uint8_t>> done;
  std::lock_guard lock(mu);
  auto key = std::make_tuple(fn, sm, entry);
  if (auto it = done.find(key); it != done.end()) return it->second;
  std::string ptxas = ptxas_path();
  if (ptxas.empty()) return not_found("cts: no ptxas (set PTXAS or CUDA_PATH)");
  std::string ptx = cts_ptx(fn, sm, entry);
  char dir[] = "/tmp/baregrad-cts-XXXXXX";
  if (!::mkdtemp(dir)) return internal("cts: mkdtemp: " + std::string(std::strerror(errno)));
  std::string in = std::string(dir) + "/k.ptx", out = std::string(dir) + "/k.cubin",
              log = std::string(dir) + "/log";
  std::ofstream(in) << ptx;
  std::string cmd = "'" + ptxas + "' -arch=sm_" + std::to_string(sm) + " -o '" + out + "' '" + in +
                    "' >'" + log + "' 2>&1";
  int rc = std::system(cmd.c_str());
  std::ifstream cubin(out, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(cubin)), {});
  std::stringstream why;
  why << std::ifstream(log).rdbuf();
  for (const std::string& f : {in, out, log}) ::unlink(f.c_str());
  ::rmdir(dir);
  if (rc != 0 || bytes.empty())
    return internal("cts: ptxas failed (" + std::to_string(rc) + "): " + why.str() + "\n" + ptx);
  done[key] = bytes;
  return bytes;
}

namespace {

// The request's kernel as a cubin loaded on the request's device (an nv::Device) through
// load_program(); on MOCK+NV the CPU-ABI kernel is registered as the twin at its code.
std::unique_ptr<hcq::Program> cubin_program(const ProgramRequest& r, bool twin) {
  auto* dev = dynamic_cast<nv::Device*>(&r.dev);
  CHECK(dev) << "cts: " << r.dev.name() << " is not an NVIDIA device";
  int sm = std::stoi(dev->info().arch.substr(3));  // "sm_90"
  Result<std::vector<uint8_t>> cubin = cts_cubin(r.fn, sm, r.name);
  CHECK(cubin.ok()) << cubin.status();
  Binary b;
  b.format = BinaryFormat::kCubin;
  b.arch = dev->info().arch;
  b.entry = r.name;
  b.code.assign(cubin->begin(), cubin->end());
  b.num_bufs = static_cast<int>(r.buf_bytes.size());
  b.num_vars = r.num_vars;
  b.buf_bytes = r.buf_bytes;
  Result<std::unique_ptr<hcq::Program>> prg = dev->load_program(b);
  CHECK(prg.ok()) << prg.status();
  if (twin) {
    auto* loaded = dynamic_cast<nv::Program*>(prg->get());
    auto prefix = std::make_shared<size_t>(loaded->args_prefix());
    r.keep->push_back(mock::register_mock_kernel(loaded->code_va(), cpu_abi_twin(r, prefix)));
  }
  return std::move(*prg);
}

}  // namespace

// add_one as the cubin Binary of `d`; on MOCK+NV with its twin registered for the Binary.
Result<Binary> cubin_add_one_binary(hcq::Device& d,
                                    std::vector<std::shared_ptr<void>>* keep,
                                    bool twin) {
  auto* dev = dynamic_cast<nv::Device*>(&d);
  CHECK(dev) << "cts: " << d.name() << " is not an NVIDIA device";
  int sm = std::stoi(dev->info().arch.substr(3));  // "sm_90"
  ASSIGN_OR_RETURN(std::vector<uint8_t> cubin, cts_cubin(add_one, sm, "cts_add_one"));
  Binary b;
  b.format = BinaryFormat::kCubin;
  b.arch = dev->info().arch;
  b.entry = "cts_add_one";
  b.id = "cts:add_one:" + b.arch;
  b.code.assign(cubin.begin(), cubin.end());
  b.num_bufs = 1;
  b.buf_bytes = {16};
  b.grid = {4, 1, 1};
  if (twin) {
    ASSIGN_OR_RETURN(nv::CubinImage img, nv::load_cubin(cubin, b.entry));
    ProgramRequest r{d, b.entry, add_one, b.buf_bytes, 0, keep};
    auto prefix = std::make_shared<size_t>(img.param_offset);
    ASSIGN_OR_RETURN(std::shared_ptr<void> reg,
                     mock::register_mock_binary(*dev, b.id, cpu_abi_twin(r, prefix)));
    keep->push_back(std::move(reg));
  }
  return b;
}

std::vector<Backend> nv_backends() {
  std::vector<Backend> v;
  v.push_back({
      .name = "mock_nv",
      .open = []() -> Result<std::unique_ptr<hcq::Device>> {
        ASSIGN_OR_RETURN(auto d, mock::open_mock_nv());
        return std::unique_ptr<hcq::Device>(std::move(d));
      },
      .program = mock_nv_program,
      .add_one_binary = nullptr,
      .unsupported = {{"binaries",
                       "mock_nv programs are code-less twins (mock_nv_cubin loads cubins)"}},
  });
  std::string ptxas = ptxas_path();
  v.push_back({
      .name = "mock_nv_cubin",
      .open = []() -> Result<std::unique_ptr<hcq::Device>> {
        ASSIGN_OR_RETURN(auto d, mock::open_mock_nv());
        return std::unique_ptr<hcq::Device>(std::move(d));
      },
      .program = [](const ProgramRequest& r) { return cubin_program(r, true); },
      .add_one_binary =
          [](hcq::Device& d, std::vector<std::shared_ptr<void>>* keep) {
            return cubin_add_one_binary(d, keep, true);
          },
      .unsupported = {},
      .missing_tool =
          ptxas.empty() ? "ptxas (install the CUDA toolkit or set PTXAS or CUDA_PATH)" : "",
  });
  if (ptxas.empty()) return v;
  if (::access("/dev/nvidiactl", F_OK) == 0)
    v.push_back({
        .name = "nv",
        .open = []() -> Result<std::unique_ptr<hcq::Device>> {
          ASSIGN_OR_RETURN(auto d, nv::Device::create(hcq::unowned(hcq::linux_os()), 0));
          return std::unique_ptr<hcq::Device>(std::move(d));
        },
        .program = [](const ProgramRequest& r) { return cubin_program(r, false); },
        .add_one_binary =
            [](hcq::Device& d, std::vector<std::shared_ptr<void>>* keep) {
              return cubin_add_one_binary(d, keep, false);
            },
        .unsupported = {},
    });
  return v;
}

}  // namespace baregrad::cts
