#include "drivers/nv/classes.h"

#include <array>
#include <sstream>
#include <utility>

#include "base/check.h"
#include "base/format.h"

namespace baregrad::nv {
namespace {

// SM shared-memory carveouts per compute capability (CUDA Programming Guide, "Compute
// Capabilities"); 0 KiB is left out: the smallest configuration a launch asks for is 8 KiB.
// sm_86, sm_89 and sm_120; sm_80; sm_90 and sm_100.
constexpr std::array<uint16_t, 5> kCarveoutsSm86{8, 16, 32, 64, 100};
constexpr std::array<uint16_t, 7> kCarveoutsSm80{8, 16, 32, 64, 100, 132, 164};
constexpr std::array<uint16_t, 9> kCarveoutsSm90{8, 16, 32, 64, 100, 132, 164, 196, 228};

}  // namespace

std::string_view generation_name(Generation g) {
  switch (g) {
    case Generation::kAmpere:
      return "Ampere";
    case Generation::kAda:
      return "Ada";
    case Generation::kHopper:
      return "Hopper";
    case Generation::kBlackwell:
      return "Blackwell";
  }
  UNREACHABLE() << "generation " << static_cast<int>(g);
}

Result<GpuClasses> select_classes(uint32_t architecture, uint32_t implementation) {
  GpuClasses c{};
  c.architecture = architecture;
  c.implementation = implementation;
  switch (architecture) {
    case kArchGa100:
      c.generation = Generation::kAmpere;
      if (implementation == kImplGa100) {
        c.compute = kAmpereComputeA;
        c.copy = kAmpereDmaCopyA;
        c.smem_carveouts_kib = kCarveoutsSm80;
      } else {
        c.compute = kAmpereComputeB;
        c.copy = kAmpereDmaCopyB;
        c.smem_carveouts_kib = kCarveoutsSm86;
      }
      c.gpfifo = kAmpereChannelGpfifoA;
      c.usermode = kTuringUsermodeA;
      c.qmd = QmdVersion::kV3;
      return c;
    case kArchAd100:
      c = {Generation::kAda,      architecture,     implementation,  kAdaComputeA,  kAmpereDmaCopyB,
           kAmpereChannelGpfifoA, kTuringUsermodeA, QmdVersion::kV3, kCarveoutsSm86};
      return c;
    case kArchGh100:
      c = {Generation::kHopper, architecture,    implementation,
           kHopperComputeA,     kHopperDmaCopyA, kHopperChannelGpfifoA,
           kHopperUsermodeA,    QmdVersion::kV4, kCarveoutsSm90};
      return c;
    case kArchGb100:
      c = {Generation::kBlackwell, architecture,       implementation,
           kBlackwellComputeA,     kBlackwellDmaCopyA, kBlackwellChannelGpfifoA,
           kHopperUsermodeA,       QmdVersion::kV5,    kCarveoutsSm90};
      return c;
    case kArchGb200:
      c = {Generation::kBlackwell, architecture,       implementation,
           kBlackwellComputeB,     kBlackwellDmaCopyB, kBlackwellChannelGpfifoA,
           kHopperUsermodeA,       QmdVersion::kV5,    kCarveoutsSm86};
      return c;
    default:
      return invalid_argument("unknown NVIDIA architecture " + hex(architecture) +
                              ": baregrad knows Ampere (0x170), Ada (0x190), Hopper (0x180), "
                              "Blackwell (0x1a0/0x1b0)");
  }
}

std::string class_name(uint32_t cls) {
  static constexpr std::pair<uint32_t, std::string_view> kNames[] = {
      {kAmpereComputeA, "AMPERE_COMPUTE_A"},
      {kAmpereComputeB, "AMPERE_COMPUTE_B"},
      {kAdaComputeA, "ADA_COMPUTE_A"},
      {kHopperComputeA, "HOPPER_COMPUTE_A"},
      {kBlackwellComputeA, "BLACKWELL_COMPUTE_A"},
      {kBlackwellComputeB, "BLACKWELL_COMPUTE_B"},
      {kAmpereDmaCopyA, "AMPERE_DMA_COPY_A"},
      {kAmpereDmaCopyB, "AMPERE_DMA_COPY_B"},
      {kHopperDmaCopyA, "HOPPER_DMA_COPY_A"},
      {kBlackwellDmaCopyA, "BLACKWELL_DMA_COPY_A"},
      {kBlackwellDmaCopyB, "BLACKWELL_DMA_COPY_B"},
      {kAmpereChannelGpfifoA, "AMPERE_CHANNEL_GPFIFO_A"},
      {kHopperChannelGpfifoA, "HOPPER_CHANNEL_GPFIFO_A"},
      {kBlackwellChannelGpfifoA, "BLACKWELL_CHANNEL_GPFIFO_A"},
      {kBlackwellChannelGpfifoB, "BLACKWELL_CHANNEL_GPFIFO_B"},
      {kTuringUsermodeA, "TURING_USERMODE_A"},
      {kAmpereUsermodeA, "AMPERE_USERMODE_A"},
      {kHopperUsermodeA, "HOPPER_USERMODE_A"},
  };
  for (const auto& [id, name] : kNames) {
    if (id == cls) return std::string(name) + " (" + hex(cls) + ")";
  }
  return "class " + hex(cls);
}

bool qmd_version_supported(uint32_t compute_class, QmdVersion v) {
  switch (compute_class) {
    case kAmpereComputeA:
    case kAmpereComputeB:
    case kAdaComputeA:
      return v == QmdVersion::kV3;
    case kHopperComputeA:
      return v == QmdVersion::kV3 || v == QmdVersion::kV4;
    case kBlackwellComputeA:
    case kBlackwellComputeB:
      return v == QmdVersion::kV5;
    default:
      return false;
  }
}

int semaphore_address_bits(uint32_t gpfifo_class) {
  switch (gpfifo_class) {
    case kAmpereChannelGpfifoA:
      return 40;
    case kHopperChannelGpfifoA:
    case kBlackwellChannelGpfifoA:
    case kBlackwellChannelGpfifoB:
      return 57;
  }
  UNREACHABLE() << "GPFIFO class " << hex(gpfifo_class);
}

int copy_address_bits(uint32_t copy_class) {
  switch (copy_class) {
    case kAmpereDmaCopyA:
    case kAmpereDmaCopyB:
      return 49;
    case kHopperDmaCopyA:
    case kBlackwellDmaCopyA:
    case kBlackwellDmaCopyB:
      return 57;
  }
  UNREACHABLE() << "copy class " << hex(copy_class);
}

int local_memory_address_bits(uint32_t compute_class) {
  switch (compute_class) {
    case kAmpereComputeA:
    case kAmpereComputeB:
    case kAdaComputeA:
      return 49;
    case kHopperComputeA:
    case kBlackwellComputeA:
    case kBlackwellComputeB:
      return 57;
  }
  UNREACHABLE() << "compute class " << hex(compute_class);
}

bool copy_has_64bit_semaphore(uint32_t copy_class) { return copy_class != kAmpereDmaCopyA; }

}  // namespace baregrad::nv
