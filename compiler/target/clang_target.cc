#include "compiler/target/clang_target.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "base/options.h"
#include "base/timer.h"
#include "compiler/cache.h"
#include "compiler/target/subprocess.h"

namespace baregrad::compiler {
namespace {

std::string join(const std::vector<std::string>& words) {
  std::string s;
  for (const std::string& w : words) s += (s.empty() ? "" : " ") + w;
  return s;
}

// Runs the C compiler; a failure to start it names the command and the CPU_CC option.
Result<int> run_cc(const std::vector<std::string>& argv, std::string* out, int timeout_ms) {
  Result<int> rc = run_subprocess(argv, out, timeout_ms);
  if (rc.ok() || rc.status().code() == StatusCode::kDeadlineExceeded) return rc;
  return Status(rc.status().code(), "cannot run the C compiler (option CPU_CC): " +
                                        rc.status().message() + "\ncommand: " + join(argv));
}

// Model name and a hash of the ISA flags from /proc/cpuinfo (what -march=native resolves).
std::string host_cpu() {
  std::ifstream f("/proc/cpuinfo");
  std::string line, model, flags;
  while (std::getline(f, line) && (model.empty() || flags.empty())) {
    auto value = [&] { return line.substr(std::min(line.size(), line.find(':') + 2)); };
    if (model.empty() && line.rfind("model name", 0) == 0) model = value();
    if (flags.empty() && (line.rfind("flags", 0) == 0 || line.rfind("Features", 0) == 0))
      flags = value();
  }
  return model + " isa:" + hash_hex(flags);
}

std::string file_stem(const std::string& name) {
  std::string s = name.empty() ? "kernel" : name.substr(0, 64);
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
  return s;
}

}  // namespace

ClangCompiler::ClangCompiler(std::string cc, int timeout_ms) : timeout_ms_(timeout_ms) {
  std::istringstream words(cc.empty() ? options().cc : cc);
  for (std::string w; words >> w;) command_.push_back(w);
  if (command_.empty()) command_.push_back("clang-19");
}

const std::vector<std::string>& ClangCompiler::flags() {
  // NOTE: -fwrapv gives signed ops exec_alu_int's wrapping; -fno-stack-protector keeps the
  // object free of references the JIT would have to resolve. -fbracket-depth: a fused chain of
  // up to 512 ops (tensor/schedule.cc) nests its expression that deep.
  static const std::vector<std::string> kFlags = {"-x",
                                                  "c",
                                                  "-std=c11",
                                                  "-O2",
                                                  "-march=native",
                                                  "-mprefer-vector-width=512",
                                                  "-ffp-contract=fast",
                                                  "-fno-math-errno",
                                                  "-fwrapv",
                                                  "-fno-strict-aliasing",
                                                  "-fno-stack-protector",
                                                  "-fbracket-depth=4096",
                                                  "-fPIC"};
  return kFlags;
}

std::string ClangCompiler::cache_key() const {
  std::call_once(key_once_, [this] {
    std::string version = "unknown";
    std::vector<std::string> argv = command_;
    argv.push_back("--version");
    std::string out;
    Result<int> status = run_cc(argv, &out, timeout_ms_);
    if (status.ok() && *status == 0 && !out.empty()) version = out.substr(0, out.find('\n'));
    key_ = "clang:" + join(command_) + " " + version + " " + join(flags()) + " cpu:" + host_cpu();
  });
  return key_;
}

Result<std::string> ClangCompiler::compile(const std::string& src, const std::string& name) const {
  ScopedTimer timer("clang " + name);
  ASSIGN_OR_RETURN(TempDir dir, TempDir::create("baregrad-cc"));
  std::string stem = file_stem(name);
  std::string c_path = dir.file(stem + ".c"), o_path = dir.file(stem + ".o");
  RETURN_IF_ERROR(write_file(c_path, src));
  std::vector<std::string> argv = command_;
  argv.insert(argv.end(), flags().begin(), flags().end());
  argv.insert(argv.end(), {"-c", c_path, "-o", o_path});
  std::string log;
  Result<int> status = run_cc(argv, &log, timeout_ms_);
  if (!status.ok())
    return Status(status.status().code(),
                  status.status().message() + "\nsource:\n" + numbered_source(src));
  if (*status != 0) {
    std::string how = *status > 128 ? "signal " + std::to_string(*status - 128)
                                    : "exit status " + std::to_string(*status);
    return internal("the C compiler failed (" + how + ")\ncommand: " + join(argv) + "\n" + log +
                    "source:\n" + numbered_source(src));
  }
  Result<std::string> object = read_file(o_path);
  if (!object.ok() || object->empty())
    return internal("the C compiler wrote no object\ncommand: " + join(argv) + "\n" + log);
  return object;
}

}  // namespace baregrad::compiler
