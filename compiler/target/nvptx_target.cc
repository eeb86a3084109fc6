#include "compiler/target/nvptx_target.h"

#include <algorithm>

#include "base/check.h"
#include "base/timer.h"
#include "llvm/Config/llvm-config.h"

namespace baregrad::compiler {
namespace {

constexpr const char* kTriple = "nvptx64-nvidia-cuda";
// The PTX ISA LLVM emits: 7.8 covers sm_75..sm_90 and is accepted by ptxas since CUDA 11.8.
constexpr const char* kPtxFeature = "+ptx78";
constexpr const char* kPtxVersion = "7.8";
constexpr int kLlvmMaxSm = 90;  // the newest target LLVM 19's NVPTX backend knows

// The PTX ISA that introduced sm_<sm>, for targets LLVM 19 does not know.
const char* ptx_version_for(int sm) {
  if (sm >= 120) return "8.7";
  if (sm >= 100) return "8.6";
  return kPtxVersion;
}

}  // namespace

TargetInfo nv_target_info(int sm) {
  TargetInfo t;
  t.name = "nv-sm_" + std::to_string(sm);
  t.vector_bytes = 16;
  t.threads = 1;
  t.registers = 255;
  t.native_transcendentals = false;
  t.gpu = true;
  t.has_local = true;  // .shared memory and bar.sync
  t.max_block = 128;
  // Allocations are 64-byte aligned (Device::alloc) and the tensor layer shifts bases by
  // multiples of 64 bytes: 16 admits ld.global.v4 / st.global.v4 of 32-bit elements.
  t.buffer_align = 16;
  t.warp_size = 32;  // shfl.sync.bfly
  return t;
}

bool NvptxCompiler::supported(int sm) {
  static constexpr int kSupported[] = {75, 80, 86, 87, 89, 90, 100, 120};
  return std::find(std::begin(kSupported), std::end(kSupported), sm) != std::end(kSupported);
}

NvptxCompiler::NvptxCompiler(int sm)
    : sm_(sm), llvm_(kTriple, "sm_" + std::to_string(std::min(sm, kLlvmMaxSm)), kPtxFeature) {
  CHECK(supported(sm)) << "nvptx: sm_" << sm << " is not supported";
}

std::string NvptxCompiler::cache_key() const {
  std::string key = "llvm" + std::to_string(LLVM_VERSION_MAJOR) + "-nvptx64-" + llvm_.cpu() + "-" +
                    std::string(kPtxFeature + 1);
  if (sm_ > kLlvmMaxSm)
    key += "-as-sm_" + std::to_string(sm_) + "-ptx" + std::string(ptx_version_for(sm_));
  return key;
}

Result<std::string> NvptxCompiler::ptx(const std::string& ir, const std::string& name) const {
  ScopedTimer timer("nvptx compile " + name);
  ASSIGN_OR_RETURN(std::string ptx, llvm_.assembly(ir, name));
  if (sm_ <= kLlvmMaxSm) return ptx;
  auto replace_line = [&](const std::string& prefix, const std::string& line) -> Status {
    size_t at = ptx.find("\n" + prefix);
    if (at == std::string::npos) return internal("nvptx: the PTX has no " + prefix + "line");
    size_t end = ptx.find('\n', at + 1);
    ptx.replace(at + 1, end - at - 1, line);
    return {};
  };
  RETURN_IF_ERROR(replace_line(".version ", std::string(".version ") + ptx_version_for(sm_)));
  RETURN_IF_ERROR(replace_line(".target ", ".target sm_" + std::to_string(sm_)));
  return ptx;
}

}  // namespace baregrad::compiler
