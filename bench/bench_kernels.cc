// Our own kernels on the CPU device: matmul (vs OpenBLAS in the same run), a fused elementwise
// chain, row and full sums, and the compile time of each kernel.
#include <cblas.h>

#include <cmath>
#include <cstring>
#include <random>

#include "base/options.h"
#include "base/timer.h"
#include "bench/bench.h"
#include "compiler/ast.h"
#include "compiler/codegen/pipeline.h"
#include "compiler/render/llvm_ir.h"
#include "compiler/target/cpu_target.h"
#include "compiler/target/llvm_target.h"
#include "drivers/cpu/device.h"
#include "runtime/beam.h"
#include "runtime/hcq_device.h"

namespace baregrad::bench {
namespace {
using namespace compiler;
using runtime::Buffer;

const DType kF32 = dtypes::kFloat32;

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

UOpPtr matmul_ast(int64_t n) {
  auto a = global(0, kF32), b = global(1, kF32), c = global(2, kF32);
  auto la = load(a, strided({n, n, n}, {n, 0, 1}));
  auto lb = load(b, strided({n, n, n}, {0, 1, n}));
  return sink({store(c, strided({n, n, 1}, {n, 1, 0}), reduce_axis(Op::ADD, {2}, la * lb))});
}

// y = (a * b + c).relu() * 0.5
UOpPtr elementwise_ast(int64_t n) {
  std::vector<UOpPtr> in;
  for (int i = 0; i < 3; i++) in.push_back(load(global(i, kF32), ShapeTracker::contiguous({n})));
  auto v = in[0] * in[1] + in[2];
  v = maximum(v, UOp::cnst(kF32, 0)) * UOp::cnst(kF32, 0.5);
  return sink({store(global(3, kF32), ShapeTracker::contiguous({n}), v)});
}

// out[r] = sum over the row of an (rows, cols) matrix.
UOpPtr row_sum_ast(int64_t rows, int64_t cols) {
  auto x = load(global(0, kF32), ShapeTracker::contiguous({rows, cols}));
  return sink({store(global(1, kF32), strided({rows, 1}, {1, 0}), reduce_axis(Op::ADD, {1}, x))});
}

// Lowering + rendering + LLVM compile of `ast`, with no cache involved.
double compile_ms(const UOpPtr& ast, const TargetInfo& target) {
  static LlvmCompiler compiler;
  double t0 = now_ms();
  ProgramSpec spec = lower_kernel(ast, target);
  std::string src = LlvmIrRenderer().render(spec);
  auto obj = compiler.compile(src, spec.name);
  if (!obj.ok()) obj.status().throw_if_error("bench compile");
  return now_ms() - t0;
}

struct Kernel {
  std::shared_ptr<runtime::Program> prg;
  std::vector<Buffer> bufs;
};

// The CPU device on `threads` threads (what DEV=CPU opens with THREADS=threads).
std::unique_ptr<cpu::Device> cpu_device(int threads) {
  auto dev = cpu::Device::create(threads);
  if (!dev.ok()) dev.status().throw_if_error("bench CPU device");
  return std::move(*dev);
}

class Runner {
 public:
  explicit Runner(int threads)
      : dev_("CPU",
             std::make_unique<compiler::CpuTarget>(compiler::CpuCompiler::kLlvm, threads),
             cpu_device(threads)) {}
  ~Runner() {
    for (auto& b : owned_) dev_.free(b);
  }

  Buffer buffer(const std::vector<float>& data) {
    Buffer b = *dev_.alloc(data.size() * 4);
    dev_.copy_in(b, data.data(), data.size() * 4).throw_if_error("bench copy_in");
    owned_.push_back(b);
    return b;
  }
  // With `beam`, the opts of a BEAM=2 search (runtime/beam.h; instant once in the database).
  Kernel kernel(const UOpPtr& ast, std::vector<Buffer> bufs, bool beam = false) {
    std::optional<std::vector<Opt>> opts;
    if (beam) {
      std::string was = option_value("BEAM");
      set_option("BEAM", "2");
      opts = runtime::beam_opts(dev_, ast, bufs);
      set_option("BEAM", was);
    }
    auto prg = dev_.compile(ast, opts);
    if (!prg.ok()) prg.status().throw_if_error("bench compile");
    return {*prg, std::move(bufs)};
  }
  // Launches are asynchronous: the time of a run includes waiting for the kernel to finish.
  void run(const Kernel& k) {
    dev_.launch(*k.prg, k.bufs).throw_if_error("bench launch");
    dev_.synchronize().throw_if_error("bench synchronize");
  }
  std::vector<float> read(Buffer b) {
    std::vector<float> out(b.bytes / 4);
    dev_.copy_out(out.data(), b, b.bytes).throw_if_error("bench copy_out");
    return out;
  }
  const TargetInfo& target() const { return dev_.target_info(); }

 private:
  runtime::HcqDevice dev_;
  std::vector<Buffer> owned_;
};

Row make_row(std::string name, std::string metric, std::string unit, double value) {
  Row r;
  r.name = std::move(name);
  r.device = "CPU";
  r.metric = std::move(metric);
  r.unit = std::move(unit);
  r.value = value;
  return r;
}

Row compile_row(const std::string& what, const UOpPtr& ast, const TargetInfo& t) {
  double best = 1e30;
  for (int i = 0; i < 3; i++) best = std::min(best, compile_ms(ast, t));
  Row r = make_row("compile " + what, "time", "ms", best);
  r.note = "lower + render + LLVM O2 to object, best of 3";
  return r;
}

std::vector<Row> matmul_rows(const Context& ctx, int n, bool beam) {
  Runner run(ctx.threads);
  auto a = random_floats(size_t(n) * n, 1), b = random_floats(size_t(n) * n, 2);
  Kernel k = run.kernel(
      matmul_ast(n), {run.buffer(a), run.buffer(b), run.buffer(std::vector<float>(size_t(n) * n))},
      beam);
  double ms = time_median_ms([&] { run.run(k); }, 5, ctx.quick ? 100 : 400);
  // Correctness against OpenBLAS on the same inputs.
  std::vector<float> want(size_t(n) * n);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n,
              0.0f, want.data(), n);
  auto got = run.read(k.bufs[2]);
  double err = 0;
  for (size_t i = 0; i < got.size(); i++) err = std::max(err, double(std::fabs(got[i] - want[i])));
  Row r = make_row("matmul " + std::to_string(n) + " fp32" + (beam ? ", BEAM=2" : ""), "throughput",
                   "GFLOP/s", 2.0 * n * double(n) * n / (ms * 1e6));
  r.peak_pct = pct_of(r.value, ctx.fma_gflops);
  r.ref = "OpenBLAS";
  r.ref_value = openblas_sgemm_gflops(n, ctx.threads);
  r.note = "max abs diff vs OpenBLAS " + std::to_string(err);
  std::vector<Row> rows{r};
  if (!beam && (n == 2048 || (ctx.quick && n == 512)))
    rows.push_back(compile_row("matmul", matmul_ast(n), run.target()));
  return rows;
}

std::vector<Row> elementwise_rows(const Context& ctx) {
  int64_t n = ctx.quick ? (1 << 22) : (1 << 24);
  Runner run(ctx.threads);
  std::vector<Buffer> bufs;
  for (uint32_t i = 0; i < 3; i++) bufs.push_back(run.buffer(random_floats(n, 10 + i)));
  bufs.push_back(run.buffer(std::vector<float>(n)));
  Kernel k = run.kernel(elementwise_ast(n), bufs);
  double ms = time_median_ms([&] { run.run(k); }, 10, ctx.quick ? 100 : 500);
  Row r = make_row("fused (a*b+c).relu()*0.5 " + std::to_string(n >> 20) + "M fp32", "bandwidth",
                   "GB/s", 16.0 * n / (ms * 1e6));
  r.peak_pct = pct_of(r.value, ctx.mem_gbs);
  r.note = std::to_string(ms) + " ms, 3 reads + 1 write";
  return {r, compile_row("elementwise", elementwise_ast(n), run.target())};
}

std::vector<Row> sum_rows(const Context& ctx) {
  int64_t n = ctx.quick ? 2048 : 4096;
  Runner run(ctx.threads);
  auto x = random_floats(size_t(n) * n, 20);
  // NOTE: one 64 MiB matrix is partly served by the 32 MiB L3 across repetitions; rotating
  // through copies (256 MiB in all) makes every run read DRAM, as the peak does.
  const int copies = ctx.quick ? 2 : 4;
  std::vector<Buffer> in;
  for (int i = 0; i < copies; i++) in.push_back(run.buffer(x));
  std::vector<Kernel> rows, stage1;
  Buffer out = run.buffer(std::vector<float>(n));
  // Full sum in two kernels: 256 partial sums of contiguous slices, then the partials.
  const int64_t parts = 256;
  Buffer partial = run.buffer(std::vector<float>(parts));
  for (Buffer b : in) {
    rows.push_back(run.kernel(row_sum_ast(n, n), {b, out}));
    stage1.push_back(run.kernel(row_sum_ast(parts, n * n / parts), {b, partial}));
  }
  Kernel stage2 = run.kernel(row_sum_ast(1, parts), {partial, run.buffer(std::vector<float>(1))});
  int next = 0;
  double row_ms =
      time_median_ms([&] { run.run(rows[next++ % copies]); }, 10, ctx.quick ? 100 : 500);
  double full_ms = time_median_ms(
      [&] {
        run.run(stage1[next++ % copies]);
        run.run(stage2);
      },
      10, ctx.quick ? 100 : 500);
  double want = 0;
  for (float v : x) want += v;
  double got = run.read(stage2.bufs[1])[0];
  std::string dims = std::to_string(n) + "x" + std::to_string(n);
  double bytes = 4.0 * n * n;
  Row r1 = make_row("row sum " + dims + " fp32", "bandwidth", "GB/s", bytes / (row_ms * 1e6));
  r1.peak_pct = pct_of(r1.value, ctx.mem_gbs);
  r1.note = std::to_string(row_ms) + " ms";
  Row r2 = make_row("full sum " + dims + " fp32", "bandwidth", "GB/s", bytes / (full_ms * 1e6));
  r2.peak_pct = pct_of(r2.value, ctx.mem_gbs);
  r2.note = std::to_string(full_ms) + " ms, 2 kernels, |err| vs fp64 " +
            std::to_string(std::fabs(got - want));
  return {r1, r2, compile_row("row sum", row_sum_ast(n, n), run.target())};
}

}  // namespace

void register_kernel_benches() {
  for (int n : {512, 1024, 2048})
    register_bench(
        "matmul " + std::to_string(n),
        [n](const Context& ctx) {
          if (ctx.quick && n > 512) return std::vector<Row>{};
          std::vector<Row> rows = matmul_rows(ctx, n, false);
          for (Row& r : matmul_rows(ctx, n, true)) rows.push_back(std::move(r));
          return rows;
        },
        "our fp32 matmul on the CPU device, with the heuristics' opts and with a BEAM=2 search's "
        "(searched once, then read from the tuning database); OpenBLAS sgemm in the same run as "
        "ref");
  register_bench("elementwise", elementwise_rows,
                 "fused y=(a*b+c).relu()*0.5 over 16M floats, bytes moved / time");
  register_bench("sums", sum_rows, "row sum and full sum of a 4096x4096 fp32 matrix");
}

}  // namespace baregrad::bench
