// OpenBLAS reference rows: the vendor-library baseline our own kernels are compared against.

#include <cblas.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench/bench.h"

namespace baregrad::bench {
namespace {

constexpr int kSizes[] = {512, 1024, 2048};

// Deterministic values in [-1, 1) so every run multiplies the same matrices.
std::vector<float> random_matrix(int n, uint32_t seed) {
  std::vector<float> m(static_cast<size_t>(n) * static_cast<size_t>(n));
  uint32_t state = seed;
  for (float& v : m) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<float>(state >> 8) / static_cast<float>(1u << 23) - 1.0f;
  }
  return m;
}

double measure_sgemm_gflops(int n, int threads) {
  openblas_set_num_threads(threads);
  std::vector<float> a = random_matrix(n, 1);
  std::vector<float> b = random_matrix(n, 2);
  std::vector<float> c(a.size());
  double ms = time_median_ms(
      [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(),
                    n, 0.0f, c.data(), n);
      },
      5, 300.0);
  // NOTE: OpenBLAS worker threads busy-wait for a while after a call; let them go to sleep so
  // they do not steal cycles from whatever is measured next.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  double flops = 2.0 * n * static_cast<double>(n) * n;
  return flops / (ms * 1e6);
}

std::vector<Row> sgemm_rows(const Context& ctx, int n) {
  Row r;
  r.name = "openblas sgemm " + std::to_string(n);
  r.device = "CPU";
  r.metric = "throughput";
  r.unit = "GFLOP/s";
  r.value = openblas_sgemm_gflops(n, ctx.threads);
  r.peak_pct = pct_of(r.value, ctx.fma_gflops);
  r.note = "OpenBLAS, " + std::to_string(ctx.threads) + (ctx.threads == 1 ? " thread" : " threads");
  return {r};
}

}  // namespace

double openblas_sgemm_gflops(int n, int threads) {
  static std::mutex mu;
  static std::map<std::pair<int, int>, double> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find({n, threads});
  if (it != cache.end()) return it->second;
  double gflops = measure_sgemm_gflops(n, threads);
  cache.emplace(std::make_pair(n, threads), gflops);
  return gflops;
}

void register_blas_benches() {
  for (int n : kSizes) {
    register_bench(
        "openblas sgemm " + std::to_string(n),
        [n](const Context& ctx) { return sgemm_rows(ctx, n); },
        "row 'openblas sgemm " + std::to_string(n) +
            "': cblas_sgemm, square row-major fp32,\n2*n^3 / median time in GFLOP/s");
  }
}

}  // namespace baregrad::bench
