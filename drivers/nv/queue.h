// NVIDIA compute and copy queues: commands recorded as pushbuffer methods (methods.h) into an
// hcq::CmdStream; exec builds a QMD per launch in device memory. submit() patches, then copies
// the words into the channel's pushbuffer ring (or points at the bound copy) and publishes a
// GP entry (Device::publish).
#pragma once

#include <deque>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "drivers/nv/device.h"
#include "drivers/nv/pushbuf.h"
#include "hcq/hcq.h"

namespace baregrad::nv {

class Queue : public hcq::HwQueue {
 public:
  Queue(Device& dev, hcq::Engine engine);
  ~Queue() override;

  // Semaphore acquire (64-bit, ACQ_CIRC_GEQ).
  hcq::HwQueue& wait(const hcq::Signal& s, hcq::Value v) override;
  // Semaphore release (64-bit, after WFI).
  hcq::HwQueue& signal(const hcq::Signal& s, hcq::Value v) override;
  // A release with timestamp into the queue's scratch slot, then a copy of its timer word to
  // s.va() + 8 (a timestamped release would also overwrite the signal's value).
  hcq::HwQueue& timestamp(const hcq::Signal& s) override;
  // Compute: INVALIDATE_SHADER_CACHES_NO_WFI; copy: nothing (copies are non-pipelined).
  hcq::HwQueue& memory_barrier() override;
  // Compute only: a QMD (constant bank 0 = the argument block) and SEND_PCAS.
  hcq::HwQueue& exec(const hcq::Program& prg,
                     const hcq::ArgsState& args,
                     hcq::Dim3 grid,
                     hcq::Dim3 block) override;
  // Copy-engine methods (on the compute channel: the copy class bound on subchannel 4).
  hcq::HwQueue& copy(hcq::Value dst, hcq::Value src, hcq::Value bytes) override;
  Status bind() override;
  Status submit(std::span<const int64_t> vars) override;
  void reset() override;

 private:
  // Whether `words` more fit (refusing the command when not).
  bool fits(size_t words);
  // Refuses when `s` is an error; true when OK.
  bool ok(Status s);
  // A 256-aligned QMD slot in the queue's QMD memory.
  Result<uint64_t> qmd_slot(void** cpu);

  Device& dev_;
  hcq::CmdStream cs_;
  PushBuffer pb_;
  std::vector<const hcq::ArgsState*> args_;
  std::vector<hcq::Buffer> qmd_mem_;  // chunks of QMD slots of the current recording
  size_t qmd_next_ = 0;               // slots used since the last reset()
  // Chunks of earlier recordings, reusable once the channel completed ring submission `seq`.
  struct Retired {
    hcq::Buffer mem;
    uint64_t seq;
  };
  std::deque<Retired> retired_;
  uint64_t last_seq_ = 0;    // the channel's sequence number of our last ring submission
                             // (bound: the empty one published behind the bound words)
  std::set<uint64_t> qmds_;  // QMDs recorded (for fault reports)
  hcq::Buffer scratch_;      // 16-byte slot for timestamps
  hcq::Buffer bound_;
  bool submitted_ = false;
};

}  // namespace baregrad::nv
