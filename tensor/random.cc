// tinygrad's generator, value for value: Threefry-2x32 (20 rounds, Random123) keyed per device
// and counted per device, so `manual_seed(s)` then the same calls give the numbers tinygrad
// gives (tinygrad/mixin/rand.py and Tensor._next_counter at a9069c17 define the scheme):
//   - device number i (in order of first use since the seed) has the key
//     (low 32 bits of sha256(i as 4 big-endian bytes), seed mod 2^32) and a 64-bit counter c;
//   - a call taking n 32-bit words advances c by n, derives (k0, k1) = threefry(key, c) and
//     returns word j = threefry((k0, k1), (j, j + h)).first, word h + j its .second (h =
//     ceil(n/2));
//   - a float of b bits and m mantissa bits is the next b bits (little-endian, packed) shifted
//     right by b - m, times 2^-m: exactly in [0, 1);
//   - randn is Box-Muller over rand((2, *shape)) in float32; uniform and randint scale a float32
//     rand on the device.
// The words are made on the host and uploaded; a TinyJit capture records the upload so that
// every replay draws again.
#include <array>
#include <bit>
#include <cmath>
#include <functional>
#include <mutex>
#include <numbers>
#include <thread>

#include "base/checked.h"
#include "base/error.h"
#include "base/sha256.h"
#include "base/thread_pool.h"
#include "tensor/jit.h"
#include "tensor/tensor.h"
#include "tensor/tensor_internal.h"

namespace baregrad::tensor {
namespace {

struct DeviceRng {
  std::string device;
  uint32_t key0, key1;
  uint64_t counter = 0;
};

struct RngState {
  std::mutex mu;
  uint64_t seed = 0;
  std::vector<DeviceRng> devices;  // in order of first use since the seed
};

// NOTE: the one piece of global state of the tensor layer, behind this accessor.
RngState& rng() {
  static RngState state;
  return state;
}

// fn(lo, hi) over [0, n), on the host's cores when n is large (the pool is made on first need):
// the values are counter-based, so any split gives the same numbers.
void parallel(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n < (int64_t{1} << 17)) return fn(0, n);
  static ThreadPool pool(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  pool.parallel_for(n, fn);
}

// Threefry-2x32 with 20 rounds: the two output words for key (k0, k1) and counter (x0, x1).
std::pair<uint32_t, uint32_t> threefry2x32(uint32_t k0, uint32_t k1, uint32_t x0, uint32_t x1) {
  constexpr int kRot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  const uint32_t ks[3] = {k0, k1, k0 ^ k1 ^ 0x1BD11BDAu};
  x0 += ks[0];
  x1 += ks[1];
  for (uint32_t i = 0; i < 5; i++) {
    for (int r : kRot[i % 2]) {
      x0 += x1;
      x1 = x0 ^ ((x1 << r) | (x1 >> (32 - r)));
    }
    x0 += ks[(i + 1) % 3];
    x1 += ks[(i + 2) % 3] + i + 1;
  }
  return {x0, x1};
}

// The next `n` words of `device`'s stream (its counter advances by n).
std::vector<uint32_t> next_words(const std::string& device, int64_t n) {
  uint32_t key0, key1;
  uint64_t counter;
  {
    RngState& s = rng();
    std::lock_guard lock(s.mu);
    auto it = std::find_if(s.devices.begin(), s.devices.end(),
                           [&](const DeviceRng& d) { return d.device == device; });
    if (it == s.devices.end()) {
      std::array<uint8_t, 4> index;
      for (int i = 0; i < 4; i++) index[i] = static_cast<uint8_t>(s.devices.size() >> (24 - 8 * i));
      std::array<uint8_t, 32> h = sha256(index);
      uint32_t low = uint32_t{h[28]} << 24 | uint32_t{h[29]} << 16 | uint32_t{h[30]} << 8 | h[31];
      s.devices.push_back({device, low, static_cast<uint32_t>(s.seed)});
      it = s.devices.end() - 1;
    }
    key0 = it->key0, key1 = it->key1, counter = it->counter;
    it->counter += static_cast<uint64_t>(n);
  }
  std::vector<uint32_t> out = host_vector<uint32_t>("rand", n);
  constexpr int64_t kChunk = 0xFFFFFFFF;  // tinygrad's words per derived key
  for (int64_t start = 0; start < n; start += kChunk) {
    int64_t len = std::min(n - start, kChunk), half = (len + 1) / 2;
    uint64_t c = counter + static_cast<uint64_t>(start);
    auto [k0, k1] =
        threefry2x32(key0, key1, static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32));
    uint32_t* dst = out.data() + start;
    parallel(half, [&, k0 = k0, k1 = k1](int64_t lo, int64_t hi) {
      for (int64_t j = lo; j < hi; j++) {
        auto [w0, w1] =
            threefry2x32(k0, k1, static_cast<uint32_t>(j), static_cast<uint32_t>(j + half));
        dst[j] = w0;
        if (half + j < len) dst[half + j] = w1;
      }
    });
  }
  return out;
}

// Mantissa bits of a float dtype (tinygrad's dtypes.finfo(dt)[1]).
int mantissa_bits(DType dt) {
  if (dt == dtypes::kFloat64) return 52;
  if (dt == dtypes::kFloat32) return 23;
  if (dt == dtypes::kFloat16) return 10;
  if (dt == dtypes::kBFloat16) return 7;
  if (dt == dtypes::kFp8e4m3 || dt == dtypes::kFp8e4m3fnuz) return 3;
  if (dt == dtypes::kFp8e5m2 || dt == dtypes::kFp8e5m2fnuz) return 2;
  fail("rand", "dtype must be a float, got " + dt.name(), ErrorKind::kValue);
}

// The bytes of `n` uniform values in [0, 1) of float dtype `dt`, from the next words of `device`:
// the top mantissa bits of each dt-sized piece of the words (little-endian, as tinygrad's
// bitcast) over the exponent of 1.0, minus 1 (exact).
std::vector<uint8_t> rand_bytes(const std::string& device, int64_t n, DType dt) {
  int64_t size = dt.itemsize(), m = mantissa_bits(dt);
  int64_t bytes = mul_or_fail("rand", "the random bytes", n, size);
  std::vector<uint32_t> w = next_words(device, (bytes + 3) / 4);
  const auto* b = reinterpret_cast<const uint8_t*>(w.data());
  std::vector<uint8_t> out = host_vector<uint8_t>("rand", bytes);
  if (dt == dtypes::kFloat32) {
    auto* f = reinterpret_cast<float*>(out.data());
    parallel(n, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; i++)
        f[i] = std::bit_cast<float>((w[i] >> 9) | 0x3F800000u) - 1.0f;
    });
    return out;
  }
  std::vector<double> v = host_vector<double>("rand", n);  // exact, then stored as dt
  const double scale = std::ldexp(1.0, static_cast<int>(-m));
  parallel(n, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; i++) {
      uint64_t u = 0;
      for (int64_t k = 0; k < size; k++) u |= uint64_t{b[i * size + k]} << (8 * k);
      v[i] = static_cast<double>(u >> (8 * size - m)) * scale;
    }
  });
  return detail::encode_values(v, dt);
}

int64_t count(const Shape& s) {
  for (int64_t d : s)
    if (d < 0) fail("rand", "negative dimension in " + shape_str(s), ErrorKind::kValue);
  return numel_or_fail("rand", s);
}

// A tensor of `shape` on `device` filled by `draw(device name)` (which takes the next words of
// that device's stream). While a TinyJit captures, the upload is recorded so that every replay
// draws again, in eager order.
Tensor drawn(Shape shape,
             DType dtype,
             std::string_view device,
             std::function<std::vector<uint8_t>(const std::string&)> draw) {
  Tensor t = empty_for("rand", std::move(shape), dtype, device);  // a MemoryError names its bytes
  std::string name = t.device();
  {
    std::vector<uint8_t> bytes = draw(name);
    const auto& db = t.lazy().base->realized;
    db->device->copy_in(db->buffer, bytes.data(), bytes.size()).throw_if_error("rand");
  }
  if (auto* capture = detail::jit_capture())
    capture->record_upload(t.lazy().base->realized,
                           [draw = std::move(draw), name](runtime::Device& dev, runtime::Buffer b) {
                             std::vector<uint8_t> bytes = draw(name);
                             dev.copy_in(b, bytes.data(), bytes.size()).throw_if_error("jit");
                           });
  return t;
}

// A factory's result is a leaf: requires_grad undecided, no history behind it.
Tensor leaf(Tensor t) {
  t = t.detach();
  t.set_requires_grad(std::nullopt);
  return t;
}
}  // namespace

void Tensor::manual_seed(uint64_t seed) {
  std::lock_guard lock(rng().mu);
  rng().seed = seed;
  rng().devices.clear();
}

Tensor Tensor::rand(Shape shape, DType dtype, std::string_view device) {
  mantissa_bits(dtype);
  int64_t n = count(shape);
  return drawn(std::move(shape), dtype, device,
               [n, dtype](const std::string& dev) { return rand_bytes(dev, n, dtype); });
}

Tensor Tensor::uniform(Shape shape, double lo, double hi, DType dtype, std::string_view device) {
  if (!(lo < hi))
    fail("uniform", "needs low < high, got [" + num(lo) + ", " + num(hi) + ")", ErrorKind::kValue);
  Tensor u = rand(std::move(shape), dtypes::kFloat32, device);
  return leaf((u * static_cast<double>(static_cast<float>(hi - lo))).cast(dtype) + lo);
}

Tensor Tensor::randn(Shape shape, DType dtype, std::string_view device) {
  if (!dtypes::is_float(dtype))
    fail("randn", "dtype must be a float, got " + dtype.name(), ErrorKind::kType);
  int64_t n = count(shape);
  mul_or_fail("randn", "2 draws per value", 2, n);
  return drawn(std::move(shape), dtype, device, [n, dtype](const std::string& dev) {
    std::vector<uint8_t> raw = rand_bytes(dev, 2 * n, dtypes::kFloat32);
    const auto* u = reinterpret_cast<const float*>(raw.data());
    const auto two_pi = static_cast<float>(2 * std::numbers::pi);
    auto box_muller = [&](int64_t i) {  // over rand((2, *shape)), in tinygrad's order
      return static_cast<double>(std::cos(u[i] * two_pi)) *
             std::sqrt(-2.0 * std::log(1.0f - u[n + i]));
    };
    if (dtype == dtypes::kFloat32) {  // written straight as float32
      std::vector<uint8_t> out = host_vector<uint8_t>("randn", 4 * n);
      auto* f = reinterpret_cast<float*>(out.data());
      parallel(n, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; i++) f[i] = static_cast<float>(box_muller(i));
      });
      return out;
    }
    std::vector<double> v = host_vector<double>("randn", n);
    parallel(n, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; i++) v[i] = box_muller(i);
    });
    return detail::encode_values(v, dtype);
  });
}

Tensor Tensor::rand_like(const Tensor& t) {
  if (!dtypes::is_float(t.dtype()))
    fail("rand_like", "needs a float tensor, got " + t.dtype().name() + " " + shape_str(t.shape()),
         ErrorKind::kValue);
  return rand(t.shape(), t.dtype(), t.device());
}

Tensor Tensor::randint(
    Shape shape, int64_t low, int64_t high, DType dtype, std::string_view device) {
  if (!dtypes::is_int(dtype))
    fail("randint", "dtype must be an integer, got " + dtype.name(), ErrorKind::kType);
  if (low >= high)
    fail("randint", "empty range [" + str(low) + ", " + str(high) + ")", ErrorKind::kValue);
  // tinygrad's ((high - low) * rand).cast(dtype) + low, with float32 rand; the minimum keeps a
  // product rounded up to high - low (spans over 2^24) inside the range.
  auto span = static_cast<double>(high - low);
  Tensor k = (rand(std::move(shape), dtypes::kFloat32, device) *
              static_cast<double>(static_cast<float>(span)))
                 .cast(dtypes::kInt64);
  Tensor top = full({}, span - 1, dtypes::kInt64, k.device());
  return leaf((k.minimum(top) + static_cast<double>(low)).cast(dtype));
}

Tensor Tensor::normal(Shape shape, double mean, double std, DType dtype, std::string_view device) {
  if (!dtypes::is_float(dtype))
    fail("normal", "dtype must be a float, got " + dtype.name(), ErrorKind::kType);
  return leaf(randn(std::move(shape), dtype, device) * std + mean);
}

}  // namespace baregrad::tensor
