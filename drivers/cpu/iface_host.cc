#include "drivers/cpu/iface_host.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "base/log.h"
#include "llvm/ExecutionEngine/Orc/Core.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"

namespace baregrad::cpu {
namespace {

constexpr size_t kHugePage = 2 << 20;

// float -> bfloat16, rounding to nearest even; NaNs stay quiet NaNs. NOTE: _Float16 is returned
// in the register __bf16 is (xmm0 on x86-64); GCC 12 has no arithmetic __bf16 type.
_Float16 bf16_from_bits(uint16_t h) {
  _Float16 r;
  std::memcpy(&r, &h, 2);
  return r;
}
extern "C" _Float16 baregrad_truncsfbf2(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = x != x ? u | 0x400000u : u + 0x7fffu + ((u >> 16) & 1u);
  return bf16_from_bits(static_cast<uint16_t>(u >> 16));
}
// double -> bfloat16 with one rounding: double -> float rounding to odd (truncate, then set the
// last bit when inexact), then float -> bfloat16 to nearest even, exact since float keeps
// more than two bits beyond bfloat16's.
extern "C" _Float16 baregrad_truncdfbf2(double d) {
  float f = static_cast<float>(d);
  if (d == d && static_cast<double>(f) != d) {
    if (std::abs(static_cast<double>(f)) > std::abs(d)) f = std::nextafter(f, 0.0f);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    u |= 1u;
    std::memcpy(&f, &u, 4);
  }
  return baregrad_truncsfbf2(f);
}

// bfloat16 -> float, exact. The argument arrives in xmm0, as _Float16's does.
extern "C" float baregrad_extendbfsf2(_Float16 x) {
  uint16_t h;
  std::memcpy(&h, &x, 2);
  uint32_t u = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The half conversions of the compiler runtime, rounding to nearest even; GCC calls libgcc's
// (__truncdfhf2, ...) for these casts, which Python's RTLD_LOCAL extension load hides from the
// JIT's process lookup. The __gnu_* forms pass the half as its bits in an integer register.
extern "C" _Float16 baregrad_truncdfhf2(double d) { return static_cast<_Float16>(d); }
extern "C" _Float16 baregrad_truncsfhf2(float f) { return static_cast<_Float16>(f); }
extern "C" float baregrad_extendhfsf2(_Float16 h) { return static_cast<float>(h); }
extern "C" double baregrad_extendhfdf2(_Float16 h) { return static_cast<double>(h); }
extern "C" uint16_t baregrad_gnu_f2h_ieee(float f) {
  _Float16 h = static_cast<_Float16>(f);
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}
extern "C" float baregrad_gnu_h2f_ieee(uint16_t u) {
  _Float16 h;
  std::memcpy(&h, &u, 2);
  return static_cast<float>(h);
}

// Resolves undefined symbols of loaded objects against the process (libm's expf, sinf, ...)
// and the compiler runtime's half and bfloat16 conversions (Debian 12's libgcc lacks the
// bfloat16 ones; the half ones are not visible to the process lookup).
llvm::Expected<llvm::orc::JITDylibSP> setup_process_symbols(llvm::orc::LLJIT& jit) {
  auto& es = jit.getExecutionSession();
  auto& jd = es.createBareJITDylib("<process>");
  auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      jit.getDataLayout().getGlobalPrefix());
  if (!gen) return gen.takeError();
  jd.addGenerator(std::move(*gen));
  auto flags = llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable;
  llvm::orc::SymbolMap builtins;
  auto add = [&](const char* name, auto* fn) {
    builtins[es.intern(name)] = {llvm::orc::ExecutorAddr::fromPtr(fn), flags};
  };
  add("__truncsfbf2", &baregrad_truncsfbf2);
  add("__truncdfbf2", &baregrad_truncdfbf2);
  add("__extendbfsf2", &baregrad_extendbfsf2);
  add("__truncdfhf2", &baregrad_truncdfhf2);
  add("__truncsfhf2", &baregrad_truncsfhf2);
  add("__extendhfsf2", &baregrad_extendhfsf2);
  add("__extendhfdf2", &baregrad_extendhfdf2);
  add("__gnu_f2h_ieee", &baregrad_gnu_f2h_ieee);
  add("__gnu_h2f_ieee", &baregrad_gnu_h2f_ieee);
  if (llvm::Error err = jd.define(llvm::orc::absoluteSymbols(std::move(builtins)))) return err;
  return llvm::orc::JITDylibSP(&jd);
}

bool is_elf(const std::string& bytes) {
  return bytes.size() >= 4 && bytes.compare(0, 4,
                                            "\x7f"
                                            "ELF") == 0;
}

}  // namespace

Result<hcq::Buffer> host_alloc(size_t bytes) {
  size_t align = bytes >= kHugePage ? kHugePage : 64;
  size_t rounded = (bytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded);
  if (!p) {
    long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    std::string avail =
        pages > 0 && page > 0
            ? std::to_string(static_cast<uint64_t>(pages) * static_cast<uint64_t>(page))
            : std::string("unknown");
    return resource_exhausted("aligned_alloc of " + std::to_string(bytes) + " bytes (" + avail +
                              " bytes of host memory available)");
  }
  if (align == kHugePage) madvise(p, rounded, MADV_HUGEPAGE);
  return hcq::Buffer{reinterpret_cast<uint64_t>(p), bytes, p, 0, {}};
}

void host_free(const hcq::Buffer& b) { std::free(b.cpu); }

struct ObjectLoader::Impl {
  std::mutex mu;  // serializes links and unlinks
  std::unique_ptr<llvm::orc::LLJIT> jit;
  Status init_error;
  int64_t next_id = 0;
};

// One linked object: its JITDylib, removed (code unmapped) on destruction.
struct ObjectLoader::Linked {
  std::shared_ptr<Impl> impl;
  llvm::orc::JITDylib* jd;
  ~Linked() {
    std::lock_guard lock(impl->mu);
    llvm::Error err = impl->jit->getExecutionSession().removeJITDylib(*jd);
    if (err) BG_LOG(1) << "ORC: unload: " << llvm::toString(std::move(err));
  }
};

ObjectLoader::ObjectLoader() : impl_(std::make_shared<Impl>()) {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
  auto jit = llvm::orc::LLJITBuilder()
                 .setProcessSymbolsJITDylibSetup(setup_process_symbols)
                 .setLinkProcessSymbolsByDefault(true)
                 .create();
  if (!jit) {
    impl_->init_error = internal("ORC LLJIT creation failed: " + llvm::toString(jit.takeError()));
    return;
  }
  impl_->jit = std::move(*jit);
// WORKAROUND(gcc 12): at -O1 under -fsanitize=thread, gcc warns that the storage of the
// llvm::unique_function built here "may be used uninitialized" in its inlined destructor (in
// LLVM's FunctionExtras.h), a false positive that -Werror would make fatal.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
  impl_->jit->getExecutionSession().setErrorReporter(
      [](llvm::Error err) { BG_LOG(1) << "ORC: " << llvm::toString(std::move(err)); });
#pragma GCC diagnostic pop
}

ObjectLoader::~ObjectLoader() = default;

Result<LoadedKernel> ObjectLoader::load(const std::string& object_bytes,
                                        const std::string& symbol) {
  std::lock_guard lock(impl_->mu);
  RETURN_IF_ERROR(impl_->init_error);
  if (!is_elf(object_bytes))
    return invalid_argument("load " + symbol + ": the object is not an ELF file (" +
                            std::to_string(object_bytes.size()) + " bytes)");
  llvm::orc::LLJIT& jit = *impl_->jit;
  auto jd = jit.createJITDylib("kernel" + std::to_string(impl_->next_id++) + "." + symbol);
  if (!jd) return internal("load " + symbol + ": " + llvm::toString(jd.takeError()));
  auto drop = [&](llvm::Error err, bool not_found_code) -> Status {
    std::string msg = "load " + symbol + ": " + llvm::toString(std::move(err));
    llvm::consumeError(jit.getExecutionSession().removeJITDylib(*jd));
    return not_found_code ? not_found(msg) : invalid_argument(msg);
  };
  auto buf = llvm::MemoryBuffer::getMemBufferCopy(object_bytes, symbol + ".o");
  if (llvm::Error err = jit.addObjectFile(*jd, std::move(buf))) return drop(std::move(err), false);
  auto addr = jit.lookup(*jd, symbol);
  if (!addr) return drop(addr.takeError(), true);
  return LoadedKernel{addr->toPtr<KernelFn>(), std::make_shared<const Linked>(impl_, &*jd)};
}

}  // namespace baregrad::cpu
