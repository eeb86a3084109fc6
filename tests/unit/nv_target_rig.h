// NvTarget for the NVIDIA compile tests: one target per sm, and a kernel compiled by it with what
// the tests check besides its Binary: the PTX, ptxas' -v report for that PTX, the parameter
// offsets, and the host twin (LlvmAbi::kHostTwin) of the same lowered program.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/check.h"
#include "compiler/cache.h"
#include "compiler/render/llvm_ir.h"
#include "compiler/target/llvm_target.h"
#include "compiler/target/nv_target.h"
#include "drivers/cpu/iface_host.h"

namespace baregrad::compiler {

// The target for sm_<sm> (ptxas must exist: callers skip first without it).
inline NvTarget& nv(int sm) {
  static auto* targets = new std::map<int, std::unique_ptr<NvTarget>>();
  auto it = targets->find(sm);
  if (it == targets->end()) {
    Result<std::unique_ptr<NvTarget>> t = NvTarget::create(sm);
    CHECK(t.ok()) << t.status().to_string();
    it = targets->emplace(sm, std::move(*t)).first;
  }
  return *it->second;
}

// Where each argument lies in the parameter area: 8 bytes per buffer slot, then per var.
struct NvParams {
  std::vector<uint32_t> buffer_offsets, var_offsets;
  uint32_t size = 0;
};

struct NvKernel {
  ProgramSpec spec;
  Binary binary;
  std::string ptx;
  std::string cubin;      // binary.code
  std::string ptxas_log;  // ptxas -v for `ptx`
  PtxasReport ptxas;
  NvParams params;
  std::array<uint32_t, 3> grid{1, 1, 1}, block{1, 1, 1};
  bool cache_hit = false;
  std::string twin_object, twin_symbol;
};

inline Result<NvKernel> describe_nv(const NvTarget& t, CompiledKernel ck) {
  NvKernel k;
  k.spec = ck.spec;
  k.binary = ck.binary;
  k.cubin = ck.binary.code;
  k.grid = ck.binary.grid;
  k.block = ck.binary.block;
  k.cache_hit = ck.cache_hit;
  ASSIGN_OR_RETURN(k.ptx, t.listing(ck));
  ASSIGN_OR_RETURN(PtxasResult r, t.ptxas().assemble(k.ptx, t.sm(), k.spec.name));
  k.ptxas_log = r.log;
  k.ptxas = r.report;
  uint32_t off = 0;
  for (int s = 0; s < k.binary.num_bufs; s++, off += 8) k.params.buffer_offsets.push_back(off);
  for (int i = 0; i < k.binary.num_vars; i++, off += 8) k.params.var_offsets.push_back(off);
  k.params.size = off;
  k.twin_symbol = twin_symbol(k.spec.name);
  ASSIGN_OR_RETURN(
      k.twin_object,
      LlvmCompiler().compile(LlvmIrRenderer(LlvmAbi::kHostTwin).render(k.spec), k.twin_symbol));
  return k;
}

inline Result<NvKernel> compile_nv(const NvTarget& t,
                                   const UOpPtr& ast,
                                   const std::optional<std::vector<Opt>>& opts = std::nullopt) {
  ASSIGN_OR_RETURN(CompiledKernel ck, t.compile(ast, opts));
  return describe_nv(t, std::move(ck));
}

inline Result<NvKernel> compile_nv(const NvTarget& t, const ProgramSpec& spec) {
  ASSIGN_OR_RETURN(CompiledKernel ck, t.compile(spec));
  return describe_nv(t, std::move(ck));
}

}  // namespace baregrad::compiler
