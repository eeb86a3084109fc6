#pragma once

// Number and byte formatting shared by every layer's messages and reports.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace baregrad {

// "0x" and the lowercase hex digits of `v`, no padding: hex(31) == "0x1f".
std::string hex(uint64_t v);
// `prefix` and `v` as `digits` uppercase hex digits, zero-padded:
// hex_padded("0xH", 0x3c00, 4) == "0xH3C00".
std::string hex_padded(std::string_view prefix, uint64_t v, int digits);
// Integers as Python writes a tuple of them: "(2, 3)", "(5,)", "()".
std::string tuple_str(std::span<const int64_t> v);

// Each byte as two lowercase hex digits, no separators ("" for none).
std::string hex_bytes(std::span<const uint8_t> bytes);

}  // namespace baregrad
