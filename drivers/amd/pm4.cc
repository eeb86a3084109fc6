#include "drivers/amd/pm4.h"

#include "base/check.h"

namespace baregrad::amd {
namespace {

using hcq::Value;

// Source: Linux drivers/gpu/drm/amd/amdgpu/nvd.h (PACKET3_ACQUIRE_MEM_GCR_CNTL_*, also used by
// gfx_v10_0.c / gfx_v11_0.c emit_mem_sync).
constexpr uint32_t kGcrGliInv = 1u << 0;
constexpr uint32_t kGcrGlmWb = 1u << 4;
constexpr uint32_t kGcrGlmInv = 1u << 5;
constexpr uint32_t kGcrGlkWb = 1u << 6;
constexpr uint32_t kGcrGlkInv = 1u << 7;
constexpr uint32_t kGcrGlvInv = 1u << 8;
constexpr uint32_t kGcrGl1Inv = 1u << 9;
constexpr uint32_t kGcrGl2Inv = 1u << 14;
constexpr uint32_t kGcrGl2Wb = 1u << 15;
// Source: Linux soc15d.h (PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_*_ACTION_ENA).
constexpr uint32_t kCoherTcWbActionEna = 1u << 18;
constexpr uint32_t kCoherTcl1ActionEna = 1u << 22;
constexpr uint32_t kCoherTcActionEna = 1u << 23;
constexpr uint32_t kCoherShKcacheActionEna = 1u << 27;
constexpr uint32_t kCoherShIcacheActionEna = 1u << 29;
// Whole-range ACQUIRE_MEM operands. Source: Linux gfx_v9_0.c and gfx_v11_0.c emit_mem_sync
// (CP_COHER_SIZE 0xffffffff, CP_COHER_SIZE_HI 0xffffff, CP_COHER_BASE 0/0, POLL_INTERVAL 0xa).
constexpr uint32_t kCoherSizeAll = 0xffffffff;
constexpr uint32_t kCoherSizeHiAll = 0x00ffffff;
constexpr uint32_t kAcquirePollInterval = 0xa;

// Source: Linux nvd.h (PACKET3_RELEASE_MEM_GCR_*) and soc15d.h (EOP_TC_WB_ACTION_EN,
// EOP_TC_NC_ACTION_EN); the per-family choice is tinygrad ops_amd.py release_mem(cache_flush).
constexpr uint32_t kReleaseGcrFlush = (1u << 12) | (1u << 13) | (1u << 14) | (1u << 15) |
                                      (1u << 20) | (1u << 21) | (1u << 22);  // GLM_WB GLM_INV
// GLV_INV GL1_INV GL2_INV GL2_WB SEQ
constexpr uint32_t kEopTcWbActionEn = 1u << 15;
constexpr uint32_t kEopTcNcActionEn = 1u << 19;
// Source: Linux amdkfd/kfd_pm4_headers_ai.h (CACHE_FLUSH_AND_INV_TS_EVENT = 0x14,
// event_index__mec_release_mem__end_of_pipe = 5, struct pm4_mec_release_mem) and soc15d.h /
// nvd.h (EVENT_TYPE 0, EVENT_INDEX 8, INT_SEL 24, DATA_SEL 29; DST_SEL 16 stays 0 = MC).
constexpr uint32_t kCacheFlushAndInvTsEvent = 0x14;
constexpr uint32_t kEventIndexEndOfPipe = 5;
// Source: Linux asic_reg/gc/*_enum.h VGT_EVENT_TYPE (CS_PARTIAL_FLUSH = 7); soc15d.h / nvd.h
// EVENT_INDEX comment (4 - *S_PARTIAL_FLUSH).
constexpr uint32_t kCsPartialFlush = 7;
constexpr uint32_t kEventIndexPartialFlush = 4;
// Source: gc_*_sh_mask.h COMPUTE_DISPATCH_INITIATOR (through tinygrad autogen/am/regs.py):
// COMPUTE_SHADER_EN 0, FORCE_START_AT_000 2, CS_W32_EN 15 (gfx10+ only).
constexpr uint32_t kComputeShaderEn = 1u << 0;
constexpr uint32_t kForceStartAt000 = 1u << 2;
constexpr uint32_t kCsW32En = 1u << 15;
// Source: soc15d.h / nvd.h WAIT_REG_MEM_FUNCTION 0, _MEM_SPACE 4, _OPERATION 6, _ENGINE 8 (0 = ME).
constexpr uint32_t kMemSpaceMemory = 1u << 4;
constexpr uint32_t kOperationWriteWait = 1u << 6;

uint32_t lo32(uint64_t v) { return static_cast<uint32_t>(v); }
uint32_t hi32(uint64_t v) { return static_cast<uint32_t>(v >> 32); }

uint32_t gcr_cntl(const AcquireCaches& c) {
  return (c.gli ? kGcrGliInv : 0) | (c.glm ? kGcrGlmInv | kGcrGlmWb : 0) |
         (c.glk ? kGcrGlkInv | kGcrGlkWb : 0) | (c.glv ? kGcrGlvInv : 0) |
         (c.gl1 ? kGcrGl1Inv : 0) | (c.gl2 ? kGcrGl2Inv | kGcrGl2Wb : 0);
}

uint32_t cp_coher_cntl(const AcquireCaches& c) {
  return (c.gli ? kCoherShIcacheActionEna : 0) | (c.glk ? kCoherShKcacheActionEna : 0) |
         (c.gl2 ? kCoherTcActionEna | kCoherTcWbActionEna : 0) | (c.gl1 ? kCoherTcl1ActionEna : 0);
}

void emit_set_reg(hcq::CmdStream& cs,
                  uint32_t opcode,
                  uint32_t offset,
                  std::initializer_list<Word> values) {
  CHECK(values.size() != 0) << "register write without values";
  auto out = cs.reserve(2 + values.size());
  size_t pos = cs.size() - out.size();
  out[0] = packet3_header(opcode, static_cast<uint32_t>(1 + values.size()));
  out[1] = offset;
  pos += 2;
  for (const Word& w : values) cs.put(pos++, w);
}

}  // namespace

void check_aligned(const char* what, hcq::Value addr, uint64_t align) {
  CHECK(addr.symbolic() || static_cast<uint64_t>(addr.imm) % align == 0)
      << what << " address 0x" << std::hex << addr.imm << " is not " << std::dec << align
      << "-byte aligned";
}

void emit_words(hcq::CmdStream& cs, std::span<const Word> words) {
  auto out = cs.reserve(words.size());  // all or nothing: an overrun fails here
  size_t pos = cs.size() - out.size();
  for (const Word& w : words) cs.put(pos++, w);
}

uint32_t packet3_header(uint32_t opcode, uint32_t body_dwords) {
  CHECK_LE(opcode, 0xffu);
  CHECK(body_dwords >= 1 && body_dwords <= 0x4000) << "PM4 body of " << body_dwords << " words";
  return 3u << 30 | (body_dwords - 1) << 16 | opcode << 8;
}

void emit_packet3(hcq::CmdStream& cs, uint32_t opcode, std::initializer_list<Word> body) {
  auto out = cs.reserve(1 + body.size());
  size_t pos = cs.size() - out.size();
  out[0] = packet3_header(opcode, static_cast<uint32_t>(body.size()));
  for (const Word& w : body) cs.put(++pos, w);
}

void emit_nop(hcq::CmdStream& cs, uint32_t total_dwords) {
  // A multi-word NOP's count must stay below 0x3fff, the one-dword NOP's marker.
  CHECK(total_dwords >= 1 && total_dwords <= 0x4000) << "NOP of " << total_dwords << " words";
  auto out = cs.reserve(total_dwords);
  // Source: Linux gfx_v9_0.c / gfx_v11_0.c ring funcs: .nop = PACKET3(PACKET3_NOP, 0x3FFF).
  if (total_dwords == 1) {
    out[0] = 3u << 30 | 0x3fffu << 16 | kPacket3Nop << 8;
    return;
  }
  out[0] = packet3_header(kPacket3Nop, total_dwords - 1);
  for (uint32_t i = 1; i < total_dwords; i++) out[i] = 0;
}

void emit_set_sh_reg(hcq::CmdStream& cs, uint32_t reg, std::initializer_list<Word> values) {
  CHECK(reg >= kSetShRegStart && reg + values.size() <= kSetShRegEnd)
      << "SET_SH_REG of " << values.size() << " registers from 0x" << std::hex << reg;
  emit_set_reg(cs, kPacket3SetShReg, reg - kSetShRegStart, values);
}

void emit_set_uconfig_reg(hcq::CmdStream& cs, uint32_t reg, std::initializer_list<Word> values) {
  // Source: soc15d.h PACKET3_SET_UCONFIG_REG__REG_OFFSET 15:0 (tinygrad's wreg bound).
  CHECK(reg >= kSetUconfigRegStart && reg - kSetUconfigRegStart + values.size() <= 0x10000)
      << "SET_UCONFIG_REG of " << values.size() << " registers from 0x" << std::hex << reg;
  emit_set_reg(cs, kPacket3SetUconfigReg, reg - kSetUconfigRegStart, values);
}

uint32_t dispatch_initiator(const ArchInfo& arch, uint32_t wave_size) {
  bool ok = (wave_size == 32 && arch.supports_wave32) || (wave_size == 64 && arch.supports_wave64);
  CHECK(ok) << arch.name << " does not run wave" << wave_size;
  uint32_t w32 = wave_size == 32 && arch.pm4 == Pm4Family::kNv ? kCsW32En : 0;
  return kComputeShaderEn | kForceStartAt000 | w32;
}

void emit_dispatch_direct(
    hcq::CmdStream& cs, const ArchInfo& arch, Word gx, Word gy, Word gz, uint32_t wave_size) {
  emit_packet3(cs, kPacket3DispatchDirect, {gx, gy, gz, dispatch_initiator(arch, wave_size)});
}

void emit_acquire_mem(hcq::CmdStream& cs, const ArchInfo& arch, AcquireCaches caches) {
  if (arch.cache_control == CacheControl::kCpCoherCntl) {
    // soc15d.h: COHER_CNTL, COHER_SIZE, COHER_SIZE_HI, COHER_BASE_LO, COHER_BASE_HI, POLL_INTERVAL
    emit_packet3(
        cs, kPacket3AcquireMem,
        {cp_coher_cntl(caches), kCoherSizeAll, kCoherSizeHiAll, 0u, 0u, kAcquirePollInterval});
    return;
  }
  // gfx10+: COHER_CNTL (0), the same range and poll interval, then GCR_CNTL.
  emit_packet3(
      cs, kPacket3AcquireMem,
      {0u, kCoherSizeAll, kCoherSizeHiAll, 0u, 0u, kAcquirePollInterval, gcr_cntl(caches)});
}

void emit_release_mem(hcq::CmdStream& cs, const ArchInfo& arch, const ReleaseMem& r) {
  bool b32 = r.data_sel == DataSel::k32BitLow;
  if (r.data_sel != DataSel::kNone) check_aligned("RELEASE_MEM", r.addr, b32 ? 4 : 8);
  uint32_t flush = 0;
  if (r.cache_flush) {
    flush = arch.cache_control == CacheControl::kGcrCntl ? kReleaseGcrFlush
                                                         : kEopTcWbActionEn | kEopTcNcActionEn;
  }
  uint32_t event = kCacheFlushAndInvTsEvent | kEventIndexEndOfPipe << 8 | flush;
  uint32_t sel = static_cast<uint32_t>(r.data_sel) << 29 | static_cast<uint32_t>(r.int_sel) << 24;
  emit_packet3(cs, kPacket3ReleaseMem,
               {event, sel, Word::lo(r.addr), Word::hi(r.addr), Word::lo(r.data), Word::hi(r.data),
                r.ctxid});
}

void emit_wait_reg_mem(hcq::CmdStream& cs,
                       Value addr,
                       Word ref,
                       uint32_t mask,
                       CompareFunc func,
                       uint32_t poll_interval) {
  check_aligned("WAIT_REG_MEM", addr, 4);
  CHECK_LE(poll_interval, 0xffffu);
  uint32_t info = static_cast<uint32_t>(func) | kMemSpaceMemory;
  emit_packet3(cs, kPacket3WaitRegMem,
               {info, Word::lo(addr), Word::hi(addr), ref, mask, poll_interval});
}

void emit_wait_reg_mem_write_wait(hcq::CmdStream& cs,
                                  uint32_t reg_write,
                                  uint32_t reg_poll,
                                  uint32_t ref,
                                  uint32_t mask,
                                  CompareFunc func,
                                  uint32_t poll_interval) {
  // soc15d.h: REG_POLL_ADDR / REG_WRITE_ADDR2 are 18-bit fields.
  CHECK(reg_write < (1u << 18) && reg_poll < (1u << 18));
  CHECK_LE(poll_interval, 0xffffu);
  uint32_t info = static_cast<uint32_t>(func) | kOperationWriteWait;
  emit_packet3(cs, kPacket3WaitRegMem, {info, reg_write, reg_poll, ref, mask, poll_interval});
}

void emit_wait_reg_mem64(hcq::CmdStream& cs,
                         const ArchInfo& arch,
                         Value addr,
                         Value ref,
                         uint64_t mask,
                         CompareFunc func,
                         uint32_t poll_interval) {
  CHECK(arch.has_wait_reg_mem64) << arch.name << " has no WAIT_REG_MEM64";
  check_aligned("WAIT_REG_MEM64", addr, 8);
  CHECK_LE(poll_interval, 0xffffu);
  // Source: AMD aqlprofile gfxip PM4MEC_WAIT_REG_MEM64 / PM4ME_WAIT_REG_MEM64: ordinal2 as
  // WAIT_REG_MEM, addr lo (31:3) / hi, reference lo / hi, mask lo / hi, poll interval.
  uint32_t info = static_cast<uint32_t>(func) | kMemSpaceMemory;
  emit_packet3(cs, kPacket3WaitRegMem64,
               {info, Word::lo(addr), Word::hi(addr), Word::lo(ref), Word::hi(ref), lo32(mask),
                hi32(mask), poll_interval});
}

void emit_event_write(hcq::CmdStream& cs, uint32_t event_type, uint32_t event_index) {
  // soc15d.h: PACKET3_EVENT_WRITE__EVENT_TYPE 5:0, __EVENT_INDEX 11:8.
  CHECK(event_type <= 0x3f && event_index <= 0xf);
  emit_packet3(cs, kPacket3EventWrite, {event_type | event_index << 8});
}

void emit_cs_partial_flush(hcq::CmdStream& cs) {
  emit_event_write(cs, kCsPartialFlush, kEventIndexPartialFlush);
}

std::array<uint32_t, 4> indirect_buffer_packet(uint64_t ib_va, uint32_t dwords) {
  CHECK(ib_va % 4 == 0) << "IB at 0x" << std::hex << ib_va << " is not 4-byte aligned";
  CHECK(dwords >= 1 && dwords <= kMaxIndirectBufferDwords) << "IB of " << dwords << " words";
  return {packet3_header(kPacket3IndirectBuffer, 3), lo32(ib_va), hi32(ib_va),
          dwords | kIndirectBufferValid};
}

void emit_indirect_buffer(hcq::CmdStream& cs, Value ib_va, uint32_t dwords) {
  check_aligned("INDIRECT_BUFFER", ib_va, 4);
  CHECK(dwords >= 1 && dwords <= kMaxIndirectBufferDwords) << "IB of " << dwords << " words";
  emit_packet3(cs, kPacket3IndirectBuffer,
               {Word::lo(ib_va), Word::hi(ib_va), dwords | kIndirectBufferValid});
}

uint32_t pred_exec_control(uint32_t xcc_mask, uint32_t exec_count) {
  // soc15d.h: PACKET3_PRED_EXEC__EXEC_COUNT 13:0, __VIRTUAL_XCC_ID_SELECT 31:24.
  CHECK(xcc_mask <= 0xff && exec_count <= 0x3fff);
  return xcc_mask << 24 | exec_count;
}

size_t emit_pred_exec(hcq::CmdStream& cs, uint32_t xcc_mask, uint32_t exec_count) {
  emit_packet3(cs, kPacket3PredExec, {pred_exec_control(xcc_mask, exec_count)});
  return cs.size() - 1;
}

void emit_copy_data(hcq::CmdStream& cs, const CopyData& c, Value src, Value dst) {
  // soc15d.h: PACKET3_COPY_DATA__SRC_SEL 3:0, __DST_SEL 11:8, __COUNT_SEL 16, __WR_CONFIRM 20.
  uint32_t control = static_cast<uint32_t>(c.src_sel) | static_cast<uint32_t>(c.dst_sel) << 8 |
                     (c.count_64 ? 1u << 16 : 0) | (c.wr_confirm ? 1u << 20 : 0);
  emit_packet3(cs, kPacket3CopyData,
               {control, Word::lo(src), Word::hi(src), Word::lo(dst), Word::hi(dst)});
}

void emit_dma_data_copy(hcq::CmdStream& cs, Value dst, Value src, Value bytes) {
  CHECK(bytes.symbolic() || (bytes.imm > 0 && static_cast<uint64_t>(bytes.imm) <= kDmaDataMaxBytes))
      << "DMA_DATA of " << bytes.imm << " bytes";
  constexpr uint32_t kL2 = 3, kDstSelShift = 20, kSrcSelShift = 29, kCpSync = 1u << 31;
  uint32_t control = kL2 << kDstSelShift | kL2 << kSrcSelShift | kCpSync;  // ENGINE 0: ME
  emit_packet3(
      cs, kPacket3DmaData,
      {control, Word::lo(src), Word::hi(src), Word::lo(dst), Word::hi(dst), Word::lo(bytes)});
}

}  // namespace baregrad::amd
