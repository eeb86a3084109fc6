// Per-architecture data for the AMD backend: what differs between gfx90a, gfx942, gfx1100 and
// gfx1201 is a row of this table, never a branch on a target name elsewhere.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"

namespace baregrad::amd {

// Which PM4 definitions the CP firmware follows: soc15d.h (gfx9) or nvd.h (gfx10+).
enum class Pm4Family : uint8_t { kSoc15, kNv };

// How ACQUIRE_MEM / RELEASE_MEM name the caches: CP_COHER_CNTL and EOP_TC_* action bits (gfx9), or
// GCR_CNTL / GCR_* (gfx10+).
enum class CacheControl : uint8_t { kCpCoherCntl, kGcrCntl };

// The SDMA packet layout (vega10_sdma_pkt_open.h = 4, navi10_sdma_pkt_open.h = 5,
// sdma_v6_0_0_pkt_open.h = 6). SDMA IP 7.x (gfx12) uses the 6.0 layout.
enum class SdmaVersion : uint8_t { k4 = 4, k5 = 5, k6 = 6 };

// Largest byte count one SDMA COPY_LINEAR packet moves: 2^(width of its COUNT field), the field
// holding bytes - 1.
constexpr uint64_t copy_linear_max_bytes(SdmaVersion v) {
  // Source: Linux drivers/gpu/drm/amd/amdgpu/{vega10,navi10}_sdma_pkt_open.h and
  // sdma_v6_0_0_pkt_open.h, SDMA_PKT_COPY_LINEAR_COUNT_count_mask: 0x003FFFFF (22 bits) in the
  // 4 and 5 layouts, 0x3FFFFFFF (30 bits) in the 6 layout.
  // NOTE: tinygrad uses 1 GiB for every SDMA >= 5; the navi10 header's field is 22 bits, so SDMA
  // 5 keeps 4 MiB here. Linux's own copy path still splits at 4 MiB on SDMA 6/7.
  return v == SdmaVersion::k6 ? 1ull << 30 : 1ull << 22;
}

// Compute SH registers as absolute register dword addresses (GC segment 0 base + the offset in
// gc_*_offset.h, BASE_IDX 0). SET_SH_REG carries address - PACKET3_SET_SH_REG_START (0x2c00).
struct ComputeRegs {
  uint32_t compute_start_x;  // then _Y, _Z, COMPUTE_NUM_THREAD_X, _Y, _Z
  uint32_t compute_num_thread_x;
  uint32_t compute_pgm_lo;  // then COMPUTE_PGM_HI
  uint32_t compute_pgm_hi;
  uint32_t compute_dispatch_scratch_base_lo;  // then _HI
  uint32_t compute_dispatch_scratch_base_hi;
  uint32_t compute_pgm_rsrc1;  // then COMPUTE_PGM_RSRC2
  uint32_t compute_pgm_rsrc2;
  uint32_t compute_resource_limits;
  uint32_t compute_tmpring_size;
  uint32_t compute_restart_x;  // then _Y, _Z
  uint32_t compute_pgm_rsrc3;
  uint32_t compute_user_data_0;  // then _1 .. _15
};

struct ArchInfo {
  std::string_view name;        // LLVM processor name: "gfx90a"
  uint32_t gfx_target_version;  // what KFD topology reports: major*10000 + minor*100 + stepping
  uint8_t gc_major, gc_minor, gc_revision;  // GC IP version (ip_discovery)
  uint32_t default_wave_size;               // 64 on gfx9, 32 on gfx10+
  bool supports_wave32;
  bool supports_wave64;
  uint32_t lds_bytes_per_workgroup;
  Pm4Family pm4;
  CacheControl cache_control;
  bool has_wait_reg_mem64;       // PACKET3_WAIT_REG_MEM64 in this family's PM4 header
  SdmaVersion sdma;              // packet layout
  uint8_t sdma_ip_major;         // the SDMA engine's IP major version
  bool multi_xcc;                // may have more than one XCC (KFD num_xcc says how many)
  uint32_t scratch_align_bytes;  // per-wave scratch granularity (COMPUTE_TMPRING_SIZE.WAVESIZE)
  ComputeRegs regs;
  // Scratch: kernels address it through COMPUTE_DISPATCH_SCRATCH_BASE ("architected flat
  // scratch", gfx940+ and gfx11+) rather than a private segment buffer V# in user SGPRs (gfx90a).
  bool architected_flat_scratch;
  uint32_t tmpring_wavesize_bits;  // width of COMPUTE_TMPRING_SIZE.WAVESIZE (bits 12 and up)
};

// The four supported architectures, in the order of the table.
std::span<const ArchInfo> supported_archs();
// The architecture KFD reports as `gfx_target_version`; InvalidArgument naming the target and
// the supported ones otherwise.
Result<const ArchInfo*> arch_for_target_version(uint32_t gfx_target_version);
// The architecture named `name` ("gfx1100"); InvalidArgument naming the supported ones otherwise.
Result<const ArchInfo*> arch_for_name(std::string_view name);
// "gfx" + major (decimal) + minor and stepping (one hex digit each): 90010 -> "gfx90a"; a
// minor or stepping over 15 prints dotted ("gfx9.16.0").
std::string gfx_name(uint32_t gfx_target_version);

}  // namespace baregrad::amd
