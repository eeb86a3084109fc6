#pragma once

// The typed options registry: the only place baregrad reads environment variables.

#include <span>
#include <string>
#include <string_view>

namespace baregrad {

struct Options {
  std::string dev;             // DEV: device name; "" picks the best device present.
  int debug = 0;               // DEBUG: log level (see option_table()).
  std::string cache_dir;       // CACHE_DIR: on-disk compiler cache directory.
  bool disable_cache = false;  // DISABLE_COMPILER_CACHE: skip the on-disk compiler cache.
  int threads = 0;             // THREADS: CPU worker threads (<= 1024); 0 means all cores.
  std::string cc;              // CC: C compiler of the C target.
  bool spec = false;           // SPEC: run the IR verifier between compiler passes.
  bool profile = false;        // PROFILE: record launches and copies into a Chrome trace.
  std::string profile_path;    // PROFILE_PATH: where the trace goes (device name added).
  std::string kernel_log;      // KERNEL_LOG: file that gets a line per lowered kernel.
  std::string ptxas;           // PTXAS: the ptxas binary ("" searches CUDA_PATH, /usr/local/cuda).
  std::string cuda_path;       // CUDA_PATH: the CUDA toolkit root.
  std::string ld_lld;          // LD_LLD: the linker of AMD code objects ("" searches LLVM 19's).
  std::string amd_aql;         // AMD_AQL: AMD compute queue, 1 AQL, 0 PM4, "" by the GPU.
  std::string libcuda;         // BAREGRAD_LIBCUDA: the driver library DEV=CUDA loads.
  std::string libcublas;       // BAREGRAD_LIBCUBLAS: the cuBLAS library DEV=CUDA loads.

  int beam = 0;            // BEAM: beam width of the opt search (runtime/beam.h); 0 is off.
  int beam_budget_s = 30;  // BEAM_BUDGET_S: seconds of search per kernel.

  // In-memory caches, least recently used out first.
  int program_cache_size = 1024;   // PROGRAM_CACHE_SIZE: loaded programs kept per device.
  int kernel_cache_mb = 256;       // KERNEL_CACHE_MB: compiled objects kept in memory (MiB).
  int schedule_cache_size = 4096;  // SCHEDULE_CACHE_SIZE: schedules of graph shapes kept; 0: off.

  // HANG_TIMEOUT_MS: how long a wait on a device may see no progress before the device is
  // reported hung (hcq::default_timeout()).
  int hang_timeout_ms = 30000;
};

// The options, read from the environment on first use (thread-safe). Throws baregrad::Error
// (ErrorKind::kValue, op "options") whose message starts with the variable and its value when
// one does not parse or is out of range: "DEBUG=abc: must be an integer >= 0".
const Options& options();

// One row per environment variable, for documentation and `bare help`.
struct OptionInfo {
  std::string_view name;           // Environment variable, e.g. "DEBUG".
  std::string_view type;           // "string", "int" (non-negative), "bool" (0/1) or "path".
  std::string_view default_value;  // Used when the variable is unset or empty.
  std::string_view help;           // One line.
};
std::span<const OptionInfo> option_table();

// Re-parses the option `name` (an environment variable name) from `value` into options(); ""
// restores the default. For scoped overrides such as Python's Context(DEBUG=2). Throws
// baregrad::Error on an unknown name or a bad value, leaving the option unchanged. Not
// synchronized with concurrent readers.
void set_option(std::string_view name, std::string_view value);
// The current value of option `name` as set_option() parses it ("1"/"0" for bools). Throws
// baregrad::Error on an unknown name.
std::string option_value(std::string_view name);

// Tests only: set_option().
void set_option_for_test(std::string_view name, std::string_view value);

}  // namespace baregrad
