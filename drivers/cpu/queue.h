#pragma once

// The CPU device's queues record packets (packets.h) into an hcq::CmdStream; submit() patches
// the symbolic values and publishes the words into the engine's ring (or, once bound, one
// indirect packet pointing at them). Queue holds what both engines record; ComputeQueue
// (compute_queue.h) adds kernels, CopyQueue (copy_queue.h) is the copy engine's.

#include <vector>

#include "hcq/hcq.h"

namespace baregrad::cpu {

class Device;

class Queue : public hcq::HwQueue {
 public:
  ~Queue() override;

  hcq::HwQueue& wait(const hcq::Signal& s, hcq::Value v) override;
  hcq::HwQueue& signal(const hcq::Signal& s, hcq::Value v) override;
  hcq::HwQueue& timestamp(const hcq::Signal& s) override;
  hcq::HwQueue& memory_barrier() override;
  // Refused: only compute queues run kernels.
  hcq::HwQueue& exec(const hcq::Program& prg,
                     const hcq::ArgsState& args,
                     hcq::Dim3 grid,
                     hcq::Dim3 block) override;
  // Constant ranges must lie in one allocation each (refused otherwise); symbolic ones are
  // checked when the engine runs the copy (an MMU fault).
  hcq::HwQueue& copy(hcq::Value dst, hcq::Value src, hcq::Value bytes) override;
  Status bind() override;
  Status submit(std::span<const int64_t> vars) override;
  void reset() override;

 protected:
  Queue(Device& dev, hcq::Engine engine);
  // Whether `words` more fit in the command buffer (refusing the command when not).
  bool fits(size_t words);

  Device& dev_;
  hcq::CmdStream cs_;
  std::vector<const hcq::ArgsState*> args_;  // patched at submit
  hcq::Buffer bound_;
};

}  // namespace baregrad::cpu
