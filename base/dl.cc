#include "base/dl.h"

namespace baregrad {

Result<void*> dl_open(const std::string& path, const std::string& what) {
  dlerror();
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib) return lib;
  const char* err = dlerror();
  return not_found("cannot load " + what + " " + path + ": " + (err ? err : "dlopen failed"));
}

Result<void*> dl_symbol(void* lib,
                        const std::string& path,
                        const char* sym,
                        const std::string& what) {
  dlerror();
  if (void* p = dlsym(lib, sym)) return p;
  const char* err = dlerror();
  return not_found(what + " " + path + " has no " + sym + ": " +
                   (err ? err : "dlsym returned null"));
}

}  // namespace baregrad
