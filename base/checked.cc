#include "base/checked.h"

#include <algorithm>

#include "base/error.h"
#include "base/format.h"

namespace baregrad {

std::optional<int64_t> checked_numel(std::span<const int64_t> shape) {
  int64_t n = 1;  // the product of the non-zero sizes
  for (int64_t s : shape) {
    if (s < 0) return std::nullopt;
    if (s == 0) continue;
    std::optional<int64_t> m = checked_mul(n, s);
    if (!m) return std::nullopt;
    n = *m;
  }
  return std::find(shape.begin(), shape.end(), 0) != shape.end() ? 0 : n;
}

int64_t numel_or_fail(std::string_view op, std::span<const int64_t> shape) {
  if (std::optional<int64_t> n = checked_numel(shape)) return *n;
  for (int64_t s : shape)
    if (s < 0) fail(op, "shape " + tuple_str(shape) + " has a negative size", ErrorKind::kValue);
  fail(op, "shape " + tuple_str(shape) + " has more than 2**63-1 elements", ErrorKind::kValue);
}

namespace {

// `r` when it holds a value, else "[op] what: a <sym> b does not fit int64" (ValueError).
int64_t value_or_fail(std::optional<int64_t> r,
                      std::string_view op,
                      std::string_view what,
                      int64_t a,
                      const char* sym,
                      int64_t b) {
  if (r) return *r;
  fail(op,
       std::string(what) + ": " + std::to_string(a) + sym + std::to_string(b) +
           " does not fit int64",
       ErrorKind::kValue);
}

}  // namespace

int64_t mul_or_fail(std::string_view op, std::string_view what, int64_t a, int64_t b) {
  return value_or_fail(checked_mul(a, b), op, what, a, " * ", b);
}

int64_t add_or_fail(std::string_view op, std::string_view what, int64_t a, int64_t b) {
  return value_or_fail(checked_add(a, b), op, what, a, " + ", b);
}

int64_t bytes_or_fail(std::string_view op,
                      std::span<const int64_t> shape,
                      int64_t numel,
                      int64_t itemsize) {
  if (std::optional<int64_t> r = checked_mul(numel, itemsize)) return *r;
  fail(op,
       "shape " + tuple_str(shape) + " of " + std::to_string(itemsize) +
           "-byte elements needs more than 2**63-1 bytes",
       ErrorKind::kMemory);
}

}  // namespace baregrad
