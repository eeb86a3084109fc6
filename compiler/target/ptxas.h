// ptxas (PTX -> cubin) run as a subprocess, and what it reports about a kernel with -v.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "compiler/target/subprocess.h"

namespace baregrad::compiler {

// What `ptxas -v` says about one entry function.
struct PtxasReport {
  int registers = -1;  // "Used N registers"; -1 when the log has no such line
  int barriers = 0;
  int64_t stack_bytes = 0;  // "N bytes stack frame"
  int64_t spill_store_bytes = 0;
  int64_t spill_load_bytes = 0;
  int64_t shared_bytes = 0;  // "N bytes smem"
  std::string str() const;
};

// The report for entry `name` in a `ptxas -v` log (the lines after "Compiling entry function
// 'name'"); registers stays -1 when the log does not mention the entry.
PtxasReport parse_ptxas_report(const std::string& log, const std::string& name);

struct PtxasResult {
  std::string cubin;  // ELF bytes
  std::string log;    // ptxas -v output (stdout and stderr)
  PtxasReport report;
  bool cache_hit = false;
};

class Ptxas {
 public:
  // The binary named by PTXAS, else the first of $CUDA_PATH/bin/ptxas, /usr/local/cuda/bin/ptxas
  // and /usr/bin/ptxas that exists, with its version. NotFound names every path tried.
  static Result<Ptxas> find();
  // A given binary (tests); FailedPrecondition when `--version` does not run.
  static Result<Ptxas> at(const std::string& path);

  const std::string& path() const { return path_; }
  // "13.0.88": the V... field of `ptxas --version`, or its last line.
  const std::string& version() const { return version_; }
  // Identifies the ptxas version, the arch and the flags: part of every cubin cache key.
  std::string cache_key(int sm) const;
  // The cubin of `ptx` (defining entry `name`) for sm_<sm> with -O3 and -v. Internal with
  // ptxas' output and the numbered PTX when it rejects the PTX; DeadlineExceeded when it runs
  // over `timeout_ms`. Logs the report at DEBUG>=2.
  Result<PtxasResult> run(const std::string& ptx,
                          int sm,
                          const std::string& name,
                          int timeout_ms = 300000) const;
  // run() through the KernelCache, keyed by cache_key(sm) and the PTX (cubin and log kept).
  Result<PtxasResult> assemble(const std::string& ptx,
                               int sm,
                               const std::string& name,
                               int timeout_ms = 300000) const;

 private:
  Ptxas(std::string path, std::string version)
      : path_(std::move(path)), version_(std::move(version)) {}
  std::string path_, version_;
};

}  // namespace baregrad::compiler
