#include "compiler/target/lld.h"

#include <map>
#include <mutex>
#include <vector>

#include "base/options.h"
#include "base/timer.h"
#include "compiler/target/subprocess.h"

namespace baregrad::compiler {
namespace {

// NOTE: --version is run once per path and process.
Result<std::string> version_of(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, std::string> versions;
  std::lock_guard lock(mu);
  if (auto it = versions.find(path); it != versions.end()) return it->second;
  std::string out;
  ASSIGN_OR_RETURN(int rc, run_subprocess({path, "--version"}, &out, 30000));
  if (rc != 0)
    return failed_precondition(path + " --version exited with " + std::to_string(rc) + ":\n" + out);
  // "Debian LLD 19.1.7 (compatible with GNU linkers)"
  size_t at = out.find("LLD ");
  if (at == std::string::npos) return failed_precondition(path + " is not LLVM's lld:\n" + out);
  std::string version = out.substr(at + 4, out.find_first_of(" \n", at + 4) - at - 4);
  versions[path] = version;
  return version;
}

}  // namespace

Result<LdLld> LdLld::find() {
  std::vector<std::string> tried;
  if (!options().ld_lld.empty()) {
    tried.push_back(options().ld_lld + " (LD_LLD)");
    if (Result<LdLld> l = at(options().ld_lld); l.ok()) return l;
  } else {
    for (const char* p : {"/usr/lib/llvm-19/bin/ld.lld", "ld.lld-19", "ld.lld"}) {
      tried.push_back(p);
      if (Result<LdLld> l = at(p); l.ok()) return l;
    }
  }
  std::string list;
  for (const std::string& t : tried) list += (list.empty() ? "" : ", ") + t;
  return not_found("ld.lld not found (tried " + list +
                   "); AMD code objects need it: install Debian's lld-19 or set LD_LLD");
}

Result<LdLld> LdLld::at(const std::string& path) {
  ASSIGN_OR_RETURN(std::string version, version_of(path));
  return LdLld(path, version);
}

std::string LdLld::cache_key() const { return "lld-" + version_ + "-shared"; }

Result<std::string> LdLld::link(const std::string& object, const std::string& name) const {
  ScopedTimer timer("ld.lld " + name);
  ASSIGN_OR_RETURN(TempDir dir, TempDir::create("baregrad-lld"));
  std::string in = dir.file("kernel.o"), out = dir.file("kernel.hsaco");
  RETURN_IF_ERROR(write_file(in, object));
  std::string log;
  ASSIGN_OR_RETURN(int rc, run_subprocess({path_, "-shared", in, "-o", out}, &log, 60000));
  if (rc != 0)
    return internal(path_ + " could not link the code object of " + name + " (exit " +
                    std::to_string(rc) + "):\n" + log);
  ASSIGN_OR_RETURN(std::string code, read_file(out));
  if (code.empty()) return internal(path_ + " wrote an empty code object for " + name);
  return code;
}

}  // namespace baregrad::compiler
