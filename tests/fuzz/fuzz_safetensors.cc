// libFuzzer target: the safetensors header parser (tensor/safetensors_header.cc), which
// safe_load and safe_load_metadata run on every file before reading tensor data. Any input is
// either a header or a baregrad::Error naming what is wrong; never a crash or a hang.
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/error.h"
#include "tensor/safetensors_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    baregrad::tensor::SafetensorsHeader h =
        baregrad::tensor::parse_safetensors_header("fuzz.safetensors", data, size);
    // What safe_load then reads: every entry's bytes lie inside the input.
    for (const auto& e : h.entries) {
      if (e.end < e.begin || h.data + e.end > data + size) __builtin_trap();
      for (uint64_t i = e.begin; i < e.end; i++) (void)*(volatile const uint8_t*)(h.data + i);
    }
  } catch (const baregrad::Error&) {
  }
  return 0;
}
