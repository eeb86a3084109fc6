#pragma once

// The AMD compute queue: PM4 packets for the MEC (tinygrad's AMDComputeQueue). exec is
// ACQUIRE_MEM (I$, K$, L0, L1), SET_SH_REG COMPUTE_PGM_LO/HI, RSRC1/RSRC2 (LDS granules),
// RSRC3, TMPRING_SIZE (0: no scratch), RESTART_X/Y/Z, USER_DATA_0.. (a null
// private segment buffer V# when the kernel asks for one, then the kernarg pointer),
// RESOURCE_LIMITS, START_X/Y/Z and NUM_THREAD_X/Y/Z, DISPATCH_DIRECT (work-groups; CS_W32_EN for
// wave32 kernels) and EVENT_WRITE CS_PARTIAL_FLUSH, so launches in a queue run one after another.
// On an AQL device (Device::aql()) exec is one AQL kernel dispatch packet instead (tinygrad's
// AMDComputeAQLQueue) and the rest stays PM4, which the ring calls through PM4-IB packets.

#include "drivers/amd/queue.h"

namespace baregrad::amd {

class ComputeQueue final : public Queue {
 public:
  explicit ComputeQueue(Device& dev) : Queue(dev, hcq::Engine::kCompute) {}
  ~ComputeQueue() override { drain(); }

  // WAIT_REG_MEM (memory, GEQ, the low 32 bits).
  hcq::HwQueue& wait(const hcq::Signal& s, hcq::Value v) override;
  // RELEASE_MEM of the 64-bit value (caches written back first), then RELEASE_MEM of the
  // signal event's id to its mailbox with an interrupt (INT_CTXID = the event id).
  hcq::HwQueue& signal(const hcq::Signal& s, hcq::Value v) override;
  // RELEASE_MEM without data (prior work done), RELEASE_MEM of the GPU clock counter to
  // s.va() + 8, ACQUIRE_MEM. NOTE: the counter runs at 100 MHz; it is written raw, not in ns.
  hcq::HwQueue& timestamp(const hcq::Signal& s) override;
  // ACQUIRE_MEM of every cache (I$, K$, L0, L1, metadata, L2 written back and invalidated).
  // NOTE: without tinygrad's HDP flush (NBIO registers), which CPU writes into VRAM through the
  // BAR need on hardware.
  hcq::HwQueue& memory_barrier() override;
  // A dispatch of the amd::Program `prg` (see the file comment).
  hcq::HwQueue& exec(const hcq::Program& prg,
                     const hcq::ArgsState& args,
                     hcq::Dim3 grid,
                     hcq::Dim3 block) override;
  // DMA_DATA (CP DMA) through L2 with CP_SYNC, split at kDmaDataMaxBytes; a symbolic byte count
  // is one packet, checked at submit to lie in 1..kDmaDataMaxBytes. (The device's own copies go
  // through the copy queue, SDMA.)
  hcq::HwQueue& copy(hcq::Value dst, hcq::Value src, hcq::Value bytes) override;
};

// Words an exec records (an upper bound, checked before emitting).
constexpr size_t kExecWords = 64;
// Words of an AQL packet (an exec on an AQL device).
constexpr size_t kAqlPacketWords = 16;

}  // namespace baregrad::amd
