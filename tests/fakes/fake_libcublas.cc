// A fake cuBLAS: a TEST INSTRUMENT, not NVIDIA's library and not a model of its numerics. It
// exports the four functions runtime/cuda/cublas.h declares and runs cublasGemmEx on the host
// with cuBLAS' column-major semantics (op(A) m x k, op(B) k x n, C m x n with leading
// dimensions), on the host memory fake_libcuda hands out as device memory. Sums in double.
#include "tests/fakes/fake_libcublas.h"

#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "runtime/cuda/cublas_api.h"

using namespace baregrad::runtime::cuda;  // NOLINT: the types and values we implement

struct baregrad::runtime::cuda::cublasContext {
  CUstream stream = nullptr;
};

namespace {

struct State {
  std::mutex mu;
  std::set<cublasHandle_t> handles;
  std::map<std::string, int> fail_next;
  bool have_gemm = false;
  FakeCublasGemm last{};
};

State& state() {
  static State* s = new State();
  return *s;
}

// The failure injected for `fn`, if any (state().mu held).
cublasStatus_t injected(const char* fn) {
  auto it = state().fail_next.find(fn);
  if (it == state().fail_next.end()) return CUBLAS_STATUS_SUCCESS;
  cublasStatus_t s = it->second;
  state().fail_next.erase(it);
  return s;
}

#define ENTER(fn)                   \
  std::lock_guard lock(state().mu); \
  if (cublasStatus_t s_ = injected(fn)) return s_

double load(const void* base, int type, int64_t i) {
  if (type == CUDA_R_32F) {
    float f;
    std::memcpy(&f, static_cast<const char*>(base) + 4 * i, 4);
    return f;
  }
  uint16_t h;  // bf16: the high half of a float
  std::memcpy(&h, static_cast<const char*>(base) + 2 * i, 2);
  uint32_t bits = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  ENTER("cublasCreate_v2");
  if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new cublasContext();
  state().handles.insert(*handle);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  ENTER("cublasDestroy_v2");
  if (!state().handles.erase(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, CUstream stream) {
  ENTER("cublasSetStream_v2");
  if (!state().handles.count(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle,
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
                            cublasGemmAlgo_t algo) {
  ENTER("cublasGemmEx");
  if (!state().handles.count(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  float al, be;
  std::memcpy(&al, alpha, 4);
  std::memcpy(&be, beta, 4);
  state().have_gemm = true;
  state().last = {transa, transb, m,   n, k,      al,  be,           a,    a_type,        lda,
                  b,      b_type, ldb, c, c_type, ldc, compute_type, algo, handle->stream};
  bool ta = transa == CUBLAS_OP_T, tb = transb == CUBLAS_OP_T;
  if (m < 0 || n < 0 || k < 0 || (transa != CUBLAS_OP_N && !ta) || (transb != CUBLAS_OP_N && !tb) ||
      lda < std::max(1, ta ? k : m) || ldb < std::max(1, tb ? n : k) || ldc < std::max(1, m))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (compute_type != CUBLAS_COMPUTE_32F || a_type != b_type ||
      (a_type != CUDA_R_32F && a_type != CUDA_R_16BF) || c_type != CUDA_R_32F)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  auto* out = static_cast<float*>(c);
  for (int j = 0; j < n; j++) {
    for (int i = 0; i < m; i++) {
      double sum = 0;
      for (int l = 0; l < k; l++) {
        int64_t ai = ta ? l + int64_t{i} * lda : i + int64_t{l} * lda;
        int64_t bi = tb ? j + int64_t{l} * ldb : l + int64_t{j} * ldb;
        sum += load(a, a_type, ai) * load(b, b_type, bi);
      }
      float& dst = out[i + int64_t{j} * ldc];
      dst = static_cast<float>(al * sum + (be == 0 ? 0.0 : be * dst));
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}

// ---- test hooks (fake_libcublas.h) ----

void fake_cublas_reset() {
  std::lock_guard lock(state().mu);
  state().fail_next.clear();
  state().have_gemm = false;
}

void fake_cublas_fail_next(const char* function, int status) {
  std::lock_guard lock(state().mu);
  state().fail_next[function] = status;
}

int fake_cublas_last_gemm(FakeCublasGemm* out) {
  std::lock_guard lock(state().mu);
  if (!state().have_gemm) return -1;
  *out = state().last;
  return 0;
}

int fake_cublas_live_handles() {
  std::lock_guard lock(state().mu);
  return static_cast<int>(state().handles.size());
}

}  // extern "C"
