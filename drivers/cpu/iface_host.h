#pragma once

// What the CPU device takes from the host: memory (aligned, huge pages for large buffers) and
// executable code (LLVM's ORC JIT links kernel objects into the process). The only files of
// drivers/cpu that reach the OS.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "base/status.h"
#include "hcq/hcq.h"

namespace baregrad::cpu {

// `bytes` of host memory: 64-byte aligned, 2 MiB aligned with transparent huge pages from
// 2 MiB up. The buffer's device address is its host address. ResourceExhausted when the host
// has no memory left.
Result<hcq::Buffer> host_alloc(size_t bytes);
void host_free(const hcq::Buffer& b);

// The kernel ABI of compiler/program.h.
using KernelFn = void (*)(void* const* bufs, const int64_t* vars, int64_t core_lo, int64_t core_hi);

// A kernel linked into the process: its entry point, valid while `code` (or a copy) lives.
struct LoadedKernel {
  KernelFn fn = nullptr;
  std::shared_ptr<const void> code;  // the last copy unlinks the object (and its JIT, if last)
};

// Links relocatable ELF objects into this process. Owns one JIT, which lives on while code it
// loaded does. Thread-safe.
class ObjectLoader {
 public:
  ObjectLoader();
  ~ObjectLoader();
  ObjectLoader(const ObjectLoader&) = delete;
  ObjectLoader& operator=(const ObjectLoader&) = delete;

  // Links `object_bytes` into a fresh symbol namespace (so a symbol may be loaded many times)
  // and returns the address of `symbol`. External references resolve against the process
  // (libm's expf, sinf, ...) and the half and bfloat16 conversions compilers call where the CPU
  // has no instruction for them (__truncdfhf2, __truncsfbf2, ...). InvalidArgument for a non-ELF
  // object, NotFound for a missing symbol.
  Result<LoadedKernel> load(const std::string& object_bytes, const std::string& symbol);

 private:
  struct Impl;
  struct Linked;
  std::shared_ptr<Impl> impl_;
};

}  // namespace baregrad::cpu
