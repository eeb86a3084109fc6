// Command streams, symbolic patches, and the CPU device's packet encoders word for word.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "base/options.h"
#include "drivers/cpu/packets.h"
#include "hcq/cmdstream.h"
#include "hcq/hcq.h"

namespace baregrad::hcq {
namespace {

using Words = std::vector<uint32_t>;

Words words(const CmdStream& cs) { return Words(cs.words().begin(), cs.words().end()); }

// The no-progress deadline of every wait is HANG_TIMEOUT_MS, at least 100 ms.
TEST(HcqTimeout, DefaultTimeoutFollowsTheOption) {
  EXPECT_EQ(default_timeout(), std::chrono::milliseconds(30000));
  set_option_for_test("HANG_TIMEOUT_MS", "1500");
  EXPECT_EQ(default_timeout(), std::chrono::milliseconds(1500));
  set_option_for_test("HANG_TIMEOUT_MS", "0");
  EXPECT_EQ(default_timeout(), std::chrono::milliseconds(100));
  set_option_for_test("HANG_TIMEOUT_MS", "");
  EXPECT_EQ(default_timeout(), std::chrono::milliseconds(30000));
}

TEST(HcqCmdStream, EmitsWordsLowHalfFirst) {
  CmdStream cs("test", 16);
  cs.emit(7).emit64(0x1122334455667788ull).emit_value(Value::of(-2));
  EXPECT_EQ(words(cs), (Words{7, 0x55667788, 0x11223344, 0xfffffffe, 0xffffffff}));
  auto r = cs.reserve(2);
  r[0] = 9;
  r[1] = 10;
  cs.set(0, 8);
  cs.set64(3, 0xaabbccdd00000001ull);
  EXPECT_EQ(words(cs), (Words{8, 0x55667788, 0x11223344, 1, 0xaabbccdd, 9, 10}));
}

TEST(HcqCmdStreamDeathTest, OverrunFailsAtTheEmitSite) {
  CmdStream cs("ring of test", 3);
  cs.emit(1).emit(2);
  EXPECT_DEATH(cs.emit64(3), "ring of test: 2 more words do not fit \\(2 of 3 used\\)");
  EXPECT_DEATH(cs.set(5, 0), "set of word 5 past the end");
}

TEST(HcqCmdStream, SymbolicValuesArePatchedOnlyWhenTheyChange) {
  CmdStream cs("test", 16);
  cs.emit(1).emit_value(Value::sym(1)).emit_value(Value::of(5)).emit_value(Value::sym(0));
  EXPECT_EQ(words(cs), (Words{1, CmdStream::kPlaceholder, CmdStream::kPlaceholder, 5, 0,
                              CmdStream::kPlaceholder, CmdStream::kPlaceholder}));
  std::vector<int64_t> vars{0x100000002, 3};
  EXPECT_EQ(cs.apply(vars), 2u);
  EXPECT_EQ(words(cs), (Words{1, 3, 0, 5, 0, 2, 1}));
  EXPECT_EQ(cs.apply(vars), 0u);  // nothing changed
  vars[1] = -1;
  EXPECT_EQ(cs.apply(vars), 1u);
  EXPECT_EQ(words(cs), (Words{1, 0xffffffff, 0xffffffff, 5, 0, 2, 1}));
}

TEST(HcqCmdStream, ReboundStreamsKeepTheirPatches) {
  CmdStream cs("test", 8);
  cs.emit(4).emit_value(Value::sym(0));
  std::vector<uint32_t> device(8, 0);
  cs.apply(std::vector<int64_t>{6});
  cs.rebind(device);
  EXPECT_EQ(device[0], 4u);
  EXPECT_EQ(device[1], 6u);
  EXPECT_EQ(cs.apply(std::vector<int64_t>{9}), 1u);
  EXPECT_EQ(device[1], 9u);  // patched in the new storage
  EXPECT_EQ(cs.capacity(), 8u);
}

TEST(HcqPatchTable, MaskedPatchesReplaceOnlyTheirBits) {
  std::vector<uint8_t> mem(16, 0xff);
  PatchTable t;
  t.add(0, 0, PatchTable::Width::k32, 0x0000fff0, 4);  // a 12-bit field at bit 4
  t.add(8, 1, PatchTable::Width::k64);
  EXPECT_EQ(t.apply(mem.data(), std::vector<int64_t>{0xabc, 42}), 2u);
  uint32_t w;
  std::memcpy(&w, mem.data(), 4);
  EXPECT_EQ(w, 0xffffabcfu);
  uint64_t q;
  std::memcpy(&q, mem.data() + 8, 8);
  EXPECT_EQ(q, 42u);
  t.invalidate();
  EXPECT_EQ(t.apply(mem.data(), std::vector<int64_t>{0xabc, 42}), 2u);  // all again
}

// An addend is added before the shift and mask: a count-minus-one field, and Word::minus_one on
// a constant and on a symbolic value (also shifted: bits 8.. of v - 1).
TEST(HcqPatchTable, AddendsApplyBeforeTheShiftAndMask) {
  std::vector<uint8_t> mem(8, 0);
  PatchTable t;
  t.add(0, 0, PatchTable::Width::k32, 0x003fffff, 0, -1);
  t.apply(mem.data(), std::vector<int64_t>{4096});
  uint32_t w;
  std::memcpy(&w, mem.data(), 4);
  EXPECT_EQ(w, 4095u);
  CmdStream cs("t", 8);
  cs.reserve(3);
  cs.put(0, Word::minus_one(Value::of(1)));
  cs.put(1, Word::minus_one(Value::sym(0)));
  cs.put(2, Word::lo(Value::sym(0)));
  EXPECT_EQ(cs.words()[0], 0u);
  EXPECT_EQ(cs.words()[1], CmdStream::kPlaceholder);
  cs.apply(std::vector<int64_t>{0x100000000});
  EXPECT_EQ(cs.words()[1], 0xffffffffu) << "the low word of 2^32 - 1";
  EXPECT_EQ(cs.words()[2], 0u);
}

TEST(HcqPatchTableDeathTest, AVariableOutOfRangeIsABug) {
  std::vector<uint8_t> mem(8, 0);
  PatchTable t;
  t.add(0, 3, PatchTable::Width::k64);
  EXPECT_DEATH(t.apply(mem.data(), std::vector<int64_t>{1}), "uses variable 3 of 1");
}

// The CPU device's packets, word for word.
TEST(HcqCpuPackets, EncodersWriteTheDocumentedWords) {
  using namespace cpu;
  CmdStream cs("test", 64);
  emit_wait(cs, Value::of(0x1000), Value::of(5));
  emit_signal(cs, Value::of(0x2000), Value::sym(0));
  emit_timestamp(cs, Value::of(0x3000));
  emit_barrier(cs);
  emit_exec(cs, 0xdeadbeef0, Value::of(0x4000), Dim3{7, 1, 1}, Dim3{});
  emit_copy(cs, Value::of(0x5000), Value::of(0x6000), Value::of(0x100000001));
  emit_indirect(cs, 0x7000, 12);
  cs.apply(std::vector<int64_t>{9});
  EXPECT_EQ(words(cs), (Words{
                           0x01000004, 0x1000,     0,   5,      0,  // wait
                           0x02000004, 0x2000,     0,   9,      0,  // signal (patched)
                           0x03000002, 0x3000,     0,               // timestamp
                           0x04000000,                              // barrier
                           0x0500000a, 0xeadbeef0, 0xd, 0x4000, 0, 7, 1, 1, 1, 1, 1,  // exec
                           0x06000006, 0x5000,     0,   0x6000, 0, 1, 1,              // copy
                           0x07000004, 0x7000,     0,   12,     0,                    // indirect
                       }));
  EXPECT_EQ(opcode_of(0x0500000a), Opcode::kExec);
  EXPECT_EQ(payload_of(0x0500000a), 10u);
}

}  // namespace
}  // namespace baregrad::hcq
