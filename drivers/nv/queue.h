#pragma once

// NVIDIA queues record pushbuffer methods (methods.h) into an hcq::CmdStream. submit() patches
// the symbolic values, then copies the words into the channel's pushbuffer ring (or points at
// the bound copy) and publishes a GP entry (Device::publish). Queue holds what both channels
// record; ComputeQueue (compute_queue.h) adds kernel launches, CopyQueue (copy_queue.h) is the
// copy channel's.

#include <memory>
#include <string>
#include <vector>

#include "drivers/nv/device.h"
#include "drivers/nv/pushbuf.h"
#include "hcq/hcq.h"

namespace baregrad::nv {

class Queue : public hcq::HwQueue {
 public:
  ~Queue() override;

  // Semaphore acquire (64-bit, ACQ_CIRC_GEQ).
  hcq::HwQueue& wait(const hcq::Signal& s, hcq::Value v) override;
  // Semaphore release (64-bit, after WFI).
  hcq::HwQueue& signal(const hcq::Signal& s, hcq::Value v) override;
  // A release with timestamp into the queue's scratch slot, then a copy of its timer word to
  // s.va() + 8 (a timestamped release would also overwrite the signal's value).
  hcq::HwQueue& timestamp(const hcq::Signal& s) override;
  // Nothing: copies are non-pipelined (ComputeQueue invalidates the shader caches).
  hcq::HwQueue& memory_barrier() override { return *this; }
  // Refused: only the compute channel runs kernels.
  hcq::HwQueue& exec(const hcq::Program& prg,
                     const hcq::ArgsState& args,
                     hcq::Dim3 grid,
                     hcq::Dim3 block) override;
  // Copy-engine methods (on the compute channel: the copy class bound on subchannel 4).
  hcq::HwQueue& copy(hcq::Value dst, hcq::Value src, hcq::Value bytes) override;
  Status bind() override;
  Status submit(std::span<const int64_t> vars) override;
  void reset() override;

 protected:
  Queue(Device& dev, hcq::Engine engine);
  // Whether `words` more fit (refusing the command when not).
  bool fits(size_t words);
  // Refuses when `s` is an error; true when OK.
  bool ok(Status s);
  // Waits for the GPU to finish everything this queue submitted (destructors call it first).
  void drain();
  // Whether the queue submitted its recording since the last reset().
  bool submitted() const { return submitted_; }
  // The channel's sequence number of the queue's last ring submission.
  uint64_t last_seq() const { return last_seq_; }

  Device& dev_;
  hcq::CmdStream cs_;
  PushBuffer pb_;
  std::vector<const hcq::ArgsState*> args_;  // patched at submit

 private:
  uint64_t last_seq_ = 0;  // the channel's sequence number of our last ring submission
                           // (bound: the empty one published behind the bound words)
  hcq::Buffer scratch_;    // 16-byte slot for timestamps
  hcq::Buffer bound_;
  bool submitted_ = false;
  bool drained_ = false;
};

}  // namespace baregrad::nv
