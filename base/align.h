#pragma once

#include <cstdint>

namespace baregrad {

// `v` rounded up to a multiple of `align` (align > 0; not checked for overflow: sizes here are
// far below 2^64).
constexpr uint64_t round_up(uint64_t v, uint64_t align) { return (v + align - 1) / align * align; }

}  // namespace baregrad
