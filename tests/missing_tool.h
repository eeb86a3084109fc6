// Whether a suite cannot run here for want of something installed, not for a bug: ptxas (the
// CUDA toolkit), which a plain Debian machine lacks, ld.lld for the AMD code objects, or an OpenCL
// platform for DEV=CL (`./bare` installs PoCL; a machine set up another way may have none). Such a
// suite skips, naming it.
#pragma once

#include <string>

#include "base/status.h"

namespace baregrad::tests {

// What `s`, the error of opening a device, says is missing ("ptxas", "an OpenCL platform"), or
// "" when it is another error.
inline std::string missing_tool(const Status& s) {
  if (s.code() != StatusCode::kNotFound) return "";
  if (s.message().find("ptxas not found") != std::string::npos) return "ptxas";
  if (s.message().find("ld.lld not found") != std::string::npos) return "ld.lld (Debian: lld-19)";
  if (s.message().find("cannot load the OpenCL ICD loader") != std::string::npos ||
      s.message().find("no OpenCL device 0 (this machine has 0") != std::string::npos)
    return "an OpenCL platform (Debian: pocl-opencl-icd)";
  return "";
}

}  // namespace baregrad::tests
