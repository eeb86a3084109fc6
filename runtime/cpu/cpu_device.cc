#include "runtime/cpu/cpu_device.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "base/options.h"
#include "base/timer.h"
#include "compiler/cache.h"
#include "compiler/codegen/pipeline.h"
#include "compiler/render/c_source.h"
#include "compiler/render/llvm_ir.h"
#include "compiler/target/clang_target.h"
#include "compiler/target/llvm_target.h"
#include "drivers/cpu/device.h"
#include "drivers/null/device.h"

namespace baregrad::runtime {

using compiler::Opt;
using compiler::UOpPtr;

namespace {
int default_threads(int requested) {
  if (requested > 0) return requested;
  if (options().threads > 0) return options().threads;
  return std::max(1u, std::thread::hardware_concurrency());
}
}  // namespace

CpuDevice::CpuDevice(CpuBackend backend, int threads, bool null) : backend_(backend), null_(null) {
  int n = default_threads(threads);
  if (null) {
    auto dev = drivers::null::Device::create();
    if (!dev.ok()) dev.status().throw_if_error("device");
    attach(std::move(*dev));
  } else {
    auto dev = drivers::cpu::Device::create(n);
    if (!dev.ok()) dev.status().throw_if_error("device");
    attach(std::move(*dev));
  }
  target_.name = backend == CpuBackend::kLlvm ? "cpu-llvm" : "cpu-clang";
  target_.threads = n;
  target_.vector_bytes = 64;
  if (backend == CpuBackend::kLlvm) {
    renderer_ = std::make_unique<compiler::LlvmIrRenderer>();
    compiler_ = std::make_unique<compiler::LlvmCompiler>();
  } else {
    renderer_ = std::make_unique<compiler::CRenderer>();
    compiler_ = std::make_unique<compiler::ClangCompiler>();
  }
}

CpuDevice::~CpuDevice() { shutdown(); }

std::string CpuDevice::name() const {
  if (null_) return "NULL";
  return backend_ == CpuBackend::kLlvm ? "CPU" : "CPU:C";
}

Status CpuDevice::copy_out(void* dst, Buffer src, size_t bytes) {
  if (!null_) return HcqRuntimeDevice::copy_out(dst, src, bytes);
  if (bytes > src.bytes)
    return invalid_argument("copy_out of " + std::to_string(bytes) + " bytes from a buffer of " +
                            std::to_string(src.bytes) + " on " + name());
  RETURN_IF_ERROR(hcq().synchronize());  // nothing was ever computed
  std::memset(dst, 0, bytes);
  return Status();
}

HcqRuntimeDevice::LaunchShape CpuDevice::shape(const Program& prg) const {
  auto items = static_cast<uint32_t>(std::max<int64_t>(prg.spec.thread_extent, 1));
  return {static_cast<const drivers::cpu::Program*>(prg.handle.get()), hcq::Dim3{items, 1, 1},
          hcq::Dim3{}};
}

Result<std::shared_ptr<Program>> CpuDevice::build(const UOpPtr& ast,
                                                  const std::optional<std::vector<Opt>>& opts) {
  double t0 = now_ms();
  auto prg = std::make_shared<Program>();
  try {
    prg->spec = compiler::lower_kernel(ast, target_, opts);
  } catch (const Error& e) {
    return invalid_argument(e.what());
  }
  prg->source = renderer_->render(prg->spec);
  // DEBUG=4 shows readable C whatever the backend; DEBUG=5 also the LLVM IR it compiles.
  BG_LOG(4) << (backend_ == CpuBackend::kClang ? prg->source
                                               : compiler::CRenderer().render(prg->spec));
  if (backend_ == CpuBackend::kLlvm) BG_LOG(5) << prg->source;
  auto& cache = compiler::KernelCache::global();
  std::string object;
  // The disk key is the rendered source: any change in lowering or rendering invalidates it.
  std::string disk_key = compiler_->cache_key() + "\n" + prg->source;
  if (auto hit = cache.get(disk_key)) {
    object = std::move(*hit);
    prg->cache_hit = true;
  } else {
    ASSIGN_OR_RETURN(object, compiler_->compile(prg->source, prg->spec.name));
    cache.put(disk_key, object);
  }
  ASSIGN_OR_RETURN(KernelFn fn, loader_.load(object, prg->spec.name));
  prg->entry = reinterpret_cast<void*>(fn);
  std::vector<size_t> buf_bytes(prg->spec.bufs.size(), 0);
  for (const auto& b : prg->spec.bufs)
    buf_bytes.at(b.slot) = static_cast<size_t>(b.size) * b.dtype.itemsize();
  prg->handle = std::make_shared<drivers::cpu::Program>(prg->spec.name, fn, std::move(buf_bytes),
                                                        static_cast<int>(prg->spec.vars.size()));
  prg->compile_ms = now_ms() - t0;
  BG_LOG(1) << "compiled " << prg->spec.name << " in " << prg->compile_ms << " ms"
            << (prg->cache_hit ? " (cached binary)" : "");
  return prg;
}

}  // namespace baregrad::runtime
