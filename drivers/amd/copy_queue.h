#pragma once

// The AMD copy queue: SDMA packets (tinygrad's AMDCopyQueue). copy is COPY_LINEAR, split at the
// SDMA version's largest count (a symbolic count: one packet, its COUNT patched to bytes - 1 and
// checked at submit to lie in 1..the largest); signal two FENCEs (the 64-bit value, low word first)
// and the signal event's mailbox FENCE and TRAP; wait POLL_REGMEM (memory, GEQ, the low 32 bits);
// timestamp TIMESTAMP GET_GLOBAL to s.va() + 8 (raw GPU clock ticks, not ns).

#include "drivers/amd/queue.h"

namespace baregrad::amd {

class CopyQueue final : public Queue {
 public:
  explicit CopyQueue(Device& dev) : Queue(dev, hcq::Engine::kCopy) {}
  ~CopyQueue() override { drain(); }

  hcq::HwQueue& wait(const hcq::Signal& s, hcq::Value v) override;
  hcq::HwQueue& signal(const hcq::Signal& s, hcq::Value v) override;
  hcq::HwQueue& timestamp(const hcq::Signal& s) override;
  // Nothing: SDMA packets complete in order and FENCE writes are uncached.
  hcq::HwQueue& memory_barrier() override { return *this; }
  // COPY_LINEAR (see the file comment for symbolic byte counts).
  hcq::HwQueue& copy(hcq::Value dst, hcq::Value src, hcq::Value bytes) override;
};

}  // namespace baregrad::amd
