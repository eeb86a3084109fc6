#include "base/sha256.h"

#include <vector>

namespace baregrad {
namespace {

using u128 = unsigned __int128;

// The largest x with x^k <= v (k = 2 or 3), by bisection over [0, 2^40).
uint64_t iroot(u128 v, int k) {
  uint64_t lo = 0, hi = uint64_t{1} << 40;
  while (hi - lo > 1) {
    uint64_t mid = lo + (hi - lo) / 2;
    u128 p = k == 2 ? u128{mid} * mid : u128{mid} * mid * mid;
    (p <= v ? lo : hi) = mid;
  }
  return lo;
}

// The first 32 bits of the fractional parts of the square roots (k = 2) or cube roots (k = 3)
// of the first n primes: the standard's initial hash value and round constants, computed
// exactly with integer roots instead of typed in.
std::vector<uint32_t> root_fractions(int n, int k) {
  std::vector<uint32_t> out;
  for (uint64_t p = 2; static_cast<int>(out.size()) < n; p++) {
    bool prime = true;
    for (uint64_t d = 2; d * d <= p; d++) prime = prime && p % d != 0;
    if (prime) out.push_back(static_cast<uint32_t>(iroot(u128{p} << (32 * k), k)));
  }
  return out;
}

uint32_t rotr(uint32_t x, int r) { return (x >> r) | (x << (32 - r)); }

}  // namespace

std::array<uint8_t, 32> sha256(std::span<const uint8_t> data) {
  static const std::vector<uint32_t> kRound = root_fractions(64, 3);
  static const std::vector<uint32_t> kInit = root_fractions(8, 2);
  std::vector<uint8_t> msg(data.begin(), data.end());
  uint64_t bits = uint64_t{data.size()} * 8;
  msg.push_back(0x80);
  while (msg.size() % 64 != 56) msg.push_back(0);
  for (int i = 7; i >= 0; i--) msg.push_back(static_cast<uint8_t>(bits >> (8 * i)));
  std::array<uint32_t, 8> h;
  for (int i = 0; i < 8; i++) h[i] = kInit[i];
  for (size_t block = 0; block < msg.size(); block += 64) {
    uint32_t w[64];
    for (int t = 0; t < 16; t++) {
      const uint8_t* b = &msg[block + 4 * t];
      w[t] = uint32_t{b[0]} << 24 | uint32_t{b[1]} << 16 | uint32_t{b[2]} << 8 | b[3];
    }
    for (int t = 16; t < 64; t++) {
      uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
      uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
      w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int t = 0; t < 64; t++) {
      uint32_t t1 =
          hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kRound[t] + w[t];
      uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      hh = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    uint32_t add[8] = {a, b, c, d, e, f, g, hh};
    for (int i = 0; i < 8; i++) h[i] += add[i];
  }
  std::array<uint8_t, 32> out;
  for (int i = 0; i < 32; i++) out[i] = static_cast<uint8_t>(h[i / 4] >> (24 - 8 * (i % 4)));
  return out;
}

}  // namespace baregrad
