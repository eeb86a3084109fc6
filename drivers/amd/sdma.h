// SDMA packets for the copy queues, appended to an hcq::CmdStream. Pure encoders, like pm4.h: an
// overrun CHECK-fails in the stream before any word of the packet is written. Every packet's
// first word is OP 7:0 | SUB_OP 15:8 | op-specific fields.
//
// Layouts differ by SdmaVersion only where noted (COPY_LINEAR's COUNT width, FENCE's MTYPE).
#pragma once

#include <cstdint>
#include <initializer_list>

#include "base/status.h"
#include "drivers/amd/arch.h"
#include "drivers/amd/pm4.h"
#include "hcq/cmdstream.h"

namespace baregrad::amd {

// Source: Linux drivers/gpu/drm/amd/amdgpu/vega10_sdma_pkt_open.h, navi10_sdma_pkt_open.h,
// sdma_v6_0_0_pkt_open.h (SDMA_OP_*, SDMA_SUBOP_*; the same values in all three).
constexpr uint32_t kSdmaOpNop = 0;
constexpr uint32_t kSdmaOpCopy = 1;
constexpr uint32_t kSdmaOpWrite = 2;
constexpr uint32_t kSdmaOpFence = 5;
constexpr uint32_t kSdmaOpTrap = 6;
constexpr uint32_t kSdmaOpPollRegmem = 8;
constexpr uint32_t kSdmaOpTimestamp = 13;
constexpr uint32_t kSdmaSubopCopyLinear = 0;
constexpr uint32_t kSdmaSubopWriteLinear = 0;
constexpr uint32_t kSdmaSubopTimestampGetGlobal = 2;
constexpr uint32_t kSdmaCopyLinearDwords = 7;  // words per COPY_LINEAR packet

// The MTYPE FENCE writes with on SDMA 5+ (SDMA_PKT_FENCE_HEADER_MTYPE 18:16): 3 = uncached, as
// Linux sdma_v6_0.c / sdma_v7_0.c emit_fence and tinygrad use.
constexpr uint32_t kSdmaFenceMtypeUc = 3;

// COPY_LINEAR of `bytes` from `src` to `dst`, split into packets of copy_linear_max_bytes(v).
// 0 bytes emit nothing. InvalidArgument when the copy needs more than one packet and an address
// is symbolic (a patch cannot add the offset).
Status emit_sdma_copy_linear(
    hcq::CmdStream& cs, SdmaVersion v, hcq::Value dst, hcq::Value src, uint64_t bytes);
// One COPY_LINEAR of a symbolic byte count (COUNT patched to bytes - 1 at submit). The count
// must be 1..copy_linear_max_bytes(v) when submitted: the caller checks it then.
void emit_sdma_copy_linear_sym(hcq::CmdStream& cs,
                               hcq::Value dst,
                               hcq::Value src,
                               hcq::Value bytes);
// FENCE: writes `data` (32 bits) to `addr` (4-aligned, CHECKed when constant) once prior
// packets are done; MTYPE UC on SDMA 5+.
void emit_sdma_fence(hcq::CmdStream& cs, SdmaVersion v, hcq::Value addr, Word data);
// POLL_REGMEM on memory: waits until (*addr & mask) `func` ref; `interval` and `retry_count` go
// to DW5 INTERVAL / RETRY_COUNT (tinygrad: 4 and 0xfff). addr 4-aligned.
void emit_sdma_poll_regmem(hcq::CmdStream& cs,
                           hcq::Value addr,
                           Word ref,
                           uint32_t mask,
                           CompareFunc func,
                           uint32_t interval = 4,
                           uint32_t retry_count = 0xfff);
// TIMESTAMP GET_GLOBAL: writes the 64-bit global timestamp to `addr` (8-aligned).
void emit_sdma_timestamp(hcq::CmdStream& cs, hcq::Value addr);
// TRAP: raises an interrupt carrying `int_context` (28 bits, CHECKed).
void emit_sdma_trap(hcq::CmdStream& cs, uint32_t int_context);
// WRITE (untiled, linear): `data` (1..2^20 words) to `addr` (4-aligned).
void emit_sdma_write(hcq::CmdStream& cs, hcq::Value addr, std::initializer_list<Word> data);
// `dwords` single-word NOPs (zero words): padding, e.g. to the 8-dword end of an IB.
void emit_sdma_nop(hcq::CmdStream& cs, uint32_t dwords);

}  // namespace baregrad::amd
