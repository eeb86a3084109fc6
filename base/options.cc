#include "base/options.h"

#include <array>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <string>
#include <variant>

#include "base/error.h"

namespace baregrad {

namespace {

// More threads than this is a typo, not a machine: each costs a stack and a kernel task.
constexpr int kMaxThreads = 1024;

using Member = std::variant<std::string Options::*, int Options::*, bool Options::*>;

struct Field {
  OptionInfo info;
  Member member;
  int max = std::numeric_limits<int>::max();  // the largest value of an int option
};

// The single definition of every option. CACHE_DIR's default is computed (default_cache_dir).
constexpr Field kFields[] = {
    {{"DEV", "string", "",
      "device: CPU, CPU:C, NULL, NV[:n], MOCK+NV, AMD[:n], MOCK+AMD, CUDA[:n], CL[:n]; empty is "
      "CPU"},
     &Options::dev},
    {{"DEBUG", "int", "0",
      "log level: 1 kernel names and timings, 2 pass timings, 3 IR after passes, "
      "4 the kernel as C or PTX, 5 also its LLVM IR"},
     &Options::debug},
    {{"CACHE_DIR", "path", "$XDG_CACHE_HOME/baregrad or $HOME/.cache/baregrad",
      "on-disk compiler cache directory"},
     &Options::cache_dir},
    {{"DISABLE_COMPILER_CACHE", "bool", "0", "1 bypasses the on-disk compiler cache"},
     &Options::disable_cache},
    {{"PROGRAM_CACHE_SIZE", "int", "1024",
      "compiled programs each device keeps loaded; the least recently used beyond it are "
      "unloaded (and reloaded from the kernel cache if needed again); 0 counts as 1"},
     &Options::program_cache_size},
    {{"SCHEDULE_CACHE_SIZE", "int", "4096",
      "schedules kept by the shape of their lazy graph, so that the same computation on new "
      "buffers is not scheduled again; beyond it the cache starts over; 0 turns it off"},
     &Options::schedule_cache_size},
    {{"KERNEL_CACHE_MB", "int", "256",
      "MiB of compiled kernel objects kept in memory in front of the on-disk cache (LRU)"},
     &Options::kernel_cache_mb},
    {{"HANG_TIMEOUT_MS", "int", "30000",
      "how long a wait on a device may see no progress (no signal advanced, no CPU work item "
      "finished) before the device is reported hung; at most a day, below 100 counts as 100"},
     &Options::hang_timeout_ms,
     86'400'000},
    {{"THREADS", "int", "0", "CPU worker threads, at most 1024; 0 uses all cores"},
     &Options::threads,
     kMaxThreads},
    {{"CPU_CC", "string", "clang-19",
      "C compiler of the CPU:C device (its C source uses clang extensions)"},
     &Options::cc},
    {{"SPEC", "bool", "0", "1 runs the IR verifier between compiler passes"}, &Options::spec},
    {{"BEAM", "int", "0",
      "beam width of the search that times real launches to pick each kernel's opts (tuning "
      "database in CACHE_DIR, so a kernel is searched once); 0 uses the heuristics"},
     &Options::beam,
     256},
    {{"BEAM_BUDGET_S", "int", "30", "seconds BEAM may search one kernel; the best found is kept"},
     &Options::beam_budget_s},
    {{"PROFILE", "bool", "0",
      "1 brackets every launch and copy with device timestamps and writes a Chrome trace "
      "(one row per queue; open it in Perfetto) when the device closes"},
     &Options::profile},
    {{"PROFILE_PATH", "path", "profile.json",
      "the PROFILE trace; each device writes <stem>.<DEVICE>.json"},
     &Options::profile_path},
    {{"KERNEL_LOG", "path", "",
      "appends a line per kernel lowered for a device: the target, the kernel name and each "
      "op.dtype of its uops (tools/op_slice.py reads it); empty is off"},
     &Options::kernel_log},
    {{"PTXAS", "path", "", "the ptxas binary for NV kernels; empty uses $CUDA_PATH/bin/ptxas"},
     &Options::ptxas},
    {{"CUDA_PATH", "path", "/usr/local/cuda", "the CUDA toolkit root (for ptxas)"},
     &Options::cuda_path},
    {{"LD_LLD", "path", "",
      "the ld.lld that links AMD code objects; empty uses LLVM 19's (lld-19), then ld.lld on PATH"},
     &Options::ld_lld},
    {{"AMD_AQL", "string", "",
      "the AMD compute queue: 1 AQL, 0 PM4; empty is AQL on GPUs with several XCCs, else PM4"},
     &Options::amd_aql},
    {{"BAREGRAD_LIBCUDA", "path", "",
      "the CUDA driver library DEV=CUDA loads; empty loads libcuda.so.1 (tests name a fake)"},
     &Options::libcuda},
    {{"BAREGRAD_LIBCUBLAS", "path", "",
      "the cuBLAS library DEV=CUDA loads; empty tries libcublas.so(.13/.12/.11) and the toolkit"},
     &Options::libcublas},
};

constexpr auto kTable = [] {
  std::array<OptionInfo, std::size(kFields)> table{};
  for (size_t i = 0; i < table.size(); ++i) table[i] = kFields[i].info;
  return table;
}();

[[noreturn]] void bad_value(std::string_view name, std::string_view value, std::string_view want) {
  fail("options", std::string(name) + "=" + std::string(value) + ": must be " + std::string(want),
       ErrorKind::kValue);
}

int parse_int(std::string_view name, std::string_view value, int max) {
  int out = 0;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, out);
  if (ec != std::errc() || ptr != end || out < 0 || out > max) {
    bad_value(name, value,
              max == std::numeric_limits<int>::max()
                  ? std::string("an integer >= 0")
                  : "an integer in [0, " + std::to_string(max) + "]");
  }
  return out;
}

bool parse_bool(std::string_view name, std::string_view value) {
  if (value == "1" || value == "true") return true;
  if (value == "0" || value == "false") return false;
  bad_value(name, value, "0 or 1");
}

std::string default_cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return std::string(xdg) + "/baregrad";
  }
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : "/tmp") + "/.cache/baregrad";
}

// Parses `value` ("" = default) into field's member of `options`; throws before writing.
void apply(Options& options, const Field& field, std::string_view value) {
  if (value.empty() && field.member == Member(&Options::cache_dir)) {
    options.cache_dir = default_cache_dir();
    return;
  }
  if (value.empty()) value = field.info.default_value;
  std::string_view name = field.info.name;
  std::visit(
      [&](auto member) {
        auto& slot = options.*member;
        using T = std::remove_reference_t<decltype(slot)>;
        if constexpr (std::is_same_v<T, int>) {
          slot = parse_int(name, value, field.max);
        } else if constexpr (std::is_same_v<T, bool>) {
          slot = parse_bool(name, value);
        } else {
          slot = std::string(value);
        }
      },
      field.member);
}

Options load_from_env() {
  Options options;
  for (const Field& field : kFields) {
    const char* raw = std::getenv(std::string(field.info.name).c_str());
    apply(options, field, raw != nullptr ? raw : "");
  }
  return options;
}

Options& storage() {
  static Options options = load_from_env();
  return options;
}

}  // namespace

const Options& options() { return storage(); }

std::span<const OptionInfo> option_table() { return kTable; }

void set_option(std::string_view name, std::string_view value) {
  for (const Field& field : kFields) {
    if (field.info.name == name) return apply(storage(), field, value);
  }
  fail("options", "unknown option '" + std::string(name) + "'", ErrorKind::kValue);
}

std::string option_value(std::string_view name) {
  for (const Field& field : kFields) {
    if (field.info.name != name) continue;
    return std::visit(
        [](auto member) -> std::string {
          const auto& slot = storage().*member;
          using T = std::remove_cvref_t<decltype(slot)>;
          if constexpr (std::is_same_v<T, int>) return std::to_string(slot);
          if constexpr (std::is_same_v<T, bool>) return slot ? "1" : "0";
          if constexpr (std::is_same_v<T, std::string>) return slot;
        },
        field.member);
  }
  fail("options", "unknown option '" + std::string(name) + "'", ErrorKind::kValue);
}

void set_option_for_test(std::string_view name, std::string_view value) { set_option(name, value); }

}  // namespace baregrad
