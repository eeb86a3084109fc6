// Pass: kernel (shape level, opts applied) -> range-level IR. Loop axes become RANGEs, views
// become INDEX math with validity, UPCAST/UNROLL axes become vector lanes or unrolled copies,
// and REDUCE_AXIS becomes REDUCE over its loop ranges. On GPU targets the output axes become
// one thread per element instead of loops (see TargetInfo::gpu).
#pragma once

#include <array>

#include "compiler/opt/kernel.h"
#include "compiler/program.h"

namespace baregrad::compiler {

struct Lowered {
  UOpPtr sink;                  // SINK of STOREs through INDEX
  std::vector<BufferArg> bufs;  // by slot
  int64_t thread_extent = 1;
  std::array<int64_t, 3> global_size{1, 1, 1};  // GPU targets: blocks and threads per block
  std::array<int64_t, 3> local_size{1, 1, 1};
  int vector_axis = -1;  // the expand axis mapped to vector lanes, or -1
  double flops = 0;
  double bytes = 0;
};

Lowered lower_to_ranges(const Kernel& k, const TargetInfo& target);

}  // namespace baregrad::compiler
