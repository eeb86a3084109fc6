// Training-step benchmarks of the tensor front-end on the CPU device.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/timer.h"
#include "bench/bench.h"
#include "runtime/device.h"
#include "tensor/jit.h"
#include "tensor/nn.h"
#include "tensor/optim.h"
#include "tensor/schedule.h"

namespace baregrad::bench {
namespace {
using tensor::Tensor;

// A row of the CPU device, with `ref` (PyTorch's value when it ran) as its reference.
Row cpu_row(std::string name,
            std::string metric,
            std::string unit,
            double value,
            std::optional<double> ref_value = std::nullopt,
            std::string ref = "PyTorch") {
  Row r;
  r.name = std::move(name);
  r.device = "CPU";
  r.metric = std::move(metric);
  r.unit = std::move(unit);
  r.value = value;
  if (ref_value) {
    r.ref = std::move(ref);
    r.ref_value = *ref_value;
  }
  return r;
}

// An MLP 784-512-512-10 with Adam on a fixed batch of 128.
struct Mlp {
  tensor::nn::Linear l1{784, 512}, l2{512, 512}, l3{512, 10};
  std::unique_ptr<tensor::Adam> opt;
  Tensor x = Tensor::randn({128, 784}).realize();
  Tensor y = labels();
  Mlp() {
    std::vector<Tensor> params;
    for (auto* l : {&l1, &l2, &l3})
      for (auto& p : l->parameters()) params.push_back(p);
    opt = std::make_unique<tensor::Adam>(params, 1e-3);
  }
  static Tensor labels() {
    std::vector<double> ys(128);
    for (int i = 0; i < 128; i++) ys[i] = (i * 7) % 10;
    return Tensor::from_data(ys, {128}, tensor::dtypes::kInt32);
  }
  // One step (forward, backward, update); returns the loss.
  Tensor step(const Tensor& xb, const Tensor& yb) {
    opt->zero_grad();
    Tensor l = l3(l2(l1(xb).relu()).relu()).sparse_categorical_crossentropy(yb);
    l.backward();
    opt->step();
    return l;
  }
};

Row mlp_row(const Context& ctx,
            const std::string& name,
            std::optional<double> torch_ms,
            const std::function<double()>& step) {
  double first_ms = 0, loss = 0;
  {
    double t0 = now_ms();
    loss = step();  // includes compiling every kernel (or loading it from the cache)
    first_ms = now_ms() - t0;
  }
  double ms = time_median_ms([&] { loss = step(); }, ctx.quick ? 3 : 10, ctx.quick ? 200 : 1000);
  // 2 * (forward + 2 backward) multiply-adds of the three layers.
  double flops = 3 * 2.0 * 128 * (784.0 * 512 + 512.0 * 512 + 512.0 * 10);
  Row r = cpu_row(name, "time", "ms", ms, torch_ms);
  r.note = "median; first step " + std::to_string(first_ms) + " ms; " +
           std::to_string(flops / (ms * 1e6)) + " GFLOP/s; loss " + std::to_string(loss);
  return r;
}

// One Adam step of an MLP 784-512-512-10 on a batch of 128, eager and through TinyJit.
std::vector<Row> mlp_rows(const Context& ctx) {
  // PyTorch's median step time for the same MLP (bench/ref/torch_mlp.py), if torch is there.
  std::optional<double> torch_ms =
      python_reference(BARE_SOURCE_DIR "/bench/ref/torch_mlp.py", std::to_string(ctx.threads));
  Tensor::manual_seed(1);
  Mlp eager;
  Row e = mlp_row(ctx, "mlp 784-512-512-10 adam step, batch 128", torch_ms,
                  [&] { return eager.step(eager.x, eager.y).to_vector()[0]; });
  Tensor::manual_seed(1);
  Mlp jitted;
  tensor::TinyJit jit([&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{jitted.step(in[0], in[1])};
  });
  Row j = mlp_row(ctx, "mlp step, TinyJit replay", torch_ms,
                  [&] { return jit({jitted.x, jitted.y})[0].to_vector()[0]; });
  j.note += "; " + std::to_string(jit.kernel_count()) + " kernels; intermediates " +
            std::to_string(jit.intermediate_bytes() >> 10) + " KiB planned into " +
            std::to_string(jit.planned_bytes() >> 10) + " KiB";
  return {e, j};
}

// One Adam step of the digits CNN (examples/digits.cc's model) on a batch of 64 8x8 images.
std::vector<Row> cnn_rows(const Context& ctx) {
  Tensor::manual_seed(2);
  tensor::nn::Conv2d c1(1, 16, 3, 1, 1), c2(16, 32, 3, 1, 1);
  tensor::nn::Linear l(128, 10);
  std::vector<Tensor> params;
  for (auto& p : c1.parameters()) params.push_back(p);
  for (auto& p : c2.parameters()) params.push_back(p);
  for (auto& p : l.parameters()) params.push_back(p);
  tensor::Adam opt(params, 1e-2);
  Tensor x = Tensor::rand({64, 1, 8, 8}).realize();
  std::vector<double> ys(64);
  for (int i = 0; i < 64; i++) ys[i] = i % 10;
  Tensor y = Tensor::from_data(ys, {64}, tensor::dtypes::kInt32);
  auto step = [&] {
    opt.zero_grad();
    Tensor h = c2(c1(x).relu().max_pool2d(2)).relu().max_pool2d(2);
    Tensor loss = l(h.reshape({64, 128})).sparse_categorical_crossentropy(y);
    loss.backward();
    opt.step();
    loss.realize();
  };
  step();
  double ms = time_median_ms(step, ctx.quick ? 3 : 10, ctx.quick ? 200 : 1000);
  Row r = cpu_row("digits cnn adam step, batch 64", "time", "ms", ms);
  r.note = "conv(1->16)-pool-conv(16->32)-pool-linear on 8x8 images; median";
  return {r};
}

// One Adam step of tinygrad's beautiful_mnist model (conv5-conv5-BN-pool-conv3-conv3-BN-pool-
// linear, the CNN workload) on random 28x28 images, beside PyTorch in the same run.
std::vector<Row> mnist_cnn_rows(const Context& ctx) {
  const int64_t batch = ctx.quick ? 64 : 512;
  Tensor::manual_seed(0);
  tensor::nn::Conv2d c1(1, 32, 5), c2(32, 32, 5), c3(32, 64, 3), c4(64, 64, 3);
  tensor::nn::BatchNorm b1(32), b2(64);
  tensor::nn::Linear l(576, 10);
  std::vector<Tensor> params;
  for (auto* c : {&c1, &c2, &c3, &c4})
    for (auto& p : c->parameters()) params.push_back(p);
  for (auto* b : {&b1, &b2})
    for (auto& p : b->parameters()) params.push_back(p);
  for (auto& p : l.parameters()) params.push_back(p);
  tensor::Adam opt(params, 1e-3);
  Tensor x = Tensor::rand({batch, 1, 28, 28}).realize();
  std::vector<double> ys(static_cast<size_t>(batch));
  for (int64_t i = 0; i < batch; i++) ys[static_cast<size_t>(i)] = static_cast<double>(i % 10);
  Tensor y = Tensor::from_data(ys, {batch}, tensor::dtypes::kInt32);
  auto step = [&] {
    opt.zero_grad();
    Tensor h = b1(c2(c1(x).relu()).relu()).max_pool2d(2);
    h = b2(c4(c3(h).relu()).relu()).max_pool2d(2);
    Tensor loss = l(h.reshape({batch, 576})).sparse_categorical_crossentropy(y);
    loss.backward();
    opt.step();
    loss.realize().to_vector();
  };
  double t0 = now_ms();
  step();
  double first_ms = now_ms() - t0;
  double ms = time_median_ms(step, 3, 0);
  std::optional<double> torch_ms =
      python_reference(BARE_SOURCE_DIR "/bench/ref/torch_cnn.py",
                       std::to_string(ctx.threads) + " " + std::to_string(batch));
  Row r =
      cpu_row("mnist cnn adam step, batch " + std::to_string(batch), "time", "ms", ms, torch_ms);
  char note[160];
  std::snprintf(note, sizeof note,
                "beautiful_mnist's model on random 28x28 images; median of 3; first step %.0f ms",
                first_ms);
  r.note = note;
  return {r};
}

// conv2d forward, float32, (N, Cin, S, S) * (Cout, Cin, K, K) with padding P, through the tensor
// API (padding copied into memory, then the window reduction), beside PyTorch in the same run.
std::vector<Row> conv_rows(const Context& ctx) {
  struct Shape5 {
    int64_t n, cin, cout, size, k, pad;
  };
  std::vector<Shape5> shapes = {{32, 64, 64, 56, 3, 1}};
  if (ctx.quick) shapes = {{8, 64, 64, 56, 3, 1}};
  std::vector<Row> rows;
  for (const Shape5& s : shapes) {
    Tensor::manual_seed(0);
    Tensor x = Tensor::rand({s.n, s.cin, s.size, s.size}).realize();
    Tensor w = Tensor::rand({s.cout, s.cin, s.k, s.k}).realize();
    auto dev = runtime::get_device(x.device());
    if (!dev.ok()) dev.status().throw_if_error("bench conv2d");
    auto run = [&] {
      x.conv2d(w, std::nullopt, 1, s.pad).realize();
      (*dev)->synchronize().throw_if_error("bench conv2d");
    };
    double t0 = now_ms();
    run();
    double first_ms = now_ms() - t0;
    double ms = time_median_ms(run, ctx.quick ? 2 : 5, ctx.quick ? 200 : 1000);
    int64_t o = s.size + 2 * s.pad - s.k + 1;
    double gflop = 2.0 * s.n * s.cout * o * o * s.cin * s.k * s.k / 1e9;
    std::optional<double> torch_ms = python_reference(
        BARE_SOURCE_DIR "/bench/ref/torch_conv.py",
        std::to_string(ctx.threads) + " " + std::to_string(s.n) + " " + std::to_string(s.cin) +
            " " + std::to_string(s.cout) + " " + std::to_string(s.size) + " " +
            std::to_string(s.k) + " " + std::to_string(s.pad));
    std::string name = "conv2d " + std::to_string(s.n) + "x" + std::to_string(s.cin) + "x" +
                       std::to_string(s.size) + "^2 -> " + std::to_string(s.cout) + ", " +
                       std::to_string(s.k) + "x" + std::to_string(s.k) + " pad " +
                       std::to_string(s.pad);
    std::optional<double> torch_gflops;
    if (torch_ms) torch_gflops = gflop / (*torch_ms / 1000);
    Row r = cpu_row(name, "throughput", "GFLOP/s", gflop / (ms / 1000), torch_gflops);
    r.peak_pct = pct_of(r.value, ctx.fma_gflops);
    char note[160];
    std::snprintf(note, sizeof note,
                  "median %.1f ms (padding and weight copies included); first run %.0f ms", ms,
                  first_ms);
    r.note = note;
    rows.push_back(r);
  }
  return rows;
}

// Tensor ops the issue-18 table names, through the tensor API, each beside the same op in
// PyTorch (bench/ref/torch_ops.py) in the same run: a row sum and a softmax of a 4096x4096
// matrix, indexing with a tensor (a dataset batch, an embedding lookup), and a conv2d training
// step (forward, then the input and weight gradients).
std::vector<Row> tensor_op_rows(const Context& ctx) {
  Tensor::manual_seed(0);
  Tensor m = Tensor::rand({4096, 4096}).realize();
  auto dev = runtime::get_device(m.device());
  if (!dev.ok()) dev.status().throw_if_error("bench tensor ops");
  auto sync = [&] { (*dev)->synchronize().throw_if_error("bench tensor ops"); };
  auto torch_ms = [&](const char* op) {
    return python_reference(BARE_SOURCE_DIR "/bench/ref/torch_ops.py",
                            std::to_string(ctx.threads) + " " + op);
  };
  std::vector<Row> rows;
  const double bytes = 4.0 * 4096 * 4096;
  auto sum_run = [&] {
    m.sum({1}).realize();
    sync();
  };
  sum_run();
  double ms = time_median_ms(sum_run, 7, 0);
  std::optional<double> ref = torch_ms("sum1");
  Row sum = cpu_row("tensor sum(1) 4096x4096 fp32", "bandwidth", "GB/s", bytes / (ms * 1e6),
                    ref ? std::optional<double>(bytes / (*ref * 1e6)) : std::nullopt);
  sum.peak_pct = pct_of(sum.value, ctx.mem_gbs);
  sum.note = "median " + std::to_string(ms) + " ms, realize + synchronize";
  rows.push_back(sum);
  // A row of the median ms of `op().realize()` plus a synchronize (after one warm-up run),
  // beside PyTorch's `ref` op.
  auto timed = [&](const char* name, const char* ref_op, const char* note, auto op) {
    auto run = [&] {
      op().realize();
      sync();
    };
    run();
    Row r = cpu_row(name, "time", "ms", time_median_ms(run, 7, 0), torch_ms(ref_op));
    r.note = note;
    rows.push_back(r);
  };
  timed("tensor softmax(-1) 4096x4096 fp32", "softmax", "median, realize + synchronize",
        [&] { return m.softmax(-1); });
  // Indexing with a tensor: a training batch drawn from a dataset (beautiful_mnist's
  // X_train[samples]) and an embedding lookup (GPT-2-small's wte[tokens]).
  for (bool embed : {false, true}) {
    int64_t rows_n = embed ? 50257 : 60000, width = embed ? 768 : 784, picks = embed ? 1024 : 512;
    Tensor table =
        embed ? Tensor::rand({rows_n, width}).realize()
              : (Tensor::rand({rows_n, width}) * 255).cast(compiler::dtypes::kUint8).realize();
    Tensor idx = Tensor::randint({picks}, 0, rows_n).realize();
    timed(embed ? "tensor wte[tokens] 50257x768 fp32, 1024 tokens"
                : "tensor X[samples] 60000x784 uint8, 512 samples",
          embed ? "embed" : "batch",
          "median, realize + synchronize; one load per element at the index",
          [&] { return table[idx]; });
  }
  // Two index tensors after a slice (numpy's src[:, i, j]): both one-hot axes collapse to loads.
  Tensor src = Tensor::rand({10, 100, 200}).realize();
  Tensor i = Tensor::randint({50, 60}, 0, 100).realize(),
         j = Tensor::randint({50, 60}, 0, 200).realize();
  timed("tensor src[:, i, j] 10x100x200 fp32, 50x60 pairs", "pairs",
        "median, realize + synchronize; one load per element at the two indices",
        [&] { return src[{tensor::Idx::slice(), i, j}]; });
  if (!ctx.quick) {
    Tensor x = Tensor::rand({32, 64, 56, 56}).realize(), w = Tensor::rand({64, 64, 3, 3}).realize();
    auto step = [&] {
      std::vector<Tensor> g = x.conv2d(w, std::nullopt, 1, 1).sum().gradient({x, w});
      tensor::run_schedule(tensor::create_schedule({g[0].lazy(), g[1].lazy()}));
      sync();
    };
    step();
    Row cs = cpu_row("conv2d 32x64x56^2 -> 64 fwd+bwd", "time", "ms", time_median_ms(step, 3, 0),
                     torch_ms("convstep"));
    cs.note = "median; forward, then the input and weight gradients of the output's sum";
    rows.push_back(cs);
  }
  return rows;
}

// 2x2 max pooling of a 32x64x56x56 activation (8x64x56x56 with --quick): forward, and forward
// plus the input gradient of its sum (what training runs), PyTorch in the same run.
std::vector<Row> pool_rows(const Context& ctx) {
  const int64_t n = ctx.quick ? 8 : 32, c = 64, size = 56;
  Tensor::manual_seed(0);
  Tensor x = Tensor::rand({n, c, size, size}).realize();
  x.requires_grad_();
  auto dev = runtime::get_device(x.device());
  if (!dev.ok()) dev.status().throw_if_error("bench max_pool2d");
  std::vector<Row> rows;
  for (bool backward : {false, true}) {
    auto run = [&] {
      Tensor y = x.max_pool2d(2);
      if (backward)
        y.sum().gradient({x})[0].realize();
      else
        y.realize();
      (*dev)->synchronize().throw_if_error("bench max_pool2d");
    };
    run();
    double ms = time_median_ms(run, ctx.quick ? 3 : 7, 0);
    std::string shape = std::to_string(n) + "x" + std::to_string(c) + "x" + std::to_string(size);
    std::optional<double> torch_ms = python_reference(
        BARE_SOURCE_DIR "/bench/ref/torch_ops.py",
        std::to_string(ctx.threads) + (backward ? " poolstep " : " pool ") + std::to_string(n));
    Row r =
        cpu_row(std::string("max_pool2d 2x2 ") + shape + "^2" + (backward ? " fwd+bwd" : " fwd"),
                "time", "ms", ms, torch_ms);
    r.note = backward ? "median; forward and the input gradient of the sum" : "median";
    rows.push_back(r);
  }
  return rows;
}

// Per-op time of `(x * s + 1).realize()` on 16 floats when s is new on every call (a decayed
// rate, `a * float(i)` in a loop), beside the same op with a fixed s: with the constant lifted
// into a launch scalar (tensor/const_args.h) the two should cost the same.
std::vector<Row> scalar_sweep_rows(const Context& ctx) {
  Tensor x = Tensor::rand({16}).realize();
  const int n = ctx.quick ? 500 : 2000;
  auto per_op_us = [&](bool changing) {
    double s = 1.0;
    (x * s + 1).realize();  // warm: the program for a fixed s
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; i++) {
      if (changing) s = 1.0 + 1e-3 * i;
      (x * s + 1).realize();
    }
    auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::micro>(t1 - t0).count() / n;
  };
  double fixed = per_op_us(false), changing = per_op_us(true);
  Row r =
      cpu_row("tensor x*s+1, s new every call", "time", "us", changing, fixed, "same op, fixed s");
  r.note = "16 floats, mean of " + std::to_string(n) + " realizes, compiles included";
  return {r};
}

// The C++ half of the Python tiny op: `(a + 1.0).realize()` on 16 floats, synchronized each
// time, and where it goes: building the lazy graph, scheduling it (a schedule-cache hit after the
// first call, tensor/schedule_cache.h), and running the schedule (kernel-cache lookups,
// allocation, launch), timed stage by stage in a second loop. PyTorch's Python op as reference.
std::vector<Row> cpp_tiny_rows(const Context& ctx) {
  Tensor a = Tensor::rand({16}).realize();
  auto dev = runtime::get_device(a.device());
  if (!dev.ok()) dev.status().throw_if_error("bench c++ tiny op");
  auto sync = [&] { (*dev)->synchronize().throw_if_error("bench c++ tiny op"); };
  const int n = ctx.quick ? 5000 : 20000;
  for (int i = 0; i < 200; i++) (a + 1.0).realize();  // warm: compile, caches
  sync();
  using clock = std::chrono::steady_clock;
  auto us = [](clock::time_point t0, clock::time_point t1) {
    return std::chrono::duration<double, std::micro>(t1 - t0).count();
  };
  auto t0 = clock::now();
  for (int i = 0; i < n; i++) {
    (a + 1.0).realize();
    sync();
  }
  double total = us(t0, clock::now()) / n;
  double build = 0, sched = 0, run = 0, release = 0;
  for (int i = 0; i < n; i++) {
    auto s0 = clock::now();
    std::optional<Tensor> b = a + 1.0;
    auto s1 = clock::now();
    std::vector<tensor::ScheduleItem> items = tensor::create_schedule({b->lazy()});
    auto s2 = clock::now();
    tensor::run_schedule(std::move(items));
    sync();
    auto s3 = clock::now();
    b.reset();  // the result's graph node and buffer go back to the allocator
    auto s4 = clock::now();
    build += us(s0, s1), sched += us(s1, s2), run += us(s2, s3), release += us(s3, s4);
  }
  char note[192];
  std::snprintf(note, sizeof note,
                "per op, synchronized each time; mean of %d; build %.2f us, schedule %.2f us, "
                "run + sync %.2f us, release %.2f us",
                n, build / n, sched / n, run / n, release / n);
#ifdef BARE_PYTHON_BUILD_DIR
  std::optional<double> torch_us =
      python_reference(BARE_SOURCE_DIR "/bench/ref/python_tiny.py", "torch single");
#else
  std::optional<double> torch_us;
#endif
  Row r = cpu_row("c++ (a + 1).realize(), 16 floats", "time", "us", total, torch_us);
  r.note = note;
  return {r};
}

#ifdef BARE_PYTHON_BUILD_DIR
// Tiny-op latency through the Python API, as a user calls it (bench/ref/python_tiny.py), and
// PyTorch's through its own, in the same run.
std::vector<Row> python_tiny_rows(const Context&) {
  const std::string script = BARE_SOURCE_DIR "/bench/ref/python_tiny.py";
  const std::string paths = BARE_SOURCE_DIR "/python " BARE_PYTHON_BUILD_DIR;
  struct Mode {
    const char* arg;
    const char* name;
    const char* note;
  };
  std::vector<Row> rows;
  for (const Mode& m : {Mode{"single", "python (a + 1).realize(), 16 floats",
                             "per op, synchronized each time; median of 7 runs of 2000"},
                        Mode{"chain", "python 1,000 chained tiny adds, each realized",
                             "per op, synchronized once per chain; median of 7 chains"},
                        Mode{"mul", "python (a * b).realize(), 16 floats",
                             "per op, synchronized each time; median of 7 runs of 2000"},
                        Mode{"setitem", "python t[i] = 1.5 into 4096x64 floats",
                             "per op, synchronized each time; median of 7 runs of 2000"},
                        Mode{"iadd", "python t[i:i+2] += 1.5 on 4096x64 floats",
                             "per op, synchronized each time; median of 7 runs of 2000"},
                        Mode{"rows", "python t[i] = 1.5, each of 4096 rows once",
                             "per op, synchronized each time; median of 7 runs of 512 new "
                             "rows"}}) {
    std::optional<double> ours =
        python_reference(script, std::string("baregrad ") + m.arg + " " + paths);
    if (!ours) {
      std::fprintf(stderr, "  %s: not measured: %s failed (is the _baregrad extension built?)\n",
                   m.name, script.c_str());
      continue;
    }
    Row r = cpu_row(m.name, "time", "us", *ours,
                    python_reference(script, std::string("torch ") + m.arg));
    r.note = m.note;
    rows.push_back(r);
  }
  return rows;
}
#endif

}  // namespace

void register_train_benches() {
  register_bench("c++ tiny op", cpp_tiny_rows,
                 "(a + 1.0).realize() on 16 floats through the C++ tensor API (per op, us), with "
                 "the time of graph building, scheduling and running; PyTorch's Python op as ref");
#ifdef BARE_PYTHON_BUILD_DIR
  register_bench("python tiny op", python_tiny_rows,
                 "(a + 1).realize() on 16 floats and 1,000 chained realized adds from Python "
                 "(per op, us), PyTorch in the same run");
#endif
  register_bench(
      "mnist cnn step", mnist_cnn_rows,
      "one Adam step of beautiful_mnist's CNN at batch 512 (64 with --quick), PyTorch in "
      "the same run");
  register_bench("conv2d", conv_rows,
                 "conv2d forward 32x64x56x56 -> 64, 3x3, pad 1 (GFLOP/s), PyTorch in the same run");
  register_bench(
      "tensor ops", tensor_op_rows,
      "sum(1) and softmax(-1) of 4096x4096, X[samples], wte[tokens] and src[:, i, j], conv2d "
      "32x64x56^2 fwd+bwd, through the tensor "
      "API, PyTorch in the same run");
  register_bench(
      "max_pool2d", pool_rows,
      "2x2 max pooling of 32x64x56x56, forward and forward+backward (ms), PyTorch in the "
      "same run");
  register_bench("scalar sweep", scalar_sweep_rows,
                 "x*s+1 on 16 floats with s new on every call, beside a fixed s (per op, us)");
  register_bench("cnn step", cnn_rows, "one Adam training step of the digits CNN, batch 64");
  register_bench("mlp step", mlp_rows,
                 "one Adam training step of an MLP 784-512-512-10, batch 128, no JIT yet");
}

}  // namespace baregrad::bench
