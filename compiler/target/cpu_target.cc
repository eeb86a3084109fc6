#include "compiler/target/cpu_target.h"

#include <algorithm>
#include <cstdint>

#include "compiler/render/c_source.h"
#include "compiler/render/llvm_ir.h"
#include "compiler/target/clang_target.h"
#include "compiler/target/llvm_target.h"

namespace baregrad::compiler {
namespace {

TargetInfo cpu_info(CpuCompiler compiler, int threads) {
  TargetInfo t;
  t.name = compiler == CpuCompiler::kLlvm ? "cpu-llvm" : "cpu-clang";
  t.threads = threads;
  t.vector_bytes = 64;
  return t;
}

}  // namespace

CpuTarget::CpuTarget(CpuCompiler compiler, int threads)
    : Target(cpu_info(compiler, threads)), kind_(compiler) {
  if (compiler == CpuCompiler::kLlvm) {
    renderer_ = std::make_unique<LlvmIrRenderer>();
    compiler_ = std::make_unique<LlvmCompiler>();
  } else {
    renderer_ = std::make_unique<CRenderer>();
    compiler_ = std::make_unique<ClangCompiler>();
  }
}

CpuTarget::~CpuTarget() = default;

std::string CpuTarget::cache_key() const { return compiler_->cache_key(); }

Result<std::string> CpuTarget::listing(const CompiledKernel& k) const {
  if (kind_ == CpuCompiler::kClang) return k.source;
  return CRenderer().render(k.spec);
}

Status CpuTarget::layout(const ProgramSpec& spec, Binary* b) const {
  if (spec.thread_extent > int64_t{UINT32_MAX})
    return invalid_argument("compile " + spec.name + " for " + info().name + ": " +
                            std::to_string(spec.thread_extent) +
                            " items in the threaded loop (at most 2^32 - 1)");
  b->format = BinaryFormat::kHostElf;
  b->arch = host_arch();
  b->grid = {static_cast<uint32_t>(std::max<int64_t>(spec.thread_extent, 1)), 1, 1};
  return Status();
}

std::string CpuTarget::render(const ProgramSpec& spec) const { return renderer_->render(spec); }

Result<std::string> CpuTarget::assemble(const std::string& source, const ProgramSpec& spec) const {
  return compiler_->compile(source, spec.name);
}

}  // namespace baregrad::compiler
