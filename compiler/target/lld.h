// ld.lld run as a subprocess: links the relocatable AMDGPU object LLVM emits into an HSA code
// object (an ELF shared object), as ROCm's comgr does with its built-in lld.
#pragma once

#include <string>

#include "base/status.h"

namespace baregrad::compiler {

class LdLld {
 public:
  // The binary named by LD_LLD, else the first of /usr/lib/llvm-19/bin/ld.lld (Debian's lld-19),
  // ld.lld-19 and ld.lld on PATH that runs, with its version. NotFound names every one tried and
  // the package to install.
  static Result<LdLld> find();
  // A given binary (tests); FailedPrecondition when `--version` does not run.
  static Result<LdLld> at(const std::string& path);

  const std::string& path() const { return path_; }
  // "19.1.7": the version `ld.lld --version` prints.
  const std::string& version() const { return version_; }
  // Identifies the linker and its flags: part of every AMD code object's cache key.
  std::string cache_key() const;
  // The code object linked from relocatable `object` (`ld.lld -shared`). Internal with lld's
  // output when it fails; `name` is the kernel, for messages.
  Result<std::string> link(const std::string& object, const std::string& name) const;

 private:
  LdLld(std::string path, std::string version)
      : path_(std::move(path)), version_(std::move(version)) {}
  std::string path_, version_;
};

}  // namespace baregrad::compiler
