// bare_bench: measures the machine peaks, runs the registered benchmarks, prints a table on stdout
// and optionally writes JSON lines. Run through `./bare bench [ARGS]`; see bench/README.md.

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "base/tool_main.h"
#include "bench/bench.h"
#include "bench/peak.h"

namespace baregrad::bench {
namespace {

constexpr int kMaxThreads = 4096;
// std::regex compiles and matches by recursion, as deep as the pattern is long or nested: a
// longer --filter overflows the stack. Benchmark names are short; so are useful patterns.
constexpr size_t kMaxFilterChars = 256;
constexpr int kMaxFilterNesting = 32;
constexpr int kMaxFilterRepeat = 100;  // the largest count of a {n,m} repetition

struct Args {
  std::optional<std::string> json_path;
  std::optional<std::string> filter;
  bool quick = false;
  std::optional<int> threads;
  bool help = false;
};

constexpr const char* kUsage = R"(
Measures the machine peaks (FP32 FMA GFLOP/s, memory GB/s), then runs every benchmark in order
and prints one table on stdout. Progress goes to stderr.

options:
  --json FILE      also write one JSON object per row to FILE (truncated first), with exactly the
                   keys name, device, metric, value, unit, peak_pct, ref, ref_value; peak_pct is
                   null when no peak applies, ref and ref_value are null without a reference.
  --filter REGEX   run only the benchmarks whose name (listed below) contains a match of REGEX
                   (ECMAScript syntax; at most 256 characters, 32 nested groups, repeat counts
                   of 100). The peaks are always measured: every % of peak needs them.
  --quick          smaller memory arrays (256 MiB instead of 512 MiB) and fewer repetitions.
  --threads N      threads of the CPU device, of the peak measurements and of OpenBLAS
                   (default: every CPU in this process's affinity mask).
  --help, -h       this text.
Also accepted: --json=FILE, --filter=REGEX, --threads=N. A bad argument exits with status 2.

table columns: name, device, metric, value and unit, % of the matching peak (FMA peak for
GFLOP/s, memory peak for GB/s), and the reference value with the ratio row/reference
("1.05x OpenBLAS" = 5% better than OpenBLAS; for times the ratio is reference/row).

benchmarks (each prints one or more rows; bench/README.md describes every row):
)";

void print_usage(std::FILE* out) {
  std::fputs("usage: bare_bench [--json FILE] [--filter REGEX] [--quick] [--threads N] [--help]\n",
             out);
  std::fputs(kUsage, out);
  for (const Bench& b : registered_benches()) {
    // Help lines after the first are indented under the first.
    std::string help = b.help;
    for (size_t at = help.find('\n'); at != std::string::npos; at = help.find('\n', at + 1)) {
      help.insert(at + 1, 25, ' ');
    }
    std::fprintf(out, "  %-22s %s\n", b.name.c_str(), help.c_str());
  }
  std::fprintf(out, "\nThis machine: %d CPUs available.\n", available_cpus());
}

// The value of option `name` at argv[i]: "--name=V" or "--name V" (advancing i). Nothing when
// argv[i] is another option; sets *missing when the value is absent.
std::optional<std::string> option_value(
    std::string_view name, int argc, char** argv, int& i, bool* missing) {
  std::string_view arg = argv[i];
  if (arg == name) {
    if (i + 1 >= argc) {
      *missing = true;
      return std::nullopt;
    }
    return std::string(argv[++i]);
  }
  if (arg.size() > name.size() && arg.substr(0, name.size()) == name && arg[name.size()] == '=') {
    return std::string(arg.substr(name.size() + 1));
  }
  return std::nullopt;
}

// Why `re` is refused as a --filter before std::regex sees it (too long, too deeply nested or
// repeated for its recursion), or "" when it is not.
std::string filter_too_big(const std::string& re) {
  if (re.size() > kMaxFilterChars) {
    return std::to_string(re.size()) + " characters; at most " + std::to_string(kMaxFilterChars);
  }
  int depth = 0, deepest = 0;
  for (size_t i = 0; i < re.size(); ++i) {
    if (re[i] == '\\') {
      ++i;  // an escaped character nests nothing
    } else if (re[i] == '(' || re[i] == '[') {
      deepest = std::max(deepest, ++depth);
    } else if ((re[i] == ')' || re[i] == ']') && depth > 0) {
      --depth;
    } else if (re[i] == '{') {
      for (size_t j = i + 1; j < re.size() && re[j] != '}'; ++j) {
        if (!std::isdigit(static_cast<unsigned char>(re[j]))) continue;
        size_t end = re.find_first_not_of("0123456789", j);
        std::string count = re.substr(j, end - j);
        if (count.size() > 3 || std::stoi(count) > kMaxFilterRepeat) {
          return "repetition {" + count.substr(0, 12) + "}; at most {" +
                 std::to_string(kMaxFilterRepeat) + "}";
        }
        j = end - 1;
      }
    }
  }
  if (deepest > kMaxFilterNesting) {
    return std::to_string(deepest) + " nested groups; at most " + std::to_string(kMaxFilterNesting);
  }
  return "";
}

// Parses argv; on a bad argument prints the reason and returns nothing.
std::optional<Args> parse_args(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    bool missing = false;
    if (arg == "--help" || arg == "-h") {
      args.help = true;
    } else if (arg == "--quick") {
      args.quick = true;
    } else if (auto v = option_value("--json", argc, argv, i, &missing)) {
      args.json_path = *v;
    } else if (auto v = option_value("--filter", argc, argv, i, &missing)) {
      if (std::string why = filter_too_big(*v); !why.empty()) {
        std::fprintf(stderr, "bare_bench: --filter regex is too big: %s\n", why.c_str());
        return std::nullopt;
      }
      args.filter = *v;
    } else if (auto v = option_value("--threads", argc, argv, i, &missing)) {
      int n = 0;
      size_t used = 0;
      try {
        n = std::stoi(*v, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != v->size() || n < 1 || n > kMaxThreads) {
        std::fprintf(stderr, "bare_bench: --threads wants an integer in [1, %d], got '%s'\n",
                     kMaxThreads, v->c_str());
        return std::nullopt;
      }
      args.threads = n;
    } else {
      std::fprintf(
          stderr,
          missing ? "bare_bench: %s needs a value\n" : "bare_bench: unknown argument '%s'\n",
          argv[i]);
      return std::nullopt;
    }
  }
  return args;
}

// Warns on stderr when other processes compete for the CPUs (1-minute load average at least the
// CPU count): peaks and timings then come out low. Linux only; silent elsewhere.
void warn_if_busy(int cpus) {
  std::ifstream loadavg("/proc/loadavg");
  double load = 0;
  if (!(loadavg >> load) || load < cpus) return;
  std::fprintf(stderr,
               "bare_bench: WARNING: load average %.1f on %d CPUs; other processes compete and "
               "the results will be low and noisy\n",
               load, cpus);
}

double now_s() {
  auto since_epoch = std::chrono::steady_clock::now().time_since_epoch();
  return std::chrono::duration<double>(since_epoch).count();
}

int bench_main(int argc, char** argv) {
  register_peak_benches();
  register_blas_benches();
#ifdef BARE_HAVE_KERNEL_BENCHES
  register_kernel_benches();
  register_train_benches();
  register_gpt2_benches();
  register_llm_benches();
  register_hcq_benches();
  register_gpu_benches();
  register_cl_benches();
  register_ptx_benches();
#endif

  std::optional<Args> args = parse_args(argc, argv);
  if (!args) {
    print_usage(stderr);
    return 2;
  }
  if (args->help) {
    print_usage(stdout);
    return 0;
  }

  std::vector<const Bench*> selected;
  try {
    std::regex re(args->filter.value_or(""));
    for (const Bench& b : registered_benches()) {
      if (std::regex_search(b.name, re)) selected.push_back(&b);
    }
  } catch (const std::regex_error& e) {
    std::fprintf(stderr, "bare_bench: bad --filter regex '%s': %s\n", args->filter->c_str(),
                 e.what());
    print_usage(stderr);
    return 2;
  }
  if (selected.empty()) {
    std::fprintf(stderr, "bare_bench: --filter '%s' matches no benchmark\n", args->filter->c_str());
    print_usage(stderr);
    return 2;
  }

  std::ofstream json;
  if (args->json_path) {
    json.open(*args->json_path, std::ios::out | std::ios::trunc);
    if (!json) {
      std::fprintf(stderr, "bare_bench: cannot open --json file '%s'\n", args->json_path->c_str());
      return 1;
    }
  }

  const double start = now_s();
  Context ctx;
  ctx.quick = args->quick;
  ctx.threads = args->threads.value_or(available_cpus());
  warn_if_busy(available_cpus());
  std::fprintf(stderr, "[peaks] measuring FMA and memory peaks on %d threads ...\n", ctx.threads);
  measure_peaks(ctx);

  std::vector<Row> rows;
  int failures = 0;
  for (size_t i = 0; i < selected.size(); ++i) {
    const Bench& b = *selected[i];
    std::fprintf(stderr, "[%zu/%zu] %s ...\n", i + 1, selected.size(), b.name.c_str());
    std::vector<Row> got;
    try {
      got = b.fn(ctx);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[%zu/%zu] %s FAILED: %s\n", i + 1, selected.size(), b.name.c_str(),
                   e.what());
      ++failures;
      continue;
    }
    for (const Row& r : got) {
      if (json.is_open()) json << json_line(r) << '\n';
      rows.push_back(r);
    }
    if (json.is_open()) json.flush();
  }

  std::cout << format_table(rows) << std::flush;
  std::fprintf(stderr, "bare_bench: %zu rows in %.1f s%s\n", rows.size(), now_s() - start,
               failures > 0 ? ", some benchmarks FAILED" : "");
  if (json.is_open() && !json) {
    std::fprintf(stderr, "bare_bench: writing '%s' failed\n", args->json_path->c_str());
    return 1;
  }
  return failures > 0 ? 1 : 0;
}

}  // namespace
}  // namespace baregrad::bench

int main(int argc, char** argv) {
  return baregrad::run_tool("bare_bench", [&] { return baregrad::bench::bench_main(argc, argv); });
}
