// The NVIDIA compile path: kernel AST -> GPU-lowered program -> LLVM NVPTX -> PTX -> ptxas ->
// cubin, plus the host twin of the same kernel (for mock GPUs) and its launch contract.
//
//   ASSIGN_OR_RETURN(NvCompiler nv, NvCompiler::create(90));
//   ASSIGN_OR_RETURN(NvKernel k, nv.compile(ast));
//   // device: upload k.cubin (drivers/nv/cubin.h), fill cbank0 at the param offset with the
//   //         buffer addresses and vars at k.params offsets, launch k.grid x k.block.
//   // mock:   load k.twin_object with runtime::ObjectLoader, reinterpret_cast the address of
//   //         k.twin_symbol to TwinFn, call it with the same parameter bytes, grid and block.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/opt/kernel.h"
#include "compiler/program.h"
#include "compiler/target/llvm_target.h"
#include "compiler/target/nvptx_target.h"
#include "compiler/target/ptxas.h"

namespace baregrad::compiler {

// Where each kernel argument lies in the parameter area (constant bank 0 from the param offset
// on the GPU; the twin's `params`): 8 bytes per buffer slot (its address) in slot order, then 8
// bytes per var (int64), little-endian.
struct NvParamLayout {
  std::vector<uint32_t> buffer_offsets;  // by slot
  std::vector<uint32_t> var_offsets;     // by ProgramSpec::vars position
  uint32_t size = 0;                     // bytes
};
NvParamLayout nv_param_layout(const ProgramSpec& spec);

// The host twin: runs every thread of grid x block in order on the calling thread.
using TwinFn = void (*)(const uint8_t* params, const uint32_t grid[3], const uint32_t block[3]);
// The twin behind a function pointer of another type (e.g. what runtime::ObjectLoader returns
// for twin_symbol).
template <class F>
TwinFn as_twin_fn(F fn) {
  return reinterpret_cast<TwinFn>(reinterpret_cast<void (*)()>(fn));
}

// One kernel compiled for sm_<sm>.
struct NvKernel {
  ProgramSpec spec;  // name (the cubin's entry), buffers, vars, global/local size
  int sm = 0;
  std::string ptx;
  std::string cubin;        // ELF from ptxas
  std::string ptxas_log;    // ptxas -v output
  PtxasReport ptxas;        // its report for the entry (registers, stack, spills, smem)
  std::string twin_object;  // host ELF object defining twin_symbol with the TwinFn ABI
  std::string twin_symbol;
  NvParamLayout params;
  std::array<uint32_t, 3> grid{1, 1, 1};   // blocks
  std::array<uint32_t, 3> block{1, 1, 1};  // threads per block
  bool cache_hit = false;                  // the cubin came from the compiler cache
};

// Thread-safe.
class NvCompiler {
 public:
  // A compiler for sm_<sm>. InvalidArgument for an unsupported sm; NotFound (naming the paths
  // tried) when there is no ptxas.
  static Result<NvCompiler> create(int sm);

  const TargetInfo& target() const { return target_; }
  const Ptxas& ptxas() const { return ptxas_; }
  // Lowers `ast` for the GPU and compiles it. InvalidArgument for a malformed AST or an illegal
  // opt; Internal (with ptxas' output and the numbered PTX) when ptxas rejects the PTX.
  Result<NvKernel> compile(const UOpPtr& ast,
                           const std::optional<std::vector<Opt>>& opts = std::nullopt) const;
  // Compiles an already GPU-lowered program (SPECIALs gidx / lidx, launch dims set).
  Result<NvKernel> compile(const ProgramSpec& spec) const;

 private:
  NvCompiler(int sm, Ptxas ptxas);
  int sm_;
  TargetInfo target_;
  Ptxas ptxas_;
  NvptxCompiler nvptx_;
  LlvmCompiler host_;
};

}  // namespace baregrad::compiler
