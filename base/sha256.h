// SHA-256 (FIPS 180-4). Used to derive tinygrad's per-device random keys (tensor/random.cc):
// 32 bits of the hash of a 4-byte index. Hand-written because a crypto library from Debian
// would have to ship in the GPU bundle (`./bare bundle`) for these few lines.
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace baregrad {

// The 32-byte digest of `data`.
std::array<uint8_t, 32> sha256(std::span<const uint8_t> data);

}  // namespace baregrad
