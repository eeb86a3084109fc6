// dlopen and dlsym with errors that name the library: how baregrad loads the libraries it does
// not link against at run time (runtime/: libcuda, cuBLAS, the OpenCL ICD loader; drivers/amd:
// libdrm and libdrm_amdgpu).
#pragma once

#include <dlfcn.h>

#include <string>

#include "base/status.h"

namespace baregrad {

// dlopen(path, RTLD_NOW | RTLD_LOCAL); NotFound "cannot load <what> <path>: <dlerror>".
Result<void*> dl_open(const std::string& path, const std::string& what);
// dlsym; NotFound "<what> <path> has no <sym>: <dlerror>" (dlerror read before any dlclose).
Result<void*> dl_symbol(void* lib,
                        const std::string& path,
                        const char* sym,
                        const std::string& what);

}  // namespace baregrad

// For an X-macro list of symbols: resolves `sym` into api->sym, or closes `lib` and returns
// the error. Expects `api`, `lib`, `path` and `what` in scope.
#define BG_DL_RESOLVE(sym)                                                       \
  if (Result<void*> p = ::baregrad::dl_symbol(lib, path, #sym, what); !p.ok()) { \
    dlclose(lib);                                                                \
    return p.status();                                                           \
  } else {                                                                       \
    api->sym = reinterpret_cast<decltype(api->sym)>(*p);                         \
  }
