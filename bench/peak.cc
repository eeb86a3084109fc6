#include "bench/peak.h"

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#endif

namespace baregrad::bench {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kMemArrayBytes = 512 * kMiB;       // Per array; 1.5 GiB in all for triad.
constexpr size_t kQuickMemArrayBytes = 256 * kMiB;  // Still 8x a 32 MiB L3.
constexpr size_t kHugePage = 2 * kMiB;

double now_ms() {
  auto since_epoch = std::chrono::steady_clock::now().time_since_epoch();
  return std::chrono::duration<double, std::milli>(since_epoch).count();
}

std::vector<int> allowed_cpu_list() {
  std::vector<int> cpus;
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
    }
  }
#endif
  if (cpus.empty()) {
    int n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    for (int cpu = 0; cpu < n; ++cpu) cpus.push_back(cpu);
  }
  return cpus;
}

// Pins the calling thread to `cpu`; best effort (a failure only costs measurement noise).
void pin_current_thread(int cpu) {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
#else
  (void)cpu;
#endif
}

// Runs body(tid) on `threads` fresh threads pinned round-robin to the allowed CPUs, `reps` times
// in lock-step (barrier before and after each rep). Returns each rep's wall time in ms, from the
// start barrier to the moment the slowest thread finished.
std::vector<double> run_lockstep_ms(int threads, int reps, const std::function<void(int)>& body) {
  std::vector<int> cpus = allowed_cpu_list();
  std::vector<double> ms(static_cast<size_t>(reps));
  std::barrier sync(threads);
  {
    std::vector<std::jthread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        pin_current_thread(cpus[static_cast<size_t>(t) % cpus.size()]);
        for (int r = 0; r < reps; ++r) {
          sync.arrive_and_wait();
          double start = now_ms();
          body(t);
          sync.arrive_and_wait();
          if (t == 0) ms[static_cast<size_t>(r)] = now_ms() - start;
        }
      });
    }
  }  // jthreads join here.
  return ms;
}

// ---- FP32 FMA peak ----------------------------------------------------------------------------

// Each kernel runs `iters` rounds of independent FMA chains acc = acc * a + b (converging to 1, no
// denormals) and returns their sum so the work cannot be optimised away.
struct FmaKernel {
  const char* isa;
  float (*run)(int64_t iters);
  double flops_per_iter;
};

constexpr float kFmaA = 0.999f;
constexpr float kFmaB = 0.001f;

#if defined(__x86_64__)
// 16 chains cover Zen 4's 4-cycle FMA latency many times over and fit in 32 zmm registers.
constexpr int kChains512 = 16;

__attribute__((target("avx512f"))) float fma_avx512(int64_t iters) {
  const __m512 a = _mm512_set1_ps(kFmaA);
  const __m512 b = _mm512_set1_ps(kFmaB);
  __m512 acc[kChains512];
  for (int c = 0; c < kChains512; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kChains512; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  }
  __m512 sum = acc[0];
  for (int c = 1; c < kChains512; ++c) sum = _mm512_add_ps(sum, acc[c]);
  // NOTE: not _mm512_reduce_add_ps: GCC 12 warns (-Wuninitialized) inside its expansion.
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  float total = 0;
  for (float v : lanes) total += v;
  return total;
}

// 12 chains + 2 constants fit in the 16 ymm registers (16 chains would spill).
constexpr int kChains256 = 12;

__attribute__((target("avx2,fma"))) float fma_avx2(int64_t iters) {
  const __m256 a = _mm256_set1_ps(kFmaA);
  const __m256 b = _mm256_set1_ps(kFmaB);
  __m256 acc[kChains256];
  for (int c = 0; c < kChains256; ++c) acc[c] = _mm256_set1_ps(static_cast<float>(c));
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int c = 0; c < kChains256; ++c) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
  }
  __m256 sum = acc[0];
  for (int c = 1; c < kChains256; ++c) sum = _mm256_add_ps(sum, acc[c]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum);
  float total = 0;
  for (float v : lanes) total += v;
  return total;
}
#endif

constexpr int kChainsScalar = 16;

float fma_scalar(int64_t iters) {
  float acc[kChainsScalar];
  for (int c = 0; c < kChainsScalar; ++c) acc[c] = static_cast<float>(c);
  for (int64_t i = 0; i < iters; ++i) {
    for (float& v : acc) v = v * kFmaA + kFmaB;
  }
  float total = 0;
  for (float v : acc) total += v;
  return total;
}

// The widest kernel this CPU (and OS) supports.
FmaKernel pick_fma_kernel() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return {"avx512f", fma_avx512, kChains512 * 16 * 2.0};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    return {"avx2+fma", fma_avx2, kChains256 * 8 * 2.0};
  }
#endif
  return {"scalar", fma_scalar, kChainsScalar * 2.0};
}

// Best GFLOP/s of `reps` runs of `iters` iterations on every one of `threads` threads.
double fma_gflops(const FmaKernel& k, int threads, int64_t iters, int reps) {
  std::vector<float> sink(static_cast<size_t>(threads));
  std::vector<double> ms =
      run_lockstep_ms(threads, reps, [&](int t) { sink[static_cast<size_t>(t)] = k.run(iters); });
  for (float v : sink) {
    if (!std::isfinite(v)) std::fprintf(stderr, "peak: FMA kernel produced %g\n", v);
  }
  double flops = k.flops_per_iter * static_cast<double>(iters) * threads;
  return flops / (*std::min_element(ms.begin(), ms.end()) * 1e6);
}

// Iterations of `k` that take about target_ms on one thread.
int64_t calibrate_fma_iters(const FmaKernel& k, double target_ms) {
  for (int64_t iters = 1 << 12;; iters *= 4) {
    double gflops = fma_gflops(k, 1, iters, 1);
    double ms = k.flops_per_iter * static_cast<double>(iters) / (gflops * 1e6);
    if (ms >= 5 || iters >= (int64_t{1} << 40)) {
      return std::max<int64_t>(1,
                               static_cast<int64_t>(static_cast<double>(iters) * target_ms / ms));
    }
  }
}

// ---- Memory bandwidth ---------------------------------------------------------------------------

// 64 bytes of floats; may_alias because the arrays are also written as plain floats.
typedef float F32x16 __attribute__((vector_size(64), may_alias));
constexpr size_t kLanes = 16;

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using FloatArray = std::unique_ptr<float[], FreeDeleter>;

// `bytes` (a multiple of 2 MiB) of 2 MiB-aligned floats, with transparent huge pages requested.
FloatArray alloc_array(size_t bytes) {
  void* p = std::aligned_alloc(kHugePage, bytes);
  if (p == nullptr) throw std::bad_alloc();
#if defined(__linux__)
  madvise(p, bytes, MADV_HUGEPAGE);  // Best effort: fewer TLB misses while streaming.
#endif
  return FloatArray(static_cast<float*>(p));
}

// The [begin, end) range of whole F32x16 vectors that thread t of `threads` owns out of `vecs`.
std::pair<size_t, size_t> chunk(size_t vecs, int t, int threads) {
  size_t per = (vecs + static_cast<size_t>(threads) - 1) / static_cast<size_t>(threads);
  size_t begin = std::min(vecs, per * static_cast<size_t>(t));
  return {begin, std::min(vecs, begin + per)};
}

float read_kernel(const F32x16* a, size_t begin, size_t end) {
  // Two accumulators = 8 independent SSE add chains: enough to never be latency-bound.
  F32x16 s0 = {};
  F32x16 s1 = {};
  size_t i = begin;
  for (; i + 1 < end; i += 2) {
    s0 += a[i];
    s1 += a[i + 1];
  }
  if (i < end) s0 += a[i];
  F32x16 s = s0 + s1;
  float total = 0;
  for (size_t l = 0; l < kLanes; ++l) total += s[l];
  return total;
}

void write_kernel(F32x16* a, size_t begin, size_t end, float value) {
  F32x16 v = {};
  v += value;
  for (size_t i = begin; i < end; ++i) a[i] = v;
}

void write_nt_kernel(F32x16* a, size_t begin, size_t end, float value) {
#if defined(__x86_64__)
  // SSE streaming stores are baseline x86-64; the write-combining buffers merge them into lines.
  const __m128 v = _mm_set1_ps(value);
  for (size_t i = begin; i < end; ++i) {
    float* p = reinterpret_cast<float*>(a + i);
    _mm_stream_ps(p, v);
    _mm_stream_ps(p + 4, v);
    _mm_stream_ps(p + 8, v);
    _mm_stream_ps(p + 12, v);
  }
  _mm_sfence();
#else
  write_kernel(a, begin, end, value);
#endif
}

void copy_kernel(F32x16* b, const F32x16* a, size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) {
    b[i] = a[i];
    // NOTE: keeps the compiler from turning the loop into memcpy, whose large-size path uses
    // non-temporal stores and would measure a different thing.
    asm volatile("" ::: "memory");
  }
}

void triad_kernel(F32x16* a, const F32x16* b, const F32x16* c, size_t begin, size_t end) {
  const float s = 3.0f;
  for (size_t i = begin; i < end; ++i) a[i] = b[i] + s * c[i];
}

// Best GB/s (1e9 bytes/s) of `reps` lock-step runs of body, each moving `bytes` in all.
double best_gbs(int threads, int reps, double bytes, const std::function<void(int)>& body) {
  std::vector<double> ms = run_lockstep_ms(threads, reps, body);
  return bytes / (*std::min_element(ms.begin(), ms.end()) * 1e6);
}

void measure_memory(Context& ctx, int reps) {
  const size_t bytes = ctx.quick ? kQuickMemArrayBytes : kMemArrayBytes;
  const size_t vecs = bytes / sizeof(F32x16);
  const int threads = ctx.threads;
  const double nbytes = static_cast<double>(bytes);
  FloatArray a = alloc_array(bytes);
  FloatArray b = alloc_array(bytes);
  FloatArray c = alloc_array(bytes);
  auto* va = reinterpret_cast<F32x16*>(a.get());
  auto* vb = reinterpret_cast<F32x16*>(b.get());
  auto* vc = reinterpret_cast<F32x16*>(c.get());
  // First touch by the same pinned threads that measure, so pages sit near them.
  run_lockstep_ms(threads, 1, [&](int t) {
    auto [begin, end] = chunk(vecs, t, threads);
    write_kernel(va, begin, end, 1.0f);
    write_kernel(vb, begin, end, 2.0f);
    write_kernel(vc, begin, end, 0.5f);
  });
  Peaks& p = ctx.peaks;
  p.mem_array_bytes = bytes;
  std::vector<float> sink(static_cast<size_t>(threads));
  p.read_gbs = best_gbs(threads, reps, nbytes, [&](int t) {
    auto [begin, end] = chunk(vecs, t, threads);
    sink[static_cast<size_t>(t)] = read_kernel(va, begin, end);
  });
  std::fprintf(stderr, "peak mem bw read: %.1f GB/s\n", p.read_gbs);
  p.write_gbs = best_gbs(threads, reps, nbytes, [&](int t) {
    auto [begin, end] = chunk(vecs, t, threads);
    write_kernel(vb, begin, end, 2.0f);
  });
  std::fprintf(stderr, "peak mem bw write: %.1f GB/s\n", p.write_gbs);
  p.write_nt_gbs = best_gbs(threads, reps, nbytes, [&](int t) {
    auto [begin, end] = chunk(vecs, t, threads);
    write_nt_kernel(vb, begin, end, 2.0f);
  });
  std::fprintf(stderr, "peak mem bw write nt: %.1f GB/s\n", p.write_nt_gbs);
  p.copy_gbs = best_gbs(threads, reps, 2 * nbytes, [&](int t) {
    auto [begin, end] = chunk(vecs, t, threads);
    copy_kernel(vb, va, begin, end);
  });
  std::fprintf(stderr, "peak mem bw copy: %.1f GB/s\n", p.copy_gbs);
  p.triad_gbs = best_gbs(threads, reps, 3 * nbytes, [&](int t) {
    auto [begin, end] = chunk(vecs, t, threads);
    triad_kernel(va, vb, vc, begin, end);
  });
  std::fprintf(stderr, "peak mem bw triad: %.1f GB/s\n", p.triad_gbs);
  for (float v : sink) {
    if (!std::isfinite(v)) std::fprintf(stderr, "peak: read kernel produced %g\n", v);
  }
  ctx.mem_gbs = std::max(p.copy_gbs, p.triad_gbs);
}

// ---- Rows ---------------------------------------------------------------------------------------

Row peak_row(std::string name, std::string metric, double value, std::string unit) {
  Row r;
  r.name = std::move(name);
  r.device = "CPU";
  r.metric = std::move(metric);
  r.value = value;
  r.unit = std::move(unit);
  return r;
}

std::string threads_text(int threads) {
  return std::to_string(threads) + (threads == 1 ? " thread" : " threads");
}

std::vector<Row> fma_rows(const Context& ctx) {
  Row one = peak_row("peak fma fp32 1 thread", "throughput", ctx.peaks.fma_gflops_1, "GFLOP/s");
  one.note = ctx.peaks.fma_isa;
  Row all = peak_row("peak fma fp32", "throughput", ctx.fma_gflops, "GFLOP/s");
  all.peak_pct = 100.0;
  all.note = ctx.peaks.fma_isa + ", " + threads_text(ctx.threads);
  return {one, all};
}

std::vector<Row> mem_rows(const Context& ctx) {
  const Peaks& p = ctx.peaks;
  std::string note =
      threads_text(ctx.threads) + ", " + std::to_string(p.mem_array_bytes / kMiB) + " MiB arrays";
  std::vector<Row> rows = {
      peak_row("peak mem bw read", "bandwidth", p.read_gbs, "GB/s"),
      peak_row("peak mem bw write", "bandwidth", p.write_gbs, "GB/s"),
      peak_row("peak mem bw write nt", "bandwidth", p.write_nt_gbs, "GB/s"),
      peak_row("peak mem bw copy", "bandwidth", p.copy_gbs, "GB/s"),
      peak_row("peak mem bw triad", "bandwidth", p.triad_gbs, "GB/s"),
  };
  for (Row& r : rows) {
    r.note = note;
    if (r.value == ctx.mem_gbs) {
      r.peak_pct = 100.0;
      r.note += "; the memory peak";
    }
  }
  return rows;
}

}  // namespace

int available_cpus() { return static_cast<int>(allowed_cpu_list().size()); }

void measure_peaks(Context& ctx) {
  // Many short repetitions, best kept: one of them likely runs without a competing process.
  const int fma_reps = ctx.quick ? 6 : 12;
  const int mem_reps = ctx.quick ? 4 : 8;
  const FmaKernel k = pick_fma_kernel();
  ctx.peaks.fma_isa = k.isa;
  const int64_t iters = calibrate_fma_iters(k, 10.0);
  ctx.peaks.fma_gflops_1 = fma_gflops(k, 1, iters, fma_reps);
  std::fprintf(stderr, "peak fma fp32 1 thread (%s): %.1f GFLOP/s\n", k.isa,
               ctx.peaks.fma_gflops_1);
  ctx.fma_gflops = fma_gflops(k, ctx.threads, iters, fma_reps);
  std::fprintf(stderr, "peak fma fp32 %s (%s): %.1f GFLOP/s\n", threads_text(ctx.threads).c_str(),
               k.isa, ctx.fma_gflops);
  measure_memory(ctx, mem_reps);
}

void register_peak_benches() {
  register_bench("peak fma fp32", fma_rows,
                 "rows 'peak fma fp32 1 thread' and 'peak fma fp32' (all threads: the compute\n"
                 "peak): GFLOP/s of independent FP32 FMA chains, AVX-512 > AVX2 > scalar");
  register_bench("peak mem bw", mem_rows,
                 "rows 'peak mem bw read|write|write nt|copy|triad': GB/s on all threads,\n"
                 "STREAM byte counting; max(copy, triad) is the memory peak");
}

}  // namespace baregrad::bench
