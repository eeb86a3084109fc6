// PM4 type-3 packets for the compute (MEC) queues, appended to an hcq::CmdStream. Encoders are
// pure: they append words (and patches for symbolic values) and return; an overrun CHECK-fails
// in the stream, at the emit site, before any word of the packet is written.
//
// Header (soc15d.h and nvd.h, identical): PACKET3(op, n) = 3 << 30 | (n & 0x3fff) << 16 |
// (op & 0xff) << 8, n = body dwords - 1.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>

#include "drivers/amd/arch.h"
#include "hcq/cmdstream.h"

namespace baregrad::amd {

// Source: Linux drivers/gpu/drm/amd/amdgpu/soc15d.h and nvd.h (PACKET3_* opcodes, the same
// values in both files).
constexpr uint32_t kPacket3Nop = 0x10;                  // PACKET3_NOP
constexpr uint32_t kPacket3DispatchDirect = 0x15;       // PACKET3_DISPATCH_DIRECT
constexpr uint32_t kPacket3PredExec = 0x23;             // PACKET3_PRED_EXEC
constexpr uint32_t kPacket3WaitRegMem = 0x3c;           // PACKET3_WAIT_REG_MEM
constexpr uint32_t kPacket3IndirectBuffer = 0x3f;       // PACKET3_INDIRECT_BUFFER
constexpr uint32_t kPacket3CopyData = 0x40;             // PACKET3_COPY_DATA
constexpr uint32_t kPacket3EventWrite = 0x46;           // PACKET3_EVENT_WRITE
constexpr uint32_t kPacket3ReleaseMem = 0x49;           // PACKET3_RELEASE_MEM
constexpr uint32_t kPacket3AcquireMem = 0x58;           // PACKET3_ACQUIRE_MEM
constexpr uint32_t kPacket3SetShReg = 0x76;             // PACKET3_SET_SH_REG
constexpr uint32_t kPacket3SetUconfigReg = 0x79;        // PACKET3_SET_UCONFIG_REG
constexpr uint32_t kPacket3WaitRegMem64 = 0x93;         // PACKET3_WAIT_REG_MEM64 (nvd.h only)
constexpr uint32_t kPacket3DmaData = 0x50;              // PACKET3_DMA_DATA
constexpr uint32_t kSetShRegStart = 0x2c00;             // PACKET3_SET_SH_REG_START
constexpr uint32_t kSetShRegEnd = 0x3000;               // PACKET3_SET_SH_REG_END
constexpr uint32_t kSetUconfigRegStart = 0xc000;        // PACKET3_SET_UCONFIG_REG_START
constexpr uint32_t kIndirectBufferValid = 1u << 23;     // INDIRECT_BUFFER_VALID
constexpr uint32_t kMaxIndirectBufferDwords = 0xfffff;  // PACKET3_INDIRECT_BUFFER__IB_SIZE 19:0

using hcq::Word;  // a constant or symbolic body word

// CHECKs that a constant `addr` is a multiple of `align` (symbolic ones are the caller's).
void check_aligned(const char* what, hcq::Value addr, uint64_t align);

// Appends `words` as one unit (reserved together; shared with the SDMA encoder).
void emit_words(hcq::CmdStream& cs, std::span<const Word> words);
inline void emit_words(hcq::CmdStream& cs, std::initializer_list<Word> words) {
  emit_words(cs, std::span<const Word>(words.begin(), words.size()));
}

// The type-3 header for a body of `body_dwords` (1..0x4000, CHECKed) words.
uint32_t packet3_header(uint32_t opcode, uint32_t body_dwords);
// A type-3 packet: header, then `body`.
void emit_packet3(hcq::CmdStream& cs, uint32_t opcode, std::initializer_list<Word> body);

// `total_dwords` (1..0x4000) words the CP skips: PACKET3(NOP, 0x3fff) for one word (the one-dword
// NOP), else a NOP header whose body is total_dwords - 1 zero words.
void emit_nop(hcq::CmdStream& cs, uint32_t total_dwords);

// SET_SH_REG: `values` into consecutive SH registers from absolute dword address `reg`
// (0x2c00..0x2fff, the whole run CHECKed); the body starts with reg - 0x2c00.
void emit_set_sh_reg(hcq::CmdStream& cs, uint32_t reg, std::initializer_list<Word> values);
// SET_UCONFIG_REG: the same from `reg` >= 0xc000 (reg - 0xc000 must fit REG_OFFSET 15:0).
void emit_set_uconfig_reg(hcq::CmdStream& cs, uint32_t reg, std::initializer_list<Word> values);

// COMPUTE_DISPATCH_INITIATOR for a wave of `wave_size` lanes (CHECKed against the arch):
// COMPUTE_SHADER_EN | FORCE_START_AT_000, plus CS_W32_EN for wave32 on gfx10+.
uint32_t dispatch_initiator(const ArchInfo& arch, uint32_t wave_size);
// DISPATCH_DIRECT of gx * gy * gz work-groups (not work-items).
void emit_dispatch_direct(
    hcq::CmdStream& cs, const ArchInfo& arch, Word gx, Word gy, Word gz, uint32_t wave_size);

// The caches an ACQUIRE_MEM invalidates (and writes back where the field has a WB half), named by
// GCR_CNTL fields. gfx9 (CP_COHER_CNTL) maps gli -> SH_ICACHE, glk -> SH_KCACHE, gl1 -> TCL1,
// gl2 -> TC + TC_WB and has no glm/glv bits (tinygrad's mapping).
struct AcquireCaches {
  bool gli = true;  // instruction cache
  bool glm = true;  // metadata cache (INV + WB)
  bool glk = true;  // scalar cache (INV + WB)
  bool glv = true;  // vector L0
  bool gl1 = true;  // L1
  bool gl2 = true;  // L2 (INV + WB)
};
// ACQUIRE_MEM over the whole address space (the ranges Linux's emit_mem_sync uses), in the
// arch's cache-control form: gfx9 6 body words, gfx10+ 7.
void emit_acquire_mem(hcq::CmdStream& cs, const ArchInfo& arch, AcquireCaches caches = {});

// RELEASE_MEM DATA_SEL and INT_SEL. Source: Linux amdkfd/kfd_pm4_headers_ai.h
// (mec_release_mem_data_sel_enum, mec_release_mem_int_sel_enum).
enum class DataSel : uint32_t { kNone = 0, k32BitLow = 1, k64BitData = 2, kGpuClockCounter = 3 };
enum class IntSel : uint32_t { kNone = 0, kSendInterruptAfterWriteConfirm = 2 };
struct ReleaseMem {
  hcq::Value addr = 0;  // 4-aligned for 32-bit data, 8-aligned for 64-bit and the clock
  hcq::Value data = 0;
  DataSel data_sel = DataSel::kNone;
  IntSel int_sel = IntSel::kNone;
  uint32_t ctxid = 0;        // INT_CTXID, reported with the interrupt (tinygrad passes 0 on gfx9)
  bool cache_flush = false;  // write back and invalidate caches before the write (per family)
};
// RELEASE_MEM of CACHE_FLUSH_AND_INV_TS_EVENT at end of pipe: once prior work is done, writes
// `data` (or the GPU clock) to `addr` and optionally interrupts. CHECKs a constant address.
void emit_release_mem(hcq::CmdStream& cs, const ArchInfo& arch, const ReleaseMem& r);

// WAIT_REG_MEM / WAIT_REG_MEM64 FUNCTION (soc15d.h / nvd.h WAIT_REG_MEM_FUNCTION comment).
enum class CompareFunc : uint32_t {
  kAlways = 0,
  kLess = 1,
  kLessEqual = 2,
  kEqual = 3,
  kNotEqual = 4,
  kGreaterEqual = 5,
  kGreater = 6,
};
constexpr uint32_t kDefaultPollInterval = 4;  // tinygrad's POLL_INTERVAL
// WAIT_REG_MEM on memory: stalls until (*addr & mask) `func` ref, 32-bit; addr 4-aligned.
void emit_wait_reg_mem(hcq::CmdStream& cs,
                       hcq::Value addr,
                       Word ref,
                       uint32_t mask,
                       CompareFunc func,
                       uint32_t poll_interval = kDefaultPollInterval);
// WAIT_REG_MEM "write, then wait": writes `reg_write`, then polls `reg_poll` (absolute dword
// addresses) until (value & mask) `func` ref (tinygrad's HDP flush request / done pair).
void emit_wait_reg_mem_write_wait(hcq::CmdStream& cs,
                                  uint32_t reg_write,
                                  uint32_t reg_poll,
                                  uint32_t ref,
                                  uint32_t mask,
                                  CompareFunc func,
                                  uint32_t poll_interval = kDefaultPollInterval);
// WAIT_REG_MEM64 on memory, 64-bit compare; addr 8-aligned. CHECKs arch.has_wait_reg_mem64.
void emit_wait_reg_mem64(hcq::CmdStream& cs,
                         const ArchInfo& arch,
                         hcq::Value addr,
                         hcq::Value ref,
                         uint64_t mask,
                         CompareFunc func,
                         uint32_t poll_interval = kDefaultPollInterval);

// EVENT_WRITE of `event_type` (VGT_EVENT_TYPE) with EVENT_INDEX `event_index`.
void emit_event_write(hcq::CmdStream& cs, uint32_t event_type, uint32_t event_index);
// EVENT_WRITE(CS_PARTIAL_FLUSH, index 4): later packets wait until prior dispatches finish.
void emit_cs_partial_flush(hcq::CmdStream& cs);

// The 4 words of INDIRECT_BUFFER calling `dwords` (1..0xfffff) words at `ib_va` (4-aligned),
// with the VALID bit (CHECKed). Also the body of the AQL PM4-IB packet.
std::array<uint32_t, 4> indirect_buffer_packet(uint64_t ib_va, uint32_t dwords);
// INDIRECT_BUFFER; a symbolic `ib_va` is patched (its alignment is the caller's).
void emit_indirect_buffer(hcq::CmdStream& cs, hcq::Value ib_va, uint32_t dwords);

// PRED_EXEC: the next `exec_count` (0..0x3fff) dwords run only on the XCCs in `xcc_mask`
// (VIRTUAL_XCC_ID_SELECT 31:24). Returns the position of its control word, for the caller to
// set the count once known. NOTE: tinygrad finds it only works inside IBs, not in rings.
size_t emit_pred_exec(hcq::CmdStream& cs, uint32_t xcc_mask, uint32_t exec_count = 0);
// The PRED_EXEC control word (for rewriting the count with CmdStream::set).
uint32_t pred_exec_control(uint32_t xcc_mask, uint32_t exec_count);

// COPY_DATA SRC_SEL / DST_SEL values used here (soc15d.h PACKET3_COPY_DATA__SRC_SEL__* and
// __DST_SEL__*), and the control bits.
enum class CopyDataSrc : uint32_t {
  kMemMappedRegister = 0,
  kTcL2 = 2,
  kPerfcounters = 4,
  kImmediateData = 5,
  kGpuClockCount = 9
};
enum class CopyDataDst : uint32_t { kMemMappedRegister = 0, kTcL2 = 2 };
struct CopyData {
  CopyDataSrc src_sel = CopyDataSrc::kTcL2;
  CopyDataDst dst_sel = CopyDataDst::kTcL2;
  bool count_64 = false;    // COUNT_SEL: 64 bits of data
  bool wr_confirm = false;  // WR_CONFIRM: wait for the write to be confirmed
};
// COPY_DATA from `src` (address, register or immediate) to `dst`, each two words.
void emit_copy_data(hcq::CmdStream& cs, const CopyData& c, hcq::Value src, hcq::Value dst);

// DMA_DATA (CP DMA) copies of memory to memory: at most kDmaDataMaxBytes per packet (COMMAND
// BYTE_COUNT is 25:0; packets are kept well inside it), 6 body dwords.
constexpr uint64_t kDmaDataMaxBytes = uint64_t{1} << 25;
constexpr size_t kDmaDataDwords = 7;
// One DMA_DATA of `bytes` (1..kDmaDataMaxBytes; symbolic: patched as it is, the caller bounds
// it at submit) from `src` to `dst`, both through L2 (SRC_SEL / DST_SEL 3), ENGINE ME, CP_SYNC:
// the CP finishes the copy before the next packet. Source: nvd.h / soc15d.h PACKET3_DMA_DATA
// (CONTROL: ENGINE 0, SRC_CACHE_POLICY 14:13, DST_SEL 21:20, DST_CACHE_POLICY 26:25, SRC_SEL
// 30:29, CP_SYNC 31; COMMAND: BYTE_COUNT 25:0, SAS 26, DAS 27, SAIC 28, DAIC 29, RAW_WAIT 30).
void emit_dma_data_copy(hcq::CmdStream& cs, hcq::Value dst, hcq::Value src, hcq::Value bytes);

}  // namespace baregrad::amd
