// The C compiler of the CPU C path: runs clang (options().cc) as a subprocess, no shell.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "compiler/program.h"

namespace baregrad::compiler {

class ClangCompiler : public Compiler {
 public:
  static constexpr int kDefaultTimeoutMs = 60'000;

  // `cc`: the compiler command, words split on whitespace ("" reads options().cc now).
  // A compile running longer than `timeout_ms` is killed.
  explicit ClangCompiler(std::string cc = "", int timeout_ms = kDefaultTimeoutMs);

  // "clang:" + the compiler's --version first line + flags + host CPU identity.
  std::string cache_key() const override;
  // Relocatable ELF bytes; on failure the status names the command line, holds the compiler's
  // stderr and the numbered source (NotFound when the compiler cannot be run, DeadlineExceeded
  // on timeout, Internal when it rejects the source).
  Result<std::string> compile(const std::string& src, const std::string& name) const override;

  // The flags every compile passes before the source file.
  static const std::vector<std::string>& flags();
  // The command words, e.g. {"clang-19"}.
  const std::vector<std::string>& command() const { return command_; }

 private:
  std::vector<std::string> command_;
  int timeout_ms_;
  mutable std::once_flag key_once_;
  mutable std::string key_;
};

}  // namespace baregrad::compiler
