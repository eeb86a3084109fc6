// Counter-based random numbers: element i of the n-th call is a hash of (seed, n, i), so
// results do not depend on the device or the thread count. rand_like, randint and normal
// are composed from rand and randn.
#include <cmath>
#include <functional>
#include <mutex>
#include <numbers>

#include "base/checked.h"
#include "base/error.h"
#include "tensor/jit.h"
#include "tensor/tensor.h"
#include "tensor/tensor_internal.h"

namespace baregrad::tensor {
namespace {

struct RngState {
  std::mutex mu;
  uint64_t seed = 0;
  uint64_t calls = 0;
};

// NOTE: the one piece of global state of the tensor layer, behind this accessor.
RngState& rng() {
  static RngState state;
  return state;
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// n uniform doubles in [0, 1) for the next call.
std::vector<double> uniform01(int64_t n) {
  uint64_t key;
  {
    std::lock_guard lock(rng().mu);
    key = splitmix64(rng().seed ^ splitmix64(rng().calls++));
  }
  std::vector<double> v = host_vector<double>("rand", std::max<int64_t>(n, 0));
  for (int64_t i = 0; i < n; i++)
    v[i] = static_cast<double>(splitmix64(key + static_cast<uint64_t>(i)) >> 11) * 0x1p-53;
  return v;
}

int64_t count(const Shape& s) {
  for (int64_t d : s)
    if (d < 0) fail("rand", "negative dimension in " + shape_str(s), ErrorKind::kValue);
  return numel_or_fail("rand", s);
}

// A tensor of `shape` filled from `draw` (which takes the next call of the generator). While a
// TinyJit captures, the upload is recorded so that every replay draws again, in eager order.
Tensor drawn(Shape shape, DType dtype, std::function<std::vector<double>()> draw) {
  Tensor t = empty_for("rand", std::move(shape), dtype);  // first: a MemoryError names its bytes
  {
    std::vector<uint8_t> bytes = detail::encode_values(draw(), dtype);
    const auto& db = t.lazy().base->realized;
    db->device->copy_in(db->buffer, bytes.data(), bytes.size()).throw_if_error("rand");
  }
  if (auto* capture = detail::jit_capture())
    capture->record_upload(t.lazy().base->realized, [draw = std::move(draw), dtype](
                                                        runtime::Device& dev, runtime::Buffer b) {
      std::vector<uint8_t> bytes = detail::encode_values(draw(), dtype);
      dev.copy_in(b, bytes.data(), bytes.size()).throw_if_error("jit");
    });
  return t;
}
}  // namespace

void Tensor::manual_seed(uint64_t seed) {
  std::lock_guard lock(rng().mu);
  rng().seed = seed;
  rng().calls = 0;
}

Tensor Tensor::rand(Shape shape, DType dtype) { return uniform(shape, 0, 1, dtype); }

Tensor Tensor::uniform(Shape shape, double lo, double hi, DType dtype) {
  int64_t n = count(shape);
  return drawn(std::move(shape), dtype, [n, lo, hi] {
    std::vector<double> v = uniform01(n);
    for (double& x : v) x = lo + (hi - lo) * x;
    return v;
  });
}

Tensor Tensor::randn(Shape shape, DType dtype) {
  int64_t n = count(shape);
  return drawn(std::move(shape), dtype, [n] {
    std::vector<double> u = uniform01(mul_or_fail("randn", "2 draws per value", 2, n));
    std::vector<double> v = host_vector<double>("randn", n);
    for (int64_t i = 0; i < n; i++)  // Box-Muller
      v[i] = std::sqrt(-2 * std::log(1 - u[2 * i])) * std::cos(2 * std::numbers::pi * u[2 * i + 1]);
    return v;
  });
}

Tensor Tensor::rand_like(const Tensor& t) {
  if (!dtypes::is_float(t.dtype()))
    fail("rand_like", "needs a float tensor, got " + t.dtype().name() + " " + shape_str(t.shape()),
         ErrorKind::kValue);
  return on_device_of(rand(t.shape(), t.dtype()), t);
}

Tensor Tensor::randint(Shape shape, int64_t low, int64_t high, DType dtype) {
  if (!dtypes::is_int(dtype))
    fail("randint", "dtype must be an integer, got " + dtype.name(), ErrorKind::kType);
  if (low >= high)
    fail("randint", "empty range [" + str(low) + ", " + str(high) + ")", ErrorKind::kValue);
  // floor(u * (high - low)) < high - low for u < 1 in float64; the minimum guards rounding.
  auto span = static_cast<double>(high - low);
  Tensor k = (rand(std::move(shape), dtypes::kFloat64) * span).cast(dtypes::kInt64);
  Tensor top = full({}, span - 1, dtypes::kInt64);
  return (k.minimum(top) + static_cast<double>(low)).cast(dtype);
}

Tensor Tensor::normal(Shape shape, double mean, double std, DType dtype) {
  if (!dtypes::is_float(dtype))
    fail("normal", "dtype must be a float, got " + dtype.name(), ErrorKind::kType);
  // A leaf, as every factory's result: requires_grad undecided, no history behind it.
  Tensor t = (randn(std::move(shape), dtype) * std + mean).detach();
  t.set_requires_grad(std::nullopt);
  return t;
}

}  // namespace baregrad::tensor
