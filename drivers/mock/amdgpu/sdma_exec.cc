// SDMA packets as the SDMA engine executes them on KFD SDMA queues. Decoded from Linux
// drivers/gpu/drm/amd/amdgpu/vega10_sdma_pkt_open.h (SDMA 4), navi10_sdma_pkt_open.h (SDMA 5)
// and sdma_v6_0_0_pkt_open.h (SDMA 6, also SDMA 7): SDMA_OP_* / SDMA_SUBOP_*, and each
// SDMA_PKT_* layout. The layouts agree except COPY_LINEAR's COUNT width (22 bits on 4 and 5, 30
// on 6), FENCE's MTYPE (5 and 6; ignored here), and DUMMY_TRAP's opcode (16 on 4, 32 on 5 and 6,
// where 16 is GPUVM_INV and 17 GCR_REQ).
#include <cstring>

#include "base/format.h"
#include "drivers/mock/amdgpu/decode.h"
#include "drivers/mock/amdgpu/fake_gpu.h"

namespace baregrad::mock {
namespace {

using amdgpu_decode::addr64;
using amdgpu_decode::compare;

constexpr uint32_t kOpNop = 0;
constexpr uint32_t kOpCopy = 1;
constexpr uint32_t kOpWrite = 2;
constexpr uint32_t kOpFence = 5;
constexpr uint32_t kOpTrap = 6;
constexpr uint32_t kOpPollRegmem = 8;
constexpr uint32_t kOpTimestamp = 13;
constexpr uint32_t kOpDummyTrapV4 = 16;  // SDMA 4; GPUVM_INV on 5 and 6
constexpr uint32_t kOpGcrReq = 17;       // SDMA 5 and 6
constexpr uint32_t kOpDummyTrap = 32;    // SDMA 5 and 6
constexpr uint32_t kSubopCopyLinear = 0;
constexpr uint32_t kSubopWriteLinear = 0;
constexpr uint32_t kSubopTimestampSet = 0, kSubopTimestampGet = 1, kSubopTimestampGetGlobal = 2;
constexpr uint32_t kPollHdpFlush = 1u << 26;      // SDMA_PKT_POLL_REGMEM_HEADER_hdp_flush
constexpr uint32_t kPollMemPoll = 1u << 31;       // SDMA_PKT_POLL_REGMEM_HEADER_mem_poll
constexpr uint32_t kIntContextMask = 0x0fffffff;  // SDMA_PKT_TRAP_INT_CONTEXT_int_context
constexpr uint32_t kWriteCountMask = 0x000fffff;  // SDMA_PKT_WRITE_UNTILED_DW_3_count
constexpr uint32_t kNopCountMask = 0x3fff;        // SDMA_PKT_NOP_HEADER_count 29:16

}  // namespace

bool FakeAmdGpu::run_sdma_queue(Queue& q) {
  bool progressed = false;
  const uint64_t ring = q.info.ring_size;
  const bool v4 = arch_->sdma == amd::SdmaVersion::k4;
  for (;;) {
    std::optional<uint64_t> wptr = read_wptr(q);
    if (!wptr || *wptr == q.rptr) return progressed;
    const uint64_t off = q.rptr % ring, va = q.info.ring_va + off;
    if (*wptr < q.rptr || *wptr - q.rptr > ring || *wptr % 4 != 0) {
      bad_packet(q, va,
                 "write pointer " + std::to_string(*wptr) + " (bytes) is not a dword " +
                     "within one ring (" + std::to_string(ring) + " bytes) after the " +
                     "read pointer " + std::to_string(q.rptr));
      return progressed;
    }
    uint8_t* mem = access(q, q.info.ring_va, ring, va, "SDMA ring");
    if (mem == nullptr) return progressed;
    // Packets never straddle the ring end (the driver pads with NOPs), so one run is linear.
    const uint64_t avail = std::min(*wptr - q.rptr, ring - off) / 4;
    auto word = [&](uint64_t i) {
      uint32_t w;
      std::memcpy(&w, mem + off + i * 4, 4);
      return w;
    };
    const uint32_t h = word(0), op = h & 0xff, sub = h >> 8 & 0xff;
    uint64_t size = 0;
    switch (op) {
      case kOpNop:
        size = 1 + (h >> 16 & kNopCountMask);
        break;
      case kOpCopy:
        size = sub == kSubopCopyLinear ? 7 : 0;
        break;
      case kOpWrite:
        size = sub != kSubopWriteLinear ? 0 : avail < 4 ? 4 : 5 + (word(3) & kWriteCountMask);
        break;
      case kOpFence:
        size = 4;
        break;
      case kOpTrap:
        size = 2;
        break;
      case kOpPollRegmem:
        size = 6;
        break;
      case kOpTimestamp:
        size = sub <= kSubopTimestampGetGlobal ? 3 : 0;
        break;
      case kOpDummyTrapV4:
        size = v4 ? 2 : 0;
        break;
      case kOpGcrReq:
        size = v4 ? 0 : 5;
        break;
      case kOpDummyTrap:
        size = v4 ? 0 : 2;
        break;
    }
    if (size == 0) {
      bad_packet(q, va,
                 "unknown SDMA op " + std::to_string(op) + " sub-op " + std::to_string(sub) +
                     " (header " + hex(h) + ") on SDMA " +
                     std::to_string(static_cast<int>(arch_->sdma)));
      return progressed;
    }
    if (size > avail) {
      bad_packet(q, va,
                 "SDMA op " + std::to_string(op) + " (header " + hex(h) + ") of " +
                     std::to_string(size) + " dwords runs past the " +
                     (*wptr - q.rptr < ring - off ? "write pointer" : "ring end") + " (" +
                     std::to_string(avail) + " dwords)");
      return progressed;
    }
    std::vector<uint32_t> pkt(size);
    std::memcpy(pkt.data(), mem + off, size * 4);
    if (exec_sdma(q, pkt, va) != Step::kNext) return progressed;
    q.rptr += size * 4;
    q.blocked = false;
    progressed = true;
    count(&AmdGpuCounters::packets);
    if (!write_rptr(q)) return progressed;
  }
}

FakeAmdGpu::Step FakeAmdGpu::exec_sdma(Queue& q, std::span<const uint32_t> p, uint64_t va) {
  const uint32_t h = p[0], op = h & 0xff, sub = h >> 8 & 0xff;
  switch (op) {
    case kOpCopy: {
      // COUNT (bytes - 1), PARAMETER (dst_sw 17:16, src_sw 25:24), src lo/hi, dst lo/hi.
      const uint32_t count_mask = arch_->sdma == amd::SdmaVersion::k6 ? 0x3fffffff : 0x003fffff;
      if ((p[1] & ~count_mask) != 0 || p[2] != 0) {
        return bad_packet(q, va,
                          "COPY_LINEAR COUNT " + hex(p[1]) + " / PARAMETER " + hex(p[2]) +
                              ": bits outside COUNT, or byte swaps (not modelled)");
      }
      const uint64_t bytes = uint64_t{p[1]} + 1, src = addr64(p[3], p[4]), dst = addr64(p[5], p[6]);
      uint8_t* s = access(q, src, bytes, va, "COPY_LINEAR source");
      if (s == nullptr) return Step::kStop;
      uint8_t* d = access(q, dst, bytes, va, "COPY_LINEAR destination");
      if (d == nullptr) return Step::kStop;
      std::memmove(d, s, bytes);
      count(&AmdGpuCounters::copies);
      count(&AmdGpuCounters::bytes_copied, bytes);
      return Step::kNext;
    }
    case kOpWrite: {
      const uint64_t addr = addr64(p[1], p[2]);
      const size_t n = p.size() - 4;
      if (addr % 4 != 0) return bad_packet(q, va, "SDMA WRITE to " + hex(addr) + " not 4-aligned");
      uint8_t* d = access(q, addr, n * 4, va, "SDMA WRITE destination");
      if (d == nullptr) return Step::kStop;
      std::memcpy(d, p.data() + 4, n * 4);
      return Step::kNext;
    }
    case kOpFence:  // MTYPE 18:16 (SDMA 5+) is a cache policy: nothing to do here
      if (!store(q, addr64(p[1], p[2]), 4, p[3], va, "SDMA FENCE")) return Step::kStop;
      count(&AmdGpuCounters::signals);
      return Step::kNext;
    case kOpTrap:
      interrupt(p[1] & kIntContextMask);
      return Step::kNext;
    case kOpPollRegmem: {
      // FUNC 30:28, MEM_POLL 31, HDP_FLUSH 26; addr lo/hi, VALUE, MASK, DW5 interval/retries.
      if ((h & kPollHdpFlush) != 0) return Step::kNext;  // the HDP flush form: done at once
      const uint32_t func = h >> 28 & 7;
      if ((h & kPollMemPoll) == 0 || func == 7) {
        return bad_packet(q, va,
                          "POLL_REGMEM header " + hex(h) +
                              ": only memory polls with a defined function are modelled");
      }
      auto v = load(q, addr64(p[1], p[2]), 4, va, "POLL_REGMEM poll");
      if (!v) return Step::kStop;
      return compare(func, static_cast<uint32_t>(*v) & p[4], p[3]) ? Step::kNext : block(q);
    }
    case kOpTimestamp:
      if (sub == kSubopTimestampSet) return Step::kNext;  // the local counter: not modelled
      if (sub == kSubopTimestampGet || sub == kSubopTimestampGetGlobal) {
        // GET_GLOBAL: WRITE_ADDR_LO holds address bits 31:3.
        return store(q, addr64(p[1], p[2]), 8, timestamp_ns(), va, "SDMA TIMESTAMP") ? Step::kNext
                                                                                     : Step::kStop;
      }
      break;
    case kOpNop:
    case kOpGcrReq:       // cache invalidation: nothing is cached
    case kOpDummyTrap:    // a pipeline flush without an interrupt
    case kOpDummyTrapV4:  // (sizes were checked against the version by the caller)
      return Step::kNext;
  }
  return bad_packet(q, va, "unknown SDMA op " + std::to_string(op) + " (header " + hex(h) + ")");
}

}  // namespace baregrad::mock
