// The CUDA driver API as baregrad uses it: our own declarations (no cuda.h) of the types,
// constants and functions we call, resolved at run time with dlopen("libcuda.so.1") + dlsym, so
// nothing links against libcuda. Names are NVIDIA's, verbatim, so grep finds them in cuda.h and
// in the driver API manual; values are from the CUDA 13.0 cuda.h (see README.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <source_location>
#include <string>
#include <string_view>

#include "base/status.h"

namespace baregrad::runtime::cuda {

// The C enums are int-sized; they are plain ints here.
using CUresult = int;
using CUdevice = int;
using CUdevice_attribute = int;
using CUfunction_attribute = int;
using CUdeviceptr = unsigned long long;  // 64-bit builds only (CUdeviceptr_v2)
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
struct CUevent_st;
struct CUkern_st;
struct CUgraph_st;
struct CUgraphNode_st;
struct CUgraphExec_st;
using CUcontext = CUctx_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
using CUstream = CUstream_st*;
using CUevent = CUevent_st*;
using CUkernel = CUkern_st*;
using CUgraph = CUgraph_st*;
using CUgraphNode = CUgraphNode_st*;
using CUgraphExec = CUgraphExec_st*;

// CUresult values we name (cuGetErrorName gives the name of any other).
constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
constexpr CUresult CUDA_ERROR_DEINITIALIZED = 4;
constexpr CUresult CUDA_ERROR_STUB_LIBRARY = 34;
constexpr CUresult CUDA_ERROR_DEVICE_UNAVAILABLE = 46;
constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
constexpr CUresult CUDA_ERROR_INVALID_DEVICE = 101;
constexpr CUresult CUDA_ERROR_INVALID_IMAGE = 200;
constexpr CUresult CUDA_ERROR_INVALID_CONTEXT = 201;
constexpr CUresult CUDA_ERROR_NO_BINARY_FOR_GPU = 209;
constexpr CUresult CUDA_ERROR_INVALID_HANDLE = 400;
constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;
constexpr CUresult CUDA_ERROR_NOT_READY = 600;
constexpr CUresult CUDA_ERROR_ILLEGAL_ADDRESS = 700;
constexpr CUresult CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701;
constexpr CUresult CUDA_ERROR_LAUNCH_FAILED = 719;
constexpr CUresult CUDA_ERROR_UNKNOWN = 999;

// CUdevice_attribute
constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
// CUfunction_attribute
constexpr CUfunction_attribute CU_FUNC_ATTRIBUTE_NUM_REGS = 4;
// cuStreamCreate / cuEventCreate flags
constexpr unsigned CU_STREAM_DEFAULT = 0x0;  // synchronizes with the legacy NULL stream
constexpr unsigned CU_EVENT_DEFAULT = 0x0;

// A kernel node of a graph, as cuGraphAddKernelNode_v2 and cuGraphExecKernelNodeSetParams_v2
// take it (cuda.h: CUDA_KERNEL_NODE_PARAMS_v2_st, the layout cuda.h names
// CUDA_KERNEL_NODE_PARAMS). `kern` and `ctx` are ignored when `func` is set; the driver copies
// `kernelParams` and the values they point to during the call.
struct CUDA_KERNEL_NODE_PARAMS_v2 {
  CUfunction func;
  unsigned gridDimX, gridDimY, gridDimZ;
  unsigned blockDimX, blockDimY, blockDimZ;
  unsigned sharedMemBytes;
  void** kernelParams;
  void** extra;
  CUkernel kern;
  CUcontext ctx;
};
static_assert(sizeof(CUDA_KERNEL_NODE_PARAMS_v2) == 72);
static_assert(offsetof(CUDA_KERNEL_NODE_PARAMS_v2, gridDimX) == 8);
static_assert(offsetof(CUDA_KERNEL_NODE_PARAMS_v2, blockDimX) == 20);
static_assert(offsetof(CUDA_KERNEL_NODE_PARAMS_v2, sharedMemBytes) == 32);
static_assert(offsetof(CUDA_KERNEL_NODE_PARAMS_v2, kernelParams) == 40);
static_assert(offsetof(CUDA_KERNEL_NODE_PARAMS_v2, extra) == 48);
static_assert(offsetof(CUDA_KERNEL_NODE_PARAMS_v2, kern) == 56);
static_assert(offsetof(CUDA_KERNEL_NODE_PARAMS_v2, ctx) == 64);

// The driver entry points, one member per symbol, named as the symbol dlsym resolved (the _v2
// names where the ABI versioned them). Filled by load_cuda_api(); every member is non-null.
struct CudaApi {
  std::string path;  // what dlopen was given
  void* lib = nullptr;

  CUresult (*cuInit)(unsigned flags);
  CUresult (*cuDriverGetVersion)(int* version);
  CUresult (*cuDeviceGet)(CUdevice* dev, int ordinal);
  CUresult (*cuDeviceGetCount)(int* count);
  CUresult (*cuDeviceGetName)(char* name, int len, CUdevice dev);
  CUresult (*cuDeviceGetAttribute)(int* value, CUdevice_attribute attrib, CUdevice dev);
  CUresult (*cuDeviceTotalMem_v2)(size_t* bytes, CUdevice dev);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext* ctx, CUdevice dev);
  CUresult (*cuDevicePrimaryCtxRelease_v2)(CUdevice dev);
  CUresult (*cuCtxSetCurrent)(CUcontext ctx);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuModuleLoadData)(CUmodule* module, const void* image);
  CUresult (*cuModuleGetFunction)(CUfunction* fn, CUmodule module, const char* name);
  CUresult (*cuModuleUnload)(CUmodule module);
  CUresult (*cuFuncGetAttribute)(int* value, CUfunction_attribute attrib, CUfunction fn);
  CUresult (*cuLaunchKernel)(CUfunction fn,
                             unsigned grid_x,
                             unsigned grid_y,
                             unsigned grid_z,
                             unsigned block_x,
                             unsigned block_y,
                             unsigned block_z,
                             unsigned shared_bytes,
                             CUstream stream,
                             void** kernel_params,
                             void** extra);
  CUresult (*cuMemAlloc_v2)(CUdeviceptr* ptr, size_t bytes);
  CUresult (*cuMemFree_v2)(CUdeviceptr ptr);
  CUresult (*cuMemcpyHtoD_v2)(CUdeviceptr dst, const void* src, size_t bytes);
  CUresult (*cuMemcpyDtoH_v2)(void* dst, CUdeviceptr src, size_t bytes);
  CUresult (*cuMemcpyDtoD_v2)(CUdeviceptr dst, CUdeviceptr src, size_t bytes);
  CUresult (*cuMemcpyDtoDAsync_v2)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream);
  CUresult (*cuMemsetD8_v2)(CUdeviceptr dst, unsigned char value, size_t count);
  CUresult (*cuStreamCreate)(CUstream* stream, unsigned flags);
  CUresult (*cuStreamDestroy_v2)(CUstream stream);
  CUresult (*cuStreamSynchronize)(CUstream stream);
  CUresult (*cuEventCreate)(CUevent* event, unsigned flags);
  CUresult (*cuEventDestroy_v2)(CUevent event);
  CUresult (*cuEventRecord)(CUevent event, CUstream stream);
  CUresult (*cuEventSynchronize)(CUevent event);
  // NOTE: the unversioned symbol: every driver since CUDA 4 exports it (cuda.h 12.8+ maps the
  // macro to cuEventElapsedTime_v2, which older drivers lack); same signature.
  CUresult (*cuEventElapsedTime)(float* ms, CUevent start, CUevent end);
  CUresult (*cuGraphCreate)(CUgraph* graph, unsigned flags);
  CUresult (*cuGraphDestroy)(CUgraph graph);
  CUresult (*cuGraphAddKernelNode_v2)(CUgraphNode* node,
                                      CUgraph graph,
                                      const CUgraphNode* dependencies,
                                      size_t num_dependencies,
                                      const CUDA_KERNEL_NODE_PARAMS_v2* params);
  // cuda.h maps cuGraphInstantiate to this symbol.
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec* exec,
                                          CUgraph graph,
                                          unsigned long long flags);
  CUresult (*cuGraphExecKernelNodeSetParams_v2)(CUgraphExec exec,
                                                CUgraphNode node,
                                                const CUDA_KERNEL_NODE_PARAMS_v2* params);
  CUresult (*cuGraphLaunch)(CUgraphExec exec, CUstream stream);
  CUresult (*cuGraphExecDestroy)(CUgraphExec exec);
  CUresult (*cuGetErrorName)(CUresult error, const char** name);
  CUresult (*cuGetErrorString)(CUresult error, const char** text);

  // OK for CUDA_SUCCESS; else "<call> failed: CUDA_ERROR_X (description)" coded by the error
  // (out of memory -> ResourceExhausted, no device -> NotFound, ...; Internal by default).
  Status check(CUresult r, std::string_view call, std::source_location loc = Loc::current()) const;
};

// Calls api.fn(args...) and converts its CUresult with api.check, naming fn.
#define BG_CU(api, fn, ...) (api).check((api).fn(__VA_ARGS__), #fn)

// The driver library: `path`, else $BAREGRAD_LIBCUDA, else "libcuda.so.1". Loaded once per
// path and kept for the process (never dlclosed: the driver outlives every context). NotFound
// naming the library (or the missing symbol) and dlerror() when it cannot be used.
Result<const CudaApi*> load_cuda_api(std::string_view path = {});

// The name of a CUresult we declare ("CUDA_ERROR_LAUNCH_FAILED"), or "" for another value; used
// when the driver cannot name it (e.g. the toolkit's stub library).
std::string_view cu_result_name(CUresult r);

}  // namespace baregrad::runtime::cuda
