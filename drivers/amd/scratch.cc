#include "drivers/amd/scratch.h"

#include <algorithm>

namespace baregrad::amd {
namespace {

constexpr uint64_t kLanes = 64;  // tinygrad sizes every wave as wave64
constexpr uint32_t kWavesMask = 0xfff;
constexpr uint32_t kWaveSizeShift = 12;

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

}  // namespace

Result<ScratchLayout> scratch_layout(const ArchInfo& arch,
                                     const KfdNodeProperties& p,
                                     uint32_t private_segment_size) {
  uint32_t xccs = std::max(1u, p.num_xcc);
  uint64_t cus = p.simd_per_cu ? p.simd_count / p.simd_per_cu / xccs : 0;
  uint64_t engines = p.simd_arrays_per_engine ? p.array_count / p.simd_arrays_per_engine / xccs : 0;
  if (cus == 0 || p.max_slots_scratch_cu == 0 || engines == 0)
    return failed_precondition(
        "AMD scratch: the KFD topology gives no CUs, shader engines or scratch slots "
        "(simd_count " +
        std::to_string(p.simd_count) + ", simd_per_cu " + std::to_string(p.simd_per_cu) +
        ", max_slots_scratch_cu " + std::to_string(p.max_slots_scratch_cu) + ")");
  uint64_t align = arch.scratch_align_bytes;
  ScratchLayout s;
  s.bytes_per_lane =
      static_cast<uint32_t>(ceil_div(private_segment_size, align / kLanes) * (align / kLanes));
  uint64_t per_xcc = uint64_t{s.bytes_per_lane} * kLanes * p.max_slots_scratch_cu * cus;
  s.bytes = per_xcc * xccs;
  uint64_t wave_size = ceil_div(kLanes * s.bytes_per_lane, align);
  if (wave_size >= (uint64_t{1} << arch.tmpring_wavesize_bits))
    return failed_precondition("AMD scratch: " + std::to_string(private_segment_size) +
                               " bytes per work-item exceed what COMPUTE_TMPRING_SIZE.WAVESIZE "
                               "holds on " +
                               std::string(arch.name));
  // Waves the buffer holds at once; gfx10+ counts them per shader engine.
  uint64_t waves = per_xcc / (wave_size * align) / (arch.gc_major == 9 ? 1 : engines);
  waves = std::min({waves, cus * p.max_slots_scratch_cu * xccs, uint64_t{kWavesMask}});
  s.tmpring_size = static_cast<uint32_t>(waves | wave_size << kWaveSizeShift);
  return s;
}

void private_segment_buffer(uint64_t va, uint32_t out[4]) {
  out[0] = static_cast<uint32_t>(va);
  out[1] = static_cast<uint32_t>(va >> 32) | 1u << 31;  // SWIZZLE_ENABLE
  out[2] = 0xffffffff;                                  // NUM_RECORDS
  out[3] = 0x20c14000;
}

}  // namespace baregrad::amd
