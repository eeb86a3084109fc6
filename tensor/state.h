// Tensor state on disk in the safetensors format (HuggingFace): an 8-byte little-endian header
// length N, N bytes of JSON describing each tensor, then the raw little-endian data.
// Errors throw baregrad::Error("[safe_load] <path>: ...") / "[safe_save] ..." naming the values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/tensor.h"

namespace baregrad::tensor {

// A new realized tensor on `device` holding a copy of `bytes` raw little-endian elements;
// `bytes` must equal numel(shape) * dtype.itemsize().
Tensor tensor_from_bytes(
    const void* data, size_t bytes, Shape shape, DType dtype, std::string_view device = {});
// The elements of `t` in row-major order as their exact raw bytes (realizes first).
std::vector<uint8_t> tensor_to_bytes(const Tensor& t);

// The safetensors dtype code ("F32", "BF16", "I64", "BOOL", ...) of `t`; throws when none.
std::string safetensors_dtype(DType t);

// Writes `tensors` (names sorted, data contiguous in that order) and `metadata` to `path`
// atomically: a temporary file in the same directory, renamed over `path` once complete.
void safe_save(const std::map<std::string, Tensor>& tensors,
               const std::string& path,
               const std::map<std::string, std::string>& metadata = {});
// Reads every tensor of a safetensors file onto `device`. The whole header is validated before
// any data is read; a corrupt or truncated file throws, naming what is wrong.
std::map<std::string, Tensor> safe_load(const std::string& path, std::string_view device = {});
// The same for the `size` bytes of a safetensors file already in memory at `data`; `name` says
// where they came from in error messages.
std::map<std::string, Tensor> safe_load_bytes(const std::string& name,
                                              const uint8_t* data,
                                              size_t size,
                                              std::string_view device = {});
// The "__metadata__" strings of a safetensors file (empty when absent); validates as safe_load.
std::map<std::string, std::string> safe_load_metadata(const std::string& path);

}  // namespace baregrad::tensor
