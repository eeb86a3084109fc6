// Helpers shared by the Tensor op files (tensor*.cc, random.cc); not part of the interface.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/checked.h"
#include "base/error.h"
#include "tensor/autograd.h"
#include "tensor/tensor.h"

namespace baregrad::tensor {

using Pads = std::vector<std::pair<int64_t, int64_t>>;

inline std::string str(int64_t v) { return std::to_string(v); }
// `v` in the fewest of 15 or 17 significant digits that read back exactly (1e+30, inf, 0.5).
inline std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  if (std::strtod(buf, nullptr) != v) std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// Tensor::empty whose errors name `op` (the op that needs the buffer: "arange", "rand").
Tensor empty_for(std::string_view op, Shape shape, DType dtype, std::string_view device = {});

// A host vector of `n` values; running out of memory is Error("[op] ...", MemoryError) that
// names the bytes asked.
template <class T>
std::vector<T> host_vector(std::string_view op, int64_t n) {
  std::optional<int64_t> bytes = checked_mul(n, static_cast<int64_t>(sizeof(T)));
  try {
    if (bytes) return std::vector<T>(static_cast<size_t>(n));
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {  // more than the vector's max_size()
  }
  fail(op,
       "cannot allocate " + std::to_string(n) + " host values (" +
           (bytes ? std::to_string(*bytes) : "more than 2**63-1") + " bytes)",
       ErrorKind::kMemory);
}

// `t` in a float dtype (least_upper_float of its own): transcendental ops compute in it.
inline Tensor as_float(const Tensor& t) { return t.cast(compiler::least_upper_float(t.dtype())); }
// An order-reversing bijection of t's dtype (tinygrad's _inverse): -x for floats, ~x for ints and
// bools. Negation would wrap (-(-128) is -128 in int8, -x reverses nothing in uint8).
inline Tensor order_inverse(const Tensor& t) {
  return compiler::dtypes::is_float(t.dtype()) ? -t : t.bitwise_not();
}

// What a backward function reads of a forward input or output: the tensor itself while
// gradient() builds a differentiable graph (create_graph(), autograd.h), else its value without
// history.
inline Tensor saved(const Tensor& t) { return create_graph() ? t : t.detach(); }
// What a backward function reads of its op's own output `out` (kept without history: the node
// must not hold its output, a reference cycle): `out`, or while gradient() builds a
// differentiable graph, the output computed again by `recompute` from saved() inputs, so that
// its dependence on them is recorded.
template <class Recompute>
Tensor saved_output(const Tensor& out, Recompute&& recompute) {
  return create_graph() ? recompute() : out;
}

// A scalar constant of dtype `dt` on `t`'s device.
inline Tensor const_like(const Tensor& t, double v, DType dt) {
  return Tensor::full({}, v, dt, t.device());
}

// 0, 1, ..., n-1 as int32 (int64 past 2**31 - 1) on `t`'s device, computed where read.
inline Tensor arange_on(const Tensor& t, int64_t n) {
  return Tensor::arange(0, static_cast<double>(n), 1,
                        n > INT32_MAX ? dtypes::kInt64 : dtypes::kInt32, t.device());
}

// `r` (freshly generated on the default device) moved to `t`'s device when they differ.
inline Tensor on_device_of(const Tensor& r, const Tensor& t) {
  if (r.device() == t.device()) return r;
  return Tensor::from_data(r.to_vector(), r.shape(), r.dtype(), t.device());
}

// Full ranges of `s`, for shrink.
inline Pads full_ranges(const Shape& s) {
  Pads r;
  for (int64_t d : s) r.push_back({0, d});
  return r;
}

}  // namespace baregrad::tensor
