#include "drivers/nv/rm_abi_fault.h"

#include <iterator>
#include <string_view>
#include <tuple>
#include <utility>

#include "base/format.h"
#include "drivers/nv/classes.h"
#include "drivers/nv/rm_abi.h"

namespace baregrad::nv {

std::string rc_error_text(uint32_t code) {
  static constexpr std::tuple<uint32_t, std::string_view, std::string_view> kCodes[] = {
#define BG_NV_RC_ENTRY(name, value, meaning) {value, #name, meaning},
      BG_NV_RC_ERRORS(BG_NV_RC_ENTRY)
#undef BG_NV_RC_ENTRY
  };
  for (const auto& [value, name, meaning] : kCodes) {
    if (value == code) {
      return std::string(name) + " (" + std::to_string(code) + "): " + std::string(meaning);
    }
  }
  return "RC error " + std::to_string(code);
}

std::string nv2080_engine_name(uint32_t engine) {
  if (engine == kNv2080EngineTypeGraphics) return "GR0";
  if (engine >= kNv2080EngineTypeCopy0 && engine < kNv2080EngineTypeCopy0 + 10) {
    return "COPY" + std::to_string(engine - kNv2080EngineTypeCopy0);
  }
  if (engine == kNv2080EngineTypeHost) return "HOST";
  return "engine " + hex(engine);
}

std::string mmu_fault_type_name(uint32_t type) {
  // NV_PFAULT_FAULT_TYPE_* 0..15 (Volta's dev_fault.h; Blackwell names 0xb CC_VIOLATION).
  static constexpr std::string_view kNames[] = {"PDE",
                                                "PDE_SIZE",
                                                "PTE",
                                                "VA_LIMIT_VIOLATION",
                                                "UNBOUND_INST_BLOCK",
                                                "PRIV_VIOLATION",
                                                "RO_VIOLATION",
                                                "WO_VIOLATION",
                                                "PITCH_MASK_VIOLATION",
                                                "WORK_CREATION",
                                                "UNSUPPORTED_APERTURE",
                                                "COMPRESSION_FAILURE/CC_VIOLATION",
                                                "UNSUPPORTED_KIND",
                                                "REGION_VIOLATION",
                                                "POISONED",
                                                "ATOMIC_VIOLATION"};
  if (type < std::size(kNames)) return std::string(kNames[type]);
  return "fault type " + hex(type);
}

std::string mmu_access_type_name(uint32_t type) {
  // NV_PFAULT_ACCESS_TYPE_VIRT_* 0..4 and _PHYS_* 8..11.
  static constexpr std::pair<uint32_t, std::string_view> kNames[] = {
      {0x0, "VIRT_READ"},     {0x1, "VIRT_WRITE"},       {0x2, "VIRT_ATOMIC"},
      {0x3, "VIRT_PREFETCH"}, {0x4, "VIRT_ATOMIC_WEAK"}, {0x8, "PHYS_READ"},
      {0x9, "PHYS_WRITE"},    {0xa, "PHYS_ATOMIC"},      {0xb, "PHYS_PREFETCH"},
  };
  for (const auto& [value, name] : kNames) {
    if (value == type) return std::string(name);
  }
  return "access type " + hex(type);
}

}  // namespace baregrad::nv
