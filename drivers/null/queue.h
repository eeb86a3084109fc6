#pragma once

// DEV=NULL's queues keep only what completes at submit, signal writes and timestamps; kernels,
// copies and waits are accepted and dropped. Queue holds what both engines record;
// ComputeQueue (compute_queue.h) accepts kernels, CopyQueue (copy_queue.h) refuses them, as on
// every device.

#include <vector>

#include "hcq/hcq.h"

namespace baregrad::null {

class Queue : public hcq::HwQueue {
 public:
  hcq::HwQueue& wait(const hcq::Signal& s, hcq::Value v) override;
  hcq::HwQueue& signal(const hcq::Signal& s, hcq::Value v) override;
  hcq::HwQueue& timestamp(const hcq::Signal& s) override;
  hcq::HwQueue& memory_barrier() override { return *this; }
  // Refused: only compute queues run kernels.
  hcq::HwQueue& exec(const hcq::Program& prg,
                     const hcq::ArgsState& args,
                     hcq::Dim3 grid,
                     hcq::Dim3 block) override;
  hcq::HwQueue& copy(hcq::Value, hcq::Value, hcq::Value) override { return *this; }
  Status bind() override { return Status(); }
  // Writes the recorded signal values (timestamps read 0).
  Status submit(std::span<const int64_t> vars) override;
  void reset() override;

 protected:
  using hcq::HwQueue::HwQueue;
  // "compute queue of NULL", "copy queue of NULL".
  std::string name() const;

 private:
  struct Op {
    const hcq::Signal* sig;
    hcq::Value value;
    bool timestamp;
  };
  std::vector<Op> ops_;
};

}  // namespace baregrad::null
