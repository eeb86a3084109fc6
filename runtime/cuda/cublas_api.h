// The cuBLAS API as baregrad uses it: our own declarations (no cublas_v2.h) of the types,
// values and four functions runtime/cuda/cublas.h calls, resolved at run time with dlopen +
// dlsym. Names are NVIDIA's, verbatim; values are from the CUDA 13.0 cublas_api.h and
// library_types.h (see README.md).
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "runtime/cuda/cuda_api.h"

namespace baregrad::runtime::cuda {

using cublasStatus_t = int;
using cublasOperation_t = int;
using cudaDataType = int;
using cublasComputeType_t = int;
using cublasGemmAlgo_t = int;
struct cublasContext;
using cublasHandle_t = cublasContext*;

constexpr cublasStatus_t CUBLAS_STATUS_SUCCESS = 0;
constexpr cublasStatus_t CUBLAS_STATUS_NOT_INITIALIZED = 1;
constexpr cublasStatus_t CUBLAS_STATUS_ALLOC_FAILED = 3;
constexpr cublasStatus_t CUBLAS_STATUS_INVALID_VALUE = 7;
constexpr cublasStatus_t CUBLAS_STATUS_ARCH_MISMATCH = 8;
constexpr cublasStatus_t CUBLAS_STATUS_MAPPING_ERROR = 11;
constexpr cublasStatus_t CUBLAS_STATUS_EXECUTION_FAILED = 13;
constexpr cublasStatus_t CUBLAS_STATUS_INTERNAL_ERROR = 14;
constexpr cublasStatus_t CUBLAS_STATUS_NOT_SUPPORTED = 15;
constexpr cublasStatus_t CUBLAS_STATUS_LICENSE_ERROR = 16;

constexpr cublasOperation_t CUBLAS_OP_N = 0;
constexpr cublasOperation_t CUBLAS_OP_T = 1;
constexpr cudaDataType CUDA_R_32F = 0;
constexpr cudaDataType CUDA_R_16BF = 14;
constexpr cublasComputeType_t CUBLAS_COMPUTE_32F = 68;
constexpr cublasGemmAlgo_t CUBLAS_GEMM_DEFAULT = -1;

struct CublasApi {
  std::string path;  // what dlopen was given
  void* lib = nullptr;

  cublasStatus_t (*cublasCreate_v2)(cublasHandle_t* handle);
  cublasStatus_t (*cublasDestroy_v2)(cublasHandle_t handle);
  cublasStatus_t (*cublasSetStream_v2)(cublasHandle_t handle, CUstream stream);
  // Column-major C (m x n) = alpha * op(A) (m x k) * op(B) (k x n) + beta * C; alpha and beta
  // are host pointers of the compute type's scale type (float for CUBLAS_COMPUTE_32F).
  cublasStatus_t (*cublasGemmEx)(cublasHandle_t handle,
                                 cublasOperation_t transa,
                                 cublasOperation_t transb,
                                 int m,
                                 int n,
                                 int k,
                                 const void* alpha,
                                 const void* a,
                                 cudaDataType a_type,
                                 int lda,
                                 const void* b,
                                 cudaDataType b_type,
                                 int ldb,
                                 const void* beta,
                                 void* c,
                                 cudaDataType c_type,
                                 int ldc,
                                 cublasComputeType_t compute_type,
                                 cublasGemmAlgo_t algo);

  // OK for CUBLAS_STATUS_SUCCESS; else "<call> failed: CUBLAS_STATUS_X".
  Status check(cublasStatus_t s, std::string_view call, Loc loc = Loc::current()) const;
};

// "CUBLAS_STATUS_NOT_SUPPORTED"; "cublasStatus_t <n>" for a value we do not declare.
std::string cublas_status_name(cublasStatus_t s);

// The cuBLAS library: `path`, else $BAREGRAD_LIBCUBLAS, else the first of libcublas.so,
// libcublas.so.13, libcublas.so.12, libcublas.so.11 that dlopen finds, then the same names
// under $CUDA_PATH/lib64 and /usr/local/cuda/lib64. Loaded once per path, never dlclosed.
// NotFound naming every library tried (or the missing symbol) with dlerror().
Result<const CublasApi*> load_cublas_api(std::string_view path = {});

}  // namespace baregrad::runtime::cuda
