// DEV=CL beside our CPU device in the same run, through the tensor API: matmul 1024, a row
// sum and a softmax of 4096x4096, and a fused elementwise kernel. On PoCL (the CPU OpenCL
// platform CI uses) the rows check the GPU-shaped kernels for correctness (the note gives the
// largest difference from the CPU device's result) and show their ratio to the CPU kernels;
// PoCL's absolute speed is not a goal. No rows when no OpenCL device opens.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/timer.h"
#include "bench/bench.h"
#include "runtime/device.h"
#include "tensor/tensor.h"

namespace baregrad::bench {
namespace {

using tensor::Tensor;

struct Op {
  std::string name, metric, unit;
  double work;  // FLOPs (throughput) or bytes (bandwidth) per run; 0 for a time row
  std::function<Tensor(const std::vector<Tensor>&)> fn;
  std::vector<Tensor> inputs;  // on the CPU; copied to each device once
};

// Median ms of op(inputs).realize() + synchronize on `device` after a warm-up run (which also
// compiles), and the result.
double time_on(const std::string& device, const Op& op, std::vector<double>* out) {
  std::vector<Tensor> in;
  for (const Tensor& t : op.inputs) in.push_back(t.to(device).realize());
  auto dev = runtime::get_device(device);
  dev.status().throw_if_error("bench cl");
  std::optional<Tensor> r;
  auto run = [&] {
    r = op.fn(in).realize();
    (*dev)->synchronize().throw_if_error("bench cl synchronize");
  };
  run();
  double ms = time_median_ms(run, 5, 0);
  *out = r->to_vector();
  return ms;
}

std::vector<Row> cl_rows(const Context& ctx) {
  if (auto cl = runtime::get_device("CL"); !cl.ok()) {
    std::fprintf(stderr, "bare_bench: cl: no OpenCL device (%s)\n", cl.status().message().c_str());
    return {};
  }
  Tensor::manual_seed(0);
  const int64_t mm = ctx.quick ? 512 : 1024, sq = ctx.quick ? 1024 : 4096,
                ew = ctx.quick ? (1 << 20) : (1 << 22);
  Tensor a = Tensor::rand({mm, mm}).realize(), b = Tensor::rand({mm, mm}).realize();
  Tensor m = Tensor::rand({sq, sq}).realize();
  Tensor x = Tensor::rand({ew}).realize(), y = Tensor::rand({ew}).realize(),
         z = Tensor::rand({ew}).realize();
  std::string d = std::to_string(sq) + "x" + std::to_string(sq);
  std::vector<Op> ops = {
      {"cl matmul " + std::to_string(mm) + " fp32",
       "throughput",
       "GFLOP/s",
       2.0 * mm * mm * mm,
       [](auto& t) { return t[0].matmul(t[1]); },
       {a, b}},
      {"cl sum(1) " + d + " fp32",
       "bandwidth",
       "GB/s",
       4.0 * sq * sq,
       [](auto& t) { return t[0].sum({1}); },
       {m}},
      {"cl softmax(-1) " + d + " fp32",
       "time",
       "ms",
       0,
       [](auto& t) { return t[0].softmax(-1); },
       {m}},
      {"cl (a*b+c).relu()*0.5 " + std::to_string(ew >> 20) + "M fp32",
       "bandwidth",
       "GB/s",
       16.0 * ew,
       [](auto& t) { return ((t[0] * t[1] + t[2]).relu() * 0.5); },
       {x, y, z}},
  };
  std::vector<Row> rows;
  for (const Op& op : ops) {
    std::fprintf(stderr, "bare_bench: cl: %s\n", op.name.c_str());
    std::vector<double> got, want;
    double cl_ms = time_on("CL", op, &got), cpu_ms = time_on("CPU", op, &want);
    double diff = got.size() == want.size() ? 0 : INFINITY;
    for (size_t i = 0; i < std::min(got.size(), want.size()); i++)
      diff = std::max(diff, std::fabs(got[i] - want[i]));
    auto value = [&](double ms) { return op.work > 0 ? op.work / (ms * 1e6) : ms; };
    Row r;
    r.name = op.name;
    r.device = "CL";
    r.metric = op.metric;
    r.unit = op.unit;
    r.value = value(cl_ms);
    r.ref = "our CPU device";
    r.ref_value = value(cpu_ms);
    char note[160];
    std::snprintf(note, sizeof(note), "median %.3f ms (CPU %.3f ms); max |CL - CPU| %.3g", cl_ms,
                  cpu_ms, diff);
    r.note = note;
    rows.push_back(r);
  }
  return rows;
}

}  // namespace

void register_cl_benches() {
  register_bench("cl", cl_rows,
                 "DEV=CL beside our CPU device: matmul 1024, sum(1) and softmax(-1) of "
                 "4096x4096, a fused elementwise kernel (correctness and ratio on PoCL)");
}

}  // namespace baregrad::bench
