// Host-side speed of the front-end: build, schedule and generate code (no run) for the forward
// and backward graph of a GPT-2-small-shaped transformer.
#include <cmath>
#include <unordered_set>

#include "base/timer.h"
#include "bench/bench.h"
#include "compiler/codegen/pipeline.h"
#include "compiler/target/cpu_target.h"
#include "tensor/schedule.h"
#include "tensor/tensor.h"

namespace baregrad::bench {
namespace {
using tensor::Shape;
using tensor::Tensor;

Tensor layernorm(const Tensor& x, const Tensor& g, const Tensor& b) {
  Tensor c = x - x.mean({-1}, true);
  return c / ((c * c).mean({-1}, true) + 1e-5).sqrt() * g + b;
}

// tanh-approximated GELU from sigmoid: 0.5 x (1 + tanh(u)) = x sigmoid(2u).
Tensor gelu(const Tensor& x) {
  Tensor u = (x + x * x * x * 0.044715) * std::sqrt(2 / M_PI);
  return x * (u * 2.0).sigmoid();
}

// One graph: with `backward`, the parameters require grad and the gradient of every one is
// part of the schedule; without, the parameters are left as tinygrad leaves them (requires_grad
// unset: a gradient could still be asked for) and only the forward is scheduled.
std::vector<Row> gpt2_graph(const Context& ctx, bool backward) {
  const int64_t layers = ctx.quick ? 2 : 12, d = 768, heads = 12, hd = d / heads, t = 256, b = 4;
  double t0 = now_ms();
  std::vector<Tensor> params;
  auto param = [&](Shape s) {
    Tensor p = Tensor::empty(std::move(s));  // values are never read: nothing runs
    if (backward) p.requires_grad_();
    params.push_back(p);
    return p;
  };
  Tensor x = Tensor::empty({b, t, d}), mask = Tensor::empty({t, t});
  for (int64_t l = 0; l < layers; l++) {
    Tensor h = layernorm(x, param({d}), param({d}));
    Tensor qkv = h.matmul(param({d, 3 * d})) + param({3 * d});
    auto head = [&](int64_t i) {
      return qkv.shrink({{0, b}, {0, t}, {i * d, (i + 1) * d}})
          .reshape({b, t, heads, hd})
          .permute({0, 2, 1, 3});
    };
    Tensor att = (head(0).matmul(head(1).transpose(-2, -1)) * (1.0 / std::sqrt(double(hd))) + mask)
                     .softmax(-1);
    Tensor y = att.matmul(head(2)).permute({0, 2, 1, 3}).reshape({b, t, d});
    x = x + y.matmul(param({d, d})) + param({d});
    h = layernorm(x, param({d}), param({d}));
    x = x + gelu(h.matmul(param({d, 4 * d})) + param({4 * d})).matmul(param({4 * d, d})) +
        param({d});
  }
  Tensor loss = layernorm(x, param({d}), param({d})).mean();
  std::vector<Tensor> grads;
  if (backward) grads = loss.gradient(params);
  double t_build = now_ms() - t0;

  t0 = now_ms();
  std::vector<tensor::Lazy> targets{loss.lazy()};
  for (auto& g : grads) targets.push_back(g.lazy());
  auto schedule = tensor::create_schedule(targets);
  double t_sched = now_ms() - t0;

  t0 = now_ms();
  // The CPU's LLVM target, whatever DEV is: the row is the CPU's.
  compiler::CpuTarget target(compiler::CpuCompiler::kLlvm, ctx.threads);
  std::unordered_set<const compiler::UOp*> seen;  // a kernel cache generates each AST once
  size_t bytes = 0;
  for (auto& item : schedule) {
    if (!seen.insert(item.ast.get()).second) continue;
    auto spec = compiler::lower_kernel(item.ast, target.info());
    bytes += target.render(spec).size();
  }
  double t_codegen = now_ms() - t0;

  const std::string graph = backward ? "gpt2-small graph fwd+bwd" : "gpt2-small graph fwd";
  Row r;
  r.name = graph + ": build+schedule+codegen";
  r.device = "CPU";
  r.metric = "time";
  r.unit = "ms";
  r.value = t_build + t_sched + t_codegen;
  r.note = std::to_string(layers) + " layers, " + std::to_string(schedule.size()) + " kernels (" +
           std::to_string(seen.size()) + " distinct); build " + std::to_string(t_build) +
           " ms, schedule " + std::to_string(t_sched) + " ms, lower+render " +
           std::to_string(t_codegen) + " ms (" + std::to_string(bytes >> 10) +
           " KiB of LLVM IR); no LLVM compile, nothing run";
  Row k;
  k.name = graph + ": kernels";
  k.device = "CPU";
  k.metric = "count";
  k.unit = "kernels";
  k.value = static_cast<double>(schedule.size());
  return {r, k};
}

std::vector<Row> gpt2_rows(const Context& ctx) {
  std::vector<Row> rows = gpt2_graph(ctx, false);
  for (Row& r : gpt2_graph(ctx, true)) rows.push_back(std::move(r));
  return rows;
}

}  // namespace

void register_gpt2_benches() {
  register_bench(
      "gpt2 graph", gpt2_rows,
      "build, schedule and generate code for GPT-2-small fwd and fwd+bwd (12x768, 12 heads, "
      "T=256, B=4) without running it");
}

}  // namespace baregrad::bench
