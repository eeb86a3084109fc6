// QMDs (queue meta data): the launch descriptor SEND_PCAS_A points the compute engine at.
// A QMD is a little-endian bit array; NVIDIA's qmd headers name each field MW(hi:lo), bit hi
// down to bit lo counted over the whole structure. Versions: V03_00 (256 bytes: Ampere, Ada,
// and Hopper's v3 mode), V04_00 (384 bytes: Hopper), V05_00 (384 bytes: Blackwell).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "drivers/nv/classes.h"
#include "drivers/nv/methods.h"
#include "hcq/cmdstream.h"

namespace baregrad::nv {

// Bits [lo, hi] of a QMD (NVIDIA's MW(hi:lo)).
struct QmdField {
  uint16_t hi = 0xffff;
  uint16_t lo = 0xffff;

  constexpr uint32_t width() const { return hi - lo + 1u; }
  constexpr bool valid() const { return hi != 0xffff; }
  // Element i of an array field (NVIDIA's inferred arrays) with `stride` bits between elements.
  constexpr QmdField at(uint32_t i, uint32_t stride) const {
    return {static_cast<uint16_t>(hi + i * stride), static_cast<uint16_t>(lo + i * stride)};
  }
};

// An array field: element i is first.at(i, stride).
struct QmdArrayField {
  QmdField first;
  uint32_t stride = 0;
  constexpr QmdField operator[](uint32_t i) const { return first.at(i, stride); }
};

constexpr size_t kQmdMaxBytes = 384;

// Launch limits (CUDA's, as tinygrad's NVProgram checks them): make_qmd and Program::check_launch
// refuse a grid or block over them.
constexpr uint64_t kMaxGridX = 0x7fffffff;
constexpr uint64_t kMaxGridYZ = 0xffff;
constexpr uint32_t kMaxBlockXY = 1024, kMaxBlockZ = 64, kMaxBlockThreads = 1024;
constexpr int kQmdConstantBuffers = 8;
constexpr int kQmdReleases = 3;

// A zeroed QMD of one version with a generic field writer and reader. Symbolic values become
// patches whose offsets count from the QMD's first byte: after copying words() to device
// memory, patches().apply(that memory, vars) fills them in.
class Qmd {
 public:
  explicit Qmd(QmdVersion v);

  QmdVersion version() const { return version_; }
  size_t size_bytes() const;  // 256 (v3) or 384 (v4, v5)
  // Sets `f` to `v`; CHECKs that `f` lies in the QMD and `v` fits it.
  void set(QmdField f, uint64_t v);
  // The value of `f`.
  uint64_t get(QmdField f) const;
  // Bits [shift, shift + f.width()) of `v`: set now when constant, else a patch (f must lie
  // in one 32-bit word, and shift <= 32 + f.lo % 32 when shift > 0; CHECKed).
  void set_value(QmdField f, hcq::Value v, uint32_t shift = 0);

  std::span<const uint32_t> words() const { return {words_.data(), size_bytes() / 4}; }
  hcq::PatchTable& patches() { return patches_; }

 private:
  QmdVersion version_;
  std::array<uint32_t, kQmdMaxBytes / 4> words_{};
  hcq::PatchTable patches_;
};

// Where one version keeps the fields baregrad writes (qmd_layout.cc; each names its header).
struct QmdReleaseLayout {
  QmdField enable, structure_size, membar_type, payload64b;
  QmdField address_lower, address_upper, payload_lower, payload_upper;
};
struct QmdLayout {
  QmdVersion version;
  uint32_t size_bytes;
  QmdField major_version, minor_version, qmd_type, sm_global_caching_enable, qmd_group_id;
  QmdField invalidate_texture_header_cache, invalidate_texture_sampler_cache,
      invalidate_texture_data_cache, invalidate_shader_data_cache;
  QmdField api_visible_call_limit, sampler_index, cwd_membar_type;
  QmdField grid_width, grid_height, grid_depth;
  QmdField cta_thread_dimension0, cta_thread_dimension1, cta_thread_dimension2;
  QmdField program_address_lower, program_address_upper;
  uint32_t program_address_shift;  // 0, or 4 (_SHIFTED4)
  QmdField program_prefetch_addr_lower_shifted, program_prefetch_addr_upper_shifted,
      program_prefetch_size;
  QmdField shared_memory_size;
  uint32_t shared_memory_shift;  // 0, or 7 (_SHIFTED7)
  QmdField min_sm_config_shared_mem_size, max_sm_config_shared_mem_size,
      target_sm_config_shared_mem_size;
  QmdField register_count, barrier_count;
  QmdField shader_local_memory_low_size, shader_local_memory_high_size;
  uint32_t shader_local_memory_shift;  // 0, or 4 (_SHIFTED4)
  QmdField sass_version;
  QmdArrayField constant_buffer_addr_lower, constant_buffer_addr_upper,
      constant_buffer_size_shifted4, constant_buffer_valid, constant_buffer_invalidate;
  uint32_t constant_buffer_addr_shift;  // 0, or 6 (_SHIFTED6)
  std::array<QmdReleaseLayout, kQmdReleases> release;
  QmdField dependent_qmd0_pointer, dependent_qmd0_enable, dependent_qmd0_action,
      dependent_qmd0_prefetch;
};
const QmdLayout& qmd_layout(QmdVersion v);

struct QmdConstantBuffer {
  uint32_t index = 0;    // bank, < kQmdConstantBuffers
  uint64_t address = 0;  // 64-byte aligned on v4/v5 (_SHIFTED6)
  uint32_t bytes = 0;    // rounded up to 16 (_SIZE_SHIFTED4)
};

// A semaphore the QMD writes when the grid completes (the release slots of the QMD).
struct QmdRelease {
  hcq::Value address;
  hcq::Value payload;
  Release form;  // 32/64-bit payload; with a timestamp the 16-byte (four word) structure
};

struct QmdGrid {
  hcq::Value x = 1, y = 1, z = 1;  // symbolic dimensions are not range-checked
};
struct QmdBlock {
  uint32_t x = 1, y = 1, z = 1;
};

struct QmdParams {
  uint64_t program_address = 0;
  uint32_t program_bytes = 0;  // instruction prefetch: min(bytes >> 8, 0x1ff) blocks; 0: none
  QmdGrid grid;
  QmdBlock block;
  // SHARED_MEMORY_SIZE: the kernel's shared memory plus the 1 KiB the system reserves; rounded
  // up to 256. The SM carveout asked for (min = target) is the smallest that holds it, the
  // largest the GPU has is the max.
  uint32_t shared_memory_bytes = 0;
  uint32_t registers = 0;  // per thread, <= 255
  uint32_t barriers = 1;   // named barriers, <= 16
  std::vector<QmdConstantBuffer> constant_buffers;
  // Local memory per thread (rounded up to 16): LOW is the per-thread size NAK-compiled code
  // uses, HIGH what cubins (tinygrad: slm_per_thread) use.
  uint32_t local_memory_low_bytes = 0;
  uint32_t local_memory_high_bytes = 0;
  uint32_t sass_version = 0;  // e.g. 0x86, 0x90
  std::vector<QmdRelease> releases;
};

// The QMD of version gpu.qmd for a launch. Fixed fields as tinygrad writes them: QMD group
// 0x3f, texture header/sampler/data and shader data caches invalidated, API_VISIBLE_CALL_LIMIT
// NO_CHECK, SAMPLER_INDEX VIA_HEADER_INDEX, CWD_MEMBAR_TYPE L1_SYSMEMBAR, constant bank 0
// invalidated, SM global caching (v3), QMD_TYPE GRID_CTA (v4, v5). InvalidArgument for a
// version the compute class does not define, a grid or block dimension out of range, more than
// 255 registers or 16 barriers, shared memory over the GPU's largest carveout, and addresses or
// sizes a field cannot hold.
Result<Qmd> build_qmd(const GpuClasses& gpu, const QmdParams& p);

// Fills the first free release slot; ResourceExhausted when all kQmdReleases are taken.
Status qmd_add_release(Qmd& qmd, const QmdRelease& r);
// Chains `next_qmd_va` (256-aligned, below 2^40) to run when this grid completes:
// DEPENDENT_QMD0 pointer, action QMD_SCHEDULE, prefetch, enable (tinygrad's launch chaining).
Status qmd_set_dependent(Qmd& qmd, uint64_t next_qmd_va);

}  // namespace baregrad::nv
