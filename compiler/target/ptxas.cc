#include "compiler/target/ptxas.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>

#include "base/log.h"
#include "base/options.h"
#include "base/timer.h"
#include "compiler/cache.h"
#include "compiler/program.h"
#include "compiler/target/subprocess.h"

namespace baregrad::compiler {
namespace {

// The integer right before `suffix` in `line` (e.g. "15" in "Used 15 registers"), or -1.
int64_t number_before(const std::string& line, const std::string& suffix) {
  size_t at = line.find(suffix);
  if (at == std::string::npos) return -1;
  size_t start = at;
  while (start > 0 && std::isdigit(static_cast<unsigned char>(line[start - 1]))) start--;
  if (start == at || at - start > 18) return -1;
  return std::stoll(line.substr(start, at - start));
}

// Versions by binary path: `ptxas --version` runs once per path and process.
std::mutex& version_mu() {
  static std::mutex mu;
  return mu;
}
std::map<std::string, std::string>& version_cache() {
  static std::map<std::string, std::string> cache;
  return cache;
}

// The cache value: "<log size>\n" + log + cubin.
std::string pack(const std::string& log, const std::string& cubin) {
  return std::to_string(log.size()) + "\n" + log + cubin;
}
bool unpack(const std::string& v, std::string* log, std::string* cubin) {
  size_t nl = v.find('\n');
  if (nl == std::string::npos || nl == 0 || nl > 12) return false;
  for (size_t i = 0; i < nl; i++)
    if (!std::isdigit(static_cast<unsigned char>(v[i]))) return false;
  size_t n = std::stoull(v.substr(0, nl));
  if (n > v.size() - nl - 1) return false;
  *log = v.substr(nl + 1, n);
  *cubin = v.substr(nl + 1 + n);
  return !cubin->empty();
}

}  // namespace

std::string PtxasReport::str() const {
  return std::to_string(registers) + " registers, " + std::to_string(barriers) + " barriers, " +
         std::to_string(stack_bytes) + " bytes stack, " + std::to_string(spill_store_bytes) +
         " bytes spill stores, " + std::to_string(spill_load_bytes) + " bytes spill loads, " +
         std::to_string(shared_bytes) + " bytes smem";
}

PtxasReport parse_ptxas_report(const std::string& log, const std::string& name) {
  PtxasReport r;
  size_t entry = log.find("Compiling entry function '" + name + "'");
  if (entry == std::string::npos) return r;
  std::istringstream lines(log.substr(entry));
  std::string line;
  std::getline(lines, line);  // the "Compiling entry function" line
  bool own_properties = false;
  while (std::getline(lines, line)) {
    if (line.find("Compiling entry function") != std::string::npos) break;  // the next entry
    if (line.find("Function properties for ") != std::string::npos) {
      own_properties = line.substr(line.find("Function properties for ") + 24) == name;
      continue;
    }
    if (own_properties && line.find("bytes stack frame") != std::string::npos) {
      r.stack_bytes = number_before(line, " bytes stack frame");
      r.spill_store_bytes = number_before(line, " bytes spill stores");
      r.spill_load_bytes = number_before(line, " bytes spill loads");
    }
    if (line.find("Used ") != std::string::npos && line.find(" registers") != std::string::npos) {
      r.registers = static_cast<int>(number_before(line, " registers"));
      r.barriers = static_cast<int>(std::max<int64_t>(0, number_before(line, " barriers")));
      r.shared_bytes = std::max<int64_t>(0, number_before(line, " bytes smem"));
    }
  }
  return r;
}

Result<Ptxas> Ptxas::find() {
  std::vector<std::string> tried;
  if (!options().ptxas.empty()) {
    tried.push_back(options().ptxas + " (PTXAS)");
    if (::access(options().ptxas.c_str(), X_OK) == 0) return at(options().ptxas);
  } else {
    for (const std::string& dir : {options().cuda_path, std::string("/usr/local/cuda")}) {
      std::string p = dir + "/bin/ptxas";
      if (dir.empty() || std::find(tried.begin(), tried.end(), p) != tried.end()) continue;
      tried.push_back(p);
      if (::access(p.c_str(), X_OK) == 0) return at(p);
    }
    tried.push_back("/usr/bin/ptxas");
    if (::access("/usr/bin/ptxas", X_OK) == 0) return at("/usr/bin/ptxas");
  }
  std::string list;
  for (const std::string& t : tried) list += (list.empty() ? "" : ", ") + t;
  return not_found("ptxas not found (tried " + list +
                   "); install the CUDA toolkit or set PTXAS or CUDA_PATH");
}

Result<Ptxas> Ptxas::at(const std::string& path) {
  std::lock_guard lock(version_mu());
  auto& cache = version_cache();
  if (auto it = cache.find(path); it != cache.end()) return Ptxas(path, it->second);
  std::string out;
  ASSIGN_OR_RETURN(int rc, run_subprocess({path, "--version"}, &out, 30000));
  if (rc != 0)
    return failed_precondition(path + " --version exited with " + std::to_string(rc) + ":\n" + out);
  std::string version;
  if (size_t v = out.find(", V"); v != std::string::npos) {
    size_t end = out.find_first_of(" \n", v + 3);
    version = out.substr(v + 3, end == std::string::npos ? std::string::npos : end - v - 3);
  } else {
    size_t end = out.find_last_not_of('\n');
    size_t start = out.rfind('\n', end);
    version = out.substr(start == std::string::npos ? 0 : start + 1, end + 1);
  }
  cache[path] = version;
  return Ptxas(path, version);
}

std::string Ptxas::cache_key(int sm) const {
  return "ptxas-" + version_ + "-sm_" + std::to_string(sm) + "-O3";
}

Result<PtxasResult> Ptxas::run(const std::string& ptx,
                               int sm,
                               const std::string& name,
                               int timeout_ms) const {
  PtxasResult res;
  ScopedTimer timer("ptxas sm_" + std::to_string(sm) + " " + name);
  ASSIGN_OR_RETURN(TempDir dir, TempDir::create("baregrad-ptxas"));
  std::string in = dir.file("kernel.ptx"), out = dir.file("kernel.cubin");
  RETURN_IF_ERROR(write_file(in, ptx));
  std::vector<std::string> argv = {path_, "-arch=sm_" + std::to_string(sm), "-O3", "-v", in, "-o",
                                   out};
  ASSIGN_OR_RETURN(int rc, run_subprocess(argv, &res.log, timeout_ms));
  if (rc != 0)
    return internal(path_ + " -arch=sm_" + std::to_string(sm) + " rejected the PTX of " + name +
                    " (exit " + std::to_string(rc) + "):\n" + res.log + "\n" +
                    numbered_source(ptx));
  ASSIGN_OR_RETURN(res.cubin, read_file(out));
  if (res.cubin.empty()) return internal(path_ + " wrote an empty cubin for " + name);
  res.report = parse_ptxas_report(res.log, name);
  BG_LOG(2) << "ptxas sm_" << sm << " " << name << ": " << res.report.str();
  return res;
}

Result<PtxasResult> Ptxas::assemble(const std::string& ptx,
                                    int sm,
                                    const std::string& name,
                                    int timeout_ms) const {
  std::string key = cache_key(sm) + "\n" + ptx;
  auto& cache = KernelCache::global();
  PtxasResult res;
  if (auto hit = cache.get(key); hit && unpack(*hit, &res.log, &res.cubin)) {
    res.cache_hit = true;
    res.report = parse_ptxas_report(res.log, name);
    BG_LOG(2) << "ptxas sm_" << sm << " " << name << ": " << res.report.str() << " (cached)";
    return res;
  }
  ASSIGN_OR_RETURN(res, run(ptx, sm, name, timeout_ms));
  cache.put(key, pack(res.log, res.cubin));
  return res;
}

}  // namespace baregrad::compiler
