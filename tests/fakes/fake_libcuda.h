// The test hooks of tests/fakes/fake_libcuda.cc, a fake CUDA driver library (a test
// instrument, never a GPU): what it logs and how to make its next call fail. Tests resolve
// these with dlsym on the same library CudaDevice loads (dlopen returns the same handle).
#pragma once

#include <cstdint>

extern "C" {

// One kernel launch as the fake saw it: a cuLaunchKernel, or a kernel node run by cuGraphLaunch
// (logged exactly the same, with `graph_exec` set).
struct FakeCudaLaunch {
  char function[128];  // the entry name cuModuleGetFunction was given
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t shared_bytes;
  void* stream;
  // The parameter area the driver would build: each kernel parameter's bytes (from
  // kernelParams[ordinal]) at its EIATTR_KPARAM_INFO offset in the cubin.
  uint32_t param_bytes;
  uint8_t params[512];
  void* graph_exec;  // the CUgraphExec that ran the node; null for cuLaunchKernel
};

// Clears the launch log, the call counts and any pending failure; keeps live objects.
void fake_cuda_reset();
// The next call of `function` (e.g. "cuStreamSynchronize") returns `result` and does nothing.
void fake_cuda_fail_next(const char* function, int result);
// Launches logged since the last reset; copies launch `i` into *out (0 on success, -1 if none).
int fake_cuda_launch_count();
int fake_cuda_get_launch(int i, FakeCudaLaunch* out);
// Calls of `function` since the last reset.
int fake_cuda_calls(const char* function);
// Live objects of a kind: "allocations", "modules", "streams", "events", "primary_ctx_refs",
// "graphs", "graph_execs".
int fake_cuda_live(const char* kind);

using FakeCudaResetFn = void (*)();
using FakeCudaFailNextFn = void (*)(const char*, int);
using FakeCudaLaunchCountFn = int (*)();
using FakeCudaGetLaunchFn = int (*)(int, FakeCudaLaunch*);
using FakeCudaCountFn = int (*)(const char*);

}  // extern "C"

// The fake: sm_90 (compute capability 9.0), 132 SMs, 80 GiB, driver 13.0.
constexpr const char* kFakeCudaName = "Fake CUDA GPU";
constexpr int kFakeCudaSmCount = 132;
constexpr uint64_t kFakeCudaTotalMem = 80ull << 30;
constexpr int kFakeCudaDriverVersion = 13000;
// Every launch (each kernel node of a graph launch too) advances the fake's event clock by this.
constexpr float kFakeCudaLaunchMs = 1.5f;
