#include "base/binary.h"

namespace baregrad {

const char* binary_format_name(BinaryFormat f) {
  switch (f) {
    case BinaryFormat::kHostElf:
      return "host-elf";
    case BinaryFormat::kCubin:
      return "cubin";
    case BinaryFormat::kOpenClC:
      return "opencl-c";
    case BinaryFormat::kAmdHsa:
      return "amdhsa";
  }
  return "?";
}

const char* host_arch() {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#else
  return "unknown";
#endif
}

}  // namespace baregrad
