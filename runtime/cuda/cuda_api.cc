#include "runtime/cuda/cuda_api.h"

#include <map>
#include <memory>
#include <mutex>

#include "base/dl.h"
#include "base/options.h"

namespace baregrad::runtime::cuda {
namespace {

// Every CudaApi member, in declaration order: the symbol dlsym resolves into it.
#define BG_CUDA_SYMBOLS(X)             \
  X(cuInit)                            \
  X(cuDriverGetVersion)                \
  X(cuDeviceGet)                       \
  X(cuDeviceGetCount)                  \
  X(cuDeviceGetName)                   \
  X(cuDeviceGetAttribute)              \
  X(cuDeviceTotalMem_v2)               \
  X(cuDevicePrimaryCtxRetain)          \
  X(cuDevicePrimaryCtxRelease_v2)      \
  X(cuCtxSetCurrent)                   \
  X(cuCtxSynchronize)                  \
  X(cuModuleLoadData)                  \
  X(cuModuleGetFunction)               \
  X(cuModuleUnload)                    \
  X(cuFuncGetAttribute)                \
  X(cuLaunchKernel)                    \
  X(cuMemAlloc_v2)                     \
  X(cuMemFree_v2)                      \
  X(cuMemcpyHtoD_v2)                   \
  X(cuMemcpyDtoH_v2)                   \
  X(cuMemcpyDtoD_v2)                   \
  X(cuMemcpyDtoDAsync_v2)              \
  X(cuMemsetD8_v2)                     \
  X(cuStreamCreate)                    \
  X(cuStreamDestroy_v2)                \
  X(cuStreamSynchronize)               \
  X(cuEventCreate)                     \
  X(cuEventDestroy_v2)                 \
  X(cuEventRecord)                     \
  X(cuEventSynchronize)                \
  X(cuEventElapsedTime)                \
  X(cuGraphCreate)                     \
  X(cuGraphDestroy)                    \
  X(cuGraphAddKernelNode_v2)           \
  X(cuGraphInstantiateWithFlags)       \
  X(cuGraphExecKernelNodeSetParams_v2) \
  X(cuGraphLaunch)                     \
  X(cuGraphExecDestroy)                \
  X(cuGetErrorName)                    \
  X(cuGetErrorString)

struct ResultName {
  CUresult value;
  std::string_view name;
};
#define BG_CU_NAME(x) {x, #x}
constexpr ResultName kResultNames[] = {
    BG_CU_NAME(CUDA_SUCCESS),
    BG_CU_NAME(CUDA_ERROR_INVALID_VALUE),
    BG_CU_NAME(CUDA_ERROR_OUT_OF_MEMORY),
    BG_CU_NAME(CUDA_ERROR_NOT_INITIALIZED),
    BG_CU_NAME(CUDA_ERROR_DEINITIALIZED),
    BG_CU_NAME(CUDA_ERROR_STUB_LIBRARY),
    BG_CU_NAME(CUDA_ERROR_DEVICE_UNAVAILABLE),
    BG_CU_NAME(CUDA_ERROR_NO_DEVICE),
    BG_CU_NAME(CUDA_ERROR_INVALID_DEVICE),
    BG_CU_NAME(CUDA_ERROR_INVALID_IMAGE),
    BG_CU_NAME(CUDA_ERROR_INVALID_CONTEXT),
    BG_CU_NAME(CUDA_ERROR_NO_BINARY_FOR_GPU),
    BG_CU_NAME(CUDA_ERROR_INVALID_HANDLE),
    BG_CU_NAME(CUDA_ERROR_NOT_FOUND),
    BG_CU_NAME(CUDA_ERROR_NOT_READY),
    BG_CU_NAME(CUDA_ERROR_ILLEGAL_ADDRESS),
    BG_CU_NAME(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES),
    BG_CU_NAME(CUDA_ERROR_LAUNCH_FAILED),
    BG_CU_NAME(CUDA_ERROR_UNKNOWN),
};
#undef BG_CU_NAME

StatusCode cu_code_of(CUresult r) {
  switch (r) {
    case CUDA_ERROR_INVALID_VALUE:
      return StatusCode::kInvalidArgument;
    case CUDA_ERROR_OUT_OF_MEMORY:
      return StatusCode::kResourceExhausted;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_NOT_FOUND:
      return StatusCode::kNotFound;
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_DEINITIALIZED:
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
      return StatusCode::kUnavailable;
    default:
      return StatusCode::kInternal;
  }
}

// dlopen + dlsym of every symbol; the caller caches the result.
Result<std::unique_ptr<CudaApi>> open_api(const std::string& path) {
  const std::string what = "the CUDA driver library";
  ASSIGN_OR_RETURN(void* lib, dl_open(path, what));
  auto api = std::make_unique<CudaApi>();
  api->path = path;
  api->lib = lib;
  BG_CUDA_SYMBOLS(BG_DL_RESOLVE)
  return api;
}

}  // namespace

std::string_view cu_result_name(CUresult r) {
  for (const ResultName& n : kResultNames)
    if (n.value == r) return n.name;
  return {};
}

Status CudaApi::check(CUresult r, std::string_view call, std::source_location loc) const {
  if (r == CUDA_SUCCESS) return Status();
  const char* name = nullptr;
  const char* text = nullptr;
  std::string msg = std::string(call) + " failed: ";
  if (cuGetErrorName(r, &name) == CUDA_SUCCESS && name) {
    msg += name;
  } else if (std::string_view ours = cu_result_name(r); !ours.empty()) {
    msg += ours;
  } else {
    msg += "CUresult " + std::to_string(r);
  }
  if (cuGetErrorString(r, &text) == CUDA_SUCCESS && text) msg += std::string(" (") + text + ")";
  return Status(cu_code_of(r), std::move(msg), loc);
}

Result<const CudaApi*> load_cuda_api(std::string_view path) {
  std::string p(path);
  if (p.empty()) p = options().libcuda.empty() ? "libcuda.so.1" : options().libcuda;
  static std::mutex mu;
  static auto* apis = new std::map<std::string, std::unique_ptr<CudaApi>>();
  std::lock_guard lock(mu);
  if (auto it = apis->find(p); it != apis->end()) return it->second.get();
  ASSIGN_OR_RETURN(std::unique_ptr<CudaApi> api, open_api(p));
  return apis->emplace(p, std::move(api)).first->second.get();
}

}  // namespace baregrad::runtime::cuda
