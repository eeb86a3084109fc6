#include "compiler/codegen/pipeline.h"

#include <algorithm>

#include "base/error.h"
#include "base/log.h"
#include "base/options.h"
#include "base/timer.h"
#include "compiler/codegen/linearize.h"
#include "compiler/codegen/lower.h"
#include "compiler/codegen/reduce.h"
#include "compiler/passes/lower_fp8.h"
#include "compiler/passes/transcendental.h"
#include "compiler/spec.h"
#include "compiler/symbolic.h"

namespace baregrad::compiler {
namespace {

// Runs one pass: timed and logged at DEBUG>=2, IR printed at DEBUG>=3, verified under SPEC=1
// (as lowered IR, or as a kernel AST for the passes before lowering).
template <class F>
UOpPtr run_pass(const char* name, const UOpPtr& in, F&& pass, bool kernel_ast = false) {
  double t0 = now_ms();
  UOpPtr out = pass(in);
  BG_LOG(2) << "  pass " << name << ": " << now_ms() - t0 << " ms, " << out->size() << " nodes";
  BG_LOG(3) << out->str();
  if (options().spec)
    (kernel_ast ? verify_kernel_ast(out) : verify_lowered(out)).throw_if_error(name);
  return out;
}

}  // namespace

std::string kernel_name(const Kernel& k) {
  std::string s = k.count(AxisKind::kReduce) + k.count(AxisKind::kUnroll) +
                          k.count(AxisKind::kOuterReduce) + k.count(AxisKind::kGroupReduce) +
                          k.count(AxisKind::kStaged)
                      ? "r"
                      : "E";
  for (int64_t d : k.shape()) s += "_" + std::to_string(d);
  return s;
}

ProgramSpec lower_kernel(const UOpPtr& ast,
                         const TargetInfo& target,
                         const std::optional<std::vector<Opt>>& opts) {
  ScopedTimer timer("lower_kernel");
  verify_kernel_ast(ast).throw_if_error("lower_kernel");

  // fp8 is storage only: bytes in memory, float32 in registers.
  UOpPtr kernel_ast = run_pass("lower_fp8", ast, lower_fp8, /*kernel_ast=*/true);

  // Shape level: analyse the AST, then choose loop order, tiles and vector lanes.
  // The heuristics see the fp8 AST (its views give the compute width); the opts fit both ASTs.
  Kernel k(kernel_ast);
  for (const Opt& o : opts ? *opts : hand_coded_optimizations(Kernel(ast), target)) k.apply(o);
  BG_LOG(2) << "kernel " << k.str() << " opts:" << [&] {
    std::string s;
    for (auto& o : k.applied()) s += " " + o.str();
    return s;
  }();

  // Range level: loops, index math and vector lanes, then simplification of the index math
  // (before accumulators, so constant-trip loops and bounds checks fold first).
  Lowered low = lower_to_ranges(k, target);
  UOpPtr s = low.sink;
  s = run_pass("symbolic", s, [](const UOpPtr& u) { return simplify(u); });
  // Reductions into accumulator registers.
  s = run_pass("lower_reduce", s, lower_reduce);
  // Transcendentals as polynomials where the target has no instruction for them.
  if (!target.native_transcendentals) s = run_pass("transcendental", s, rewrite_transcendentals);
  // Constant folding of what the expansions above produced.
  s = run_pass("symbolic_simple", s,
               [](const UOpPtr& u) { return graph_rewrite(u, symbolic_simple()); });

  ProgramSpec spec;
  spec.name = kernel_name(k);
  spec.uops = linearize(s);
  if (options().spec) verify_linear(spec.uops).throw_if_error("linearize");
  spec.bufs = low.bufs;
  spec.thread_extent = low.thread_extent;
  spec.global_size = low.global_size;
  spec.local_size = low.local_size;
  spec.buffer_align = std::max(1, target.buffer_align);
  spec.flops = low.flops;
  spec.bytes = low.bytes;
  for (auto& u : spec.uops)
    if (u->op() == Op::DEFINE_VAR) spec.vars.push_back(u->arg_as<VarArg>());
  return spec;
}

}  // namespace baregrad::compiler
