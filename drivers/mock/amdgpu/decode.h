// Helpers the fake AMD GPU's PM4 and SDMA decoders share.
#pragma once

#include <cstdint>

namespace baregrad::mock::amdgpu_decode {

inline uint64_t addr64(uint32_t lo, uint32_t hi) { return uint64_t{hi} << 32 | lo; }

// WAIT_REG_MEM_FUNCTION (also SDMA POLL_REGMEM's func): 0 always, 1 <, 2 <=, 3 ==, 4 !=, 5 >=,
// 6 > (7 reserved: false).
inline bool compare(uint32_t func, uint64_t v, uint64_t ref) {
  switch (func) {
    case 0:
      return true;
    case 1:
      return v < ref;
    case 2:
      return v <= ref;
    case 3:
      return v == ref;
    case 4:
      return v != ref;
    case 5:
      return v >= ref;
    case 6:
      return v > ref;
  }
  return false;
}

}  // namespace baregrad::mock::amdgpu_decode
