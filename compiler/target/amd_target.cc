#include "compiler/target/amd_target.h"

#include <algorithm>

#include "base/check.h"
#include "compiler/render/llvm_ir.h"

namespace baregrad::compiler {
namespace {

constexpr const char* kTriple = "amdgcn-amd-amdhsa";

bool is_gfx9(const std::string& gfx) { return gfx.starts_with("gfx9"); }

// Wave32 on RDNA, in CU mode (a work-group's waves on one CU, as tinygrad compiles them); gfx9
// has neither feature.
std::string features(const std::string& gfx) {
  return is_gfx9(gfx) ? "" : "+wavefrontsize32,+cumode";
}

}  // namespace

const std::vector<std::string>& amd_gfx_targets() {
  static const std::vector<std::string> targets = {"gfx90a", "gfx942", "gfx1100", "gfx1201"};
  return targets;
}

int amd_wave_size(const std::string& gfx) { return is_gfx9(gfx) ? 64 : 32; }

TargetInfo amd_target_info(const std::string& gfx) {
  const auto& all = amd_gfx_targets();
  CHECK(std::find(all.begin(), all.end(), gfx) != all.end()) << "amd: unknown target " << gfx;
  TargetInfo t;
  t.name = "amd-" + gfx;
  t.vector_bytes = 16;
  t.threads = 1;
  t.registers = 255;
  t.native_transcendentals = false;
  t.gpu = true;
  t.has_local = true;  // LDS and s_barrier
  t.max_block = 128;
  // KFD allocations are page aligned and the tensor layer shifts bases by multiples of 64
  // bytes: 16 admits global_load_dwordx4 / global_store_dwordx4.
  t.buffer_align = 16;
  t.warp_size = amd_wave_size(gfx);  // ds_bpermute_b32 across the wave
  return t;
}

Result<std::unique_ptr<AmdTarget>> AmdTarget::create(const std::string& gfx) {
  const auto& all = amd_gfx_targets();
  if (std::find(all.begin(), all.end(), gfx) == all.end())
    return invalid_argument("amd: " + gfx +
                            " is not a supported target (gfx90a, gfx942, gfx1100, gfx1201 are)");
  ASSIGN_OR_RETURN(LdLld lld, LdLld::find());
  return std::unique_ptr<AmdTarget>(new AmdTarget(gfx, std::move(lld)));
}

AmdTarget::AmdTarget(std::string gfx, LdLld lld)
    : Target(amd_target_info(gfx)),
      gfx_(gfx),
      lld_(std::move(lld)),
      llvm_(kTriple, gfx, features(gfx)) {}

AmdTarget::~AmdTarget() = default;

std::string AmdTarget::cache_key() const { return llvm_.cache_key() + "+" + lld_.cache_key(); }

std::string AmdTarget::render(const ProgramSpec& spec) const {
  return LlvmIrRenderer(LlvmAbi::kAmdgpu).render(spec);
}

Result<std::string> AmdTarget::listing(const CompiledKernel& k) const {
  return llvm_.assembly(k.source, k.spec.name);
}

Status AmdTarget::layout(const ProgramSpec& spec, Binary* b) const {
  b->format = BinaryFormat::kAmdHsa;
  b->arch = gfx_;
  b->num_bufs = gpu_buffer_slots(spec);
  int64_t threads = 1;
  for (int d = 0; d < 3; d++) {
    int64_t grid = spec.global_size[d], block = spec.local_size[d];
    threads *= block;
    if (grid < 1 || block < 1 || block > 1024 || grid * block > int64_t{0xffffffff})
      return invalid_argument("amd: " + spec.name + " has launch dims out of range in dim " +
                              std::to_string(d) + ": grid " + std::to_string(grid) + ", block " +
                              std::to_string(block));
    b->grid[d] = static_cast<uint32_t>(grid);
    b->block[d] = static_cast<uint32_t>(block);
  }
  if (threads > 1024)
    return invalid_argument("amd: " + spec.name + " has " + std::to_string(threads) +
                            " threads per work-group (at most 1024)");
  return Status();
}

Result<std::string> AmdTarget::assemble(const std::string& source, const ProgramSpec& spec) const {
  ASSIGN_OR_RETURN(std::string object, llvm_.compile(source, spec.name));
  return lld_.link(object, spec.name);
}

}  // namespace baregrad::compiler
