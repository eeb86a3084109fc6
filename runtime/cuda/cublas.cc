#include "runtime/cuda/cublas.h"

#include <cstdint>
#include <limits>

namespace baregrad::runtime {
namespace {
// A buffer's device address as cuBLAS takes it.
void* dptr(const Buffer& b) { return reinterpret_cast<void*>(static_cast<uintptr_t>(b.va)); }
}  // namespace

using namespace cuda;  // NOLINT: the library's own names

Result<std::unique_ptr<Cublas>> Cublas::create(CudaDevice& dev, std::string_view libcublas) {
  ASSIGN_OR_RETURN(const CublasApi* api, load_cublas_api(libcublas));
  RETURN_IF_ERROR(dev.bind());  // the handle belongs to the current context
  cublasHandle_t h = nullptr;
  RETURN_IF_ERROR(api->check(api->cublasCreate_v2(&h), "cublasCreate_v2"));
  std::unique_ptr<Cublas> out(new Cublas(dev, *api, h));
  RETURN_IF_ERROR(api->check(api->cublasSetStream_v2(h, dev.stream()), "cublasSetStream_v2"));
  return out;
}

Cublas::~Cublas() {
  if (dev_.bind().ok()) (void)api_.cublasDestroy_v2(handle_);
}

Status Cublas::gemm(GemmInput in, Buffer a, Buffer b, Buffer c, int64_t m, int64_t n, int64_t k) {
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  if (m <= 0 || n <= 0 || k <= 0 || m > kMax || n > kMax || k > kMax)
    return invalid_argument("cublas gemm: dimensions " + std::to_string(m) + " x " +
                            std::to_string(n) + " x " + std::to_string(k) +
                            " must be in [1, 2^31)");
  size_t in_bytes = in == GemmInput::kBf16 ? 2 : 4;
  // Bytes of an r x cols matrix of e-byte elements, saturating (r * cols * 4 can pass 2^64).
  auto need = [](int64_t r, int64_t cols, size_t e) {
    auto rows = static_cast<size_t>(r), n = static_cast<size_t>(cols);
    return rows > SIZE_MAX / n / e ? SIZE_MAX : rows * n * e;
  };
  struct Mat {
    const char* what;
    Buffer buf;
    size_t bytes;
  };
  for (const Mat& mat : {Mat{"A", a, need(m, k, in_bytes)}, Mat{"B", b, need(k, n, in_bytes)},
                         Mat{"C", c, need(m, n, 4)}})
    if (!mat.buf.va || mat.buf.bytes < mat.bytes)
      return invalid_argument(std::string("cublas gemm: ") + mat.what + " needs " +
                              std::to_string(mat.bytes) + " bytes, got " +
                              std::to_string(mat.buf.bytes));
  cudaDataType type = in == GemmInput::kBf16 ? CUDA_R_16BF : CUDA_R_32F;
  const float alpha = 1.0f, beta = 0.0f;
  RETURN_IF_ERROR(dev_.bind());
  // cuBLAS is column-major, where a row-major matrix reads as its transpose: row-major
  // C = A x B is column-major C^T (n x m) = B^T (n x k) x A^T (k x m), with leading
  // dimensions n, n and k.
  return api_.check(
      api_.cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                        static_cast<int>(k), &alpha, dptr(b), type, static_cast<int>(n), dptr(a),
                        type, static_cast<int>(k), &beta, dptr(c), CUDA_R_32F, static_cast<int>(n),
                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "cublasGemmEx");
}

Status cublas_gemm(CudaDevice& dev,
                   GemmInput in,
                   Buffer a,
                   Buffer b,
                   Buffer c,
                   int64_t m,
                   int64_t n,
                   int64_t k,
                   std::string_view libcublas) {
  ASSIGN_OR_RETURN(std::unique_ptr<Cublas> blas, Cublas::create(dev, libcublas));
  return blas->gemm(in, a, b, c, m, n, k);
}

}  // namespace baregrad::runtime
