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

// Resolves undefined symbols of loaded objects against the process (libm's expf, sinf, ...)
// and the compiler runtime's bfloat16 conversions, which Debian 12's libgcc lacks.
llvm::Expected<llvm::orc::JITDylibSP> setup_process_symbols(llvm::orc::LLJIT& jit) {
  auto& es = jit.getExecutionSession();
  auto& jd = es.createBareJITDylib("<process>");
  auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      jit.getDataLayout().getGlobalPrefix());
  if (!gen) return gen.takeError();
  jd.addGenerator(std::move(*gen));
  auto flags = llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable;
  llvm::orc::SymbolMap builtins;
  builtins[es.intern("__truncsfbf2")] = {llvm::orc::ExecutorAddr::fromPtr(&baregrad_truncsfbf2),
                                         flags};
  builtins[es.intern("__truncdfbf2")] = {llvm::orc::ExecutorAddr::fromPtr(&baregrad_truncdfbf2),
                                         flags};
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
  std::unique_ptr<llvm::orc::LLJIT> jit;
  Status init_error;
};

ObjectLoader::ObjectLoader() : impl_(std::make_unique<Impl>()) {
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

Result<KernelFn> ObjectLoader::load(const std::string& object_bytes, const std::string& symbol) {
  std::lock_guard lock(mu_);
  RETURN_IF_ERROR(impl_->init_error);
  if (!is_elf(object_bytes))
    return invalid_argument("load " + symbol + ": the object is not an ELF file (" +
                            std::to_string(object_bytes.size()) + " bytes)");
  llvm::orc::LLJIT& jit = *impl_->jit;
  auto jd = jit.createJITDylib("kernel" + std::to_string(next_id_++) + "." + symbol);
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
  return addr->toPtr<KernelFn>();
}

}  // namespace baregrad::cpu
