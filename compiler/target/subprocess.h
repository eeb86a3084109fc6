#pragma once

// What the targets that run a compiler as a process share (clang for CPU:C, ptxas for NV):
// a private temporary directory, whole-file reads and writes, and a process run with its
// output captured and a time limit.

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace baregrad::compiler {

// A fresh directory under the system temporary directory (std::filesystem's: $TMPDIR or /tmp),
// removed with everything in it on destruction.
class TempDir {
 public:
  // "<tmp>/<prefix>-XXXXXX"; the error names the pattern and errno.
  static Result<TempDir> create(std::string_view prefix);
  TempDir(TempDir&& o) noexcept;
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();
  // The path of `name` inside the directory.
  std::string file(std::string_view name) const;

 private:
  explicit TempDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// Writes `data` to `path` (replacing it); Internal naming the path on failure.
Status write_file(const std::string& path, const std::string& data);
// The whole file; NotFound naming the path when it cannot be read.
Result<std::string> read_file(const std::string& path);

// Runs `argv` (argv[0] a path, or a name searched on PATH) with stdin from /dev/null and
// stdout and stderr captured together into `out`. Returns the exit status (128 + signal when
// killed by one); NotFound naming argv[0] when it cannot be started; DeadlineExceeded after
// `timeout_ms` (the process is killed), with the output so far.
Result<int> run_subprocess(const std::vector<std::string>& argv, std::string* out, int timeout_ms);

}  // namespace baregrad::compiler
