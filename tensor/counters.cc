#include "tensor/counters.h"

namespace baregrad::tensor {

void Counters::reset() {
  kernel_count = 0;
  global_ops = 0;
  global_mem = 0;
}

void Counters::count_kernel(const compiler::ProgramSpec& spec) {
  kernel_count.fetch_add(1, std::memory_order_relaxed);
  global_ops.fetch_add(static_cast<int64_t>(spec.flops), std::memory_order_relaxed);
  global_mem.fetch_add(static_cast<int64_t>(spec.bytes), std::memory_order_relaxed);
}

Counters& counters() {
  static Counters c;
  return c;
}

}  // namespace baregrad::tensor
