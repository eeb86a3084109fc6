// Renders linear programs to LLVM 19 IR text (see program.h for the contract): for x86-64 hosts
// (the CPU ABI), and for GPU-lowered programs as an NVPTX or AMDGPU kernel or as its host twin.
#pragma once

#include <string>

#include "compiler/program.h"

namespace baregrad::compiler {

// The entry point a rendered module defines. Every ABI wraps an always-inlined `@NAME_body`
// whose buffer parameters are `noalias`: buffers bound to different slots must not overlap.
enum class LlvmAbi {
  // `void NAME(ptr %bufs, ptr %vars, i64 %core_lo, i64 %core_hi)` (program.h's CPU ABI).
  kCpu,
  // `ptx_kernel void NAME(ptr addrspace(1) %p0, ..., i64 %var0, ...)`: one GPU thread. Every
  // buffer slot in [0, nbufs) then every var is a parameter, so the parameter area is 8 bytes
  // per buffer in slot order, then 8 bytes per var. SPECIALs read %ctaid / %tid.
  kNvptx,
  // `amdgpu_kernel void NAME(ptr addrspace(1) noalias %p0, ..., i64 %var0, ...)`: kNvptx's
  // parameters as the kernarg segment (the same bytes), no implicit (hidden) kernargs; SPECIALs
  // read the work-group and work-item ids. Blocks are at most spec.local_size's product
  // ("amdgpu-flat-work-group-size").
  kAmdgpu,
  // `void NAME_twin(const uint8_t* params, const uint32_t grid[3], const uint32_t block[3])`:
  // the kNvptx kernel for the host, running every thread of the grid in order. `params` is the
  // kNvptx parameter area byte for byte (any alignment).
  // A kernel with shared memory or barriers (twin_is_per_thread) instead defines
  // `void NAME_twin(const uint8_t* params, const uint32_t ids[6], uint8_t* smem,
  //                 void (*barrier)(void*), void* ctx)`:
  // ONE thread (ids: block x, y, z, then thread x, y, z), its block's shared memory at `smem`
  // (twin_shared_bytes, 16-byte aligned), calling barrier(ctx) at each BARRIER. The caller runs
  // a block's threads side by side (a thread each), so that they meet at barriers.
  kHostTwin,
};

// The symbol of the kHostTwin entry point of kernel `name`.
inline std::string twin_symbol(const std::string& name) { return name + "_twin"; }
// Whether the kHostTwin form of `spec` is the one-thread entry (it has shared memory or a
// BARRIER).
bool twin_is_per_thread(const ProgramSpec& spec);
// Bytes of shared memory the kHostTwin form of `spec` addresses at `smem`.
int64_t twin_shared_bytes(const ProgramSpec& spec);

// Buffer parameter slots of a GPU kernel: max(spec.bufs.size(), largest DEFINE_GLOBAL slot + 1).
int gpu_buffer_slots(const ProgramSpec& spec);

class LlvmIrRenderer : public Renderer {
 public:
  explicit LlvmIrRenderer(LlvmAbi abi = LlvmAbi::kCpu) : abi_(abi) {}
  std::string name() const override;
  // A complete module (no triple or data layout; the compiler sets its target's).
  std::string render(const ProgramSpec& spec) const override;

 private:
  LlvmAbi abi_;
};

}  // namespace baregrad::compiler
