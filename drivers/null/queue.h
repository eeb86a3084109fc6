#pragma once

// DEV=NULL's queues (compute and copy alike): they keep only what completes at submit, signal
// writes and timestamps; kernels, copies and waits are accepted and dropped. Exec is refused
// on a copy queue, and a launch its program refuses is refused, as on every device.

#include <vector>

#include "hcq/hcq.h"

namespace baregrad::null {

class Queue final : public hcq::HwQueue {
 public:
  using hcq::HwQueue::HwQueue;
  hcq::HwQueue& wait(const hcq::Signal& s, hcq::Value v) override;
  hcq::HwQueue& signal(const hcq::Signal& s, hcq::Value v) override;
  hcq::HwQueue& timestamp(const hcq::Signal& s) override;
  hcq::HwQueue& memory_barrier() override { return *this; }
  hcq::HwQueue& exec(const hcq::Program& prg,
                     const hcq::ArgsState& args,
                     hcq::Dim3 grid,
                     hcq::Dim3 block) override;
  hcq::HwQueue& copy(hcq::Value, hcq::Value, hcq::Value) override { return *this; }
  Status bind() override { return Status(); }
  // Writes the recorded signal values (timestamps read 0).
  Status submit(std::span<const int64_t> vars) override;
  void reset() override;

 private:
  struct Op {
    const hcq::Signal* sig;
    hcq::Value value;
    bool timestamp;
  };
  std::vector<Op> ops_;
};

}  // namespace baregrad::null
