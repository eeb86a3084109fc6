#pragma once

// Overflow-checked int64 arithmetic for shapes, strides, offsets and byte sizes. Every product
// of sizes goes through here, so a shape too large for int64 is an error, never a wrapped value.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace baregrad {

// a * b, or nullopt when it does not fit int64.
inline std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}
// a + b, or nullopt when it does not fit int64.
inline std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}
// a - b, or nullopt when it does not fit int64.
inline std::optional<int64_t> checked_sub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// The element count of `shape` (1 for a scalar), or nullopt when a size is negative or the
// product of its non-zero sizes does not fit int64 (so every partial product of a shape that
// passes fits too, zero-size shapes included).
std::optional<int64_t> checked_numel(std::span<const int64_t> shape);

// The element count of `shape`; throws Error("[op] shape (..) has a negative size" or
// "[op] shape (..) has more than 2**63-1 elements", ValueError).
int64_t numel_or_fail(std::string_view op, std::span<const int64_t> shape);

// a * b for sizes (the message names the operands); throws Error("[op] what: a * b does not
// fit int64", ValueError) on overflow.
int64_t mul_or_fail(std::string_view op, std::string_view what, int64_t a, int64_t b);
// a + b likewise.
int64_t add_or_fail(std::string_view op, std::string_view what, int64_t a, int64_t b);

// numel * itemsize as bytes; throws Error("[op] shape (..) of N-byte elements needs more than
// 2**63-1 bytes", MemoryError) on overflow. numel must be >= 0.
int64_t bytes_or_fail(std::string_view op,
                      std::span<const int64_t> shape,
                      int64_t numel,
                      int64_t itemsize);

}  // namespace baregrad
