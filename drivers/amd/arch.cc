#include "drivers/amd/arch.h"

#include <array>

namespace baregrad::amd {
namespace {

// GC register segment 0 bases (the BASE_IDX 0 aperture, in dwords).
// Source: Linux drivers/gpu/drm/amd/include/vega10_ip_offset.h and renoir_ip_offset.h
// (GC_BASE = 0x00002000, 0x0000A000, ...) for gfx9; navi10_ip_offset.h and vangogh_ip_offset.h
// (GC_BASE = 0x00001260, 0x0000A000, ...) for gfx10+. tinygrad's KFD path uses the same pair
// (autogen/am/vega_offsets.py, navi_offsets.py) for gfx942, gfx11 and gfx12.
// NOTE: on real devices the bases come from IP discovery; these two values are not re-read.
constexpr uint32_t kGfx9GcSeg0 = 0x2000;
constexpr uint32_t kGfx10GcSeg0 = 0x1260;

// Source: Linux drivers/gpu/drm/amd/include/asic_reg/gc/gc_9_4_2_offset.h (read directly) and
// gc_9_4_3_offset.h (through tinygrad autogen/am/regs.py, generated from it): regCOMPUTE_*,
// all BASE_IDX 0. The gfx9 SH layout is identical in both.
constexpr ComputeRegs gfx9_regs() {
  constexpr uint32_t b = kGfx9GcSeg0;
  return {
      .compute_start_x = b + 0x0e04,
      .compute_num_thread_x = b + 0x0e07,
      .compute_pgm_lo = b + 0x0e0c,
      .compute_pgm_hi = b + 0x0e0d,
      .compute_dispatch_scratch_base_lo = b + 0x0e10,
      .compute_dispatch_scratch_base_hi = b + 0x0e11,
      .compute_pgm_rsrc1 = b + 0x0e12,
      .compute_pgm_rsrc2 = b + 0x0e13,
      .compute_resource_limits = b + 0x0e15,
      .compute_tmpring_size = b + 0x0e18,
      .compute_restart_x = b + 0x0e1b,
      .compute_pgm_rsrc3 = b + 0x0e2d,
      .compute_user_data_0 = b + 0x0e40,
  };
}

// Source: Linux asic_reg/gc/gc_11_0_0_offset.h and gc_12_0_0_offset.h (through tinygrad
// autogen/am/regs.py, generated from them): regCOMPUTE_*, BASE_IDX 0; the same in both.
// Only COMPUTE_PGM_RSRC3 moved against gfx9 (absolute 0x2e28, not 0x2e2d).
constexpr ComputeRegs gfx10_regs() {
  constexpr uint32_t b = kGfx10GcSeg0;
  return {
      .compute_start_x = b + 0x1ba4,
      .compute_num_thread_x = b + 0x1ba7,
      .compute_pgm_lo = b + 0x1bac,
      .compute_pgm_hi = b + 0x1bad,
      .compute_dispatch_scratch_base_lo = b + 0x1bb0,
      .compute_dispatch_scratch_base_hi = b + 0x1bb1,
      .compute_pgm_rsrc1 = b + 0x1bb2,
      .compute_pgm_rsrc2 = b + 0x1bb3,
      .compute_resource_limits = b + 0x1bb5,
      .compute_tmpring_size = b + 0x1bb8,
      .compute_restart_x = b + 0x1bbb,
      .compute_pgm_rsrc3 = b + 0x1bc8,
      .compute_user_data_0 = b + 0x1be0,
  };
}

// gfx_target_version: Linux drivers/gpu/drm/amd/amdkfd/kfd_device.c, kgd2kfd_probe(): GC 9.4.2
// -> 90010, GC 9.4.3 rev >= 1 -> 90402 (90400/90401 are pre-production gfx940/gfx941, not
// supported), GC 11.0.0 -> 110000, GC 12.0.1 -> 120001.
// Wave sizes and LDS: LLVM AMDGPU (gfx9 is wave64 only; gfx10+ default wave32, wave64 allowed;
// addressable LDS 65536 bytes for every GCN/RDNA target but gfx950/gfx1250).
// PM4 family, cache control, XCCs, scratch alignment: tinygrad runtime/ops_amd.py (pm4_soc15 vs
// pm4_nv by target[0] == 9; AQL when num_xcc > 1; mem_alignment_size 1024 on gfx9, else 256).
// Architected flat scratch: LLVM AMDGPUUsage (FeatureArchitectedFlatScratch: gfx940+, gfx11+);
// COMPUTE_TMPRING_SIZE (WAVES 11:0, WAVESIZE from bit 12: 13 bits gfx9, 15 gfx11, 18 gfx12):
// tinygrad runtime/autogen/hsa.py union_COMPUTE_TMPRING_SIZE{,_GFX11,_GFX12}_bitfields.
// WAIT_REG_MEM64 (0x93) is defined in nvd.h and absent from soc15d.h.
// NOTE: AMD's MEC packet headers (aqlprofile gfxip) also describe a WAIT_REG_MEM64 for MEC
// firmware; its support on gfx9 MEC is unverified, so gfx9 rows leave it off.
// SDMA IP: Linux sdma_v4_4_2.c (gfx942), sdma_v6_0.c (sdma_6_0_0.bin, gfx1100), sdma_v7_0.c
// (sdma_7_0_1.bin; includes sdma_v6_0_0_pkt_open.h). NOTE: gfx90a's SDMA 4.4.0 is taken from
// the Aldebaran IP list by name, not re-read.
constexpr std::array<ArchInfo, 4> kArchs = {{
    {"gfx90a", 90010, 9, 4, 2, 64, false, true, 65536, Pm4Family::kSoc15,
     CacheControl::kCpCoherCntl, false, SdmaVersion::k4, 4, false, 1024, gfx9_regs(), false, 13},
    {"gfx942", 90402, 9, 4, 3, 64, false, true, 65536, Pm4Family::kSoc15,
     CacheControl::kCpCoherCntl, false, SdmaVersion::k4, 4, true, 1024, gfx9_regs(), true, 13},
    {"gfx1100", 110000, 11, 0, 0, 32, true, true, 65536, Pm4Family::kNv, CacheControl::kGcrCntl,
     true, SdmaVersion::k6, 6, false, 256, gfx10_regs(), true, 15},
    {"gfx1201", 120001, 12, 0, 1, 32, true, true, 65536, Pm4Family::kNv, CacheControl::kGcrCntl,
     true, SdmaVersion::k6, 7, false, 256, gfx10_regs(), true, 18},
}};

std::string supported_list() {
  std::string s;
  for (const ArchInfo& a : kArchs) s += (s.empty() ? "" : ", ") + std::string(a.name);
  return s;
}

Status unsupported(const std::string& what) {
  return invalid_argument("[amd] unsupported gfx target " + what +
                          " (supported: " + supported_list() + ")");
}

}  // namespace

std::span<const ArchInfo> supported_archs() { return kArchs; }

std::string gfx_name(uint32_t v) {
  static constexpr char kHex[] = "0123456789abcdef";
  uint32_t minor = v / 100 % 100, stepping = v % 100;
  std::string name = "gfx" + std::to_string(v / 10000);
  if (minor > 15 || stepping > 15)
    return name + "." + std::to_string(minor) + "." + std::to_string(stepping);
  return name + kHex[minor] + kHex[stepping];
}

Result<const ArchInfo*> arch_for_target_version(uint32_t gfx_target_version) {
  for (const ArchInfo& a : kArchs) {
    if (a.gfx_target_version == gfx_target_version) return &a;
  }
  return unsupported(gfx_name(gfx_target_version));
}

Result<const ArchInfo*> arch_for_name(std::string_view name) {
  for (const ArchInfo& a : kArchs) {
    if (a.name == name) return &a;
  }
  return unsupported(std::string(name));
}

}  // namespace baregrad::amd
