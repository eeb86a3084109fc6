#include "runtime/cpu/object_loader.h"

#include "base/log.h"
#include "compiler/target/llvm_target.h"
#include "llvm/ExecutionEngine/Orc/Core.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

namespace baregrad::runtime {
namespace {

// Resolves undefined symbols of loaded objects (libm's expf, sinf, ...) against the process.
llvm::Expected<llvm::orc::JITDylibSP> setup_process_symbols(llvm::orc::LLJIT& jit) {
  auto& jd = jit.getExecutionSession().createBareJITDylib("<process>");
  auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      jit.getDataLayout().getGlobalPrefix());
  if (!gen) return gen.takeError();
  jd.addGenerator(std::move(*gen));
  return llvm::orc::JITDylibSP(&jd);
}

bool is_elf(const std::string& bytes) {
  return bytes.size() >= 4 && bytes.compare(0, 4,
                                            "\x7f"
                                            "ELF") == 0;
}

}  // namespace

struct ObjectLoader::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  Status init_error;
};

ObjectLoader::ObjectLoader() : impl_(std::make_unique<Impl>()) {
  compiler::init_llvm_native_target();
  auto jit = llvm::orc::LLJITBuilder()
                 .setProcessSymbolsJITDylibSetup(setup_process_symbols)
                 .setLinkProcessSymbolsByDefault(true)
                 .create();
  if (!jit) {
    impl_->init_error = internal("ORC LLJIT creation failed: " + llvm::toString(jit.takeError()));
    return;
  }
  impl_->jit = std::move(*jit);
  impl_->jit->getExecutionSession().setErrorReporter(
      [](llvm::Error err) { BG_LOG(1) << "ORC: " << llvm::toString(std::move(err)); });
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

}  // namespace baregrad::runtime
