#pragma once

// The bare_bench harness: a registry of named benchmarks, timing helpers, and the table and JSON
// lines output. main.cc registers every benchmark explicitly, measures the machine peaks, then
// runs the registered benchmarks in order. See bench/README.md for what every row measures.

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace baregrad::bench {

// One result line: a table row on stdout and one JSON object in the --json file.
struct Row {
  std::string name;                 // e.g. "openblas sgemm 2048".
  std::string device;               // e.g. "CPU".
  std::string metric;               // "throughput", "bandwidth" or "time".
  std::string unit;                 // "GFLOP/s", "GB/s" (1e9 bytes/s), "ms", ...
  double value = 0;                 // In `unit`.
  std::optional<double> peak_pct;   // value as a percentage of the matching machine peak.
  std::optional<std::string> ref;   // Reference implementation, e.g. "OpenBLAS".
  std::optional<double> ref_value;  // The reference's value in `unit`, measured in this run.
  std::string note;                 // Free text for the table only; not in the JSON.
};

// Machine peaks measured once per run by measure_peaks() (bench/peak.h).
struct Peaks {
  std::string fma_isa;         // FMA kernel used: "avx512f", "avx2+fma" or "scalar".
  double fma_gflops_1 = 0;     // FP32 FMA GFLOP/s on one thread.
  double read_gbs = 0;         // All threads; bytes read.
  double write_gbs = 0;        // All threads; bytes written with normal stores.
  double write_nt_gbs = 0;     // All threads; bytes written with non-temporal stores.
  double copy_gbs = 0;         // All threads; bytes read + written, b[i] = a[i].
  double triad_gbs = 0;        // All threads; bytes read + written, a[i] = b[i] + s * c[i].
  size_t mem_array_bytes = 0;  // Size of each array of the memory benchmarks.
};

// What every benchmark receives.
struct Context {
  double fma_gflops = 0;  // FP32 FMA peak, all threads: the roof for compute-bound rows.
  double mem_gbs = 0;  // max(copy, triad) bandwidth, all threads: the roof for memory-bound rows.
  bool quick = false;  // --quick: smaller sizes and fewer repetitions.
  int threads = 1;     // Threads of the device under test and of the references.
  Peaks peaks;         // Details of the peak measurements.
};

using BenchFn = std::function<std::vector<Row>(const Context&)>;

struct Bench {
  std::string name;
  std::string help;  // One line for --help; may be empty.
  BenchFn fn;
};

// Appends a benchmark; benchmarks run in registration order. `name` is what --filter matches.
void register_bench(std::string name, BenchFn fn, std::string help = {});

// Every registered benchmark, in registration order.
const std::vector<Bench>& registered_benches();

// Registration entry points, called explicitly from main.cc.
void register_peak_benches();
void register_blas_benches();
// Defined in bench/bench_kernels.cc; called only when BARE_HAVE_KERNEL_BENCHES is defined.
void register_kernel_benches();
// Defined in bench/bench_train.cc (with the kernel benches).
void register_train_benches();
// Defined in bench/bench_gpt2.cc (with the kernel benches).
void register_gpt2_benches();
// Defined in bench/bench_llm.cc (with the kernel benches).
void register_llm_benches();
// Defined in bench/bench_hcq.cc (with the kernel benches).
void register_hcq_benches();
// Defined in bench/bench_gpu.cc (with the kernel benches).
void register_gpu_benches();
// DEV=CL beside the CPU device (bench_cl.cc).
void register_cl_benches();
// PTX statistics of GPU kernels for sm_90 (bench_ptx.cc).
void register_ptx_benches();

// Runs fn once as warm-up, then repeatedly until it ran at least min_reps times and for at least
// min_total_ms in total; returns the median of the timed runs in milliseconds.
double time_median_ms(const std::function<void()>& fn, int min_reps, double min_total_ms);

// Runs `script` (a path under bench/ref/) with Debian's /usr/bin/python3 and `args`, and parses
// the one number it prints; nullopt when Python, its module (python3-torch) or the run fails.
std::optional<double> python_reference(const std::string& script, const std::string& args = {});

// As time_median_ms, but returns the fastest timed run in milliseconds.
double time_best_ms(const std::function<void()>& fn, int min_reps, double min_total_ms);

// GFLOP/s (2*n^3 / time) of a row-major fp32 cblas_sgemm of two n x n matrices with OpenBLAS on
// `threads` threads; measured on first use for each (n, threads), cached for the run.
double openblas_sgemm_gflops(int n, int threads);

// 100 * value / peak, or nothing when the peak is unknown (<= 0).
std::optional<double> pct_of(double value, double peak);

// The rows as an aligned text table, header included, one row per line.
std::string format_table(const std::vector<Row>& rows);

// One JSON object (no newline) with exactly the keys name, device, metric, value, unit, peak_pct,
// ref, ref_value; absent optionals and non-finite numbers are null.
std::string json_line(const Row& row);

// True for units where smaller is better ("s", "ms", "us", "ns").
bool is_time_unit(std::string_view unit);

}  // namespace baregrad::bench
