#pragma once

// AMD queues record packets into an hcq::CmdStream: PM4 on the compute queue (compute_queue.h),
// SDMA on the copy queue (copy_queue.h). Queue holds what both share: the stream, the argument
// blocks patched at submit, bind() and submit(), which hands the words (or, bound on PM4, an
// INDIRECT_BUFFER calling them) to the engine's Ring (ring.h: the order of ring words, write
// pointer and doorbell). On a device whose compute queue is AQL (DeviceOptions::compute), a
// compute recording is PM4 words with 16-word AQL dispatch packets among them (aql_at_), which
// the ring publishes as packets (Ring::submit_aql).
//
// Signal values: every signal writes the whole 64-bit value (RELEASE_MEM DATA_SEL 64-bit; on
// SDMA two 32-bit FENCEs, low word first, so a reader never sees more than the new value), and
// raises the device's KFD signal event (its mailbox, then an interrupt) so host waits wake. Waits
// compare the low 32 bits (WAIT_REG_MEM / POLL_REGMEM, GEQ, as tinygrad): the timeline wraps
// at 2^31 (hcq::kTimelineWrap) so its values never need more; a constant wait value of 2^32 or
// more is refused when recorded.

#include <memory>
#include <string>
#include <vector>

#include "drivers/amd/device.h"
#include "hcq/hcq.h"

namespace baregrad::amd {

class Queue : public hcq::HwQueue {
 public:
  ~Queue() override;

  // Refused here: only the compute queue runs kernels.
  hcq::HwQueue& exec(const hcq::Program& prg,
                     const hcq::ArgsState& args,
                     hcq::Dim3 grid,
                     hcq::Dim3 block) override;
  // Moves the words into CPU-mapped GTT; PM4 submits then call them with an INDIRECT_BUFFER,
  // SDMA submits copy them into the ring (KFD's SDMA queues take no IBs from us).
  Status bind() override;
  Status submit(std::span<const int64_t> vars) override;
  void reset() override;

 protected:
  Queue(Device& dev, hcq::Engine engine);
  // Whether `words` more fit (refusing the command when not).
  bool fits(size_t words);
  // Refuses when `s` is an error; true when OK.
  bool ok(Status s);
  // Records that symbolic copy count `bytes` must be 1..`max` at submit: one `packet` holds it.
  void bound_copy_count(hcq::Value bytes, uint64_t max, const std::string& packet);
  // Refuses a constant value a 32-bit wait cannot compare; true when usable.
  bool check_wait_value(const hcq::Signal& s, hcq::Value v);
  // Waits for the engine to finish everything this queue submitted (destructors call it first).
  void drain();
  Ring& ring() { return dev_.ring(engine()); }

  Device& dev_;
  hcq::CmdStream cs_;
  std::vector<const hcq::ArgsState*> args_;  // patched at submit
  std::vector<std::string> kernels_;         // launched by the recording (reports)
  std::vector<uint32_t> aql_at_;  // AQL compute queue: word offsets of the dispatch packets

 private:
  // Symbolic values a recorded packet can hold only within [lo, hi], checked at submit (before
  // anything is patched); `what` names the command.
  struct VarBound {
    int32_t var;
    int64_t lo, hi;
    std::string what;
  };
  std::vector<VarBound> bounds_;
  uint64_t last_seq_ = 0;  // the ring's sequence number of our last submission
  hcq::Buffer bound_;
  bool submitted_ = false;
  bool drained_ = false;
};

}  // namespace baregrad::amd
