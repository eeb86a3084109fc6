// Runs a kernel's host twin (compiler/render/llvm_ir.h, LlvmAbi::kHostTwin) over a grid the
// way a GPU may: a kernel without shared memory thread after thread; one with shared memory or
// barriers (compiler::twin_is_per_thread) block after block, the threads of a block as fibers
// on the calling thread, in a fixed order, each until it reaches a barrier or ends. When every
// thread still running waits at the barrier, they go on from it in the same order. Each block's
// shared memory starts filled with 0xff bytes (NaN floats, -1 integers), so a read of an entry
// no thread wrote before a barrier shows, every time: the schedule is deterministic.
#pragma once

#include <cstdint>

namespace baregrad::mock {

// `twin` is the twin's entry: the grid form (`per_thread` false) or the one-thread form with
// `smem_bytes` of shared memory per block. `params` is the kNvptx parameter area.
void run_twin(void (*twin)(),
              bool per_thread,
              int64_t smem_bytes,
              const uint8_t* params,
              const uint32_t grid[3],
              const uint32_t block[3]);

}  // namespace baregrad::mock
