// Field positions: each entry names the field of NVIDIA's qmd header it was written from
// (open-gpu-doc classes/compute; drivers/mock/nvgpu/README.md names the commit):
//   V03_00: NVC6C0_QMDV03_00_<name> in clc6c0qmd.h (Hopper's NVCBC0_QMDV03_00_* in clcbc0qmd.h
//           has the same positions for every field below)
//   V04_00: NVCBC0_QMDV04_00_<name> in clcbc0qmd.h
//   V05_00: NVCDC0_QMDV05_00_<name> in clcdc0qmd.h (the same in clcec0qmd.h's NVCEC0_QMDV05_00_*)
// A field is MW(hi:lo): bits hi down to lo counted over the whole little-endian structure.
#include "drivers/mock/nvgpu/qmd_decode.h"

#include <string>

#include "base/check.h"

namespace baregrad::mock {
namespace {

struct Bits {
  uint16_t hi, lo;
};
struct ReleaseBits {
  Bits enable, reduction_enable, payload64b, structure_size;
  Bits address_lower, address_upper, payload_lower, payload_upper;
};
struct Layout {
  uint32_t version;
  uint32_t bytes;
  Bits minor_version;
  Bits is_queue;  // V03_00 IS_QUEUE (must be 0)
  Bits qmd_type;  // V04_00/V05_00 QMD_TYPE
  Bits grid[3], block[3];
  Bits program_lower, program_upper;
  uint32_t program_shift;
  Bits shared_memory;
  uint32_t shared_memory_shift;
  Bits registers;
  Bits cb0_valid, cb0_lower, cb0_upper, cb0_size_shifted4;
  uint32_t cb0_shift;
  ReleaseBits release[3];
  Bits dependent_enable, dependent_action, dependent_pointer;
};

constexpr Bits kNone{0xffff, 0xffff};

// QMD_TYPE values (clcbc0qmd.h / clcdc0qmd.h): QUEUE 0 (what Mesa leaves on V04_00), GRID_CTA 2.
constexpr uint64_t kQmdTypeQueue = 0, kQmdTypeGridCta = 2;
// RELEASE*_STRUCTURE_SIZE_SEMAPHORE_{FOUR_WORDS, ONE_WORD, TWO_WORDS}.
constexpr uint64_t kFourWords = 0, kOneWord = 1, kTwoWords = 2;
constexpr uint64_t kActionQmdSchedule = 1;  // DEPENDENT_QMD0_ACTION_QMD_SCHEDULE

constexpr Layout kV3{
    .version = 3,
    .bytes = 256,
    .minor_version = {579, 576},  // QMD_VERSION
    .is_queue = {136, 136},       // IS_QUEUE
    .qmd_type = kNone,
    .grid = {{415, 384}, {431, 416}, {463, 448}},   // CTA_RASTER_WIDTH, _HEIGHT, _DEPTH
    .block = {{607, 592}, {623, 608}, {639, 624}},  // CTA_THREAD_DIMENSION0, 1, 2
    .program_lower = {1567, 1536},                  // PROGRAM_ADDRESS_LOWER
    .program_upper = {1584, 1568},                  // PROGRAM_ADDRESS_UPPER
    .program_shift = 0,
    .shared_memory = {561, 544},  // SHARED_MEMORY_SIZE
    .shared_memory_shift = 0,
    .registers = {656, 648},            // REGISTER_COUNT_V
    .cb0_valid = {640, 640},            // CONSTANT_BUFFER_VALID(0)
    .cb0_lower = {1055, 1024},          // CONSTANT_BUFFER_ADDR_LOWER(0)
    .cb0_upper = {1072, 1056},          // CONSTANT_BUFFER_ADDR_UPPER(0)
    .cb0_size_shifted4 = {1087, 1075},  // CONSTANT_BUFFER_SIZE_SHIFTED4(0)
    .cb0_shift = 0,
    // RELEASE<i>_ENABLE, _REDUCTION_ENABLE, _PAYLOAD64B, _STRUCTURE_SIZE, _ADDRESS_LOWER,
    // _ADDRESS_UPPER, _PAYLOAD_LOWER, _PAYLOAD_UPPER
    .release = {{{823, 823},
                 {826, 826},
                 {829, 829},
                 {831, 830},
                 {799, 768},
                 {807, 800},
                 {863, 832},
                 {895, 864}},
                {{951, 951},
                 {954, 954},
                 {957, 957},
                 {959, 958},
                 {927, 896},
                 {935, 928},
                 {991, 960},
                 {1023, 992}},
                {{1719, 1719},
                 {1722, 1722},
                 {1725, 1725},
                 {1727, 1726},
                 {1695, 1664},
                 {1703, 1696},
                 {1759, 1728},
                 {1791, 1760}}},
    .dependent_enable = {512, 512},   // DEPENDENT_QMD0_ENABLE
    .dependent_action = {515, 513},   // DEPENDENT_QMD0_ACTION
    .dependent_pointer = {511, 480},  // DEPENDENT_QMD0_POINTER
};

constexpr Layout kV4{
    .version = 4,
    .bytes = 384,
    .minor_version = {579, 576},  // QMD_MINOR_VERSION
    .is_queue = kNone,
    .qmd_type = {25, 23},                                 // QMD_TYPE
    .grid = {{1055, 1024}, {1071, 1056}, {1103, 1088}},   // GRID_WIDTH, _HEIGHT, _DEPTH
    .block = {{1167, 1152}, {1183, 1168}, {1199, 1184}},  // CTA_THREAD_DIMENSION0, 1, 2
    .program_lower = {1247, 1216},                        // PROGRAM_ADDRESS_LOWER
    .program_upper = {1272, 1248},                        // PROGRAM_ADDRESS_UPPER
    .program_shift = 0,
    .shared_memory = {601, 584},  // SHARED_MEMORY_SIZE
    .shared_memory_shift = 0,
    .registers = {1208, 1200},          // REGISTER_COUNT
    .cb0_valid = {416, 416},            // CONSTANT_BUFFER_VALID(0)
    .cb0_lower = {1567, 1536},          // CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6(0)
    .cb0_upper = {1586, 1568},          // CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6(0)
    .cb0_size_shifted4 = {1599, 1587},  // CONSTANT_BUFFER_SIZE_SHIFTED4(0)
    .cb0_shift = 6,
    // RELEASE_ENABLE(i), RELEASE_REDUCTION_ENABLE(i), RELEASE_PAYLOAD64B(i),
    // RELEASE_STRUCTURE_SIZE(i), RELEASE_SEMAPHORE<i>_ADDR_LOWER, _ADDR_UPPER, _PAYLOAD_LOWER,
    // _PAYLOAD_UPPER
    .release = {{{320, 320},
                 {324, 324},
                 {332, 332},
                 {322, 321},
                 {671, 640},
                 {696, 672},
                 {735, 704},
                 {767, 736}},
                {{336, 336},
                 {340, 340},
                 {348, 348},
                 {338, 337},
                 {799, 768},
                 {824, 800},
                 {863, 832},
                 {895, 864}},
                {{352, 352},
                 {356, 356},
                 {364, 364},
                 {354, 353},
                 {927, 896},
                 {952, 928},
                 {991, 960},
                 {1023, 992}}},
    .dependent_enable = {368, 368},   // DEPENDENT_QMD_ENABLE(0)
    .dependent_action = {371, 369},   // DEPENDENT_QMD_ACTION(0)
    .dependent_pointer = {479, 448},  // DEPENDENT_QMD0_POINTER
};

constexpr Layout kV5{
    .version = 5,
    .bytes = 384,
    .minor_version = {467, 464},  // QMD_MINOR_VERSION
    .is_queue = kNone,
    .qmd_type = {153, 151},                               // QMD_TYPE
    .grid = {{1279, 1248}, {1295, 1280}, {1327, 1312}},   // GRID_WIDTH, _HEIGHT, _DEPTH
    .block = {{1103, 1088}, {1119, 1104}, {1127, 1120}},  // CTA_THREAD_DIMENSION0, 1, 2
    .program_lower = {1055, 1024},                        // PROGRAM_ADDRESS_LOWER_SHIFTED4
    .program_upper = {1076, 1056},                        // PROGRAM_ADDRESS_UPPER_SHIFTED4
    .program_shift = 4,
    .shared_memory = {1162, 1152},  // SHARED_MEMORY_SIZE_SHIFTED7
    .shared_memory_shift = 7,
    .registers = {1136, 1128},          // REGISTER_COUNT
    .cb0_valid = {1856, 1856},          // CONSTANT_BUFFER_VALID(0)
    .cb0_lower = {1375, 1344},          // CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6(0)
    .cb0_upper = {1394, 1376},          // CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6(0)
    .cb0_size_shifted4 = {1407, 1395},  // CONSTANT_BUFFER_SIZE_SHIFTED4(0)
    .cb0_shift = 6,
    // As V04_00: RELEASE_ENABLE(i) ... RELEASE_SEMAPHORE<i>_PAYLOAD_UPPER.
    .release = {{{288, 288},
                 {292, 292},
                 {300, 300},
                 {290, 289},
                 {511, 480},
                 {536, 512},
                 {575, 544},
                 {607, 576}},
                {{304, 304},
                 {308, 308},
                 {316, 316},
                 {306, 305},
                 {799, 768},
                 {824, 800},
                 {863, 832},
                 {895, 864}},
                {{320, 320},
                 {324, 324},
                 {332, 332},
                 {322, 321},
                 {927, 896},
                 {952, 928},
                 {991, 960},
                 {1023, 992}}},
    .dependent_enable = {336, 336},   // DEPENDENT_QMD0_ENABLE
    .dependent_action = {339, 337},   // DEPENDENT_QMD0_ACTION
    .dependent_pointer = {415, 384},  // DEPENDENT_QMD0_POINTER
};

constexpr Bits kMajorVersionV3V4{583, 580};  // QMD_MAJOR_VERSION (V03_00, V04_00)
constexpr Bits kMajorVersionV5{471, 468};    // QMD_MAJOR_VERSION (V05_00)

// Bits hi..lo of a little-endian bit array, read one bit at a time.
uint64_t field(std::span<const uint8_t> q, Bits b) {
  CHECK(b.hi >= b.lo && b.hi - b.lo < 64 && b.hi / 8u < q.size())
      << "QMD bits " << b.hi << ":" << b.lo;
  uint64_t v = 0;
  for (int bit = b.hi; bit >= b.lo; bit--) v = v << 1 | (q[bit / 8] >> (bit % 8) & 1u);
  return v;
}

uint64_t address(std::span<const uint8_t> q, Bits lower, Bits upper, uint32_t shift) {
  return (field(q, lower) | field(q, upper) << 32) << shift;
}

const Layout* layout(uint32_t version) {
  switch (version) {
    case 3:
      return &kV3;
    case 4:
      return &kV4;
    case 5:
      return &kV5;
  }
  return nullptr;
}

Result<QmdSemaphore> decode_release(std::span<const uint8_t> q, const ReleaseBits& r, int slot) {
  std::string name = "release " + std::to_string(slot);
  if (field(q, r.reduction_enable) != 0) {
    return invalid_argument(name + " is a reduction (not modelled by the fake GPU)");
  }
  QmdSemaphore s;
  s.payload64 = field(q, r.payload64b) != 0;
  uint64_t size = field(q, r.structure_size);
  if (size == kFourWords) {
    s.timestamp = true;
  } else if ((size == kOneWord && s.payload64) || (size == kTwoWords && !s.payload64) ||
             size > kTwoWords) {
    return invalid_argument(name + ": STRUCTURE_SIZE " + std::to_string(size) +
                            " with PAYLOAD64B " + std::to_string(s.payload64 ? 1 : 0));
  }
  s.address = address(q, r.address_lower, r.address_upper, 0);
  s.payload = field(q, r.payload_lower) | (s.payload64 ? field(q, r.payload_upper) << 32 : 0);
  return s;
}

}  // namespace

uint32_t qmd_declared_version(nv::Generation g, std::span<const uint8_t> head) {
  return static_cast<uint32_t>(
      field(head, g == nv::Generation::kBlackwell ? kMajorVersionV5 : kMajorVersionV3V4));
}

bool qmd_version_runs(nv::Generation g, uint32_t version) {
  switch (g) {
    case nv::Generation::kAmpere:
    case nv::Generation::kAda:
      return version == 3;
    case nv::Generation::kHopper:
      return version == 3 || version == 4;
    case nv::Generation::kBlackwell:
      return version == 5;
  }
  return false;
}

size_t qmd_size(uint32_t version) {
  const Layout* l = layout(version);
  return l != nullptr ? l->bytes : 0;
}

Result<DecodedQmd> decode_qmd(uint32_t version, std::span<const uint8_t> q) {
  const Layout* l = layout(version);
  if (l == nullptr) return invalid_argument("QMD version " + std::to_string(version));
  CHECK_GE(q.size(), l->bytes);
  if (uint64_t minor = field(q, l->minor_version); minor != 0) {
    return invalid_argument("QMD version " + std::to_string(version) + "." + std::to_string(minor) +
                            " (the fake GPU knows " + std::to_string(version) + ".0)");
  }
  if (l->is_queue.hi != kNone.hi && field(q, l->is_queue) != 0) {
    return invalid_argument("a queue QMD (IS_QUEUE): only grids are modelled");
  }
  if (l->qmd_type.hi != kNone.hi) {
    uint64_t type = field(q, l->qmd_type);
    if (type != kQmdTypeQueue && type != kQmdTypeGridCta) {
      return invalid_argument("QMD_TYPE " + std::to_string(type) +
                              ": only GRID_CTA (and QUEUE, 0) are modelled");
    }
  }
  DecodedQmd d;
  d.version = version;
  d.program_va = address(q, l->program_lower, l->program_upper, l->program_shift);
  auto dim = [&](const Bits(&b)[3]) {
    return hcq::Dim3{static_cast<uint32_t>(field(q, b[0])), static_cast<uint32_t>(field(q, b[1])),
                     static_cast<uint32_t>(field(q, b[2]))};
  };
  d.grid = dim(l->grid);
  d.block = dim(l->block);
  d.shared_memory_bytes =
      static_cast<uint32_t>(field(q, l->shared_memory) << l->shared_memory_shift);
  d.registers = static_cast<uint32_t>(field(q, l->registers));
  d.cbank0_valid = field(q, l->cb0_valid) != 0;
  if (d.cbank0_valid) {
    d.cbank0_va = address(q, l->cb0_lower, l->cb0_upper, l->cb0_shift);
    d.cbank0_bytes = static_cast<uint32_t>(field(q, l->cb0_size_shifted4) << 4);
  }
  for (int i = 0; i < 3; i++) {
    if (field(q, l->release[i].enable) == 0) continue;
    ASSIGN_OR_RETURN(QmdSemaphore s, decode_release(q, l->release[i], i));
    d.releases.push_back(s);
  }
  if (field(q, l->dependent_enable) != 0) {
    if (uint64_t action = field(q, l->dependent_action); action != kActionQmdSchedule) {
      return invalid_argument("DEPENDENT_QMD0_ACTION " + std::to_string(action) +
                              ": only QMD_SCHEDULE (1) is modelled");
    }
    d.dependent_qmd_va = field(q, l->dependent_pointer) << 8;
  }
  return d;
}

}  // namespace baregrad::mock
