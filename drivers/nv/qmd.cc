#include "drivers/nv/qmd.h"

#include <algorithm>
#include <string>

#include "base/align.h"
#include "base/check.h"
#include "base/format.h"

namespace baregrad::nv {
namespace {

using hcq::Value;

constexpr uint64_t mask_of(uint32_t width) { return width >= 64 ? ~0ull : (1ull << width) - 1; }

// Enumerants of the qmd headers (the fixed fields as tinygrad writes them; release forms).
constexpr uint32_t kQmdTypeGridCta = 2;              // QMD_TYPE_GRID_CTA (v4, v5)
constexpr uint32_t kQmdGroupId = 0x3f;               // QMD_GROUP_ID
constexpr uint32_t kApiVisibleCallLimitNoCheck = 1;  // API_VISIBLE_CALL_LIMIT_NO_CHECK
constexpr uint32_t kSamplerIndexViaHeaderIndex = 1;  // SAMPLER_INDEX_VIA_HEADER_INDEX
constexpr uint32_t kCwdMembarTypeL1Sysmembar = 1;    // CWD_MEMBAR_TYPE_L1_SYSMEMBAR
constexpr uint32_t kStructureSizeFourWords = 0;      // RELEASE*_STRUCTURE_SIZE_SEMAPHORE_*
constexpr uint32_t kStructureSizeOneWord = 1;
constexpr uint32_t kStructureSizeTwoWords = 2;
constexpr uint32_t kMembarTypeFeSysmembar = 1;       // RELEASE*_MEMBAR_TYPE_FE_SYSMEMBAR
constexpr uint32_t kDependentActionQmdSchedule = 1;  // DEPENDENT_QMD0_ACTION_QMD_SCHEDULE

constexpr uint32_t kMaxRegisters = 255;
constexpr uint32_t kMaxBarriers = 16;

// MIN/MAX/TARGET_SM_CONFIG_SHARED_MEM_SIZE encode a carveout of k KiB as k / 4 + 1.
constexpr uint32_t sm_config(uint32_t kib) { return kib / 4 + 1; }

// Bits an address can have when `lower` holds bits [shift, shift + 32) and `upper` the rest.
int address_bits(QmdField upper, uint32_t shift) {
  return static_cast<int>(32 + upper.width() + shift);
}

Status check_address(std::string_view what, Value addr, uint64_t align, int bits) {
  if (addr.symbolic()) return {};
  uint64_t a = static_cast<uint64_t>(addr.imm);
  if (a % align == 0 && a >> bits == 0) return {};
  return invalid_argument(std::string(what) + " at " + hex(a) + ": the QMD takes a " +
                          std::to_string(align) + "-byte aligned address below 2^" +
                          std::to_string(bits));
}

void set_address(Qmd& q, QmdField lower, QmdField upper, Value addr, uint32_t shift) {
  q.set_value(lower, addr, shift);
  q.set_value(upper, addr, 32 + shift);
}

Status check_launch(const GpuClasses& gpu, const QmdParams& p) {
  const QmdGrid& g = p.grid;
  auto bad_dim = [](Value v, uint64_t max) {
    return !v.symbolic() && (v.imm < 1 || static_cast<uint64_t>(v.imm) > max);
  };
  if (bad_dim(g.x, kMaxGridX) || bad_dim(g.y, kMaxGridYZ) || bad_dim(g.z, kMaxGridYZ)) {
    auto s = [](Value v) {
      return v.symbolic() ? "var" + std::to_string(v.var) : std::to_string(v.imm);
    };
    return invalid_argument("grid " + s(g.x) + "x" + s(g.y) + "x" + s(g.z) +
                            " out of range: x in [1, 2147483647], y and z in [1, 65535]");
  }
  const QmdBlock& b = p.block;
  uint64_t threads = uint64_t{b.x} * b.y * b.z;
  if (b.x < 1 || b.y < 1 || b.z < 1 || b.x > kMaxBlockXY || b.y > kMaxBlockXY || b.z > kMaxBlockZ ||
      threads > kMaxBlockThreads) {
    return invalid_argument("block " + std::to_string(b.x) + "x" + std::to_string(b.y) + "x" +
                            std::to_string(b.z) +
                            " out of range: x, y in [1, 1024], z in [1, 64], at most 1024 threads");
  }
  if (p.registers > kMaxRegisters) {
    return invalid_argument(std::to_string(p.registers) + " registers per thread: at most 255");
  }
  if (p.barriers > kMaxBarriers) {
    return invalid_argument(std::to_string(p.barriers) + " barriers: at most 16");
  }
  uint32_t max_kib = gpu.smem_carveouts_kib.back();
  if (p.shared_memory_bytes > max_kib * 1024u) {
    return invalid_argument(
        std::to_string(p.shared_memory_bytes) +
        " bytes of shared memory: " + std::string(generation_name(gpu.generation)) + " (" +
        class_name(gpu.compute) + ") has at most " + std::to_string(max_kib * 1024u) + " per SM");
  }
  return {};
}

}  // namespace

Qmd::Qmd(QmdVersion v) : version_(v) {}

size_t Qmd::size_bytes() const { return qmd_layout(version_).size_bytes; }

void Qmd::set(QmdField f, uint64_t v) {
  CHECK(f.valid() && f.hi >= f.lo && f.hi < size_bytes() * 8)
      << "QMD field [" << f.hi << ":" << f.lo << "] outside a " << size_bytes() << "-byte QMD";
  CHECK_LE(v, mask_of(f.width())) << "QMD field [" << f.hi << ":" << f.lo << "]";
  for (uint32_t bit = f.lo, done = 0; bit <= f.hi;) {
    uint32_t w = bit / 32, b = bit % 32;
    uint32_t n = std::min(32 - b, f.hi + 1 - bit);
    uint32_t m = static_cast<uint32_t>(mask_of(n) << b);
    words_[w] = (words_[w] & ~m) | (static_cast<uint32_t>(v >> done << b) & m);
    bit += n;
    done += n;
  }
}

uint64_t Qmd::get(QmdField f) const {
  CHECK(f.valid() && f.hi >= f.lo && f.hi < size_bytes() * 8)
      << "QMD field [" << f.hi << ":" << f.lo << "] outside a " << size_bytes() << "-byte QMD";
  uint64_t v = 0;
  for (uint32_t bit = f.lo, done = 0; bit <= f.hi;) {
    uint32_t w = bit / 32, b = bit % 32;
    uint32_t n = std::min(32 - b, f.hi + 1 - bit);
    v |= (uint64_t{words_[w]} >> b & mask_of(n)) << done;
    bit += n;
    done += n;
  }
  return v;
}

void Qmd::set_value(QmdField f, Value v, uint32_t shift) {
  if (!v.symbolic()) {
    set(f, static_cast<uint64_t>(v.imm) >> shift & mask_of(f.width()));
    return;
  }
  uint32_t w = f.lo / 32, b = f.lo % 32;
  CHECK(f.valid() && b + f.width() <= 32) << "symbolic QMD field [" << f.hi << ":" << f.lo << "]";
  uint64_t m = mask_of(f.width()) << b;
  set(f, 0);
  if (shift == 0) {
    patches_.add(w * 4, v.var, hcq::PatchTable::Width::k32, m, static_cast<int>(b));
    return;
  }
  // PatchTable only shifts left: the field is the upper half of a 64-bit patch over the word
  // before it (see PushBuffer::put).
  CHECK(w > 0 && shift <= 32 + b) << "symbolic QMD field [" << f.hi << ":" << f.lo << "] >> "
                                  << shift;
  patches_.add((w - 1) * 4, v.var, hcq::PatchTable::Width::k64, m << 32,
               static_cast<int>(32 + b - shift));
}

Result<Qmd> build_qmd(const GpuClasses& gpu, const QmdParams& p) {
  if (!qmd_version_supported(gpu.compute, gpu.qmd)) {
    return invalid_argument("QMD v" + std::to_string(static_cast<int>(gpu.qmd)) +
                            " is not defined for " + class_name(gpu.compute));
  }
  RETURN_IF_ERROR(check_launch(gpu, p));
  const QmdLayout& l = qmd_layout(gpu.qmd);
  RETURN_IF_ERROR(check_address("program", Value::of(static_cast<int64_t>(p.program_address)),
                                uint64_t{1} << l.program_address_shift,
                                address_bits(l.program_address_upper, l.program_address_shift)));
  uint32_t slm_low = static_cast<uint32_t>(round_up(p.local_memory_low_bytes, 16));
  uint32_t slm_high = static_cast<uint32_t>(round_up(p.local_memory_high_bytes, 16));
  uint64_t slm_max = mask_of(l.shader_local_memory_low_size.width()) << l.shader_local_memory_shift;
  if (slm_low > slm_max || slm_high > slm_max) {
    return invalid_argument("local memory of " + std::to_string(std::max(slm_low, slm_high)) +
                            " bytes per thread: the QMD holds at most " + std::to_string(slm_max));
  }
  if (p.sass_version > 0xff) return invalid_argument("SASS version " + hex(p.sass_version));

  Qmd q(gpu.qmd);
  q.set(l.major_version, static_cast<uint32_t>(gpu.qmd));
  q.set(l.minor_version, 0);
  if (l.qmd_type.valid()) q.set(l.qmd_type, kQmdTypeGridCta);
  if (l.sm_global_caching_enable.valid()) q.set(l.sm_global_caching_enable, 1);
  q.set(l.qmd_group_id, kQmdGroupId);
  q.set(l.invalidate_texture_header_cache, 1);
  q.set(l.invalidate_texture_sampler_cache, 1);
  q.set(l.invalidate_texture_data_cache, 1);
  q.set(l.invalidate_shader_data_cache, 1);
  q.set(l.api_visible_call_limit, kApiVisibleCallLimitNoCheck);
  q.set(l.sampler_index, kSamplerIndexViaHeaderIndex);
  q.set(l.cwd_membar_type, kCwdMembarTypeL1Sysmembar);

  q.set_value(l.grid_width, p.grid.x);
  q.set_value(l.grid_height, p.grid.y);
  q.set_value(l.grid_depth, p.grid.z);
  q.set(l.cta_thread_dimension0, p.block.x);
  q.set(l.cta_thread_dimension1, p.block.y);
  q.set(l.cta_thread_dimension2, p.block.z);

  set_address(q, l.program_address_lower, l.program_address_upper,
              Value::of(static_cast<int64_t>(p.program_address)), l.program_address_shift);
  if (p.program_bytes > 0) {
    q.set(l.program_prefetch_addr_lower_shifted, p.program_address >> 8 & 0xffffffff);
    q.set(l.program_prefetch_addr_upper_shifted, p.program_address >> 40);
    q.set(l.program_prefetch_size, std::min<uint32_t>(p.program_bytes >> 8, 0x1ff));
  }

  uint32_t smem = static_cast<uint32_t>(round_up(p.shared_memory_bytes, 256));
  q.set(l.shared_memory_size, smem >> l.shared_memory_shift);
  auto fits = [&](uint16_t kib) { return kib * 1024u >= smem; };
  const auto& cv = gpu.smem_carveouts_kib;
  uint32_t cfg = sm_config(*std::find_if(cv.begin(), cv.end(), fits));
  q.set(l.min_sm_config_shared_mem_size, cfg);
  q.set(l.target_sm_config_shared_mem_size, cfg);
  q.set(l.max_sm_config_shared_mem_size, sm_config(cv.back()));

  q.set(l.register_count, p.registers);
  q.set(l.barrier_count, p.barriers);
  q.set(l.shader_local_memory_low_size, slm_low >> l.shader_local_memory_shift);
  q.set(l.shader_local_memory_high_size, slm_high >> l.shader_local_memory_shift);
  q.set(l.sass_version, p.sass_version);

  uint32_t seen = 0;
  for (const QmdConstantBuffer& cb : p.constant_buffers) {
    if (cb.index >= kQmdConstantBuffers || (seen >> cb.index & 1)) {
      return invalid_argument("constant buffer " + std::to_string(cb.index) +
                              ": banks are 0..7, each given once");
    }
    seen |= 1u << cb.index;
    uint32_t shift = l.constant_buffer_addr_shift;
    RETURN_IF_ERROR(check_address("constant buffer " + std::to_string(cb.index),
                                  Value::of(static_cast<int64_t>(cb.address)), uint64_t{1} << shift,
                                  address_bits(l.constant_buffer_addr_upper.first, shift)));
    uint64_t size16 = round_up(cb.bytes, 16) >> 4;
    if (size16 > mask_of(l.constant_buffer_size_shifted4.first.width())) {
      return invalid_argument("constant buffer " + std::to_string(cb.index) + " of " +
                              std::to_string(cb.bytes) + " bytes: too large for the QMD");
    }
    set_address(q, l.constant_buffer_addr_lower[cb.index], l.constant_buffer_addr_upper[cb.index],
                Value::of(static_cast<int64_t>(cb.address)), shift);
    q.set(l.constant_buffer_size_shifted4[cb.index], size16);
    q.set(l.constant_buffer_valid[cb.index], 1);
    if (cb.index == 0) q.set(l.constant_buffer_invalidate[0], 1);
  }
  if (p.releases.size() > kQmdReleases) {
    return invalid_argument(std::to_string(p.releases.size()) + " release semaphores: a QMD has " +
                            std::to_string(kQmdReleases));
  }
  for (const QmdRelease& r : p.releases) RETURN_IF_ERROR(qmd_add_release(q, r));
  return q;
}

Status qmd_add_release(Qmd& qmd, const QmdRelease& r) {
  const QmdLayout& l = qmd_layout(qmd.version());
  for (const QmdReleaseLayout& s : l.release) {
    if (qmd.get(s.enable) != 0) continue;
    bool b64 = r.form.size == PayloadSize::k64;
    RETURN_IF_ERROR(check_address("release semaphore", r.address, b64 ? 8 : 4,
                                  address_bits(s.address_upper, 0)));
    qmd.set(s.enable, 1);
    qmd.set(s.structure_size, r.form.timestamp ? kStructureSizeFourWords
                              : b64            ? kStructureSizeTwoWords
                                               : kStructureSizeOneWord);
    qmd.set(s.membar_type, kMembarTypeFeSysmembar);
    qmd.set(s.payload64b, b64 ? 1 : 0);
    set_address(qmd, s.address_lower, s.address_upper, r.address, 0);
    qmd.set_value(s.payload_lower, r.payload, 0);
    qmd.set_value(s.payload_upper, r.payload, 32);
    return {};
  }
  return resource_exhausted("QMD release semaphores: all " + std::to_string(kQmdReleases) +
                            " slots are taken");
}

Status qmd_set_dependent(Qmd& qmd, uint64_t next_qmd_va) {
  if (next_qmd_va % 256 != 0 || next_qmd_va >> 40 != 0) {
    return invalid_argument("dependent QMD at " + hex(next_qmd_va) +
                            ": DEPENDENT_QMD0_POINTER takes a 256-byte aligned address below 2^40");
  }
  const QmdLayout& l = qmd_layout(qmd.version());
  qmd.set(l.dependent_qmd0_pointer, next_qmd_va >> 8);
  qmd.set(l.dependent_qmd0_action, kDependentActionQmdSchedule);
  qmd.set(l.dependent_qmd0_prefetch, 1);
  qmd.set(l.dependent_qmd0_enable, 1);
  return {};
}

}  // namespace baregrad::nv
