#pragma once

// The CPU device's compute queue: Queue's commands and kernel launches.

#include "drivers/cpu/queue.h"

namespace baregrad::cpu {

class ComputeQueue final : public Queue {
 public:
  explicit ComputeQueue(Device& dev);
  // An exec packet: the engine splits grid.x items of the cpu::Program `prg` over the
  // device's threads. Refused for another driver's program, an argument block of another
  // arity, or a launch the program refuses (check_launch).
  hcq::HwQueue& exec(const hcq::Program& prg,
                     const hcq::ArgsState& args,
                     hcq::Dim3 grid,
                     hcq::Dim3 block) override;
};

}  // namespace baregrad::cpu
