#pragma once

// What the codegen (lowering, heuristics, renderers) knows about a target; each Target
// (target.h) carries one.

#include <string>

namespace baregrad::compiler {

// What the codegen knows about a target.
struct TargetInfo {
  std::string name = "cpu";
  int vector_bytes = 64;                // widest native vector register
  int threads = 1;                      // cores the first GLOBAL axis is split across
  int registers = 32;                   // vector registers
  bool native_transcendentals = false;  // EXP2/LOG2/SIN/POW reach the renderer as-is
  // Shared memory and work-group barriers (DEFINE_LOCAL, BARRIER): GROUP reductions, LOCAL.
  bool has_local = false;
  // GPU lowering: the output elements (GLOBAL axes, flattened) become one thread each, indexed
  // by SPECIAL gidx0 * block + lidx0 with block = min(max_block, bit_ceil(N)); with LOCAL axes,
  // the block is the LOCAL axes and the grid the GLOBAL axes (up to 3 dimensions each).
  bool gpu = false;
  int max_block = 128;  // a power of two
  // Bytes every buffer's base address is aligned to at launch (a power of two; 1: only the
  // element's own alignment). Renderers may align vector loads and stores to it where the
  // index is a proven multiple (known_divisor), and Device::launch refuses a buffer that is not
  // aligned to it.
  int buffer_align = 1;
  // Threads of a warp that exchange registers (SHFL_XOR): GROUP reductions combine within a
  // warp that way before shared memory. 0: no such exchange.
  int warp_size = 0;
};

}  // namespace baregrad::compiler
