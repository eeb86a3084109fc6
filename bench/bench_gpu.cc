// GPUs side by side: our NVIDIA driver (DEV=NV) against the vendor stack (DEV=CUDA: the same
// cubins through libcuda, and cuBLAS) in the same run: tiny-kernel dispatch latency, graph
// replay of 1000 tiny kernels, host <-> device and device-to-device copy bandwidth, an
// elementwise kernel over 1 GiB, and fp32 and bf16 matmuls (ours vs cuBLAS). Rows appear for each
// GPU device that opens; NV rows carry CUDA's value as the reference. With DEV=MOCK+NV the fake GPU
// is measured too, at small sizes (host simulation numbers: a check of the benchmark itself, not of
// any GPU).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "base/options.h"
#include "base/status.h"
#include "bench/bench.h"
#include "compiler/ast.h"
#include "runtime/cuda/cublas.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/device.h"

namespace baregrad::bench {
namespace {
using namespace compiler;
using runtime::Buffer;

const DType kF32 = dtypes::kFloat32;
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

void check(const Status& s, const std::string& what) {
  if (!s.ok()) throw std::runtime_error(what + ": " + s.to_string());
}
template <class T>
T check(Result<T> r, const std::string& what) {
  check(r.status(), what);
  return std::move(*r);
}

// c = a + b over n floats.
UOpPtr add_ast(int64_t n) {
  auto st = ShapeTracker::contiguous({n});
  return sink({store(global(0, kF32), st, load(global(1, kF32), st) + load(global(2, kF32), st))});
}

// c[n x n] = a[n x n] @ b[n x n], row-major; a and b of dtype `in`, products and sums in fp32
// (cuBLAS' GemmEx configuration for both rows).
UOpPtr matmul_ast(int64_t n, DType in) {
  auto la = load(global(1, in), strided({n, n, n}, {n, 0, 1}));
  auto lb = load(global(2, in), strided({n, n, n}, {0, 1, n}));
  if (in != kF32) la = cast(la, kF32), lb = cast(lb, kF32);
  return sink(
      {store(global(0, kF32), strided({n, n, 1}, {n, 1, 0}), reduce_axis(Op::ADD, {2}, la * lb))});
}

struct Sizes {
  size_t copy_bytes, ew_bytes;
  int64_t matmul_n, bf16_n;
  int graph_kernels;
};

// One device's measurements; NaN where it has none.
struct Measured {
  std::string device, note;
  double launch_us = kNan, graph_us = kNan, in_gbs = kNan, out_gbs = kNan, d2d_gbs = kNan,
         ew_gbs = kNan, mm_gflops = kNan, bf16_gflops = kNan, cublas_fp32 = kNan,
         cublas_bf16 = kNan;
};

Measured measure(runtime::Device& dev, const Sizes& sz) {
  Measured m;
  m.device = dev.name();
  std::vector<Buffer> owned;
  auto alloc = [&](size_t bytes) {
    Buffer b = check(dev.alloc(bytes), "alloc on " + dev.name());
    owned.push_back(b);
    return b;
  };
  try {
    // Tiny launch: c[0] = a[0] + b[0], then synchronize; the result is checked once.
    auto tiny = check(dev.compile(add_ast(1)), "compile");
    Buffer a = alloc(4), b = alloc(4), c = alloc(4);
    float one = 1.5f, two = 2.25f, got = 0;
    check(dev.copy_in(a, &one, 4), "copy_in");
    check(dev.copy_in(b, &two, 4), "copy_in");
    std::vector<Buffer> abc{c, a, b};
    double ms = time_median_ms(
        [&] {
          check(dev.launch(*tiny, abc), "launch");
          check(dev.synchronize(), "synchronize");
        },
        20, 300);
    m.launch_us = ms * 1e3;
    check(dev.copy_out(&got, c, 4), "copy_out");
    if (got != 3.75f) m.note = "WRONG RESULT of the tiny kernel (" + std::to_string(got) + ")";

    // Graph replay of graph_kernels tiny launches.
    std::vector<runtime::GraphLaunch> ls(sz.graph_kernels, {tiny, abc, {-1, -1, -1}});
    auto graph = dev.make_graph(ls, 0);
    if (graph.ok()) {
      ms = time_median_ms(
          [&] {
            check((*graph)->replay({}), "replay");
            check(dev.synchronize(), "synchronize");
          },
          5, 300);
      m.graph_us = ms * 1e3 / sz.graph_kernels;
    }

    // Host <-> device copies.
    std::vector<uint8_t> host(sz.copy_bytes, 1);
    Buffer big = alloc(sz.copy_bytes);
    ms = time_median_ms([&] { check(dev.copy_in(big, host.data(), host.size()), "copy_in"); }, 3,
                        300);
    m.in_gbs = static_cast<double>(sz.copy_bytes) / (ms * 1e6);
    ms = time_median_ms([&] { check(dev.copy_out(host.data(), big, host.size()), "copy_out"); }, 3,
                        300);
    m.out_gbs = static_cast<double>(sz.copy_bytes) / (ms * 1e6);
    // Device to device: the bytes are read once and written once.
    Buffer big2 = alloc(sz.copy_bytes);
    ms = time_median_ms(
        [&] {
          check(dev.copy(big2, big, sz.copy_bytes), "copy");
          check(dev.synchronize(), "synchronize");
        },
        3, 300);
    m.d2d_gbs = 2.0 * static_cast<double>(sz.copy_bytes) / (ms * 1e6);

    // Elementwise c = a + b with ew_bytes per array.
    auto n = static_cast<int64_t>(sz.ew_bytes / 4);
    auto ew = check(dev.compile(add_ast(n)), "compile");
    std::vector<Buffer> ewb{alloc(sz.ew_bytes), alloc(sz.ew_bytes), alloc(sz.ew_bytes)};
    ms = time_median_ms(
        [&] {
          check(dev.launch(*ew, ewb), "launch");
          check(dev.synchronize(), "synchronize");
        },
        3, 300);
    m.ew_gbs = 3.0 * static_cast<double>(sz.ew_bytes) / (ms * 1e6);

    // fp32 matmul: ours, and cuBLAS on the CUDA device.
    int64_t mn = sz.matmul_n;
    auto mm = check(dev.compile(matmul_ast(mn, kF32)), "compile");
    size_t mbytes = static_cast<size_t>(mn * mn) * 4;
    std::vector<Buffer> mmb{alloc(mbytes), alloc(mbytes), alloc(mbytes)};
    double flop = 2.0 * static_cast<double>(mn) * mn * mn;
    ms = time_median_ms(
        [&] {
          check(dev.launch(*mm, mmb), "launch");
          check(dev.synchronize(), "synchronize");
        },
        2, 300);
    m.mm_gflops = flop / (ms * 1e6);
    // bf16 matmul: ours (bf16 loads, fp32 products and sums), then cuBLAS on the same buffers.
    int64_t bn = sz.bf16_n;
    size_t in_bytes = static_cast<size_t>(bn * bn) * 2, out_bytes = in_bytes * 2;
    std::vector<Buffer> bmb{alloc(out_bytes), alloc(in_bytes), alloc(in_bytes)};
    double bflop = 2.0 * static_cast<double>(bn) * bn * bn;
    auto bmm = check(dev.compile(matmul_ast(bn, dtypes::kBFloat16)), "compile");
    ms = time_median_ms(
        [&] {
          check(dev.launch(*bmm, bmb), "launch");
          check(dev.synchronize(), "synchronize");
        },
        2, 300);
    m.bf16_gflops = bflop / (ms * 1e6);
    if (auto* cuda = dynamic_cast<runtime::CudaDevice*>(&dev)) {
      auto blas = check(runtime::Cublas::create(*cuda), "cuBLAS");
      ms = time_median_ms(
          [&] {
            check(blas->gemm(runtime::GemmInput::kFp32, mmb[1], mmb[2], mmb[0], mn, mn, mn),
                  "cublasGemmEx fp32");
            check(dev.synchronize(), "synchronize");
          },
          3, 300);
      m.cublas_fp32 = flop / (ms * 1e6);
      ms = time_median_ms(
          [&] {
            check(blas->gemm(runtime::GemmInput::kBf16, bmb[1], bmb[2], bmb[0], bn, bn, bn),
                  "cublasGemmEx bf16");
            check(dev.synchronize(), "synchronize");
          },
          3, 300);
      m.cublas_bf16 = bflop / (ms * 1e6);
    }
  } catch (const std::exception& e) {
    m.note = e.what();
    std::fprintf(stderr, "bare_bench: gpu on %s stopped: %s\n", dev.name().c_str(), e.what());
  }
  (void)dev.synchronize();
  for (Buffer b : owned) dev.free(b);
  return m;
}

std::vector<Row> gpu_rows(const Context& ctx) {
  std::vector<std::shared_ptr<runtime::Device>> devs;
  std::string absent;
  for (const char* name : {"NV", "CUDA"}) {
    auto d = runtime::get_device(name);
    if (d.ok()) {
      devs.push_back(*d);
    } else {
      absent += std::string(absent.empty() ? "" : "; ") + name + ": " + d.status().message();
    }
  }
  if (options().dev == "MOCK+NV") devs.push_back(check(runtime::get_device("MOCK+NV"), "MOCK+NV"));
  if (devs.empty()) {
    std::fprintf(stderr, "bare_bench: gpu: no GPU device opens (%s)\n", absent.c_str());
    return {};
  }
  Sizes full{size_t{256} << 20, size_t{1} << 30, 4096, 8192, 1000};
  Sizes quick{size_t{32} << 20, size_t{64} << 20, 1024, 2048, 1000};
  Sizes fake{size_t{4} << 20, size_t{4} << 20, 64, 64, 100};  // the fake GPU simulates on the host
  std::vector<Measured> ms;
  for (auto& d : devs) {
    bool simulated = d->name().rfind("MOCK+", 0) == 0;
    std::fprintf(stderr, "bare_bench: gpu: measuring %s\n", d->name().c_str());
    ms.push_back(measure(*d, simulated ? fake : ctx.quick ? quick : full));
  }
  const Measured* cuda = nullptr;
  for (const Measured& m : ms)
    if (m.device == "CUDA") cuda = &m;
  std::vector<Row> rows;
  for (const Measured& m : ms) {
    bool simulated = m.device.rfind("MOCK+", 0) == 0;
    const Sizes& sz = simulated ? fake : ctx.quick ? quick : full;
    // `field`: the vendor's number to compare with (CUDA's own row, or cuBLAS for matmul).
    auto add = [&](const std::string& name, const std::string& metric, const std::string& unit,
                   double v, double Measured::* field, const std::string& note,
                   const char* ref = "CUDA") {
      if (std::isnan(v)) return;
      Row r;
      r.name = "gpu " + name;
      r.device = m.device;
      r.metric = metric;
      r.unit = unit;
      r.value = v;
      if (cuda && &m != cuda && !simulated && !std::isnan(cuda->*field)) {
        r.ref = ref;
        r.ref_value = cuda->*field;
      }
      r.note = m.note.empty() ? note : m.note;
      rows.push_back(r);
    };
    add("tiny launch + synchronize", "time", "us", m.launch_us, &Measured::launch_us,
        "c[0] = a[0] + b[0]; median");
    add("graph replay", "time", "us/kernel", m.graph_us, &Measured::graph_us,
        std::to_string(sz.graph_kernels) + " tiny kernels per replay + synchronize");
    add("copy-in (host -> device)", "bandwidth", "GB/s", m.in_gbs, &Measured::in_gbs,
        std::to_string(sz.copy_bytes >> 20) + " MiB");
    add("copy-out (device -> host)", "bandwidth", "GB/s", m.out_gbs, &Measured::out_gbs,
        std::to_string(sz.copy_bytes >> 20) + " MiB");
    add("copy device -> device", "bandwidth", "GB/s", m.d2d_gbs, &Measured::d2d_gbs,
        std::to_string(sz.copy_bytes >> 20) + " MiB, read + written");
    add("elementwise add", "bandwidth", "GB/s", m.ew_gbs, &Measured::ew_gbs,
        std::to_string(sz.ew_bytes >> 20) + " MiB per array, 3 arrays moved");
    add("matmul fp32 " + std::to_string(sz.matmul_n), "throughput", "GFLOP/s", m.mm_gflops,
        &Measured::cublas_fp32,
        "our kernel (register tiles up to 4 x 4 outputs per thread, no shared memory)", "cuBLAS");
    add("matmul fp32 " + std::to_string(sz.matmul_n) + " (cuBLAS)", "throughput", "GFLOP/s",
        m.cublas_fp32, &Measured::cublas_fp32, "cublasGemmEx, fp32 accumulate");
    add("matmul bf16 " + std::to_string(sz.bf16_n), "throughput", "GFLOP/s", m.bf16_gflops,
        &Measured::cublas_bf16, "our kernel: bf16 in, fp32 accumulate and out; no tensor cores",
        "cuBLAS");
    add("matmul bf16 " + std::to_string(sz.bf16_n) + " (cuBLAS)", "throughput", "GFLOP/s",
        m.cublas_bf16, &Measured::cublas_bf16, "cublasGemmEx, fp32 accumulate and out");
  }
  if (!absent.empty()) std::fprintf(stderr, "bare_bench: gpu: not measured: %s\n", absent.c_str());
  return rows;
}

}  // namespace

void register_gpu_benches() {
  register_bench("gpu", gpu_rows,
                 "GPUs: DEV=NV (our driver) vs DEV=CUDA (libcuda, cuBLAS): launch latency, "
                 "graph replay, copies, elementwise, fp32 and bf16 matmul; DEV=MOCK+NV adds the "
                 "fake GPU");
}

}  // namespace baregrad::bench
