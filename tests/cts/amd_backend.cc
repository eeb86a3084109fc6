// The conformance suite's AMD backends: mock_amd, mock_amd_aql, amd and amd_aql (see
// backends.h). On a GPU the CTS
// kernels must be device code: each CPU-ABI kernel has an AMDGPU twin here, written by hand as
// LLVM IR to the same contract (item i = workgroup.id.x * block.x + workitem.id.x over
// grid.x * block.x items, block.x = 1 as the CTS launches them; kernarg segment: one 8-byte
// address per buffer, then one 8-byte value per scalar, no hidden kernargs), compiled by clang
// for the device's gfx and linked by ld.lld into an HSA code object, which the device loads
// with load_program(). On MOCK+AMD the CPU-ABI kernel is registered as the code object's twin.
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <sstream>
#include <tuple>

#include "base/check.h"
#include "base/format.h"
#include "base/options.h"
#include "drivers/amd/code_object.h"
#include "drivers/amd/device.h"
#include "drivers/mock/amd_device/mock_amd.h"
#include "tests/cts/backends.h"

namespace baregrad::cts {
namespace {

// The fake GPU's twin of a CPU-ABI kernel: the dispatch's kernarg segment holds one 8-byte
// address per buffer then one 8-byte value per scalar. Each buffer must lie in one allocation of
// the device for `buf_bytes[i]` bytes (else a VM fault, as the GPU reports it); the kernel runs
// over grid.x * block.x items on the host addresses behind them.
mock::MockAmdKernel cpu_abi_twin(KernelFn fn,
                                 std::string name,
                                 std::vector<size_t> buf_bytes,
                                 int num_vars) {
  int num_bufs = static_cast<int>(buf_bytes.size());
  return [fn, buf_bytes = std::move(buf_bytes), num_bufs, num_vars, name = std::move(name)](
             const mock::AmdLaunch& l, hcq::Device& dev, mock::AmdTwinMemory& mem) -> Status {
    size_t need = 8 * static_cast<size_t>(num_bufs + num_vars);
    if (l.kernargs.size() < need)
      return invalid_argument("kernel '" + name + "': a kernarg segment of " +
                              std::to_string(l.kernargs.size()) + " bytes, " +
                              std::to_string(need) + " needed");
    std::vector<void*> bufs(static_cast<size_t>(num_bufs));
    std::vector<int64_t> vars(static_cast<size_t>(num_vars) + 1);
    for (int b = 0; b < num_bufs; b++) {
      uint64_t va;
      std::memcpy(&va, l.kernargs.data() + 8 * b, 8);
      size_t n = std::max<size_t>(buf_bytes[b], 1);
      auto owner = dev.allocator().find(va);
      auto host = mem.resolve(va, n);
      if (!owner || va + n > owner->va + owner->size || !host)
        return mem.vm_fault(
            va, false,
            "kernel '" + name + "' buffer " + std::to_string(b) + " at " + hex(va) + " (" +
                std::to_string(n) + " bytes) is outside every allocation" +
                (owner ? " (it starts inside one of " + std::to_string(owner->size) + " bytes at " +
                             hex(owner->va) + ")"
                       : ""));
      bufs[b] = *host;
    }
    if (num_vars) std::memcpy(vars.data(), l.kernargs.data() + 8 * num_bufs, 8 * num_vars);
    fn(bufs.data(), vars.data(), 0, int64_t{l.grid.x} * l.block.x);
    return Status();
  };
}

// ---- the kernels as LLVM IR ------------------------------------------------------------------

struct IrKernel {
  KernelFn fn;
  bool first_item_only;  // the CPU ABI's grid-1 kernels: every other item returns at once
  const char* params;
  const char* body;  // %i: the item (i64)
};

const IrKernel kAmdKernels[] = {
    {add_one, false, "ptr addrspace(1) %a", R"(
  %p = getelementptr inbounds i32, ptr addrspace(1) %a, i64 %i
  %v = load i32, ptr addrspace(1) %p, align 4
  %v1 = add i32 %v, 1
  store i32 %v1, ptr addrspace(1) %p, align 4
)"},
    {reverse_double, false, "ptr addrspace(1) %dst, ptr addrspace(1) %src, i64 %n", R"(
  %last = sub i64 %n, 1
  %j = sub i64 %last, %i
  %ps = getelementptr inbounds i32, ptr addrspace(1) %src, i64 %j
  %v = load i32, ptr addrspace(1) %ps, align 4
  %d = shl i32 %v, 1
  %pd = getelementptr inbounds i32, ptr addrspace(1) %dst, i64 %i
  store i32 %d, ptr addrspace(1) %pd, align 4
)"},
    {append_log, true, "ptr addrspace(1) %log, i64 %v", R"(
  %c = load i64, ptr addrspace(1) %log, align 8
  %c1 = add i64 %c, 1
  %pe = getelementptr inbounds i64, ptr addrspace(1) %log, i64 %c1
  store i64 %v, ptr addrspace(1) %pe, align 8
  store i64 %c1, ptr addrspace(1) %log, align 8
)"},
    {store_var, true, "ptr addrspace(1) %out, i64 %v", R"(
  store i64 %v, ptr addrspace(1) %out, align 8
)"},
    {increment, true, "ptr addrspace(1) %c", R"(
  %v = load i64, ptr addrspace(1) %c, align 8
  %v1 = add i64 %v, 1
  store i64 %v1, ptr addrspace(1) %c, align 8
)"},
};

const IrKernel* ir_kernel(KernelFn fn) {
  for (const IrKernel& k : kAmdKernels)
    if (k.fn == fn) return &k;
  return nullptr;
}

bool is_gfx9(const std::string& gfx) { return gfx.rfind("gfx9", 0) == 0; }

// The LLVM IR of a CTS kernel for `gfx` as kernel `entry`. The attributes are those
// compiler/render/llvm_ir.cc gives kAmdgpu kernels (no implicit kernargs or SGPRs beyond the
// kernarg pointer and work-group ids), the features compiler/target/amd_target.cc's.
std::string cts_amdgpu_ir(KernelFn fn, const std::string& gfx, const std::string& entry) {
  const IrKernel* k = ir_kernel(fn);
  CHECK(k) << "no AMDGPU twin of CTS kernel '" << entry << "' (tests/cts/amd_backend.cc)";
  std::ostringstream s;
  s << "target triple = \"amdgcn-amd-amdhsa\"\n\n"
    << "declare i32 @llvm.amdgcn.workgroup.id.x()\n"
    << "declare i32 @llvm.amdgcn.workitem.id.x()\n\n"
    << "define amdgpu_kernel void @\"" << entry << "\"(" << k->params << ") #0 {\nentry:\n"
    << "  %wg = call i32 @llvm.amdgcn.workgroup.id.x()\n"
    << "  %wi = call i32 @llvm.amdgcn.workitem.id.x()\n"
    << "  %wg64 = zext i32 %wg to i64\n"
    << "  %wi64 = zext i32 %wi to i64\n"
    << "  %i = add i64 %wg64, %wi64\n";  // block.x = 1
  if (k->first_item_only)
    s << "  %first = icmp eq i64 %i, 0\n  br i1 %first, label %run, label %done\nrun:\n";
  s << k->body;
  if (k->first_item_only) s << "  br label %done\ndone:\n";
  s << "  ret void\n}\n\n"
    << "attributes #0 = { nounwind \"amdgpu-flat-work-group-size\"=\"1,1\" "
       "\"amdgpu-no-implicitarg-ptr\" \"amdgpu-no-dispatch-ptr\" \"amdgpu-no-queue-ptr\" "
       "\"amdgpu-no-dispatch-id\" \"amdgpu-no-hostcall-ptr\" \"amdgpu-no-heap-ptr\" "
       "\"amdgpu-no-multigrid-sync-arg\" \"amdgpu-no-lds-kernel-id\" "
       "\"amdgpu-no-default-queue\" \"amdgpu-no-completion-action\" "
       "\"uniform-work-group-size\"=\"true\""
    << (is_gfx9(gfx) ? "" : " \"target-features\"=\"+wavefrontsize32,+cumode\"") << " }\n";
  return s.str();
}

// `name` as an executable: a path as it is, else the first match on PATH; "" when none.
std::string executable(const std::string& name) {
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    std::string p = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

// ld.lld in the order of compiler::LdLld::find() (LD_LLD, else LLVM 19's), and clang for the
// AMDGPU backend (LLVM 19's first); "" when none. The CTS runs them rather than the compiler
// library: linking it (and LLVM) into the conformance binary would triple the ThreadSanitizer
// build of `bare test` (as nv_backend.cc runs ptxas).
std::string ld_lld_path() {
  if (!options().ld_lld.empty()) return executable(options().ld_lld);
  for (const char* p : {"/usr/lib/llvm-19/bin/ld.lld", "ld.lld-19", "ld.lld"})
    if (std::string e = executable(p); !e.empty()) return e;
  return "";
}
std::string clang_path() {
  for (const char* p : {"/usr/lib/llvm-19/bin/clang", "clang-19", "clang"})
    if (std::string e = executable(p); !e.empty()) return e;
  return "";
}
// What mock_amd and amd need and this machine lacks ("" when nothing).
std::string missing_tools() {
  std::string missing;
  if (ld_lld_path().empty())
    missing = "ld.lld (install Debian's lld-19 or set LD_LLD; AMD code objects are linked by it)";
  if (clang_path().empty())
    missing += std::string(missing.empty() ? "" : " and ") +
               "clang (install Debian's clang-19; it compiles the AMDGPU kernels)";
  return missing;
}

// The HSA code object of a CTS kernel for `gfx` as kernel `entry`: clang (IR to a relocatable
// AMDGPU object), then ld.lld -shared. Once per kernel, gfx and name in a process.
Result<std::string> cts_code_object(KernelFn fn, const std::string& gfx, const std::string& entry) {
  static std::mutex mu;
  static std::map<std::tuple<KernelFn, std::string, std::string>, std::string> done;
  std::lock_guard lock(mu);
  auto key = std::make_tuple(fn, gfx, entry);
  if (auto it = done.find(key); it != done.end()) return it->second;
  std::string lld = ld_lld_path(), clang = clang_path();
  if (lld.empty() || clang.empty()) return not_found("cts: no " + missing_tools());
  std::string ir = cts_amdgpu_ir(fn, gfx, entry);
  char dir[] = "/tmp/baregrad-cts-XXXXXX";
  if (!::mkdtemp(dir)) return internal("cts: mkdtemp: " + std::string(std::strerror(errno)));
  std::string in = std::string(dir) + "/k.ll", obj = std::string(dir) + "/k.o",
              out = std::string(dir) + "/k.hsaco", log = std::string(dir) + "/log";
  std::ofstream(in) << ir;
  std::string cmd = "'" + clang + "' -x ir --target=amdgcn-amd-amdhsa -mcpu=" + gfx +
                    " -nogpulib -O2 -c -o '" + obj + "' '" + in + "' >'" + log + "' 2>&1 && '" +
                    lld + "' -shared -o '" + out + "' '" + obj + "' >>'" + log + "' 2>&1";
  int rc = std::system(cmd.c_str());
  std::ifstream hsaco(out, std::ios::binary);
  std::string code((std::istreambuf_iterator<char>(hsaco)), {});
  std::stringstream why;
  why << std::ifstream(log).rdbuf();
  for (const std::string& f : {in, obj, out, log}) ::unlink(f.c_str());
  ::rmdir(dir);
  if (rc != 0 || code.empty())
    return internal("cts: clang or ld.lld failed for " + entry + " on " + gfx + " (" +
                    std::to_string(rc) + "): " + why.str() + "\n" + ir);
  done[key] = code;
  return code;
}

// The request's kernel as the Binary of `dev`'s gfx, named `id`.
Result<Binary> code_object_binary(amd::Device& dev,
                                  KernelFn fn,
                                  const std::string& entry,
                                  const std::vector<size_t>& buf_bytes,
                                  int num_vars,
                                  const std::string& id) {
  std::string gfx(dev.arch().name);
  ASSIGN_OR_RETURN(std::string code, cts_code_object(fn, gfx, entry));
  Binary b;
  b.format = BinaryFormat::kAmdHsa;
  b.arch = gfx;
  b.entry = entry;
  b.id = id;
  b.code = std::move(code);
  b.num_bufs = static_cast<int>(buf_bytes.size());
  b.num_vars = num_vars;
  b.buf_bytes = buf_bytes;
  return b;
}

// On MOCK+AMD: registers `fn` as the twin of Binary `b` on `dev`, kept alive in *keep.
Status register_twin(amd::Device& dev,
                     const Binary& b,
                     KernelFn fn,
                     std::vector<std::shared_ptr<void>>* keep) {
  // Where the code takes its kernarg pointer: after the private segment buffer V# (gfx9).
  ASSIGN_OR_RETURN(amd::CodeObject co,
                   amd::load_code_object(
                       {reinterpret_cast<const uint8_t*>(b.code.data()), b.code.size()}, b.entry));
  uint32_t sgpr = co.descriptor.kernel_code_properties &
                          amd::KERNEL_CODE_PROPERTY_ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER
                      ? 4
                      : 0;
  ASSIGN_OR_RETURN(std::shared_ptr<void> reg,
                   mock::register_mock_amd_binary(
                       dev, b.id, cpu_abi_twin(fn, b.entry, b.buf_bytes, b.num_vars), sgpr));
  keep->push_back(std::move(reg));
  return Status();
}

amd::Device& amd_device(hcq::Device& d) {
  auto* dev = dynamic_cast<amd::Device*>(&d);
  CHECK(dev) << "cts: " << d.name() << " is not an AMD device";
  return *dev;
}

// The request's kernel as a code object loaded on the request's device (an amd::Device)
// through load_program(); on MOCK+AMD the CPU-ABI kernel is registered as its twin. Each program
// gets a Binary id of its own: the twin checks the request's buffer sizes.
std::unique_ptr<hcq::Program> code_object_program(const ProgramRequest& r, bool twin) {
  static std::atomic<uint64_t> programs{0};
  amd::Device& dev = amd_device(r.dev);
  std::string id = "cts:" + r.name + ":" + std::string(dev.arch().name) + ":" +
                   std::to_string(programs.fetch_add(1));
  Result<Binary> b = code_object_binary(dev, r.fn, r.name, r.buf_bytes, r.num_vars, id);
  CHECK(b.ok()) << b.status();
  if (twin) {
    Status s = register_twin(dev, *b, r.fn, r.keep);
    CHECK(s.ok()) << s;
  }
  Result<std::unique_ptr<hcq::Program>> prg = dev.load_program(*b);
  CHECK(prg.ok()) << prg.status();
  return std::move(*prg);
}

// add_one as the code-object Binary of `d`; on MOCK+AMD with its twin registered for the Binary.
Result<Binary> code_object_add_one_binary(hcq::Device& d,
                                          std::vector<std::shared_ptr<void>>* keep,
                                          bool twin) {
  amd::Device& dev = amd_device(d);
  ASSIGN_OR_RETURN(Binary b, code_object_binary(dev, add_one, "cts_add_one", {16}, 0,
                                                "cts:add_one:" + std::string(dev.arch().name)));
  b.grid = {4, 1, 1};
  if (twin) RETURN_IF_ERROR(register_twin(dev, b, add_one, keep));
  return b;
}

}  // namespace

std::vector<Backend> amd_backends() {
  std::vector<Backend> v;
  // What the AMD device refuses (with Unimplemented or InvalidArgument) that the suite asks of
  // backends with execution.
  std::map<std::string, std::string> unsupported = {
      {"peers",
       "each AMD device is a peer group of its own (no GPU page-table entries in another "
       "device's VA space yet): no map_into() and no waits on another device's signals"},
  };
  std::string missing = missing_tools();
  // mock_amd drives the PM4 compute queue of a fake gfx1100, mock_amd_aql the AQL one of a fake
  // gfx942 (wave64, CDNA's registers).
  for (auto [name, gfx, mode] :
       {std::tuple{"mock_amd", "gfx1100", amd::ComputeQueueMode::kPm4},
        std::tuple{"mock_amd_aql", "gfx942", amd::ComputeQueueMode::kAql}}) {
    v.push_back({
        .name = name,
        .open = [gfx, mode]() -> Result<std::unique_ptr<hcq::Device>> {
          amd::DeviceOptions o;
          o.compute = mode;
          ASSIGN_OR_RETURN(auto d, mock::open_mock_amd(gfx, o));
          return std::unique_ptr<hcq::Device>(std::move(d));
        },
        .program = [](const ProgramRequest& r) { return code_object_program(r, true); },
        .add_one_binary =
            [](hcq::Device& d, std::vector<std::shared_ptr<void>>* keep) {
              return code_object_add_one_binary(d, keep, true);
            },
        .unsupported = unsupported,
        .missing_tool = missing,
    });
  }
  // On a machine with an AMD GPU: amd (the compute queue its GPU gets by default) and amd_aql.
  if (missing.empty() && ::access("/dev/kfd", F_OK) == 0) {
    for (auto [name, mode] : {std::pair{"amd", amd::ComputeQueueMode::kAuto},
                              std::pair{"amd_aql", amd::ComputeQueueMode::kAql}}) {
      v.push_back({
          .name = name,
          .open = [mode]() -> Result<std::unique_ptr<hcq::Device>> {
            amd::DeviceOptions o;
            o.compute = mode;
            ASSIGN_OR_RETURN(auto d, amd::Device::create(hcq::unowned(hcq::linux_os()), 0, o));
            return std::unique_ptr<hcq::Device>(std::move(d));
          },
          .program = [](const ProgramRequest& r) { return code_object_program(r, false); },
          .add_one_binary =
              [](hcq::Device& d, std::vector<std::shared_ptr<void>>* keep) {
                return code_object_add_one_binary(d, keep, false);
              },
          .unsupported = unsupported,
      });
    }
  }
  return v;
}

}  // namespace baregrad::cts
