#include "runtime/cpu/cpu_device.h"

#include <sys/mman.h>

#include <cstdlib>
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

namespace baregrad::runtime {

using compiler::Opt;
using compiler::UOpPtr;

namespace {
int default_threads(int requested) {
  if (requested > 0) return requested;
  if (options().threads > 0) return options().threads;
  return std::max(1u, std::thread::hardware_concurrency());
}

std::string opts_key(const std::optional<std::vector<Opt>>& opts) {
  if (!opts) return "heuristic";
  std::string s;
  for (auto& o : *opts) s += o.str();
  return s;
}
}  // namespace

CpuDevice::CpuDevice(CpuBackend backend, int threads)
    : backend_(backend), pool_(default_threads(threads)) {
  target_.name = backend == CpuBackend::kLlvm ? "cpu-llvm" : "cpu-clang";
  target_.threads = pool_.threads();
  target_.vector_bytes = 64;
  if (backend == CpuBackend::kLlvm) {
    renderer_ = std::make_unique<compiler::LlvmIrRenderer>();
    compiler_ = std::make_unique<compiler::LlvmCompiler>();
  } else {
    renderer_ = std::make_unique<compiler::CRenderer>();
    compiler_ = std::make_unique<compiler::ClangCompiler>();
  }
}

CpuDevice::~CpuDevice() = default;

std::string CpuDevice::name() const { return backend_ == CpuBackend::kLlvm ? "CPU" : "CPU:C"; }

Result<Buffer> CpuDevice::alloc(size_t bytes) {
  // Large buffers sit on 2 MiB boundaries and ask for transparent huge pages: kernels stream
  // them and strided tiles (matmul panels) touch many pages, so TLB misses cost bandwidth.
  constexpr size_t kHugePage = size_t{2} << 20;
  size_t align = bytes >= kHugePage ? kHugePage : 64;
  size_t rounded = (std::max<size_t>(bytes, 1) + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded);
  if (!p) return resource_exhausted("CPU alloc of " + std::to_string(bytes) + " bytes failed");
  if (align == kHugePage) madvise(p, rounded, MADV_HUGEPAGE);  // best effort
  return Buffer{p, bytes};
}

void CpuDevice::free(Buffer b) { std::free(b.ptr); }

Status CpuDevice::copy_in(Buffer dst, const void* src, size_t bytes) {
  if (bytes > dst.bytes)
    return invalid_argument("copy_in of " + std::to_string(bytes) + " bytes into a buffer of " +
                            std::to_string(dst.bytes));
  if (bytes > 0) std::memcpy(dst.ptr, src, bytes);
  return Status();
}

Status CpuDevice::copy_out(void* dst, Buffer src, size_t bytes) {
  if (bytes > src.bytes)
    return invalid_argument("copy_out of " + std::to_string(bytes) + " bytes from a buffer of " +
                            std::to_string(src.bytes));
  if (bytes > 0) std::memcpy(dst, src.ptr, bytes);
  return Status();
}

Result<std::shared_ptr<Program>> CpuDevice::compile(const UOpPtr& ast,
                                                    const std::optional<std::vector<Opt>>& opts) {
  // UOps are interned, so the AST's address identifies it while the entry keeps it alive.
  auto key = std::make_pair(ast.get(), opts_key(opts));
  {
    std::lock_guard lock(mu_);
    if (auto it = programs_.find(key); it != programs_.end()) return it->second.second;
  }
  ASSIGN_OR_RETURN(std::shared_ptr<Program> prg, build(ast, opts));
  std::lock_guard lock(mu_);
  programs_.emplace(key, std::make_pair(ast, prg));
  return prg;
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
  prg->compile_ms = now_ms() - t0;
  BG_LOG(1) << "compiled " << prg->spec.name << " in " << prg->compile_ms << " ms"
            << (prg->cache_hit ? " (cached binary)" : "");
  return prg;
}

Status CpuDevice::launch(const Program& prg,
                         std::span<const Buffer> bufs,
                         std::span<const int64_t> vars) {
  const auto& spec = prg.spec;
  if (bufs.size() != spec.bufs.size())
    return invalid_argument("launch " + spec.name + ": expected " +
                            std::to_string(spec.bufs.size()) + " buffers, got " +
                            std::to_string(bufs.size()));
  for (const auto& b : spec.bufs) {
    size_t need = static_cast<size_t>(b.size) * b.dtype.itemsize();
    if (bufs[b.slot].bytes < need || !bufs[b.slot].ptr)
      return invalid_argument("launch " + spec.name + ": buffer " + std::to_string(b.slot) + " (" +
                              b.dtype.name() + ") needs " + std::to_string(need) + " bytes, got " +
                              std::to_string(bufs[b.slot].bytes));
  }
  if (vars.size() != spec.vars.size())
    return invalid_argument("launch " + spec.name + ": expected " +
                            std::to_string(spec.vars.size()) + " vars, got " +
                            std::to_string(vars.size()));
  std::vector<void*> ptrs;
  for (auto& b : bufs) ptrs.push_back(b.ptr);
  auto fn = reinterpret_cast<KernelFn>(prg.entry);
  double t0 = options().debug >= 1 ? now_ms() : 0;
  pool_.parallel_for(spec.thread_extent,
                     [&](int64_t lo, int64_t hi) { fn(ptrs.data(), vars.data(), lo, hi); });
  BG_LOG(1) << "launch " << spec.name << ": " << now_ms() - t0 << " ms";
  return Status();
}

}  // namespace baregrad::runtime
