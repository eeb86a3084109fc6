#include "drivers/mock/twin/host_twin.h"

#include "compiler/cache.h"
#include "compiler/render/llvm_ir.h"

namespace baregrad::mock {

Result<HostTwin> HostTwinCompiler::compile(const compiler::ProgramSpec& spec) {
  std::string symbol = compiler::twin_symbol(spec.name);
  std::string ir = compiler::LlvmIrRenderer(compiler::LlvmAbi::kHostTwin).render(spec);
  auto& cache = compiler::KernelCache::global();
  std::string key = host_.cache_key() + "\n" + ir;
  std::string object;
  if (auto hit = cache.get(key)) {
    object = std::move(*hit);
  } else {
    ASSIGN_OR_RETURN(object, host_.compile(ir, symbol));
    cache.put(key, object);
  }
  ASSIGN_OR_RETURN(cpu::LoadedKernel loaded, loader_.load(object, symbol));
  HostTwin t;
  t.fn = reinterpret_cast<void (*)()>(loaded.fn);
  t.smem_bytes = compiler::twin_is_per_thread(spec) ? compiler::twin_shared_bytes(spec) : -1;
  std::lock_guard lock(mu_);
  code_.push_back(std::move(loaded.code));
  return t;
}

}  // namespace baregrad::mock
