// The GPU shape of our kernels without a GPU: matmul 4096, the first kernel of a 4096x4096
// full sum (16M floats into 256 partial sums; the second kernel sums those) and a 4096x4096 add,
// compiled for sm_90 as NvTarget does for DEV=NV, with what ptxas and the PTX say about them:
// registers, shared memory, 16-byte vector loads, threads per block. No rows without ptxas.
#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "compiler/ast.h"
#include "compiler/codegen/pipeline.h"
#include "compiler/target/nv_target.h"

namespace baregrad::bench {
namespace {
using namespace compiler;

constexpr DType kF32 = dtypes::kFloat32;

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) n++;
  return n;
}

std::vector<Row> ptx_rows(const Context&) {
  constexpr int kSm = 90;
  auto target = NvTarget::create(kSm);
  if (!target.ok()) {
    std::fprintf(stderr, "bare_bench: ptx: %s\n", target.status().message().c_str());
    return {};
  }
  const int64_t n = 4096, parts = 256;
  auto la = load(global(1, kF32), strided({n, n, n}, {n, 0, 1}));
  auto lb = load(global(2, kF32), strided({n, n, n}, {0, 1, n}));
  UOpPtr matmul = sink(
      {store(global(0, kF32), strided({n, n, 1}, {n, 1, 0}), reduce_axis(Op::ADD, {2}, la * lb))});
  UOpPtr sum = sink({store(
      global(0, kF32), strided({parts, 1}, {1, 0}),
      reduce_axis(Op::ADD, {1},
                  load(global(1, kF32), ShapeTracker::contiguous({parts, n * n / parts}))))});
  UOpPtr add = sink({store(global(0, kF32), ShapeTracker::contiguous({n, n}),
                           load(global(1, kF32), ShapeTracker::contiguous({n, n})) +
                               load(global(2, kF32), ShapeTracker::contiguous({n, n})))});
  std::vector<Row> rows;
  for (auto [what, ast] : {std::pair<std::string, UOpPtr>{"matmul 4096 fp32", matmul},
                           {"sum 4096x4096 fp32, first of 2 kernels", sum},
                           {"add 4096x4096 fp32", add}}) {
    ProgramSpec spec = lower_kernel(ast, (*target)->info());
    auto k = (*target)->compile(spec);
    auto ptx = k.ok() ? (*target)->listing(*k) : Result<std::string>(k.status());
    auto report = ptx.ok() ? (*target)->ptxas().assemble(*ptx, kSm, spec.name)
                           : Result<PtxasResult>(ptx.status());
    if (!report.ok()) {
      std::fprintf(stderr, "bare_bench: ptx: %s: %s\n", what.c_str(),
                   report.status().to_string().c_str());
      continue;
    }
    auto dims = [](const std::array<int64_t, 3>& d) {
      std::string out = std::to_string(d[0]);
      if (d[1] > 1 || d[2] > 1) out += "x" + std::to_string(d[1]);
      if (d[2] > 1) out += "x" + std::to_string(d[2]);
      return out;
    };
    std::string shape =
        spec.name + ": " + dims(spec.global_size) + " blocks of " + dims(spec.local_size);
    auto add = [&](const std::string& metric, double value, const std::string& note) {
      Row r;
      r.name = "ptx sm_90 " + what + ": " + metric;
      r.device = "sm_90";
      r.metric = "count";
      r.unit = "";
      r.value = value;
      r.note = note;
      rows.push_back(r);
    };
    add("registers", report->report.registers, shape);
    add("shared bytes", static_cast<double>(report->report.shared_bytes), "ptxas -v smem");
    add("v4 global loads",
        static_cast<double>(count(*ptx, "ld.global.v4") + count(*ptx, "ld.global.nc.v4")),
        "ld.global(.nc).v4 in the PTX");
    add("threads per block",
        static_cast<double>(spec.local_size[0] * spec.local_size[1] * spec.local_size[2]), shape);
  }
  return rows;
}

}  // namespace

void register_ptx_benches() {
  register_bench(
      "ptx", ptx_rows,
      "matmul 4096, a 4096x4096 sum and add compiled for sm_90 (needs ptxas): registers, "
      "shared bytes, v4 loads, threads per block");
}

}  // namespace baregrad::bench
