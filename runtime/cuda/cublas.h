// cuBLAS for benchmarks: the vendor GEMM on CudaDevice buffers, through the library
// runtime/cuda/cublas_api.h loads at run time.
#pragma once

#include <memory>
#include <string_view>

#include "base/status.h"
#include "runtime/cuda/cublas_api.h"
#include "runtime/cuda/cuda_device.h"

namespace baregrad::runtime {

enum class GemmInput { kBf16, kFp32 };

// A cuBLAS handle bound to a device's stream (RAII).
class Cublas {
 public:
  static Result<std::unique_ptr<Cublas>> create(CudaDevice& dev, std::string_view libcublas = {});
  ~Cublas();
  Cublas(const Cublas&) = delete;
  Cublas& operator=(const Cublas&) = delete;

  // Row-major C[m x n] (fp32) = A[m x k] x B[k x n] (both `in`), accumulated in fp32
  // (CUBLAS_COMPUTE_32F), asynchronous on the device's stream. InvalidArgument for a
  // non-positive or over-int dimension or a buffer smaller than its matrix.
  Status gemm(GemmInput in, Buffer a, Buffer b, Buffer c, int64_t m, int64_t n, int64_t k);

 private:
  Cublas(CudaDevice& dev, const cuda::CublasApi& api, cuda::cublasHandle_t h)
      : dev_(dev), api_(api), handle_(h) {}
  CudaDevice& dev_;
  const cuda::CublasApi& api_;
  cuda::cublasHandle_t handle_;
};

// One GEMM as Cublas::gemm with a handle made for it (cublasCreate is slow: loops hold a
// Cublas); returns once the GEMM is enqueued (the handle's destruction may wait for it).
Status cublas_gemm(CudaDevice& dev,
                   GemmInput in,
                   Buffer a,
                   Buffer b,
                   Buffer c,
                   int64_t m,
                   int64_t n,
                   int64_t k,
                   std::string_view libcublas = {});

}  // namespace baregrad::runtime
