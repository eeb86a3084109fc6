// Links relocatable ELF objects (LlvmCompiler / C compiler output) into this process with ORC.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "base/status.h"

namespace baregrad::runtime {

// The kernel ABI of program.h.
using KernelFn = void (*)(void* const* bufs, const int64_t* vars, int64_t core_lo, int64_t core_hi);

// Owns one JIT; loaded code stays mapped until the loader is destroyed. Thread-safe.
class ObjectLoader {
 public:
  ObjectLoader();
  ~ObjectLoader();
  ObjectLoader(const ObjectLoader&) = delete;
  ObjectLoader& operator=(const ObjectLoader&) = delete;

  // Links `object_bytes` into a fresh symbol namespace (so a symbol may be loaded many times)
  // and returns the address of `symbol`. External references resolve against the process
  // (libm's expf, sinf, ...). InvalidArgument for a non-ELF object or a missing symbol.
  Result<KernelFn> load(const std::string& object_bytes, const std::string& symbol);

 private:
  struct Impl;
  std::mutex mu_;
  std::unique_ptr<Impl> impl_;
  int64_t next_id_ = 0;
};

}  // namespace baregrad::runtime
