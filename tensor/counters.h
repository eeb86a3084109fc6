// Process-wide counters of the work tensors ran (tinygrad's GlobalCounters), behind one accessor.
#pragma once

#include <atomic>
#include <cstdint>

#include "compiler/program.h"

namespace baregrad::tensor {

struct Counters {
  std::atomic<int64_t> kernel_count{0};  // kernel launches, eager and TinyJit replays
  std::atomic<int64_t> global_ops{0};    // their estimated FLOPs (ProgramSpec::flops)
  std::atomic<int64_t> global_mem{0};    // their estimated bytes moved (ProgramSpec::bytes)
  std::atomic<int64_t> mem_used{0};      // bytes of the device buffers tensors hold now

  // Zeroes every counter but mem_used (which tracks live memory), as tinygrad's reset().
  void reset();
  // Counts one launch of `spec`.
  void count_kernel(const compiler::ProgramSpec& spec);
};

// The one set of counters.
Counters& counters();

}  // namespace baregrad::tensor
