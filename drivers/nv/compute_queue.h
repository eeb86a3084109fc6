#pragma once

// The NVIDIA compute queue: Queue's commands on the compute channel, and kernel launches: a
// QMD per launch in host memory (constant bank 0 = the argument block) and SEND_PCAS.

#include <deque>
#include <set>
#include <vector>

#include "drivers/nv/queue.h"

namespace baregrad::nv {

class ComputeQueue final : public Queue {
 public:
  explicit ComputeQueue(Device& dev);
  ~ComputeQueue() override;

  // INVALIDATE_SHADER_CACHES_NO_WFI.
  hcq::HwQueue& memory_barrier() override;
  // A QMD for the nv::Program `prg` (its local memory provisioned first) and a launch of it.
  hcq::HwQueue& exec(const hcq::Program& prg,
                     const hcq::ArgsState& args,
                     hcq::Dim3 grid,
                     hcq::Dim3 block) override;
  void reset() override;

 private:
  // A 256-aligned QMD slot in the queue's QMD memory.
  Result<uint64_t> qmd_slot(void** cpu);

  std::vector<hcq::Buffer> qmd_mem_;  // chunks of QMD slots of the current recording
  size_t qmd_next_ = 0;               // slots used since the last reset()
  // Chunks of earlier recordings, reusable once the channel completed ring submission `seq`.
  struct Retired {
    hcq::Buffer mem;
    uint64_t seq;
  };
  std::deque<Retired> retired_;
  std::set<uint64_t> qmds_;  // QMDs recorded (for fault reports)
};

}  // namespace baregrad::nv
