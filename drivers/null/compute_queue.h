#pragma once

// DEV=NULL's compute queue: a launch is checked (arity, the program's launch limits) and
// dropped.

#include "drivers/null/queue.h"

namespace baregrad::null {

class ComputeQueue final : public Queue {
 public:
  explicit ComputeQueue(hcq::Device& dev) : Queue(dev, hcq::Engine::kCompute) {}
  hcq::HwQueue& exec(const hcq::Program& prg,
                     const hcq::ArgsState& args,
                     hcq::Dim3 grid,
                     hcq::Dim3 block) override {
    if (!check_exec(prg, args, name())) return *this;
    if (Status s = prg.check_launch(grid, block); !s.ok()) refuse(std::move(s));
    return *this;
  }
};

}  // namespace baregrad::null
