#include "compiler/target/nv_program.h"

#include "base/error.h"
#include "base/log.h"
#include "base/timer.h"
#include "compiler/cache.h"
#include "compiler/codegen/pipeline.h"
#include "compiler/render/llvm_ir.h"

namespace baregrad::compiler {
namespace {

// `compile(src)` through the KernelCache under `key_prefix` + src.
template <class F>
Result<std::string> cached(const std::string& key_prefix, const std::string& src, F&& compile) {
  auto& cache = KernelCache::global();
  std::string key = key_prefix + "\n" + src;
  if (auto hit = cache.get(key)) return std::move(*hit);
  ASSIGN_OR_RETURN(std::string out, compile(src));
  cache.put(key, out);
  return out;
}

}  // namespace

NvParamLayout nv_param_layout(const ProgramSpec& spec) {
  NvParamLayout l;
  uint32_t off = 0;
  for (int s = 0; s < gpu_buffer_slots(spec); s++, off += 8) l.buffer_offsets.push_back(off);
  for (size_t i = 0; i < spec.vars.size(); i++, off += 8) l.var_offsets.push_back(off);
  l.size = off;
  return l;
}

Result<NvCompiler> NvCompiler::create(int sm) {
  if (!NvptxCompiler::supported(sm))
    return invalid_argument("nv: sm_" + std::to_string(sm) +
                            " is not supported (75, 80, 86, 87, 89, 90, 100, 120 are)");
  ASSIGN_OR_RETURN(Ptxas ptxas, Ptxas::find());
  return NvCompiler(sm, std::move(ptxas));
}

NvCompiler::NvCompiler(int sm, Ptxas ptxas)
    : sm_(sm), target_(nv_target_info(sm)), ptxas_(std::move(ptxas)), nvptx_(sm) {}

Result<NvKernel> NvCompiler::compile(const UOpPtr& ast,
                                     const std::optional<std::vector<Opt>>& opts) const {
  ProgramSpec spec;
  try {
    spec = lower_kernel(ast, target_, opts);
  } catch (const Error& e) {
    return invalid_argument(e.what());
  }
  return compile(spec);
}

Result<NvKernel> NvCompiler::compile(const ProgramSpec& spec) const {
  ScopedTimer timer("nv compile " + spec.name);
  NvKernel k;
  k.spec = spec;
  k.sm = sm_;
  for (int d = 0; d < 3; d++) {
    if (spec.global_size[d] < 1 || spec.global_size[d] > int64_t{0x7fffffff} ||
        spec.local_size[d] < 1 || spec.local_size[d] > 1024)
      return invalid_argument("nv: " + spec.name + " has launch dims out of range in dim " +
                              std::to_string(d) + ": grid " + std::to_string(spec.global_size[d]) +
                              ", block " + std::to_string(spec.local_size[d]));
    k.grid[d] = static_cast<uint32_t>(spec.global_size[d]);
    k.block[d] = static_cast<uint32_t>(spec.local_size[d]);
  }
  k.params = nv_param_layout(spec);

  std::string ir = LlvmIrRenderer(LlvmAbi::kNvptx).render(spec);
  BG_LOG(5) << ir;
  ASSIGN_OR_RETURN(k.ptx, cached(nvptx_.cache_key(), ir, [&](const std::string& src) {
                     return nvptx_.ptx(src, spec.name);
                   }));
  BG_LOG(4) << k.ptx;
  ASSIGN_OR_RETURN(PtxasResult cubin, ptxas_.assemble(k.ptx, sm_, spec.name));
  k.cubin = std::move(cubin.cubin);
  k.ptxas_log = std::move(cubin.log);
  k.ptxas = cubin.report;
  k.cache_hit = cubin.cache_hit;

  k.twin_symbol = twin_symbol(spec.name);
  std::string twin_ir = LlvmIrRenderer(LlvmAbi::kHostTwin).render(spec);
  ASSIGN_OR_RETURN(k.twin_object, cached(host_.cache_key(), twin_ir, [&](const std::string& src) {
                     return host_.compile(src, k.twin_symbol);
                   }));
  BG_LOG(1) << "nv compiled " << spec.name << " for sm_" << sm_ << ": grid " << k.grid[0]
            << " x block " << k.block[0] << ", " << k.ptxas.registers << " registers"
            << (k.cache_hit ? " (cached cubin)" : "");
  return k;
}

}  // namespace baregrad::compiler
