// The safetensors header parser (safe_load's validation): the 8-byte length, the JSON header,
// dtypes, shapes and data offsets, checked without reading tensor data. It knows no tensors or
// devices, so that tests/fuzz/ can build it alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "compiler/dtype.h"

namespace baregrad::tensor {

struct SafetensorsEntry {
  std::string name;
  compiler::DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // relative to the data section
};

// A header that passed every check: data offsets tile the data section exactly.
struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;
  std::map<std::string, std::string> metadata;
  const uint8_t* data = nullptr;  // the data section
};

// Validates everything in the `file_size` bytes at `file` (a whole safetensors file) without
// reading tensor data. Throws baregrad::Error("[safe_load] <path>: ...") naming what is wrong.
SafetensorsHeader parse_safetensors_header(const std::string& path,
                                           const uint8_t* file,
                                           size_t file_size);

// The safetensors dtype code of `t` ("F32", "BF16", "BOOL", ...), or "" when it has none.
std::string safetensors_code(compiler::DType t);

// `s` as a JSON string literal for a message; bytes that are not UTF-8 become U+FFFD.
std::string json_quote(const std::string& s);

}  // namespace baregrad::tensor
