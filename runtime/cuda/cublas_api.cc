#include "runtime/cuda/cublas_api.h"

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "base/dl.h"
#include "base/options.h"

namespace baregrad::runtime::cuda {
namespace {

#define BG_CUBLAS_SYMBOLS(X) \
  X(cublasCreate_v2) X(cublasDestroy_v2) X(cublasSetStream_v2) X(cublasGemmEx)

StatusCode cublas_code_of(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_INVALID_VALUE:
      return StatusCode::kInvalidArgument;
    case CUBLAS_STATUS_ALLOC_FAILED:
      return StatusCode::kResourceExhausted;
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return StatusCode::kUnavailable;
    case CUBLAS_STATUS_NOT_SUPPORTED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return StatusCode::kUnimplemented;
    default:
      return StatusCode::kInternal;
  }
}

// The libraries to try, in order, for an empty path.
std::vector<std::string> candidates() {
  static constexpr const char* kNames[] = {"libcublas.so", "libcublas.so.13", "libcublas.so.12",
                                           "libcublas.so.11"};
  std::vector<std::string> out(std::begin(kNames), std::end(kNames));
  std::vector<std::string> dirs;
  if (!options().cuda_path.empty()) dirs.push_back(options().cuda_path + "/lib64/");
  dirs.push_back("/usr/local/cuda/lib64/");
  for (const std::string& d : dirs)
    for (const char* n : kNames) out.push_back(d + n);
  return out;
}

// `loaded` tells a library that dlopen refused from one that lacks a symbol.
Result<std::unique_ptr<CublasApi>> open_api(const std::string& path, bool& loaded) {
  const std::string what = "cuBLAS";
  Result<void*> opened = dl_open(path, what);
  loaded = opened.ok();
  if (!opened.ok()) return opened.status();
  void* lib = *opened;
  auto api = std::make_unique<CublasApi>();
  api->path = path;
  api->lib = lib;
  BG_CUBLAS_SYMBOLS(BG_DL_RESOLVE)
  return api;
}

}  // namespace

std::string cublas_status_name(cublasStatus_t s) {
  switch (s) {
#define BG_CASE(x) \
  case x:          \
    return #x;
    BG_CASE(CUBLAS_STATUS_SUCCESS)
    BG_CASE(CUBLAS_STATUS_NOT_INITIALIZED)
    BG_CASE(CUBLAS_STATUS_ALLOC_FAILED)
    BG_CASE(CUBLAS_STATUS_INVALID_VALUE)
    BG_CASE(CUBLAS_STATUS_ARCH_MISMATCH)
    BG_CASE(CUBLAS_STATUS_MAPPING_ERROR)
    BG_CASE(CUBLAS_STATUS_EXECUTION_FAILED)
    BG_CASE(CUBLAS_STATUS_INTERNAL_ERROR)
    BG_CASE(CUBLAS_STATUS_NOT_SUPPORTED)
    BG_CASE(CUBLAS_STATUS_LICENSE_ERROR)
#undef BG_CASE
  }
  return "cublasStatus_t " + std::to_string(s);
}

Status CublasApi::check(cublasStatus_t s, std::string_view call, Loc loc) const {
  if (s == CUBLAS_STATUS_SUCCESS) return Status();
  return Status(cublas_code_of(s), std::string(call) + " failed: " + cublas_status_name(s), loc);
}

Result<const CublasApi*> load_cublas_api(std::string_view path) {
  std::vector<std::string> tries;
  if (!path.empty()) {
    tries.emplace_back(path);
  } else if (!options().libcublas.empty()) {
    tries.emplace_back(options().libcublas);
  } else {
    tries = candidates();
  }
  static std::mutex mu;
  static auto* apis = new std::map<std::string, std::unique_ptr<CublasApi>>();
  std::lock_guard lock(mu);
  std::string errors;
  for (const std::string& p : tries) {
    if (auto it = apis->find(p); it != apis->end()) return it->second.get();
    bool loaded = false;
    Result<std::unique_ptr<CublasApi>> api = open_api(p, loaded);
    if (api.ok()) return apis->emplace(p, std::move(*api)).first->second.get();
    // A library that loads but lacks a symbol is an answer, not a reason to look further.
    if (loaded) return api.status();
    errors += (errors.empty() ? "" : "; ") + api.status().message();
  }
  return not_found(errors);
}

}  // namespace baregrad::runtime::cuda
