// QMD builders: the generic bit-field writer and reader, fully specified QMDs of each version
// against literal words, symbolic fields, and every refusal.
//
// The goldens are derived from the qmd headers of NVIDIA/open-gpu-doc (classes/compute/
// clc6c0qmd.h, clcbc0qmd.h, clcdc0qmd.h): each field value is placed at its MW(hi:lo) position,
// word = bit / 32. The comment of each word lists the fields that make it up, as
// NAME[hi:lo]=value with the header's names and positions. The fields are read back through
// positions spelled here from the headers, not through the driver's layout table.
#include <gtest/gtest.h>

#include <cstring>
#include <utility>
#include <vector>

#include "drivers/nv/classes.h"
#include "drivers/nv/qmd.h"

namespace baregrad::nv {
namespace {

using hcq::Value;
using WordAt = std::pair<int, uint32_t>;

GpuClasses gpu(uint32_t arch, uint32_t impl = 0) {
  auto r = select_classes(arch, impl);
  EXPECT_TRUE(r.ok()) << r.status();
  return *r;
}

// The QMD's words: `nonzero` at their indices, zero everywhere else.
std::vector<uint32_t> expand(size_t bytes, std::initializer_list<WordAt> nonzero) {
  std::vector<uint32_t> w(bytes / 4, 0);
  for (auto [i, v] : nonzero) w[i] = v;
  return w;
}
std::vector<uint32_t> words(const Qmd& q) { return {q.words().begin(), q.words().end()}; }

TEST(NvQmd, TheGenericWriterSetsBitsAcrossWords) {
  Qmd q(QmdVersion::kV3);
  EXPECT_EQ(q.size_bytes(), 256u);
  q.set({40, 24}, 0x1abcd);  // 17 bits: 0xcd << 24 in word 0, 0x1ab in word 1
  EXPECT_EQ(q.words()[0], 0xcd000000u);
  EXPECT_EQ(q.words()[1], 0x000001abu);
  EXPECT_EQ(q.get({40, 24}), 0x1abcdu);
  q.set({23, 0}, 0xffffff);  // the neighbor below is untouched and keeps its own bits
  q.set({40, 24}, 0);
  EXPECT_EQ(q.words()[0], 0x00ffffffu);
  EXPECT_EQ(q.words()[1], 0u);
  q.set({2047, 2016}, 0xdeadbeef);  // the last word of a 256-byte QMD
  EXPECT_EQ(q.get({2047, 2016}), 0xdeadbeefu);
  EXPECT_EQ(Qmd(QmdVersion::kV5).size_bytes(), 384u);
}

TEST(NvQmdDeathTest, AValueThatDoesNotFitIsABug) {
  Qmd q(QmdVersion::kV3);
  EXPECT_DEATH(q.set({431, 416}, 0x10000), "QMD field \\[431:416\\]");
  EXPECT_DEATH(q.set({2048, 2048}, 1), "outside a 256-byte QMD");
  EXPECT_DEATH(q.get({3071, 3040}), "outside a 256-byte QMD");
}

// Ampere GA10x: program 0x7f12_3456_7800 (0x1234 bytes), grid 0x10000x0x20x3, block 128x2x4,
// shared 0x2c80 -> 0x2d00 (16 KiB carveout: 16/4+1 = 5; GA10x max 100 KiB: 26), 72 registers,
// 2 barriers, local memory HIGH 0x1e8 -> 0x1f0, SASS 0x86, cb0 0x7f00_0000_1000 (0x160 bytes),
// cb3 0x7f00_0000_2040 (64 KiB), release 0 64-bit without timestamp (TWO_WORDS = 2), release 1
// 32-bit with timestamp (FOUR_WORDS = 0).
QmdParams v3_params() {
  QmdParams p;
  p.program_address = 0x7f1234567800;
  p.program_bytes = 0x1234;
  p.grid = {0x10000, 0x20, 3};
  p.block = {128, 2, 4};
  p.shared_memory_bytes = 0x2c80;
  p.registers = 72;
  p.barriers = 2;
  p.constant_buffers = {{0, 0x7f0000001000, 0x160}, {3, 0x7f0000002040, 0x10000}};
  p.local_memory_high_bytes = 0x1e8;
  p.sass_version = 0x86;
  p.releases = {{0xff12345678, 0x1122334455667788, {PayloadSize::k64, false}},
                {0x1000000010, 7, {PayloadSize::k32, true}}};
  return p;
}

TEST(NvQmd, V3FullySpecifiedMatchesTheHeaderLayout) {
  auto q = build_qmd(gpu(0x170, 2), v3_params());
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(
      words(*q),
      expand(
          256,
          {
              {4, 0x0000007f},   // SM_GLOBAL_CACHING_ENABLE[134:134]=1, QMD_GROUP_ID[133:128]=0x3f
              {5, 0x3c000000},   // INVALIDATE_TEXTURE_HEADER_CACHE[186]=1, _SAMPLER_CACHE[187]=1,
                                 // _TEXTURE_DATA_CACHE[188]=1, INVALIDATE_SHADER_DATA_CACHE[189]=1
              {8, 0x12345678},   // PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED[287:256]=0x12345678
              {11, 0x44010000},  // API_VISIBLE_CALL_LIMIT[378]=1, SAMPLER_INDEX[382]=1,
                                 // CWD_MEMBAR_TYPE[369:368]=1
              {12, 0x00010000},  // CTA_RASTER_WIDTH[415:384]=0x10000
              {13, 0x00000020},  // CTA_RASTER_HEIGHT[431:416]=0x20
              {14, 0x00000003},  // CTA_RASTER_DEPTH[463:448]=3
              {17, 0x34142d00},  // SHARED_MEMORY_SIZE[561:544]=0x2d00,
                                 // MIN_SM_CONFIG_SHARED_MEM_SIZE[567:562]=5, MAX_...[574:569]=0x1a
              {18, 0x00800030},  // QMD_MAJOR_VERSION[583:580]=3,
                                 // CTA_THREAD_DIMENSION0[607:592]=0x80
              {19, 0x00040002},  // CTA_THREAD_DIMENSION1[623:608]=2,
                                 // CTA_THREAD_DIMENSION2[639:624]=4
              {20, 0x000a4809},  // TARGET_SM_CONFIG_SHARED_MEM_SIZE[662:657]=5,
                                 // REGISTER_COUNT_V[656:648]=0x48, CONSTANT_BUFFER_VALID(0)[640]=1,
                                 // CONSTANT_BUFFER_VALID(3)[643]=1
              {23, 0x10000000},  // BARRIER_COUNT[767:763]=2
              {24, 0x12345678},  // RELEASE0_ADDRESS_LOWER[799:768]=0x12345678
              {25, 0xa08800ff},  // RELEASE0_ENABLE[823]=1, RELEASE0_STRUCTURE_SIZE[831:830]=2,
                                 // RELEASE0_MEMBAR_TYPE[819]=1, RELEASE0_PAYLOAD64B[829]=1,
                                 // RELEASE0_ADDRESS_UPPER[807:800]=0xff
              {26, 0x55667788},  // RELEASE0_PAYLOAD_LOWER[863:832]=0x55667788
              {27, 0x11223344},  // RELEASE0_PAYLOAD_UPPER[895:864]=0x11223344
              {28, 0x00000010},  // RELEASE1_ADDRESS_LOWER[927:896]=0x10
              {29, 0x00880010},  // RELEASE1_ENABLE[951]=1, RELEASE1_MEMBAR_TYPE[947]=1,
                                 // RELEASE1_ADDRESS_UPPER[935:928]=0x10
              {30, 0x00000007},  // RELEASE1_PAYLOAD_LOWER[991:960]=7
              {32, 0x00001000},  // CONSTANT_BUFFER_ADDR_LOWER(0)[1055:1024]=0x1000
              {33, 0x00b47f00},  // CONSTANT_BUFFER_ADDR_UPPER(0)[1072:1056]=0x7f00,
                                 // CONSTANT_BUFFER_SIZE_SHIFTED4(0)[1087:1075]=0x16,
                                 // CONSTANT_BUFFER_INVALIDATE(0)[1074]=1
              {38, 0x00002040},  // CONSTANT_BUFFER_ADDR_LOWER(3)[1247:1216]=0x2040
              {39, 0x80007f00},  // CONSTANT_BUFFER_ADDR_UPPER(3)[1264:1248]=0x7f00,
                                 // CONSTANT_BUFFER_SIZE_SHIFTED4(3)[1279:1267]=0x1000
              {48, 0x34567800},  // PROGRAM_ADDRESS_LOWER[1567:1536]=0x34567800
              {49, 0x00007f12},  // PROGRAM_ADDRESS_UPPER[1584:1568]=0x7f12
              {50, 0x000001f0},  // SHADER_LOCAL_MEMORY_HIGH_SIZE[1623:1600]=0x1f0
              {51, 0x8600247f},  // PROGRAM_PREFETCH_ADDR_UPPER_SHIFTED[1640:1632]=0x7f,
                                 // PROGRAM_PREFETCH_SIZE[1649:1641]=0x12,
                                 // SASS_VERSION[1663:1656]=0x86
          }));
  // Read back through header positions (NVC6C0_QMDV03_00_*).
  EXPECT_EQ(q->get({583, 580}), 3u);                           // QMD_MAJOR_VERSION
  EXPECT_EQ(q->get({415, 384}), 0x10000u);                     // CTA_RASTER_WIDTH
  EXPECT_EQ(q->get({639, 624}), 4u);                           // CTA_THREAD_DIMENSION2
  EXPECT_EQ(q->get({656, 648}), 72u);                          // REGISTER_COUNT_V
  EXPECT_EQ(q->get({1087 + 3 * 64, 1075 + 3 * 64}), 0x1000u);  // CONSTANT_BUFFER_SIZE_SHIFTED4(3)
  EXPECT_EQ(q->get({895, 864}), 0x11223344u);                  // RELEASE0_PAYLOAD_UPPER
  EXPECT_EQ(q->get({959, 958}), 0u);  // RELEASE1_STRUCTURE_SIZE: FOUR_WORDS
}

// Hopper V04_00: program 0x1_2345_6789_a000 (256 KiB: prefetch size min(0x400, 0x1ff)),
// grid at its limits 0x7fffffff x 0xffff x 0xffff, block 32x32x1, shared 0x19001 -> 0x19100
// (over 100 KiB: the 132 KiB carveout, 132/4+1 = 0x22; GH100 max 228: 0x3a), 255 registers,
// 16 barriers, local memory LOW 0x30, SASS 0x90, cb0 0x7f00_0000_1000 >> 6 = 0x1fc_0000_0040,
// cb7 0x1_0000_0000_0040 >> 6 = 0x400_0000_0001 (0x20 bytes), release 0 at 0x1_0000_0000_0008
// 64-bit with timestamp, chained to the QMD at 0xab_cdef_1200.
TEST(NvQmd, V4FullySpecifiedMatchesTheHeaderLayout) {
  QmdParams p;
  p.program_address = 0x123456789a000;
  p.program_bytes = 0x40000;
  p.grid = {0x7fffffff, 0xffff, 0xffff};
  p.block = {32, 32, 1};
  p.shared_memory_bytes = 0x19001;
  p.registers = 255;
  p.barriers = 16;
  p.constant_buffers = {{0, 0x7f0000001000, 0x160}, {7, 0x1000000000040, 0x20}};
  p.local_memory_low_bytes = 0x30;
  p.sass_version = 0x90;
  p.releases = {
      {0x1000000000008, static_cast<int64_t>(0xdeadbeefcafef00d), {PayloadSize::k64, true}}};
  auto q = build_qmd(gpu(0x180), p);
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_TRUE(qmd_set_dependent(*q, 0xabcdef1200).ok());
  EXPECT_EQ(
      words(*q),
      expand(
          384,
          {
              {0, 0x013f0000},   // QMD_TYPE[25:23]=2 (GRID_CTA), QMD_GROUP_ID[21:16]=0x3f
              {10, 0x00001009},  // RELEASE_ENABLE(0)[320]=1, RELEASE_MEMBAR_TYPE(0)[323]=1,
                                 // RELEASE_PAYLOAD64B(0)[332]=1 (STRUCTURE_SIZE(0) 0: FOUR_WORDS)
              {11, 0x00130000},  // DEPENDENT_QMD_ENABLE(0)[368]=1, DEPENDENT_QMD_ACTION(0)[371:369]
                                 // =1 (QMD_SCHEDULE), DEPENDENT_QMD_PREFETCH(0)[372]=1
              {13, 0x10000009},  // CONSTANT_BUFFER_VALID(0)[416]=1, CONSTANT_BUFFER_INVALIDATE(0)
                                 // [419]=1, CONSTANT_BUFFER_VALID(7)[444]=1
              {14, 0xabcdef12},  // DEPENDENT_QMD0_POINTER[479:448]=0xabcdef12
              {16, 0x90000030},  // SHADER_LOCAL_MEMORY_LOW_SIZE[535:512]=0x30,
                                 // SASS_VERSION[543:536]=0x90
              {17, 0x03000000},  // API_VISIBLE_CALL_LIMIT[568]=1, SAMPLER_INDEX[569]=1
              {18, 0x3d910040},  // QMD_MAJOR_VERSION[583:580]=4, SHARED_MEMORY_SIZE[601:584]=
                                 // 0x19100, INVALIDATE_TEXTURE_HEADER/SAMPLER/DATA_CACHE
                                 // [602..604]=1, INVALIDATE_SHADER_DATA_CACHE[605]=1
              {19, 0x00022ea2},  // MIN_SM_CONFIG_SHARED_MEM_SIZE[613:608]=0x22, MAX_...[619:614]
                                 // =0x3a, TARGET_...[625:620]=0x22
              {20, 0x00000008},  // RELEASE_SEMAPHORE0_ADDR_LOWER[671:640]=8
              {21, 0x00010000},  // RELEASE_SEMAPHORE0_ADDR_UPPER[696:672]=0x10000
              {22, 0xcafef00d},  // RELEASE_SEMAPHORE0_PAYLOAD_LOWER[735:704]=0xcafef00d
              {23, 0xdeadbeef},  // RELEASE_SEMAPHORE0_PAYLOAD_UPPER[767:736]=0xdeadbeef
              {32, 0x7fffffff},  // GRID_WIDTH[1055:1024]=0x7fffffff
              {33, 0x0000ffff},  // GRID_HEIGHT[1071:1056]=0xffff
              {34, 0x0000ffff},  // GRID_DEPTH[1103:1088]=0xffff
              {35, 0x00010000},  // CWD_MEMBAR_TYPE[1137:1136]=1 (L1_SYSMEMBAR)
              {36, 0x00200020},  // CTA_THREAD_DIMENSION0[1167:1152]=32, _DIMENSION1[1183:1168]=32
              {37, 0x80ff0001},  // CTA_THREAD_DIMENSION2[1199:1184]=1, REGISTER_COUNT[1208:1200]
                                 // =0xff, BARRIER_COUNT[1215:1211]=0x10
              {38, 0x6789a000},  // PROGRAM_ADDRESS_LOWER[1247:1216]=0x6789a000
              {39, 0x00012345},  // PROGRAM_ADDRESS_UPPER[1272:1248]=0x12345
              {42, 0x456789a0},  // PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED[1375:1344]=0x456789a0
              {43, 0x03fe0123},  // PROGRAM_PREFETCH_ADDR_UPPER_SHIFTED[1392:1376]=0x123,
                                 // PROGRAM_PREFETCH_SIZE[1401:1393]=0x1ff
              {48, 0x00000040},  // CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6(0)[1567:1536]=0x40
              {49, 0x00b001fc},  // CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6(0)[1586:1568]=0x1fc,
                                 // CONSTANT_BUFFER_SIZE_SHIFTED4(0)[1599:1587]=0x16
              {62, 0x00000001},  // CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6(7)[2015:1984]=1
              {63, 0x00100400},  // CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6(7)[2034:2016]=0x400,
                                 // CONSTANT_BUFFER_SIZE_SHIFTED4(7)[2047:2035]=2
          }));
  // Read back through header positions (NVCBC0_QMDV04_00_*).
  EXPECT_EQ(q->get({583, 580}), 4u);           // QMD_MAJOR_VERSION
  EXPECT_EQ(q->get({25, 23}), 2u);             // QMD_TYPE
  EXPECT_EQ(q->get({1071, 1056}), 0xffffu);    // GRID_HEIGHT
  EXPECT_EQ(q->get({601, 584}), 0x19100u);     // SHARED_MEMORY_SIZE
  EXPECT_EQ(q->get({696, 672}), 0x10000u);     // RELEASE_SEMAPHORE0_ADDR_UPPER
  EXPECT_EQ(q->get({479, 448}), 0xabcdef12u);  // DEPENDENT_QMD0_POINTER
}

// Blackwell GB20x V05_00: program 0x7f12_3456_7890 >> 4 = 0x7f1_2345_6789 (192 KiB: prefetch
// 0x1ff), grid 5x6x7, block 64x4x2, shared 0x400 (SHIFTED7: 8; 8 KiB carveout: 3; GB20x max
// 100 KiB: 0x1a), 32 registers, 1 barrier, local memory HIGH 0x100 (SHIFTED4: 0x10), SASS 0xc0,
// cb0 0x7f00_0000_1000 >> 6 = 0x1fc_0000_0040 (0x380 bytes), release 0 32-bit at 0x10_0000_0000
// (ONE_WORD = 1), release 1 64-bit with timestamp at 0x10_0000_0010.
TEST(NvQmd, V5FullySpecifiedMatchesTheHeaderLayout) {
  QmdParams p;
  p.program_address = 0x7f1234567890;
  p.program_bytes = 0x30000;
  p.grid = {5, 6, 7};
  p.block = {64, 4, 2};
  p.shared_memory_bytes = 0x400;
  p.registers = 32;
  p.constant_buffers = {{0, 0x7f0000001000, 0x380}};
  p.local_memory_high_bytes = 0x100;
  p.sass_version = 0xc0;
  p.releases = {{0x1000000000, 0x42, {PayloadSize::k32, false}},
                {0x1000000010, 0x100000002, {PayloadSize::k64, true}}};
  auto q = build_qmd(gpu(0x1b0, 2), p);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(
      words(*q),
      expand(
          384,
          {
              {4, 0x013f0000},   // QMD_TYPE[153:151]=2, QMD_GROUP_ID[149:144]=0x3f
              {9, 0x1009000b},   // RELEASE_ENABLE(0)[288]=1, RELEASE_STRUCTURE_SIZE(0)[290:289]=1,
                                 // RELEASE_MEMBAR_TYPE(0)[291]=1, RELEASE_ENABLE(1)[304]=1,
                                 // RELEASE_MEMBAR_TYPE(1)[307]=1, RELEASE_PAYLOAD64B(1)[316]=1
              {14, 0x0f5003c0},  // SASS_VERSION[455:448]=0xc0, API_VISIBLE_CALL_LIMIT[456]=1,
                                 // SAMPLER_INDEX[457]=1, QMD_MAJOR_VERSION[471:468]=5,
                                 // INVALIDATE_TEXTURE_HEADER/SAMPLER/DATA_CACHE[472..474]=1,
                                 // INVALIDATE_SHADER_DATA_CACHE[475]=1
              {16, 0x00000010},  // RELEASE_SEMAPHORE0_ADDR_UPPER[536:512]=0x10
              {17, 0x00000042},  // RELEASE_SEMAPHORE0_PAYLOAD_LOWER[575:544]=0x42
              {19, 0x00010000},  // CWD_MEMBAR_TYPE[625:624]=1
              {24, 0x00000010},  // RELEASE_SEMAPHORE1_ADDR_LOWER[799:768]=0x10
              {25, 0x00000010},  // RELEASE_SEMAPHORE1_ADDR_UPPER[824:800]=0x10
              {26, 0x00000002},  // RELEASE_SEMAPHORE1_PAYLOAD_LOWER[863:832]=2
              {27, 0x00000001},  // RELEASE_SEMAPHORE1_PAYLOAD_UPPER[895:864]=1
              {32, 0x23456789},  // PROGRAM_ADDRESS_LOWER_SHIFTED4[1055:1024]=0x23456789
              {33, 0x3fe007f1},  // PROGRAM_ADDRESS_UPPER_SHIFTED4[1076:1056]=0x7f1,
                                 // PROGRAM_PREFETCH_SIZE[1085:1077]=0x1ff
              {34, 0x00040040},  // CTA_THREAD_DIMENSION0[1103:1088]=0x40, _DIMENSION1[1119:1104]=4
              {35, 0x00022002},  // CTA_THREAD_DIMENSION2[1127:1120]=2, REGISTER_COUNT[1136:1128]
                                 // =0x20, BARRIER_COUNT[1141:1137]=1
              {36, 0x01b41808},  // SHARED_MEMORY_SIZE_SHIFTED7[1162:1152]=8, MIN_SM_CONFIG_SHARED_
                                 // MEM_SIZE[1168:1163]=3, MAX_...[1174:1169]=0x1a,
                                 // TARGET_...[1180:1175]=3
              {37, 0x00100000},  // SHADER_LOCAL_MEMORY_HIGH_SIZE_SHIFTED4[1215:1200]=0x10
              {39, 0x00000005},  // GRID_WIDTH[1279:1248]=5
              {40, 0x00000006},  // GRID_HEIGHT[1295:1280]=6
              {41, 0x00000007},  // GRID_DEPTH[1327:1312]=7
              {42, 0x00000040},  // CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6(0)[1375:1344]=0x40
              {43, 0x01c001fc},  // CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6(0)[1394:1376]=0x1fc,
                                 // CONSTANT_BUFFER_SIZE_SHIFTED4(0)[1407:1395]=0x38
              {58, 0x00000009},  // CONSTANT_BUFFER_VALID(0)[1856]=1, _INVALIDATE(0)[1859]=1
              {59, 0x12345678},  // PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED[1919:1888]=0x12345678
              {60, 0x0000007f},  // PROGRAM_PREFETCH_ADDR_UPPER_SHIFTED[1936:1920]=0x7f
          }));
  // Read back through header positions (NVCDC0_QMDV05_00_*).
  EXPECT_EQ(q->get({471, 468}), 5u);        // QMD_MAJOR_VERSION
  EXPECT_EQ(q->get({1127, 1120}), 2u);      // CTA_THREAD_DIMENSION2 (8 bits in V05_00)
  EXPECT_EQ(q->get({1162, 1152}), 8u);      // SHARED_MEMORY_SIZE_SHIFTED7
  EXPECT_EQ(q->get({290, 289}), 1u);        // RELEASE_STRUCTURE_SIZE(0): ONE_WORD
  EXPECT_EQ(q->get({1076, 1056}), 0x7f1u);  // PROGRAM_ADDRESS_UPPER_SHIFTED4
}

TEST(NvQmd, HopperAlsoBuildsItsV3Layout) {
  // clcbc0qmd.h defines NVCBC0_QMDV03_00_* at the V03_00 positions: the same words as Ampere's,
  // except the larger max carveout (228 KiB: 0x3a) in MAX_SM_CONFIG_SHARED_MEM_SIZE[574:569].
  GpuClasses h = gpu(0x180);
  h.qmd = QmdVersion::kV3;
  auto q = build_qmd(h, v3_params());
  ASSERT_TRUE(q.ok()) << q.status();
  auto a = build_qmd(gpu(0x170, 2), v3_params());
  std::vector<uint32_t> expected = words(*a);
  expected[17] = 0x74142d00;  // 0x3a << 25 | 5 << 18 | 0x2d00
  EXPECT_EQ(words(*q), expected);
}

TEST(NvQmd, SymbolicFieldsArePatchedInPlace) {
  QmdParams p = v3_params();
  p.grid = {Value::sym(0), 0x20, 3};
  p.releases = {{0xff12345678, Value::sym(1), {PayloadSize::k64, false}}};
  auto q = build_qmd(gpu(0x170, 2), p);
  ASSERT_TRUE(q.ok()) << q.status();
  std::vector<uint32_t> mem = words(*q);  // the QMD as copied to device memory
  EXPECT_EQ(mem[12], 0u);                 // CTA_RASTER_WIDTH before the patch
  EXPECT_EQ(mem[26], 0u);                 // RELEASE0_PAYLOAD_LOWER
  EXPECT_EQ(mem[27], 0u);                 // RELEASE0_PAYLOAD_UPPER
  std::vector<uint32_t> before = mem;
  EXPECT_EQ(q->patches().apply(reinterpret_cast<uint8_t*>(mem.data()),
                               std::vector<int64_t>{0x1234, 0x0000000900000008}),
            3u);
  std::vector<uint32_t> expected = before;
  expected[12] = 0x1234;  // CTA_RASTER_WIDTH[415:384]
  expected[26] = 0x8;     // RELEASE0_PAYLOAD_LOWER[863:832]
  expected[27] = 0x9;     // RELEASE0_PAYLOAD_UPPER[895:864]
  EXPECT_EQ(mem, expected);

  // A symbolic release address on V05_00: ADDR_LOWER[511:480] (word 15) takes bits 31:0 and
  // ADDR_UPPER[536:512] (word 16) bits 56:32; other bits of those words are kept.
  Qmd v5(QmdVersion::kV5);
  v5.set({543, 543}, 1);  // a bit above ADDR_UPPER in word 16
  ASSERT_TRUE(qmd_add_release(v5, {Value::sym(0), 1, {PayloadSize::k64, false}}).ok());
  std::vector<uint32_t> m5(v5.words().begin(), v5.words().end());
  EXPECT_EQ(v5.patches().apply(reinterpret_cast<uint8_t*>(m5.data()),
                               std::vector<int64_t>{0x01abcdef01234568}),
            2u);
  EXPECT_EQ(m5[15], 0x01234568u);
  EXPECT_EQ(m5[16], 0x81abcdefu);  // bit 31 (543) kept, 0x1abcdef in 24:0
  EXPECT_EQ(m5[17], 1u);           // RELEASE_SEMAPHORE0_PAYLOAD_LOWER[575:544], constant
}

TEST(NvQmd, ReleasesFillSlotsInOrderAndChainsPointAtTheNextQmd) {
  Qmd q(QmdVersion::kV4);
  for (int i = 0; i < kQmdReleases; i++) {
    ASSERT_TRUE(qmd_add_release(q, {0x1000 + 16 * i, i, {}}).ok());
  }
  EXPECT_EQ(q.get({320, 320}), 1u);       // RELEASE_ENABLE(0)
  EXPECT_EQ(q.get({336, 336}), 1u);       // RELEASE_ENABLE(1)
  EXPECT_EQ(q.get({352, 352}), 1u);       // RELEASE_ENABLE(2)
  EXPECT_EQ(q.get({927, 896}), 0x1020u);  // RELEASE_SEMAPHORE2_ADDR_LOWER
  EXPECT_EQ(q.get({354, 353}), 2u);       // RELEASE_STRUCTURE_SIZE(2): TWO_WORDS (64-bit)
  Status full = qmd_add_release(q, {0x2000, 1, {}});
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(full.message(), "QMD release semaphores: all 3 slots are taken");

  Qmd v3(QmdVersion::kV3);
  ASSERT_TRUE(qmd_set_dependent(v3, 0x12345600).ok());
  EXPECT_EQ(v3.words()[15], 0x00123456u);  // DEPENDENT_QMD0_POINTER[511:480] = va >> 8
  EXPECT_EQ(v3.words()[16], 0x00000013u);  // ENABLE[512]=1, ACTION[515:513]=1, PREFETCH[516]=1
  EXPECT_EQ(qmd_set_dependent(v3, 0x12345680).message(),
            "dependent QMD at 0x12345680: DEPENDENT_QMD0_POINTER takes a 256-byte aligned "
            "address below 2^40");
}

// ---- refusals -----------------------------------------------------------------------------

Status refusal(const GpuClasses& g, void (*edit)(QmdParams&)) {
  QmdParams p = v3_params();
  if (g.qmd != QmdVersion::kV3) p.constant_buffers = {{0, 0x7f0000001000, 0x160}};
  edit(p);
  auto q = build_qmd(g, p);
  EXPECT_FALSE(q.ok());
  return q.status();
}

TEST(NvQmd, LaunchShapesOutOfRangeAreRefused) {
  GpuClasses a = gpu(0x170, 2);
  const char* grid = " out of range: x in [1, 2147483647], y and z in [1, 65535]";
  EXPECT_EQ(refusal(a, [](QmdParams& p) { p.grid = {0, 1, 1}; }).message(),
            std::string("grid 0x1x1") + grid);
  EXPECT_EQ(refusal(a, [](QmdParams& p) { p.grid = {0x80000000, 1, 1}; }).message(),
            std::string("grid 2147483648x1x1") + grid);
  EXPECT_EQ(refusal(a, [](QmdParams& p) { p.grid = {1, 0x10000, 1}; }).message(),
            std::string("grid 1x65536x1") + grid);
  EXPECT_EQ(refusal(a, [](QmdParams& p) { p.grid = {Value::sym(2), 1, 0x10000}; }).message(),
            std::string("grid var2x1x65536") + grid);
  const char* block = " out of range: x, y in [1, 1024], z in [1, 64], at most 1024 threads";
  EXPECT_EQ(refusal(a, [](QmdParams& p) { p.block = {1025, 1, 1}; }).message(),
            std::string("block 1025x1x1") + block);
  EXPECT_EQ(refusal(a, [](QmdParams& p) { p.block = {1, 1, 65}; }).message(),
            std::string("block 1x1x65") + block);
  EXPECT_EQ(refusal(a, [](QmdParams& p) { p.block = {32, 32, 2}; }).message(),
            std::string("block 32x32x2") + block);
  EXPECT_EQ(refusal(a, [](QmdParams& p) { p.block = {0, 1, 1}; }).message(),
            std::string("block 0x1x1") + block);
}

TEST(NvQmd, ResourcesOverTheLimitsAreRefused) {
  GpuClasses a = gpu(0x170, 2);
  EXPECT_EQ(refusal(a, [](QmdParams& p) { p.registers = 256; }).message(),
            "256 registers per thread: at most 255");
  EXPECT_EQ(refusal(a, [](QmdParams& p) { p.barriers = 17; }).message(), "17 barriers: at most 16");
  EXPECT_EQ(refusal(a, [](QmdParams& p) { p.shared_memory_bytes = 100 * 1024 + 1; }).message(),
            "102401 bytes of shared memory: Ampere (AMPERE_COMPUTE_B (0xc7c0)) has at most 102400 "
            "per SM");
  // GA100 and GH100 have larger carveouts (164 and 228 KiB).
  QmdParams p = v3_params();
  p.shared_memory_bytes = 164 * 1024;
  EXPECT_TRUE(build_qmd(gpu(0x170, 0), p).ok());
  GpuClasses h = gpu(0x180);
  EXPECT_EQ(refusal(h, [](QmdParams& p) { p.shared_memory_bytes = 228 * 1024 + 1; }).message(),
            "233473 bytes of shared memory: Hopper (HOPPER_COMPUTE_A (0xcbc0)) has at most 233472 "
            "per SM");
  EXPECT_EQ(
      refusal(gpu(0x1b0, 2), [](QmdParams& p) { p.local_memory_high_bytes = 0x100000; }).message(),
      "local memory of 1048576 bytes per thread: the QMD holds at most 1048560");
  EXPECT_EQ(refusal(a, [](QmdParams& p) { p.sass_version = 0x100; }).message(),
            "SASS version 0x100");
}

TEST(NvQmd, VersionsAndAddressesTheLayoutCannotHoldAreRefused) {
  GpuClasses a = gpu(0x170, 2);
  a.qmd = QmdVersion::kV4;
  EXPECT_EQ(refusal(a, [](QmdParams&) {}).message(),
            "QMD v4 is not defined for AMPERE_COMPUTE_B (0xc7c0)");
  GpuClasses h = gpu(0x180);
  h.qmd = QmdVersion::kV5;
  EXPECT_EQ(refusal(h, [](QmdParams&) {}).message(),
            "QMD v5 is not defined for HOPPER_COMPUTE_A (0xcbc0)");

  GpuClasses v3 = gpu(0x170, 2), v4 = gpu(0x180), v5 = gpu(0x1b0, 2);
  // PROGRAM_ADDRESS_UPPER is 16:0 in V03_00 (49 bits); V05_00's address is _SHIFTED4.
  EXPECT_EQ(refusal(v3, [](QmdParams& p) { p.program_address = 1ull << 49; }).message(),
            "program at 0x2000000000000: the QMD takes a 1-byte aligned address below 2^49");
  EXPECT_EQ(refusal(v5, [](QmdParams& p) { p.program_address = 0x1008; }).message(),
            "program at 0x1008: the QMD takes a 16-byte aligned address below 2^57");
  // Constant buffers: banks 0..7 once each, _SHIFTED6 addresses 64-byte aligned, 13-bit sizes.
  EXPECT_EQ(
      refusal(v3, [](QmdParams& p) { p.constant_buffers.push_back({8, 0x1000, 16}); }).message(),
      "constant buffer 8: banks are 0..7, each given once");
  EXPECT_EQ(
      refusal(v3, [](QmdParams& p) { p.constant_buffers.push_back({3, 0x1000, 16}); }).message(),
      "constant buffer 3: banks are 0..7, each given once");
  EXPECT_EQ(refusal(v4, [](QmdParams& p) { p.constant_buffers = {{0, 0x1020, 16}}; }).message(),
            "constant buffer 0 at 0x1020: the QMD takes a 64-byte aligned address below 2^57");
  EXPECT_EQ(
      refusal(v3, [](QmdParams& p) { p.constant_buffers = {{1, 0x1000, 0x20000}}; }).message(),
      "constant buffer 1 of 131072 bytes: too large for the QMD");
  // RELEASE0_ADDRESS_UPPER is 7:0 in V03_00 (40 bits); V04_00 takes 57.
  EXPECT_EQ(refusal(v3, [](QmdParams& p) { p.releases = {{1ull << 40, 1, {}}}; }).message(),
            "release semaphore at 0x10000000000: the QMD takes a 8-byte aligned address below "
            "2^40");
  QmdParams p = v3_params();
  p.constant_buffers = {};
  p.releases = {{1ull << 40, 1, {}}};
  EXPECT_TRUE(build_qmd(v4, p).ok());
  EXPECT_EQ(refusal(v4, [](QmdParams& p) { p.releases = {{0x1004, 1, {}}}; }).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(refusal(v4, [](QmdParams& p) { p.releases.resize(4, {0x1000, 1, {}}); }).message(),
            "4 release semaphores: a QMD has 3");
}

}  // namespace
}  // namespace baregrad::nv
