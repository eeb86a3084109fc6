#include "base/format.h"

#include <cinttypes>
#include <cstdio>

namespace baregrad {

std::string hex(uint64_t v) {
  char text[24];
  std::snprintf(text, sizeof(text), "0x%" PRIx64, v);
  return text;
}

std::string hex_padded(std::string_view prefix, uint64_t v, int digits) {
  char text[24];
  std::snprintf(text, sizeof(text), "%0*" PRIX64, digits, v);
  return std::string(prefix) + text;
}

std::string hex_bytes(std::span<const uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) {
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

std::string tuple_str(std::span<const int64_t> v) {
  std::string out = "(";
  for (size_t i = 0; i < v.size(); i++) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + (v.size() == 1 ? ",)" : ")");
}

}  // namespace baregrad
