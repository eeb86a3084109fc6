// GPFIFO entries and ring bookkeeping. Pure: computes what submit() writes (the entry and its
// ring slot, USERD GP_PUT, the doorbell register and value) and never touches memory or MMIO.
//
// Submit order (tinygrad's _submit_to_gpfifo): ring[slot] = entry; USERD[kUserdGpPut] = gp_put;
// full memory fence (USERD is write-combined); usermode[kDoorbellOffset] = work-submit token.
#pragma once

#include <cstdint>

#include "base/status.h"

namespace baregrad::nv {

// NVC56F_GP_ENTRY0/1 (clc56f.h; identical in clc86f.h, clc96f.h), one u64 = ENTRY0 | ENTRY1 << 32:
//   ENTRY0 1:0 FETCH (0 unconditional), 31:2 GET = address bits 31:2
//   ENTRY1 7:0 GET_HI = address bits 39:32, 9:9 LEVEL (1 SUBROUTINE), 30:10 LENGTH in words,
//          31:31 SYNC (0 PROCEED)
constexpr uint32_t kGpEntryBytes = 8;                  // NVC56F_GP_ENTRY__SIZE
constexpr uint32_t kGpEntryMaxWords = 0x1fffff;        // LENGTH 30:10
constexpr uint64_t kGpEntryAddressLimit = 1ull << 40;  // GET 31:2 + GET_HI 7:0

// USERD (Nvc56fControl / AmpereAControlGPFifo, the same in Nvc86fControl and Nvc96fControl).
constexpr uint32_t kUserdBytes = 0x200;
constexpr uint32_t kUserdGpGet = 0x88;  // GPGet: the ring index the GPU reads next
constexpr uint32_t kUserdGpPut = 0x8c;  // GPPut: one past the last entry submitted

// The doorbell: the channel's work-submit token (NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN)
// written to NVC361_NOTIFY_CHANNEL_PENDING in the usermode page (clc361.h; used by
// TURING/AMPERE/HOPPER_USERMODE_A alike).
constexpr uint32_t kDoorbellOffset = 0x90;
constexpr uint32_t kUsermodeBytes = 0x10000;  // NVC361_NV_USERMODE__SIZE

// The entry for a pushbuffer segment of `words` words at `va` (LEVEL = SUBROUTINE, as tinygrad):
// InvalidArgument for an empty or too long segment, an unaligned address or one >= 2^40.
Result<uint64_t> gp_entry(uint64_t va, uint32_t words);

// What one submission writes.
struct GpSubmit {
  uint32_t slot;      // ring index for `entry`
  uint64_t entry;     // the GP entry
  uint32_t gp_put;    // the value for USERD GPPut after the entry is written
  uint32_t doorbell;  // the value for usermode + kDoorbellOffset (the work-submit token)
};

// A ring of `entries` GP entries; put() counts from 0 and wraps. The GPU owns the entries
// from GPGet up to GPPut, so at most entries - 1 are in flight (GPPut == GPGet means empty).
class GpFifoRing {
 public:
  GpFifoRing(uint32_t entries, uint32_t work_submit_token);

  uint32_t entries() const { return entries_; }
  uint32_t put() const { return put_; }
  // Entries the GPU has not consumed, given the GPGet it reported (< entries, CHECKed).
  uint32_t in_flight(uint32_t gp_get) const;
  // OK when `n` more entries fit; ResourceExhausted naming the sizes, put and get otherwise.
  Status check_space(uint32_t n, uint32_t gp_get) const;
  // The next submission of one segment; nothing changes when it is refused.
  Result<GpSubmit> push(uint64_t va, uint32_t words, uint32_t gp_get);

 private:
  uint32_t entries_;
  uint32_t token_;
  uint32_t put_ = 0;
};

}  // namespace baregrad::nv
