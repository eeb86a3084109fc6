// NVIDIA encoders word for word: method headers, GPFIFO entries and ring bookkeeping, the method
// builders, and class selection. Every golden is derived by hand from NVIDIA's headers (the
// derivation is next to it): header = SEC_OP << 29 | count << 16 | subchannel << 13 | method >> 2
// (clc56f.h NVC56F_DMA_*), method offsets and field bits from the class headers.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "drivers/nv/classes.h"
#include "drivers/nv/gpfifo.h"
#include "drivers/nv/methods.h"
#include "drivers/nv/pushbuf.h"
#include "hcq/cmdstream.h"

namespace baregrad::nv {
namespace {

using hcq::CmdStream;
using hcq::Value;
using Words = std::vector<uint32_t>;

Words words(const CmdStream& cs) { return Words(cs.words().begin(), cs.words().end()); }

GpuClasses gpu(uint32_t arch, uint32_t impl = 0) {
  auto r = select_classes(arch, impl);
  EXPECT_TRUE(r.ok()) << r.status();
  return *r;
}
GpuClasses hopper() { return gpu(0x180); }
GpuClasses ga102() { return gpu(0x170, 2); }

constexpr uint32_t kP = CmdStream::kPlaceholder;

// ---- method headers ------------------------------------------------------------------------

TEST(NvPushbuf, HeadersFollowTheDmaMethodFormat) {
  // INC_METHOD 1<<29 = 0x20000000; count 1<<16; subch 1<<13 = 0x2000; SET_OBJECT 0x0000 >> 2 = 0
  EXPECT_EQ(method_header(SecOp::kIncMethod, Subchannel::kCompute, 0x0000, 1), 0x20012000u);
  // INC_METHOD, count 5 (0x50000), subch 0, SEM_ADDR_LO 0x5c >> 2 = 0x17
  EXPECT_EQ(method_header(SecOp::kIncMethod, Subchannel::kHost, 0x005c, 5), 0x20050017u);
  // NON_INC_METHOD 3<<29 = 0x60000000, count 3 (0x30000), subch 4 (0x8000), 0x418 >> 2 = 0x106
  EXPECT_EQ(method_header(SecOp::kNonIncMethod, Subchannel::kCopy, 0x0418, 3), 0x60038106u);
  // IMMD_DATA_METHOD 4<<29 = 0x80000000, data 9 (0x90000), subch 1 (0x2000), 0x2c0 >> 2 = 0xb0
  EXPECT_EQ(method_header(SecOp::kImmdDataMethod, Subchannel::kCompute, 0x02c0, 9), 0x800920b0u);
  // ONE_INC 5<<29 = 0xa0000000, count 4 (0x40000), subch 4 (0x8000), 0x400 >> 2 = 0x100
  EXPECT_EQ(method_header(SecOp::kOneInc, Subchannel::kCopy, 0x0400, 4), 0xa0048100u);
  // Every field at its maximum: count 0x1fff (0x1fff0000), subch 7 (0xe000), 0x3ffc >> 2 = 0xfff
  EXPECT_EQ(method_header(SecOp::kIncMethod, static_cast<Subchannel>(7), 0x3ffc, 0x1fff),
            0x3fffefffu);
}

TEST(NvPushbufDeathTest, MalformedHeadersAreBugs) {
  EXPECT_DEATH(method_header(SecOp::kIncMethod, Subchannel::kHost, 0x0062, 1), "method 0x62");
  EXPECT_DEATH(method_header(SecOp::kIncMethod, Subchannel::kHost, 0x4000, 1), "method 0x4000");
  EXPECT_DEATH(method_header(SecOp::kIncMethod, Subchannel::kHost, 0x0000, 0x2000), "CHECK");
  CmdStream cs("pb", 4);
  EXPECT_DEATH(PushBuffer(cs).immd(Subchannel::kCompute, 0x02c0, 0x2000), "CHECK");
  EXPECT_DEATH(PushBuffer(cs).inc(Subchannel::kCompute, 0x02c0, {1u, 2u, 3u, 4u}),
               "pb: 5 more words do not fit \\(0 of 4 used\\)");
}

TEST(NvPushbuf, BurstsWriteTheHeaderThenTheData) {
  CmdStream cs("pb", 32);
  PushBuffer pb(cs);
  pb.inc(Subchannel::kCompute, 0x07b0, {0x7293u, 0u});
  pb.non_inc(Subchannel::kCopy, 0x0418, {1u, 2u});
  pb.immd(Subchannel::kCompute, 0x02c0, 3);
  const uint32_t qmd[3] = {0xa, 0xb, 0xc};
  pb.inc(Subchannel::kCompute, 0x0320, std::span<const uint32_t>(qmd));
  EXPECT_EQ(words(cs), (Words{
                           0x200221ec, 0x7293, 0,      // INC, count 2, subch 1, 0x7b0 >> 2 = 0x1ec
                           0x60028106, 1, 2,           // NON_INC, count 2, subch 4, 0x418 >> 2
                           0x800320b0,                 // IMMD, data 3, subch 1, 0x2c0 >> 2 = 0xb0
                           0x200320c8, 0xa, 0xb, 0xc,  // INC, count 3, subch 1, 0x320 >> 2 = 0xc8
                       }));
}

TEST(NvPushbuf, SymbolicWordsArePatchedWithTheirBits) {
  CmdStream cs("pb", 16);
  PushBuffer pb(cs);
  pb.inc(Subchannel::kCopy, 0x0400,
         {Word::hi(Value::sym(0)), Word::lo(Value::sym(0)), Word::shr(Value::sym(1), 8), 5u});
  // INC, count 4, subch 4, 0x400 >> 2 = 0x100
  EXPECT_EQ(words(cs), (Words{0x20048100, kP, kP, kP, 5}));
  EXPECT_EQ(cs.apply(std::vector<int64_t>{0x0000123487654321, 0x12345678ab}), 3u);
  // hi, lo of var 0; bits 39:8 of var 1; the header before the hi word is kept
  EXPECT_EQ(words(cs), (Words{0x20048100, 0x1234, 0x87654321, 0x12345678, 5}));
  EXPECT_EQ(cs.apply(std::vector<int64_t>{0x0000123487654321, 0x77000000ff}), 1u);
  EXPECT_EQ(words(cs), (Words{0x20048100, 0x1234, 0x87654321, 0x77000000, 5}));
}

// ---- GPFIFO --------------------------------------------------------------------------------

TEST(NvGpfifo, EntriesFollowGpEntry0And1) {
  // ENTRY0 = va bits 31:2 (GET) = 0x1000; ENTRY1 = LEVEL_SUBROUTINE 1<<9 | LENGTH 16<<10 = 0x4200
  EXPECT_EQ(*gp_entry(0x1000, 16), 0x0000420000001000ull);
  // va 0x12_3456_7890: ENTRY0 0x34567890, GET_HI 0x12; ENTRY1 0x12 | 0x200 | 3<<10 = 0xe12
  EXPECT_EQ(*gp_entry(0x1234567890, 3), 0x00000e1234567890ull);
  // The largest: va 2^40 - 4 (GET 0xfffffffc, GET_HI 0xff), LENGTH 0x1fffff << 10 = 0x7ffffc00
  // -> ENTRY1 0x7ffffc00 | 0x200 | 0xff = 0x7ffffeff (SYNC bit 31 stays 0)
  EXPECT_EQ(*gp_entry(0xfffffffffc, 0x1fffff), 0x7ffffefffffffffcull);
  // The USERD and usermode offsets (Nvc56fControl GPGet/GPPut; NVC361_NOTIFY_CHANNEL_PENDING).
  EXPECT_EQ(kUserdGpGet, 0x88u);
  EXPECT_EQ(kUserdGpPut, 0x8cu);
  EXPECT_EQ(kDoorbellOffset, 0x90u);
}

TEST(NvGpfifo, EntriesRefuseWhatTheFieldsCannotHold) {
  EXPECT_EQ(gp_entry(0x1000, 0).status().message(),
            "GPFIFO entry of 0 words: the length must be 1..2097151");
  EXPECT_EQ(gp_entry(0x1000, 0x200000).status().message(),
            "GPFIFO entry of 2097152 words: the length must be 1..2097151");
  EXPECT_EQ(gp_entry(0x1002, 1).status().message(),
            "GPFIFO entry at 0x1002: the pushbuffer must be 4-byte aligned and below 2^40");
  EXPECT_EQ(gp_entry(1ull << 40, 1).status().code(), StatusCode::kInvalidArgument);
}

TEST(NvGpfifo, TheRingWrapsAndRefusesWhenFull) {
  GpFifoRing ring(4, 0xabcd);
  for (uint32_t i = 0; i < 3; i++) {
    auto s = ring.push(0x1000 + 0x100 * i, 8, /*gp_get=*/0);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->slot, i);
    EXPECT_EQ(s->gp_put, i + 1);
    EXPECT_EQ(s->doorbell, 0xabcdu);
    // ENTRY1 = 0x200 | 8 << 10 = 0x2200
    EXPECT_EQ(s->entry, 0x0000220000000000ull | (0x1000 + 0x100 * i));
  }
  // 3 of 4 in flight: GPPut == GPGet would read as empty, so the ring is full.
  EXPECT_EQ(ring.in_flight(0), 3u);
  auto full = ring.push(0x2000, 8, 0);
  EXPECT_EQ(full.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(full.status().message(),
            "GPFIFO ring full: a submission of 1 entries, 0 of 4 free (put 3, get 0)");
  EXPECT_EQ(ring.put(), 3u);  // unchanged by the refusal
  // The GPU consumed two: slot 3, then the put wraps to slot 0.
  auto a = ring.push(0x3000, 1, 2);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->slot, 3u);
  EXPECT_EQ(a->gp_put, 0u);
  auto b = ring.push(0x3004, 1, 2);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->slot, 0u);
  EXPECT_EQ(b->gp_put, 1u);
  EXPECT_EQ(ring.check_space(1, 2).message(),
            "GPFIFO ring full: a submission of 1 entries, 0 of 4 free (put 1, get 2)");
  EXPECT_TRUE(ring.check_space(3, 1).ok());
  EXPECT_EQ(ring.check_space(4, 1).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(ring.check_space(1, 4).code(), StatusCode::kInternal);  // GPGet outside the ring
  // A bad segment is refused without taking a slot.
  EXPECT_EQ(ring.push(0x3002, 1, 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ring.put(), 1u);
}

// ---- method builders -----------------------------------------------------------------------

TEST(NvMethods, SetObjectBindsAClassToASubchannel) {
  CmdStream cs("pb", 8);
  PushBuffer pb(cs);
  emit_set_object(pb, Subchannel::kCompute, kHopperComputeA);
  emit_set_object(pb, Subchannel::kCopy, kHopperDmaCopyA);
  EXPECT_EQ(words(cs), (Words{
                           0x20012000, 0xcbc0,  // INC, count 1, subch 1, SET_OBJECT 0x0000
                           0x20018000, 0xc8b5,  // INC, count 1, subch 4 (0x8000), SET_OBJECT
                       }));
}

TEST(NvMethods, SemaphoreReleaseUsesTheHostSemaphoreMethods) {
  CmdStream cs("pb", 32);
  PushBuffer pb(cs);
  const uint64_t addr = 0x1234567890;
  const uint64_t payload = 0x1122334455667788;
  ASSERT_TRUE(emit_semaphore_release(pb, hopper(), addr, payload, {PayloadSize::k64, true}).ok());
  ASSERT_TRUE(emit_semaphore_release(pb, hopper(), addr, payload, {PayloadSize::k64, false}).ok());
  ASSERT_TRUE(emit_semaphore_release(pb, ga102(), addr, 7, {PayloadSize::k32, false}).ok());
  emit_non_stall_interrupt(pb);
  // Header: INC, count 5, subch 0, SEM_ADDR_LO 0x5c >> 2 = 0x17 -> 0x20050017; then ADDR_LO,
  // ADDR_HI, PAYLOAD_LO, PAYLOAD_HI, SEM_EXECUTE:
  //   RELEASE 1 | RELEASE_WFI_EN 1<<20 | PAYLOAD_SIZE_64BIT 1<<24 | RELEASE_TIMESTAMP_EN 1<<25
  //   = 0x03100001; without the timestamp 0x01100001; 32-bit, no timestamp 0x00100001.
  // NON_STALL_INTERRUPT: INC, count 1, subch 0, 0x20 >> 2 = 8 -> 0x20010008, data 0.
  EXPECT_EQ(words(cs),
            (Words{
                0x20050017, 0x34567890, 0x12,       0x55667788, 0x11223344, 0x03100001, 0x20050017,
                0x34567890, 0x12,       0x55667788, 0x11223344, 0x01100001, 0x20050017, 0x34567890,
                0x12,       7,          0,          0x00100001, 0x20010008, 0,
            }));
}

TEST(NvMethods, ReleaseWithoutWfiLeavesReleaseWfiDisabled) {
  CmdStream cs("pb", 16);
  PushBuffer pb(cs);
  ASSERT_TRUE(emit_semaphore_release(pb, hopper(), 0x1234567890, 0x1122334455667788,
                                     {.size = PayloadSize::k64, .wfi = false})
                  .ok());
  ASSERT_TRUE(emit_semaphore_release(pb, hopper(), 0x2000, 9,
                                     {.size = PayloadSize::k32, .timestamp = true, .wfi = false})
                  .ok());
  // SEM_EXECUTE: RELEASE 1 | RELEASE_WFI_DIS 0<<20 | PAYLOAD_SIZE_64BIT 1<<24 = 0x01000001;
  // 32-bit with RELEASE_TIMESTAMP_EN 1<<25: 1 | 0x02000000 = 0x02000001.
  EXPECT_EQ(words(cs), (Words{
                           0x20050017,
                           0x34567890,
                           0x12,
                           0x55667788,
                           0x11223344,
                           0x01000001,
                           0x20050017,
                           0x2000,
                           0,
                           9,
                           0,
                           0x02000001,
                       }));
}

TEST(NvMethods, TimestampedReleasesNeedSixteenByteAlignment) {
  CmdStream cs("pb", 32);
  PushBuffer pb(cs);
  // 8-aligned is enough for the 64-bit payload, not for the 16 bytes a timestamp writes.
  Status s = emit_semaphore_release(pb, hopper(), 0x1008, 1, {.timestamp = true});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "semaphore release with timestamp (SEM_EXECUTE RELEASE_TIMESTAMP) at 0x1008: the "
            "address must be 16-byte aligned");
  EXPECT_EQ(
      emit_semaphore_release(pb, hopper(), 0x1004, 1, {.size = PayloadSize::k32, .timestamp = true})
          .code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(cs.size(), 0u);  // nothing written
  // Without a timestamp 0x1008 is fine; a symbolic address is the caller's to align.
  EXPECT_TRUE(emit_semaphore_release(pb, hopper(), 0x1008, 1).ok());
  EXPECT_TRUE(emit_semaphore_release(pb, hopper(), Value::sym(0), 1, {.timestamp = true}).ok());
  ASSERT_TRUE(emit_semaphore_release(pb, hopper(), 0x1010, 2, {.timestamp = true}).ok());
  // The last: 0x1010, payload 2, SEM_EXECUTE RELEASE 1 | WFI 1<<20 | 64BIT 1<<24 |
  // TIMESTAMP 1<<25 = 0x03100001.
  Words w = words(cs);
  ASSERT_EQ(w.size(), 18u);
  EXPECT_EQ(Words(w.begin() + 12, w.end()), (Words{0x20050017, 0x1010, 0, 2, 0, 0x03100001}));
}

TEST(NvMethods, SemaphoreAcquireWaitsForAGreaterOrEqualValue) {
  CmdStream cs("pb", 16);
  PushBuffer pb(cs);
  ASSERT_TRUE(emit_semaphore_acquire(pb, hopper(), 0x1000, 0x100000002).ok());
  ASSERT_TRUE(emit_semaphore_acquire(pb, hopper(), 0x1004, 9, PayloadSize::k32).ok());
  // SEM_EXECUTE: ACQ_CIRC_GEQ 3 | PAYLOAD_SIZE_64BIT 1<<24 = 0x01000003; 32-bit: 0x00000003
  EXPECT_EQ(words(cs), (Words{
                           0x20050017,
                           0x1000,
                           0,
                           2,
                           1,
                           0x01000003,
                           0x20050017,
                           0x1004,
                           0,
                           9,
                           0,
                           0x00000003,
                       }));
}

TEST(NvMethods, SemaphoreAddressesMustFitTheChannelClass) {
  CmdStream cs("pb", 16);
  PushBuffer pb(cs);
  // AMPERE_CHANNEL_GPFIFO_A SEM_ADDR_HI_OFFSET is 7:0 (40 bits); HOPPER_CHANNEL_GPFIFO_A 24:0.
  Status s = emit_semaphore_release(pb, ga102(), 1ull << 40, 1);
  EXPECT_EQ(s.message(),
            "semaphore release at 0x10000000000: the address must be 8-byte aligned and below "
            "2^40 (AMPERE_CHANNEL_GPFIFO_A (0xc56f))");
  EXPECT_EQ(cs.size(), 0u);  // nothing written
  EXPECT_TRUE(emit_semaphore_release(pb, hopper(), 1ull << 40, 1).ok());
  EXPECT_EQ(emit_semaphore_release(pb, hopper(), 1ull << 57, 1).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(emit_semaphore_acquire(pb, hopper(), 0x1004, 1).message(),
            "semaphore acquire at 0x1004: the address must be 8-byte aligned and below 2^57 "
            "(HOPPER_CHANNEL_GPFIFO_A (0xc86f))");
  EXPECT_TRUE(emit_semaphore_acquire(pb, hopper(), 0x1004, 1, PayloadSize::k32).ok());
}

TEST(NvMethods, TheBarrierInvalidatesShaderCaches) {
  CmdStream cs("pb", 4);
  PushBuffer pb(cs);
  emit_invalidate_shader_caches(pb);
  // INC, count 1, subch 1, 0x1698 >> 2 = 0x5a6; INSTRUCTION 1<<0 | GLOBAL_DATA 1<<4 |
  // CONSTANT 1<<12 = 0x1011
  EXPECT_EQ(words(cs), (Words{0x200125a6, 0x1011}));
}

TEST(NvMethods, LaunchSendsThePcasWithTheQmdAddress) {
  CmdStream cs("pb", 8);
  PushBuffer pb(cs);
  ASSERT_TRUE(emit_launch(pb, 0x1234567800).ok());
  ASSERT_TRUE(emit_launch(pb, 0x100, PcasAction::kInvalidateCopySchedule).ok());
  // SEND_PCAS_A: INC, count 1, subch 1, 0x2b4 >> 2 = 0xad -> 0x200120ad, QMD address >> 8;
  // SEND_SIGNALING_PCAS2_B: 0x2c0 >> 2 = 0xb0 -> 0x200120b0, PCAS_ACTION_PREFETCH_SCHEDULE 9
  // (INVALIDATE_COPY_SCHEDULE 3).
  EXPECT_EQ(words(cs), (Words{
                           0x200120ad,
                           0x12345678,
                           0x200120b0,
                           9,
                           0x200120ad,
                           0x1,
                           0x200120b0,
                           3,
                       }));
  EXPECT_EQ(emit_launch(pb, 0x1234567880).message(),
            "launch of the QMD at 0x1234567880: SEND_PCAS_A takes a 256-byte aligned address "
            "below 2^40");
  EXPECT_EQ(emit_launch(pb, 1ull << 40).code(), StatusCode::kInvalidArgument);
}

TEST(NvMethods, ShaderMemoryWindowsAndLocalMemory) {
  CmdStream cs("pb", 32);
  PushBuffer pb(cs);
  ASSERT_TRUE(emit_shader_memory_windows(pb, kLocalMemoryWindow, kSharedMemoryWindow).ok());
  ASSERT_TRUE(emit_shader_local_memory(pb, hopper(), 0x7f0000000000, 0x1234568000).ok());
  EXPECT_EQ(words(cs), (Words{
                           // SET_SHADER_LOCAL_MEMORY_WINDOW_A: INC, count 2, subch 1,
                           // 0x7b0 >> 2 = 0x1ec; A = upper 0x7293, B = lower 0
                           0x200221ec,
                           0x7293,
                           0,
                           // SET_SHADER_SHARED_MEMORY_WINDOW_A: 0x2a0 >> 2 = 0xa8
                           0x200220a8,
                           0x7294,
                           0,
                           // SET_SHADER_LOCAL_MEMORY_A: 0x790 >> 2 = 0x1e4; upper, lower
                           0x200221e4,
                           0x7f00,
                           0,
                           // SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A: count 3, 0x2e4 >> 2 =
                           // 0xb9; SIZE_UPPER, SIZE_LOWER, C = MAX_SM_COUNT 0xff
                           0x200320b9,
                           0x12,
                           0x34568000,
                           0xff,
                       }));
  // The windows' BASE_ADDRESS_UPPER is 16:0; SET_SHADER_LOCAL_MEMORY_A_ADDRESS_UPPER is 16:0 on
  // AMPERE_COMPUTE_B and 24:0 on HOPPER_COMPUTE_A; NON_THROTTLED_A_SIZE_UPPER is 7:0.
  EXPECT_EQ(emit_shader_memory_windows(pb, 1ull << 49, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(emit_shader_local_memory(pb, ga102(), 1ull << 50, 0x8000).message(),
            "local memory at 0x4000000000000: the address must be 1-byte aligned and below 2^49 "
            "(AMPERE_COMPUTE_B (0xc7c0))");
  EXPECT_TRUE(emit_shader_local_memory(pb, hopper(), 1ull << 50, 0x8000).ok());
  EXPECT_EQ(emit_shader_local_memory(pb, hopper(), 0, 1ull << 40).code(),
            StatusCode::kInvalidArgument);
}

TEST(NvMethods, CopiesAreOnePitchLaunchPerTwoGiB) {
  CmdStream cs("pb", 64);
  PushBuffer pb(cs);
  ASSERT_TRUE(emit_copy(pb, hopper(), 0x200000001000, 0x100000002000, 0x1000).ok());
  // OFFSET_IN_UPPER: INC, count 4, subch 4 (0x8000), 0x400 >> 2 = 0x100 -> 0x20048100; src hi,
  // src lo, dst hi, dst lo. LINE_LENGTH_IN: 0x418 >> 2 = 0x106 -> 0x20018106. LAUNCH_DMA:
  // 0x300 >> 2 = 0xc0 -> 0x200180c0; NON_PIPELINED 2 | SRC pitch 1<<7 | DST pitch 1<<8 = 0x182.
  Words one{0x20048100, 0x1000, 0x2000, 0x2000, 0x1000, 0x20018106, 0x1000, 0x200180c0, 0x182};
  EXPECT_EQ(words(cs), one);

  cs.clear();
  ASSERT_TRUE(emit_copy(pb, hopper(), 0x10000000, 0x20000000, (1ll << 31) + 0x10).ok());
  EXPECT_EQ(words(cs), (Words{
                           0x20048100,
                           0,
                           0x20000000,
                           0,
                           0x10000000,  // first 2 GiB
                           0x20018106,
                           0x80000000,
                           0x200180c0,
                           0x182,
                           0x20048100,
                           0,
                           0xa0000000,
                           0,
                           0x90000000,  // the 16 bytes after
                           0x20018106,
                           0x10,
                           0x200180c0,
                           0x182,
                       }));

  cs.clear();
  ASSERT_TRUE(emit_copy(pb, hopper(), 0x1000, 0x2000, 0).ok());
  EXPECT_EQ(cs.size(), 0u);
  ASSERT_TRUE(emit_copy(pb, hopper(), Value::sym(0), 0x2000, Value::sym(1)).ok());
  EXPECT_EQ(words(cs), (Words{0x20048100, 0, 0x2000, kP, kP, 0x20018106, kP, 0x200180c0, 0x182}));
  cs.apply(std::vector<int64_t>{0x300000004000, 0x40});
  EXPECT_EQ(words(cs),
            (Words{0x20048100, 0, 0x2000, 0x3000, 0x4000, 0x20018106, 0x40, 0x200180c0, 0x182}));
}

TEST(NvMethods, CopiesRefuseWhatTheyCannotEncode) {
  CmdStream cs("pb", 64);
  PushBuffer pb(cs);
  // OFFSET_IN_UPPER_UPPER is 16:0 on AMPERE_DMA_COPY_B (49 bits), 24:0 on HOPPER_DMA_COPY_A.
  EXPECT_EQ(emit_copy(pb, ga102(), 1ull << 49, 0, 16).message(),
            "copy destination at 0x2000000000000: the address must be 1-byte aligned and below "
            "2^49 (AMPERE_DMA_COPY_B (0xc7b5))");
  EXPECT_EQ(emit_copy(pb, ga102(), 0, (1ull << 49) - 8, 16).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(emit_copy(pb, hopper(), 1ull << 49, 0, 16).ok());
  EXPECT_EQ(emit_copy(pb, hopper(), Value::sym(0), 0, (1ll << 31) + 1).message(),
            "copy of 2147483649 bytes (over 2147483648 per LAUNCH_DMA) between symbolic "
            "addresses");
  EXPECT_EQ(emit_copy(pb, hopper(), 0, 0, -1).message(), "copy of -1 bytes");
}

TEST(NvMethods, CopyEngineSemaphoreRelease) {
  CmdStream cs("pb", 32);
  PushBuffer pb(cs);
  ASSERT_TRUE(emit_copy_semaphore_release(pb, hopper(), 0x1234567890, 0x1122334455667788,
                                          {PayloadSize::k64, true})
                  .ok());
  ASSERT_TRUE(emit_copy_semaphore_release(pb, hopper(), 0x1000, 5, {PayloadSize::k64, false}).ok());
  // tinygrad's form: a 32-bit payload and the four-word (timestamped) semaphore.
  ASSERT_TRUE(
      emit_copy_semaphore_release(pb, gpu(0x170, 0), 0x1000, 6, {PayloadSize::k32, true}).ok());
  EXPECT_EQ(words(cs), (Words{
                           // SET_SEMAPHORE_A: INC, count 4, subch 4, 0x240 >> 2 = 0x90; A = addr
                           // upper, B = lower, PAYLOAD, PAYLOAD_UPPER
                           0x20048090,
                           0x12,
                           0x34567890,
                           0x55667788,
                           0x11223344,
                           // LAUNCH_DMA: FLUSH_ENABLE 1<<2 | SEMAPHORE_TYPE 2<<3 (with
                           // timestamp) | SEMAPHORE_PAYLOAD_SIZE_TWO_WORD 1<<27 = 0x08000014
                           0x200180c0,
                           0x08000014,
                           0x20048090,
                           0,
                           0x1000,
                           5,
                           0,
                           // FLUSH_ENABLE | SEMAPHORE_TYPE 1<<3 | TWO_WORD = 0x0800000c
                           0x200180c0,
                           0x0800000c,
                           // count 3: A, B, PAYLOAD; FLUSH_ENABLE | FOUR_WORD 2<<3 = 0x14
                           0x20038090,
                           0,
                           0x1000,
                           6,
                           0x200180c0,
                           0x14,
                       }));
  EXPECT_EQ(emit_copy_semaphore_release(pb, gpu(0x170, 0), 0x1000, 6).message(),
            "64-bit copy-engine semaphore release on AMPERE_DMA_COPY_A (0xc6b5): the class has "
            "no SET_SEMAPHORE_PAYLOAD_UPPER; release through the host semaphore instead");
  EXPECT_EQ(emit_copy_semaphore_release(pb, hopper(), 0x1004, 6).code(),
            StatusCode::kInvalidArgument);  // a 64-bit payload needs 8-byte alignment
}

TEST(NvMethods, ASymbolicPayloadChangesExactlyItsTwoWords) {
  CmdStream cs("pb", 32);
  PushBuffer pb(cs);
  emit_invalidate_shader_caches(pb);
  ASSERT_TRUE(
      emit_semaphore_release(pb, hopper(), 0x1234567890, Value::sym(0), {PayloadSize::k64, true})
          .ok());
  emit_non_stall_interrupt(pb);
  Words before{0x200125a6, 0x1011, 0x20050017, 0x34567890, 0x12, kP, kP, 0x03100001, 0x20010008, 0};
  EXPECT_EQ(words(cs), before);
  EXPECT_EQ(cs.apply(std::vector<int64_t>{0x0000000a00000009}), 2u);
  Words after = before;
  after[5] = 0x9;  // SEM_PAYLOAD_LO
  after[6] = 0xa;  // SEM_PAYLOAD_HI
  EXPECT_EQ(words(cs), after);
  EXPECT_EQ(cs.apply(std::vector<int64_t>{-1}), 2u);
  after[5] = after[6] = 0xffffffff;
  EXPECT_EQ(words(cs), after);
}

// ---- class selection -----------------------------------------------------------------------

TEST(NvClasses, EachGenerationGetsItsClassesAndQmdVersion) {
  struct Case {
    uint32_t arch, impl;
    Generation gen;
    uint32_t compute, copy, gpfifo, usermode;
    QmdVersion qmd;
    uint16_t max_smem_kib;
  };
  // Class numbers as NVIDIA's class headers define them; which chip lists which class as in
  // open-gpu-kernel-modules src/nvidia/generated/g_gpu_class_list.c.
  const Case cases[] = {
      {0x170, 0, Generation::kAmpere, 0xc6c0, 0xc6b5, 0xc56f, 0xc461, QmdVersion::kV3, 164},
      {0x170, 2, Generation::kAmpere, 0xc7c0, 0xc7b5, 0xc56f, 0xc461, QmdVersion::kV3, 100},
      {0x190, 2, Generation::kAda, 0xc9c0, 0xc7b5, 0xc56f, 0xc461, QmdVersion::kV3, 100},
      {0x180, 0, Generation::kHopper, 0xcbc0, 0xc8b5, 0xc86f, 0xc661, QmdVersion::kV4, 228},
      {0x1a0, 0, Generation::kBlackwell, 0xcdc0, 0xc9b5, 0xc96f, 0xc661, QmdVersion::kV5, 228},
      {0x1b0, 2, Generation::kBlackwell, 0xcec0, 0xcab5, 0xc96f, 0xc661, QmdVersion::kV5, 100},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.arch);
    auto r = select_classes(c.arch, c.impl);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->generation, c.gen);
    EXPECT_EQ(r->compute, c.compute);
    EXPECT_EQ(r->copy, c.copy);
    EXPECT_EQ(r->gpfifo, c.gpfifo);
    EXPECT_EQ(r->usermode, c.usermode);
    EXPECT_EQ(r->qmd, c.qmd);
    EXPECT_EQ(r->smem_carveouts_kib.back(), c.max_smem_kib);
    EXPECT_TRUE(qmd_version_supported(r->compute, r->qmd));
  }
  EXPECT_TRUE(qmd_version_supported(kHopperComputeA, QmdVersion::kV3));  // clcbc0qmd.h has both
  EXPECT_FALSE(qmd_version_supported(kHopperComputeA, QmdVersion::kV5));
  EXPECT_FALSE(qmd_version_supported(kAdaComputeA, QmdVersion::kV4));
  EXPECT_FALSE(qmd_version_supported(kBlackwellComputeB, QmdVersion::kV3));
  EXPECT_EQ(generation_name(Generation::kHopper), "Hopper");
  EXPECT_EQ(class_name(kBlackwellChannelGpfifoA), "BLACKWELL_CHANNEL_GPFIFO_A (0xc96f)");
  EXPECT_EQ(class_name(0xc397), "class 0xc397");
}

TEST(NvClasses, AnUnknownArchitectureIsRefusedByName) {
  auto r = select_classes(0x160, 0);  // NV2080_CTRL_MC_ARCH_INFO_ARCHITECTURE_TU100
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "unknown NVIDIA architecture 0x160: baregrad knows Ampere (0x170), Ada (0x190), "
            "Hopper (0x180), Blackwell (0x1a0/0x1b0)");
}

}  // namespace
}  // namespace baregrad::nv
