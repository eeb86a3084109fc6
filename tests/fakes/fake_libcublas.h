// The test hooks of tests/fakes/fake_libcublas.cc, a fake cuBLAS (a test instrument: it runs
// cublasGemmEx on the host, on the host memory fake_libcuda hands out as device memory).
#pragma once

#include <cstdint>

extern "C" {

// The arguments of the last cublasGemmEx, as cuBLAS received them (column-major terms).
struct FakeCublasGemm {
  int transa, transb, m, n, k;
  float alpha, beta;
  const void* a;
  int a_type, lda;
  const void* b;
  int b_type, ldb;
  void* c;
  int c_type, ldc;
  int compute_type, algo;
  void* stream;  // the handle's stream (cublasSetStream_v2)
};

// Forgets the last call and any pending failure.
void fake_cublas_reset();
// The next call of `function` returns `status` and does nothing.
void fake_cublas_fail_next(const char* function, int status);
// Copies the last cublasGemmEx into *out; 0 on success, -1 when there was none.
int fake_cublas_last_gemm(FakeCublasGemm* out);
// Handles created and not destroyed.
int fake_cublas_live_handles();

using FakeCublasResetFn = void (*)();
using FakeCublasFailNextFn = void (*)(const char*, int);
using FakeCublasLastGemmFn = int (*)(FakeCublasGemm*);
using FakeCublasLiveFn = int (*)();

}  // extern "C"
