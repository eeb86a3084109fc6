#include "compiler/target/nv_target.h"

#include "compiler/render/llvm_ir.h"

namespace baregrad::compiler {

Result<std::unique_ptr<NvTarget>> NvTarget::create(int sm) {
  if (!NvptxCompiler::supported(sm))
    return invalid_argument("nv: sm_" + std::to_string(sm) +
                            " is not supported (75, 80, 86, 87, 89, 90, 100, 120 are)");
  ASSIGN_OR_RETURN(Ptxas ptxas, Ptxas::find());
  return std::unique_ptr<NvTarget>(new NvTarget(sm, std::move(ptxas)));
}

NvTarget::NvTarget(int sm, Ptxas ptxas)
    : Target(nv_target_info(sm)), sm_(sm), ptxas_(std::move(ptxas)), nvptx_(sm) {}

NvTarget::~NvTarget() = default;

std::string NvTarget::cache_key() const { return nvptx_.cache_key() + "+" + ptxas_.cache_key(sm_); }

Result<std::string> NvTarget::listing(const CompiledKernel& k) const {
  return nvptx_.ptx(k.source, k.spec.name);
}

Status NvTarget::layout(const ProgramSpec& spec, Binary* b) const {
  b->format = BinaryFormat::kCubin;
  b->arch = "sm_" + std::to_string(sm_);
  b->num_bufs = gpu_buffer_slots(spec);
  for (int d = 0; d < 3; d++) {
    if (spec.global_size[d] < 1 || spec.global_size[d] > int64_t{0x7fffffff} ||
        spec.local_size[d] < 1 || spec.local_size[d] > 1024)
      return invalid_argument("nv: " + spec.name + " has launch dims out of range in dim " +
                              std::to_string(d) + ": grid " + std::to_string(spec.global_size[d]) +
                              ", block " + std::to_string(spec.local_size[d]));
    b->grid[d] = static_cast<uint32_t>(spec.global_size[d]);
    b->block[d] = static_cast<uint32_t>(spec.local_size[d]);
  }
  return Status();
}

std::string NvTarget::render(const ProgramSpec& spec) const {
  return LlvmIrRenderer(LlvmAbi::kNvptx).render(spec);
}

Result<std::string> NvTarget::assemble(const std::string& source, const ProgramSpec& spec) const {
  ASSIGN_OR_RETURN(std::string ptx, nvptx_.ptx(source, spec.name));
  ASSIGN_OR_RETURN(PtxasResult cubin, ptxas_.run(ptx, sm_, spec.name));
  return std::move(cubin.cubin);
}

}  // namespace baregrad::compiler
