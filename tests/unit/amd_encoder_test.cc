// AMD encoders word for word: the architecture table, PM4 packets, SDMA packets and AQL packets.
// Every golden is derived by hand from the vendor headers (the derivation is next to it):
// PACKET3(op, n) = 3 << 30 | n << 16 | op << 8 with n = body words - 1 (soc15d.h / nvd.h);
// SDMA header = OP | SUB_OP << 8 (*_sdma_pkt_open.h); AQL header bits from hsa.h.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "drivers/amd/aql.h"
#include "drivers/amd/arch.h"
#include "drivers/amd/pm4.h"
#include "drivers/amd/sdma.h"
#include "hcq/cmdstream.h"

namespace baregrad::amd {
namespace {

using hcq::CmdStream;
using hcq::Value;
using Words = std::vector<uint32_t>;

Words words(const CmdStream& cs) { return Words(cs.words().begin(), cs.words().end()); }
const ArchInfo& arch(std::string_view name) { return **arch_for_name(name); }
const ArchInfo& gfx90a() { return arch("gfx90a"); }
const ArchInfo& gfx942() { return arch("gfx942"); }
const ArchInfo& gfx1100() { return arch("gfx1100"); }
const ArchInfo& gfx1201() { return arch("gfx1201"); }
constexpr uint32_t kP = CmdStream::kPlaceholder;

// ---- architecture table --------------------------------------------------------------------

TEST(AmdArch, RowsMatchKfdAndTheVendorHeaders) {
  // kfd_device.c: GC 9.4.2 -> 90010, 9.4.3 (rev >= 1) -> 90402, 11.0.0 -> 110000, 12.0.1 -> 120001
  EXPECT_EQ(gfx90a().gfx_target_version, 90010u);
  EXPECT_EQ(gfx942().gfx_target_version, 90402u);
  EXPECT_EQ(gfx1100().gfx_target_version, 110000u);
  EXPECT_EQ(gfx1201().gfx_target_version, 120001u);
  for (const ArchInfo* a : {&gfx90a(), &gfx942()}) {
    EXPECT_EQ(a->default_wave_size, 64u) << a->name;
    EXPECT_FALSE(a->supports_wave32) << a->name;
    EXPECT_EQ(a->pm4, Pm4Family::kSoc15) << a->name;
    EXPECT_EQ(a->cache_control, CacheControl::kCpCoherCntl) << a->name;
    EXPECT_FALSE(a->has_wait_reg_mem64) << a->name;  // not in soc15d.h
    EXPECT_EQ(a->sdma, SdmaVersion::k4) << a->name;
    EXPECT_EQ(a->scratch_align_bytes, 1024u) << a->name;
  }
  for (const ArchInfo* a : {&gfx1100(), &gfx1201()}) {
    EXPECT_EQ(a->default_wave_size, 32u) << a->name;
    EXPECT_TRUE(a->supports_wave32 && a->supports_wave64) << a->name;
    EXPECT_EQ(a->pm4, Pm4Family::kNv) << a->name;
    EXPECT_EQ(a->cache_control, CacheControl::kGcrCntl) << a->name;
    EXPECT_TRUE(a->has_wait_reg_mem64) << a->name;  // PACKET3_WAIT_REG_MEM64 0x93 in nvd.h
    EXPECT_EQ(a->sdma, SdmaVersion::k6) << a->name;
    EXPECT_EQ(a->scratch_align_bytes, 256u) << a->name;
  }
  EXPECT_EQ(gfx1201().sdma_ip_major, 7u);  // SDMA 7.0 speaks the 6.0 packets (sdma_v7_0.c)
  EXPECT_TRUE(gfx942().multi_xcc);
  EXPECT_FALSE(gfx90a().multi_xcc || gfx1100().multi_xcc || gfx1201().multi_xcc);
  for (const ArchInfo& a : supported_archs()) EXPECT_EQ(a.lds_bytes_per_workgroup, 65536u);
  // COUNT field widths: 22 bits (vega10/navi10 headers) and 30 bits (sdma_v6_0_0).
  EXPECT_EQ(copy_linear_max_bytes(SdmaVersion::k4), 0x400000u);
  EXPECT_EQ(copy_linear_max_bytes(SdmaVersion::k5), 0x400000u);
  EXPECT_EQ(copy_linear_max_bytes(SdmaVersion::k6), 0x40000000u);
}

TEST(AmdArch, LooksUpByVersionAndNameAndNamesWhatItRefuses) {
  EXPECT_EQ(*arch_for_target_version(90402), &gfx942());
  EXPECT_EQ(*arch_for_target_version(120001), &gfx1201());
  EXPECT_EQ(gfx_name(90010), "gfx90a");  // 9, 0, 0xa
  EXPECT_EQ(gfx_name(110000), "gfx1100");
  const char* kMsg =
      "[amd] unsupported gfx target gfx1030 (supported: gfx90a, gfx942, gfx1100, gfx1201)";
  auto by_version = arch_for_target_version(100300);
  EXPECT_EQ(by_version.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(by_version.status().message(), kMsg);
  EXPECT_EQ(arch_for_name("gfx1030").status().message(), kMsg);
  EXPECT_EQ(arch_for_target_version(90400).status().message(),
            "[amd] unsupported gfx target gfx940 (supported: gfx90a, gfx942, gfx1100, gfx1201)");
}

TEST(AmdArch, ShRegistersAreAbsoluteDwordAddresses) {
  // gfx9: GC seg0 0x2000 + gc_9_4_x_offset.h; gfx10+: 0x1260 + gc_11/12_0_0_offset.h.
  for (const ArchInfo& a : supported_archs()) {
    const ComputeRegs& r = a.regs;
    EXPECT_EQ(r.compute_start_x, 0x2e04u) << a.name;       // 0x2000+0x0e04 = 0x1260+0x1ba4
    EXPECT_EQ(r.compute_num_thread_x, 0x2e07u) << a.name;  // 0x0e07 / 0x1ba7
    EXPECT_EQ(r.compute_pgm_lo, 0x2e0cu) << a.name;        // 0x0e0c / 0x1bac
    EXPECT_EQ(r.compute_pgm_hi, 0x2e0du) << a.name;
    EXPECT_EQ(r.compute_dispatch_scratch_base_lo, 0x2e10u) << a.name;  // 0x0e10 / 0x1bb0
    EXPECT_EQ(r.compute_dispatch_scratch_base_hi, 0x2e11u) << a.name;
    EXPECT_EQ(r.compute_pgm_rsrc1, 0x2e12u) << a.name;  // 0x0e12 / 0x1bb2
    EXPECT_EQ(r.compute_pgm_rsrc2, 0x2e13u) << a.name;
    EXPECT_EQ(r.compute_resource_limits, 0x2e15u) << a.name;  // 0x0e15 / 0x1bb5
    EXPECT_EQ(r.compute_tmpring_size, 0x2e18u) << a.name;     // 0x0e18 / 0x1bb8
    EXPECT_EQ(r.compute_restart_x, 0x2e1bu) << a.name;        // 0x0e1b / 0x1bbb
    EXPECT_EQ(r.compute_user_data_0, 0x2e40u) << a.name;      // 0x0e40 / 0x1be0
  }
  EXPECT_EQ(gfx90a().regs.compute_pgm_rsrc3, 0x2e2du);  // 0x2000 + 0x0e2d
  EXPECT_EQ(gfx942().regs.compute_pgm_rsrc3, 0x2e2du);
  EXPECT_EQ(gfx1100().regs.compute_pgm_rsrc3, 0x2e28u);  // 0x1260 + 0x1bc8
  EXPECT_EQ(gfx1201().regs.compute_pgm_rsrc3, 0x2e28u);
}

// ---- PM4 -----------------------------------------------------------------------------------

TEST(AmdPm4, HeadersFollowPacket3) {
  EXPECT_EQ(packet3_header(0x76, 3), 0xc0027600u);       // SET_SH_REG, n 2: 3<<30 | 2<<16 | 0x76<<8
  EXPECT_EQ(packet3_header(0x49, 7), 0xc0064900u);       // RELEASE_MEM, n 6
  EXPECT_EQ(packet3_header(0x10, 0x4000), 0xffff1000u);  // NOP, n 0x3fff (the largest)
  CmdStream cs("pm4", 16);
  emit_nop(cs, 1);  // PACKET3(NOP, 0x3fff): the one-dword NOP
  emit_nop(cs, 3);  // PACKET3(NOP, 1) = 3<<30 | 1<<16 | 0x10<<8, then 2 skipped words
  EXPECT_EQ(words(cs), (Words{0xffff1000, 0xc0011000, 0, 0}));
}

TEST(AmdPm4DeathTest, MalformedPacketsAreBugs) {
  EXPECT_DEATH(packet3_header(0x76, 0), "PM4 body of 0 words");
  EXPECT_DEATH(packet3_header(0x100, 1), "CHECK");
  CmdStream cs("pm4", 64);
  EXPECT_DEATH(emit_nop(cs, 0x4001), "NOP of 16385 words");
  EXPECT_DEATH(emit_set_sh_reg(cs, 0x3000, {1u}), "SET_SH_REG of 1 registers from 0x3000");
  EXPECT_DEATH(emit_set_sh_reg(cs, 0x2fff, {1u, 2u}), "SET_SH_REG of 2 registers from 0x2fff");
  EXPECT_DEATH(emit_set_uconfig_reg(cs, 0xbfff, {1u}), "SET_UCONFIG_REG");
  EXPECT_DEATH(emit_set_sh_reg(cs, 0x2e0c, {Word::shr(Value::sym(0), 40)}), "shift <= 32");
}

TEST(AmdPm4DeathTest, AnOverrunFailsAtTheEmitSite) {
  CmdStream cs("amd", 4);
  EXPECT_DEATH(emit_release_mem(cs, gfx1100(), {}),
               "amd: 8 more words do not fit \\(0 of 4 used\\)");
  cs.emit(0);
  cs.emit(0);
  EXPECT_DEATH(emit_sdma_timestamp(cs, Value::of(0)), "amd: 3 more words do not fit \\(2 of 4");
  EXPECT_EQ(cs.size(), 2u);  // nothing of the refused packet was written
}

TEST(AmdPm4, SetShRegCarriesTheOffsetFromSetShRegStart) {
  for (const ArchInfo& a : supported_archs()) {
    CmdStream cs("pm4", 32);
    emit_set_sh_reg(cs, a.regs.compute_pgm_lo, {0x12345678u, 0x7fu});
    emit_set_sh_reg(cs, a.regs.compute_pgm_rsrc3, {0xau});
    emit_set_sh_reg(cs, a.regs.compute_user_data_0, {1u, 2u, 3u, 4u});
    uint32_t rsrc3 = a.pm4 == Pm4Family::kSoc15 ? 0x22d : 0x228;  // 0x2e2d / 0x2e28 - 0x2c00
    EXPECT_EQ(words(cs), (Words{
                             0xc0027600, 0x20c, 0x12345678, 0x7f,  // n 2, 0x2e0c - 0x2c00
                             0xc0017600, rsrc3, 0xa,               // n 1
                             0xc0047600, 0x240, 1, 2, 3, 4,  // n 4 (offset + 4), 0x2e40 - 0x2c00
                         }))
        << a.name;
  }
  CmdStream cs("pm4", 8);
  emit_set_uconfig_reg(cs, 0xc200, {0xe0000000u});  // GRBM_GFX_INDEX: seg1 0xa000 + 0x2200
  EXPECT_EQ(words(cs), (Words{0xc0017900, 0x200, 0xe0000000}));  // SET_UCONFIG_REG n 1
}

TEST(AmdPm4, SymbolicRegisterValuesArePatchedWithTheirBits) {
  CmdStream cs("pm4", 8);
  Value scratch = Value::sym(0);
  emit_set_sh_reg(cs, gfx942().regs.compute_dispatch_scratch_base_lo,
                  {Word::shr(scratch, 8), Word::shr(scratch, 32)});
  EXPECT_EQ(words(cs), (Words{0xc0027600, 0x210, kP, kP}));  // 0x2e10 - 0x2c00
  cs.apply(std::vector<int64_t>{0x7f0012345600});
  // 0x7f0012345600 >> 8 = 0x7f00123456 -> low word 0x00123456; >> 32 = 0x7f00
  EXPECT_EQ(words(cs), (Words{0xc0027600, 0x210, 0x00123456, 0x7f00}));
}

TEST(AmdPm4, DispatchDirectSetsTheInitiatorPerArch) {
  CmdStream cs("pm4", 16);
  emit_dispatch_direct(cs, gfx1100(), 4u, 2u, 1u, 32);
  emit_dispatch_direct(cs, gfx1201(), 4u, 2u, 1u, 64);
  emit_dispatch_direct(cs, gfx942(), Word::lo(Value::sym(0)), 1u, 1u, 64);
  // DISPATCH_DIRECT n 3 = 0xc0031500; COMPUTE_SHADER_EN 1 | FORCE_START_AT_000 1<<2 = 0x5,
  // | CS_W32_EN 1<<15 = 0x8005 for wave32 (gfx10+ only)
  EXPECT_EQ(words(cs), (Words{0xc0031500, 4, 2, 1, 0x8005, 0xc0031500, 4, 2, 1, 0x5, 0xc0031500, kP,
                              1, 1, 0x5}));
  EXPECT_EQ(dispatch_initiator(gfx90a(), 64), 0x5u);
}

TEST(AmdPm4DeathTest, Gfx9RunsOnlyWave64) {
  EXPECT_DEATH(dispatch_initiator(gfx942(), 32), "gfx942 does not run wave32");
}

TEST(AmdPm4, AcquireMemUsesCpCoherCntlOnGfx9AndGcrCntlOnGfx10Plus) {
  for (const ArchInfo* a : {&gfx90a(), &gfx942()}) {
    CmdStream cs("pm4", 16);
    emit_acquire_mem(cs, *a);
    emit_acquire_mem(cs, *a, {.gli = false, .gl2 = false});
    // ACQUIRE_MEM n 5 = 0xc0055800; SH_ICACHE 1<<29 | SH_KCACHE 1<<27 | TC 1<<23 | TCL1 1<<22 |
    // TC_WB 1<<18 = 0x28c40000; without gli/gl2: SH_KCACHE | TCL1 = 0x08400000. Then
    // COHER_SIZE 0xffffffff, COHER_SIZE_HI 0xffffff, COHER_BASE 0, 0, POLL_INTERVAL 0xa.
    EXPECT_EQ(words(cs), (Words{0xc0055800, 0x28c40000, 0xffffffff, 0xffffff, 0, 0, 0xa, 0xc0055800,
                                0x08400000, 0xffffffff, 0xffffff, 0, 0, 0xa}))
        << a->name;
  }
  for (const ArchInfo* a : {&gfx1100(), &gfx1201()}) {
    CmdStream cs("pm4", 16);
    emit_acquire_mem(cs, *a);
    emit_acquire_mem(cs, *a, {.gli = false, .gl2 = false});
    // ACQUIRE_MEM n 6 = 0xc0065800; GCR_CNTL: GLI_INV 1 | GLM_WB 1<<4 | GLM_INV 1<<5 | GLK_WB 1<<6
    // | GLK_INV 1<<7 | GLV_INV 1<<8 | GL1_INV 1<<9 | GL2_INV 1<<14 | GL2_WB 1<<15 = 0xc3f1;
    // without gli/gl2: 0x3f0.
    EXPECT_EQ(words(cs), (Words{0xc0065800, 0, 0xffffffff, 0xffffff, 0, 0, 0xa, 0xc3f1, 0xc0065800,
                                0, 0xffffffff, 0xffffff, 0, 0, 0xa, 0x3f0}))
        << a->name;
  }
}

TEST(AmdPm4, ReleaseMemSignalsAtEndOfPipe) {
  const ReleaseMem signal{.addr = Value::of(0x7f0000001000),
                          .data = Value::of(0x1122334455667788),
                          .data_sel = DataSel::k32BitLow,
                          .cache_flush = true};
  CmdStream nv("pm4", 32);
  emit_release_mem(nv, gfx1100(), signal);
  emit_release_mem(nv, gfx1201(),
                   {.addr = Value::of(0x7f0000000008),
                    .data = Value::of(42),
                    .data_sel = DataSel::k32BitLow,
                    .int_sel = IntSel::kSendInterruptAfterWriteConfirm,
                    .ctxid = 42});
  emit_release_mem(nv, gfx1100(),
                   {.addr = Value::of(0x7f0000000010), .data_sel = DataSel::kGpuClockCounter});
  // RELEASE_MEM n 6 = 0xc0064900. Event word: CACHE_FLUSH_AND_INV_TS_EVENT 0x14 | end_of_pipe
  // 5<<8 = 0x514; flush GLM_WB 1<<12 | GLM_INV 1<<13 | GLV_INV 1<<14 | GL1_INV 1<<15 | GL2_INV
  // 1<<20 | GL2_WB 1<<21 | SEQ 1<<22 = 0x70f000. DATA_SEL<<29 | INT_SEL<<24: 32-bit 0x20000000,
  // + interrupt after write confirm 2<<24 = 0x22000000, GPU clock 3<<29 = 0x60000000.
  EXPECT_EQ(words(nv),
            (Words{0xc0064900, 0x70f514, 0x20000000, 0x1000, 0x7f00, 0x55667788, 0x11223344, 0,
                   0xc0064900, 0x514,    0x22000000, 8,      0x7f00, 42,         0,          42,
                   0xc0064900, 0x514,    0x60000000, 0x10,   0x7f00, 0,          0,          0}));
  for (const ArchInfo* a : {&gfx90a(), &gfx942()}) {
    CmdStream cs("pm4", 16);
    emit_release_mem(cs, *a, signal);
    emit_release_mem(
        cs, *a,
        {.addr = Value::of(0x2000), .data = Value::of(-1), .data_sel = DataSel::k64BitData});
    // flush EOP_TC_WB_ACTION_EN 1<<15 | EOP_TC_NC_ACTION_EN 1<<19 = 0x88000; 64-bit 2<<29
    EXPECT_EQ(words(cs),
              (Words{0xc0064900, 0x88514, 0x20000000, 0x1000, 0x7f00, 0x55667788, 0x11223344, 0,
                     0xc0064900, 0x514, 0x40000000, 0x2000, 0, 0xffffffff, 0xffffffff, 0}))
        << a->name;
  }
}

TEST(AmdPm4, SymbolicReleaseAddressAndValueArePatched) {
  CmdStream cs("pm4", 8);
  emit_release_mem(cs, gfx1100(),
                   {.addr = Value::sym(0), .data = Value::sym(1), .data_sel = DataSel::k64BitData});
  EXPECT_EQ(words(cs), (Words{0xc0064900, 0x514, 0x40000000, kP, kP, kP, kP, 0}));
  EXPECT_EQ(cs.apply(std::vector<int64_t>{0x7f0000002000, 0x0000000900000005}), 4u);
  EXPECT_EQ(words(cs), (Words{0xc0064900, 0x514, 0x40000000, 0x2000, 0x7f00, 5, 9, 0}));
}

TEST(AmdPm4DeathTest, MisalignedConstantAddressesAreBugs) {
  CmdStream cs("pm4", 16);
  EXPECT_DEATH(
      emit_release_mem(cs, gfx1100(), {.addr = Value::of(0x1004), .data_sel = DataSel::k64BitData}),
      "RELEASE_MEM address 0x1004 is not 8-byte aligned");
  EXPECT_DEATH(emit_wait_reg_mem(cs, Value::of(0x1002), 1u, ~0u, CompareFunc::kEqual),
               "not 4-byte aligned");
  EXPECT_DEATH(emit_wait_reg_mem64(cs, gfx942(), Value::of(0x1000), 1, ~0ull, CompareFunc::kEqual),
               "gfx942 has no WAIT_REG_MEM64");
}

TEST(AmdPm4, WaitRegMemPollsMemoryOrWritesThenPollsRegisters) {
  CmdStream cs("pm4", 32);
  emit_wait_reg_mem(cs, Value::of(0x123456780), 7u, 0xffffffff, CompareFunc::kGreaterEqual);
  emit_wait_reg_mem(cs, Value::of(0x1000), 1u, 0x1, CompareFunc::kEqual, 10);
  emit_wait_reg_mem_write_wait(cs, 0x14d4, 0x14d5, 0xffffffff, 0xffffffff, CompareFunc::kEqual);
  // WAIT_REG_MEM n 5 = 0xc0053c00. Info: FUNCTION | MEM_SPACE(1)<<4: GEQ 5 -> 0x15, EQ 3 ->
  // 0x13; write-then-wait: OPERATION(1)<<6 | EQ 3 = 0x43. Then addr lo/hi (or the two
  // registers), reference, mask, poll interval.
  EXPECT_EQ(words(cs), (Words{0xc0053c00, 0x15, 0x23456780, 0x1,    7,          0xffffffff, 4,
                              0xc0053c00, 0x13, 0x1000,     0,      1,          1,          10,
                              0xc0053c00, 0x43, 0x14d4,     0x14d5, 0xffffffff, 0xffffffff, 4}));
  CmdStream w64("pm4", 16);
  emit_wait_reg_mem64(w64, gfx1100(), Value::of(0x7f0000000040), 0x0000000200000001,
                      0xffffffffffffffff, CompareFunc::kGreaterEqual);
  // WAIT_REG_MEM64 n 7 = 3<<30 | 7<<16 | 0x93<<8 = 0xc0079300; info 0x15; addr, ref, mask (lo, hi)
  EXPECT_EQ(words(w64), (Words{0xc0079300, 0x15, 0x40, 0x7f00, 1, 2, 0xffffffff, 0xffffffff, 4}));
}

TEST(AmdPm4, EventWriteIndirectBufferPredExecCopyData) {
  CmdStream cs("pm4", 32);
  emit_cs_partial_flush(cs);
  emit_indirect_buffer(cs, Value::of(0x1234567800), 0x40);
  size_t pred = emit_pred_exec(cs, 0b10, 5);
  emit_copy_data(cs, {.src_sel = CopyDataSrc::kPerfcounters, .wr_confirm = true}, Value::of(0x3418),
                 Value::of(0x7f0000000100));
  // EVENT_WRITE n 0 = 0xc0004600: CS_PARTIAL_FLUSH 7 | EVENT_INDEX 4<<8 = 0x407.
  // INDIRECT_BUFFER n 2 = 0xc0023f00: lo, hi, 0x40 | VALID 1<<23 = 0x800040.
  // PRED_EXEC n 0 = 0xc0002300: xcc mask 2<<24 | count 5 = 0x02000005.
  // COPY_DATA n 4 = 0xc0044000: SRC_SEL perf 4 | DST_SEL tc_l2 2<<8 | WR_CONFIRM 1<<20 = 0x100204.
  EXPECT_EQ(words(cs), (Words{0xc0004600, 0x407, 0xc0023f00, 0x34567800, 0x12, 0x800040, 0xc0002300,
                              0x02000005, 0xc0044000, 0x100204, 0x3418, 0, 0x100, 0x7f00}));
  EXPECT_EQ(pred, 7u);
  cs.set(pred, pred_exec_control(0b1, 9));
  EXPECT_EQ(cs.words()[7], 0x01000009u);
  EXPECT_EQ(indirect_buffer_packet(0x1234567800, 0x40),
            (std::array<uint32_t, 4>{0xc0023f00, 0x34567800, 0x12, 0x800040}));
}

TEST(AmdPm4DeathTest, IndirectBufferSizeIsBounded) {
  EXPECT_DEATH(indirect_buffer_packet(0x1000, 0), "IB of 0 words");
  EXPECT_DEATH(indirect_buffer_packet(0x1000, 0x100000), "IB of 1048576 words");
  EXPECT_DEATH(indirect_buffer_packet(0x1002, 1), "not 4-byte aligned");
  EXPECT_DEATH(pred_exec_control(0x100, 0), "CHECK");
}

// ---- SDMA ----------------------------------------------------------------------------------

constexpr uint64_t kSrc = 0x7f0010000000, kDst = 0x7f0020000000;

// DMA_DATA n 5 = 0xc0055000; CONTROL DST_SEL 3<<20 | SRC_SEL 3<<29 | CP_SYNC 1<<31 = 0xe0300000;
// src lo/hi, dst lo/hi, COMMAND = the byte count (a symbolic one patched as it is).
TEST(AmdPm4, DmaDataCopiesThroughL2WithCpSync) {
  CmdStream cs("pm4", 16);
  emit_dma_data_copy(cs, Value::of(0x7f0020000000), Value::of(0x7f0010000000), 4096);
  emit_dma_data_copy(cs, Value::of(0x7f0020000000), Value::sym(0), Value::sym(1));
  cs.apply(std::vector<int64_t>{0x7f0030000004, 17});
  EXPECT_EQ(words(cs), (Words{0xc0055000, 0xe0300000, 0x10000000, 0x7f00, 0x20000000, 0x7f00, 4096,
                              0xc0055000, 0xe0300000, 0x30000004, 0x7f00, 0x20000000, 0x7f00, 17}));
}

TEST(AmdSdma, CopyLinearSplitsAtTheVersionsMaximum) {
  // COPY_LINEAR: OP_COPY 1 | SUB_OP COPY_LINEAR 0 = 0x1, COUNT bytes - 1, PARAMETER 0,
  // src lo/hi, dst lo/hi.
  CmdStream one("sdma", 64);
  ASSERT_TRUE(emit_sdma_copy_linear(one, SdmaVersion::k6, kDst, kSrc, 1).ok());
  ASSERT_TRUE(emit_sdma_copy_linear(one, SdmaVersion::k6, kDst, kSrc, 0).ok());  // nothing
  EXPECT_EQ(words(one), (Words{0x1, 0, 0, 0x10000000, 0x7f00, 0x20000000, 0x7f00}));

  CmdStream v6("sdma", 64);
  ASSERT_TRUE(emit_sdma_copy_linear(v6, SdmaVersion::k6, kDst, kSrc, 1ull << 30).ok());
  ASSERT_TRUE(emit_sdma_copy_linear(v6, SdmaVersion::k6, kDst, kSrc, (1ull << 30) + 1).ok());
  // max (2^30): one packet, COUNT 0x3fffffff; max + 1: that, then 1 byte at +0x40000000.
  EXPECT_EQ(words(v6), (Words{0x1, 0x3fffffff, 0, 0x10000000, 0x7f00, 0x20000000, 0x7f00,
                              0x1, 0x3fffffff, 0, 0x10000000, 0x7f00, 0x20000000, 0x7f00,
                              0x1, 0,          0, 0x50000000, 0x7f00, 0x60000000, 0x7f00}));

  CmdStream v4("sdma", 64);
  ASSERT_TRUE(emit_sdma_copy_linear(v4, SdmaVersion::k4, kDst, kSrc, 1ull << 22).ok());
  ASSERT_TRUE(emit_sdma_copy_linear(v4, SdmaVersion::k4, kDst, kSrc, (1ull << 22) + 1).ok());
  // max (2^22): COUNT 0x3fffff; max + 1: that, then 1 byte at +0x400000.
  EXPECT_EQ(words(v4), (Words{0x1, 0x3fffff, 0, 0x10000000, 0x7f00, 0x20000000, 0x7f00,
                              0x1, 0x3fffff, 0, 0x10000000, 0x7f00, 0x20000000, 0x7f00,
                              0x1, 0,        0, 0x10400000, 0x7f00, 0x20400000, 0x7f00}));
}

TEST(AmdSdma, SymbolicCopiesFitOnePacket) {
  CmdStream cs("sdma", 16);
  ASSERT_TRUE(emit_sdma_copy_linear(cs, SdmaVersion::k4, Value::sym(0), kSrc, 0x400000).ok());
  EXPECT_EQ(words(cs), (Words{0x1, 0x3fffff, 0, 0x10000000, 0x7f00, kP, kP}));
  cs.apply(std::vector<int64_t>{0x7f0030000000});
  EXPECT_EQ(words(cs), (Words{0x1, 0x3fffff, 0, 0x10000000, 0x7f00, 0x30000000, 0x7f00}));
  Status s = emit_sdma_copy_linear(cs, SdmaVersion::k4, Value::sym(0), kSrc, 0x400001);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "SDMA copy of 4194305 bytes (over 4194304 per COPY_LINEAR) between symbolic addresses");
  EXPECT_EQ(cs.size(), 7u);
}

// A symbolic byte count: COUNT is the placeholder, patched to bytes - 1 (Word::minus_one).
TEST(AmdSdma, ASymbolicCountPatchesBytesMinusOne) {
  CmdStream cs("sdma", 16);
  emit_sdma_copy_linear_sym(cs, kDst, Value::sym(1), Value::sym(0));
  EXPECT_EQ(words(cs), (Words{0x1, kP, 0, kP, kP, 0x20000000, 0x7f00}));
  cs.apply(std::vector<int64_t>{4096, 0x7f0030000000});
  EXPECT_EQ(words(cs), (Words{0x1, 4095, 0, 0x30000000, 0x7f00, 0x20000000, 0x7f00}));
  cs.apply(std::vector<int64_t>{1, 0x7f0030000000});
  EXPECT_EQ(words(cs)[1], 0u);
}

TEST(AmdSdma, FencePollTimestampTrapWriteNop) {
  CmdStream cs("sdma", 64);
  emit_sdma_fence(cs, SdmaVersion::k4, Value::of(0x7f0000001000), 5u);
  emit_sdma_fence(cs, SdmaVersion::k6, Value::of(0x7f0000001000), 6u);
  emit_sdma_poll_regmem(cs, Value::of(0x7f0000001000), 7u, 0xffffffff, CompareFunc::kGreaterEqual);
  emit_sdma_timestamp(cs, Value::of(0x7f0000001008));
  emit_sdma_trap(cs, 0x1234);
  emit_sdma_write(cs, Value::of(0x7f0000001000), {9u});
  emit_sdma_write(cs, Value::of(0x7f0000001000),
                  {Word::lo(0x1122334455667788), Word::hi(0x1122334455667788)});
  emit_sdma_nop(cs, 2);
  EXPECT_EQ(words(cs),
            (Words{
                0x5,        0x1000, 0x7f00, 5,              // FENCE: OP 5, no MTYPE on SDMA 4
                0x30005,    0x1000, 0x7f00, 6,              // FENCE: | MTYPE 3 (UC) << 16
                0xd0000008, 0x1000, 0x7f00, 7, 0xffffffff,  // POLL_REGMEM: OP 8 | FUNC GEQ 5<<28
                0x0fff0004,                        // | MEM_POLL 1<<31; INTERVAL 4 | RETRY 0xfff<<16
                0x20d,      0x1008, 0x7f00,        // TIMESTAMP 13 | GET_GLOBAL 2<<8
                0x6,        0x1234,                // TRAP 6, INT_CONTEXT
                0x2,        0x1000, 0x7f00, 0, 9,  // WRITE 2 (linear), COUNT words - 1
                0x2,        0x1000, 0x7f00, 1, 0x55667788,
                0x11223344, 0,      0,  // two one-word NOPs (OP 0, COUNT 0)
            }));
}

TEST(AmdSdmaDeathTest, FieldLimitsAreBugs) {
  CmdStream cs("sdma", 16);
  EXPECT_DEATH(emit_sdma_trap(cs, 0x10000000), "int_context");
  EXPECT_DEATH(emit_sdma_timestamp(cs, Value::of(0x1004)), "not 8-byte aligned");
  EXPECT_DEATH(emit_sdma_fence(cs, SdmaVersion::k6, Value::of(0x1002), 1u), "not 4-byte");
  EXPECT_DEATH(emit_sdma_write(cs, Value::of(0x1000), {}), "SDMA WRITE of 0 words");
}

// ---- AQL -----------------------------------------------------------------------------------

TEST(AmdAql, HeadersFollowHsaH) {
  // TYPE 7:0 | BARRIER 1<<8 | ACQUIRE scope << 9 | RELEASE scope << 11; SYSTEM = 2.
  EXPECT_EQ(aql_header(AqlPacketType::kKernelDispatch, {}), 0x1502);  // 2|0x100|0x400|0x1000
  EXPECT_EQ(aql_header(AqlPacketType::kBarrierAnd, {}), 0x1503);
  EXPECT_EQ(aql_header(AqlPacketType::kVendorSpecific, {}), 0x1500);
  // no barrier, AGENT (1) acquire, NONE release: 2 | 1<<9 = 0x202
  EXPECT_EQ(
      aql_header(AqlPacketType::kKernelDispatch, {false, FenceScope::kAgent, FenceScope::kNone}),
      0x202);
}

TEST(AmdAql, KernelDispatchFillsTheBodyAndReturnsTheHeaderWord) {
  std::array<uint32_t, 16> slot;
  slot.fill(0xdeadbeef);
  slot[0] = 1;  // HSA_PACKET_TYPE_INVALID until published
  uint32_t header = encode_kernel_dispatch(slot, {.workgroup_size = {256, 1, 1},
                                                  .grid_size = {65536, 2, 1},
                                                  .private_segment_size = 16,
                                                  .group_segment_size = 4096,
                                                  .kernel_object = 0x7f0012345600,
                                                  .kernarg_address = 0x7f00aaaa0000,
                                                  .completion_signal = 0x555500001000});
  EXPECT_EQ(header, 0x00031502u);  // header 0x1502 | setup (3 dimensions) << 16
  // wg x | y<<16, wg z | reserved0, grid x/y/z (work-items), private, group, kernel object,
  // kernarg, reserved2, completion signal.
  EXPECT_EQ(slot, (std::array<uint32_t, 16>{1, 0x00010100, 1, 0x10000, 2, 1, 16, 0x1000, 0x12345600,
                                            0x7f00, 0xaaaa0000, 0x7f00, 0, 0, 0x1000, 0x5555}));
  aql_publish(slot, header);
  EXPECT_EQ(slot[0], 0x00031502u);
}

TEST(AmdAql, BarrierAndAndPm4IbPackets) {
  std::array<uint32_t, 16> slot;
  slot.fill(0xdeadbeef);
  uint32_t h = encode_barrier_and(slot, {0x100000010, 0x200000020, 0, 0, 0x500000050}, 0x8000);
  EXPECT_EQ(h, 0x1503u);
  // reserved1, dep_signal[0..4] (lo, hi each), reserved2, completion signal
  EXPECT_EQ(slot, (std::array<uint32_t, 16>{0xdeadbeef, 0, 0x10, 1, 0x20, 2, 0, 0, 0, 0, 0x50, 5, 0,
                                            0, 0x8000, 0}));
  slot.fill(0xdeadbeef);
  h = encode_pm4_ib(slot, 0x7f0000004000, 24, 0);
  EXPECT_EQ(h, 0x00011500u);  // vendor-specific header 0x1500 | pm4_ib_format 1 << 16
  // INDIRECT_BUFFER (n 2: 0xc0023f00, lo, hi, 24 | VALID 1<<23), dw_count_remain 10,
  // reserved[8], completion signal.
  EXPECT_EQ(slot, (std::array<uint32_t, 16>{0xdeadbeef, 0xc0023f00, 0x4000, 0x7f00, 0x800018, 10, 0,
                                            0, 0, 0, 0, 0, 0, 0, 0, 0}));
}

// amd_queue_t as 64 little-endian dwords, offsets from LLVM device-libs amd_hsa_queue.h: max_cu_id
// dword 18, max_wave_id 19, read_dispatch_id_field_base_byte_offset 34, compute_tmpring_size 35,
// scratch_resource_descriptor 36..39, scratch_backing_memory_location 40..41, its byte size
// 42..43, scratch_wave64_lane_byte_size 44, queue_properties 45.
TEST(AmdAql, AmdQueueTFieldsFollowAmdHsaQueueH) {
  std::array<uint8_t, 256> q;
  q.fill(0xee);
  init_amd_queue(q, 95, 31);
  std::array<uint32_t, 64> want{};
  want[18] = 95;
  want[19] = 31;
  want[34] = 128;
  want[45] = 0xa;  // IS_PTR64 (bit 1) | ENABLE_PROFILING (bit 3)
  auto dwords = [&] {
    std::array<uint32_t, 64> d;
    std::memcpy(d.data(), q.data(), 256);
    return d;
  };
  EXPECT_EQ(dwords(), want);
  AqlScratch s{.va = 0x7f1234560000, .bytes = 0x300000, .tmpring_size = 0xa200, .lane_bytes = 40};
  s.rsrc[0] = 1, s.rsrc[1] = 2, s.rsrc[2] = 3, s.rsrc[3] = 4;
  set_amd_queue_scratch(q, s);
  want[35] = 0xa200;
  want[36] = 1, want[37] = 2, want[38] = 3, want[39] = 4;
  want[40] = 0x34560000, want[41] = 0x7f12;
  want[42] = 0x300000, want[43] = 0;
  want[44] = 40;
  EXPECT_EQ(dwords(), want);
}

}  // namespace
}  // namespace baregrad::amd
