// NVIDIA class IDs and the per-generation choice of compute, copy, GPFIFO and usermode class
// and QMD version. Every number is checked against NVIDIA's headers; drivers/nv/README.md
// names the file and commit for each.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"

namespace baregrad::nv {

// Compute classes (open-gpu-doc classes/compute/cl<id>.h).
constexpr uint32_t kAmpereComputeA = 0xc6c0;     // AMPERE_COMPUTE_A: GA100
constexpr uint32_t kAmpereComputeB = 0xc7c0;     // AMPERE_COMPUTE_B: GA10x
constexpr uint32_t kAdaComputeA = 0xc9c0;        // ADA_COMPUTE_A: AD10x
constexpr uint32_t kHopperComputeA = 0xcbc0;     // HOPPER_COMPUTE_A: GH100
constexpr uint32_t kBlackwellComputeA = 0xcdc0;  // BLACKWELL_COMPUTE_A: GB10x
constexpr uint32_t kBlackwellComputeB = 0xcec0;  // BLACKWELL_COMPUTE_B: GB20x

// Copy-engine classes (open-gpu-doc classes/dma-copy/cl<id>.h).
constexpr uint32_t kAmpereDmaCopyA = 0xc6b5;     // AMPERE_DMA_COPY_A
constexpr uint32_t kAmpereDmaCopyB = 0xc7b5;     // AMPERE_DMA_COPY_B
constexpr uint32_t kHopperDmaCopyA = 0xc8b5;     // HOPPER_DMA_COPY_A
constexpr uint32_t kBlackwellDmaCopyA = 0xc9b5;  // BLACKWELL_DMA_COPY_A
constexpr uint32_t kBlackwellDmaCopyB = 0xcab5;  // BLACKWELL_DMA_COPY_B

// GPFIFO channel (host) classes (open-gpu-kernel-modules class/cl<id>.h).
constexpr uint32_t kAmpereChannelGpfifoA = 0xc56f;     // AMPERE_CHANNEL_GPFIFO_A
constexpr uint32_t kHopperChannelGpfifoA = 0xc86f;     // HOPPER_CHANNEL_GPFIFO_A
constexpr uint32_t kBlackwellChannelGpfifoA = 0xc96f;  // BLACKWELL_CHANNEL_GPFIFO_A
constexpr uint32_t kBlackwellChannelGpfifoB = 0xca6f;  // BLACKWELL_CHANNEL_GPFIFO_B

// Usermode (doorbell page) classes.
constexpr uint32_t kTuringUsermodeA = 0xc461;  // TURING_USERMODE_A
constexpr uint32_t kAmpereUsermodeA = 0xc561;  // AMPERE_USERMODE_A
constexpr uint32_t kHopperUsermodeA = 0xc661;  // HOPPER_USERMODE_A

// What NV2080_CTRL_CMD_MC_GET_ARCH_INFO reports (ctrl2080mc.h). Within kArchGa100 the
// implementation tells GA100 from GA10x.
constexpr uint32_t kArchGa100 = 0x170;  // NV2080_CTRL_MC_ARCH_INFO_ARCHITECTURE_GA100: Ampere
constexpr uint32_t kArchGh100 = 0x180;  // NV2080_CTRL_MC_ARCH_INFO_ARCHITECTURE_GH100: Hopper
constexpr uint32_t kArchAd100 = 0x190;  // NV2080_CTRL_MC_ARCH_INFO_ARCHITECTURE_AD100: Ada
constexpr uint32_t kArchGb100 = 0x1a0;  // NV2080_CTRL_MC_ARCH_INFO_ARCHITECTURE_GB100: GB10x
constexpr uint32_t kArchGb200 = 0x1b0;  // NV2080_CTRL_MC_ARCH_INFO_ARCHITECTURE_GB200: GB20x
constexpr uint32_t kImplGa100 = 0x0;    // NV2080_CTRL_MC_ARCH_INFO_IMPLEMENTATION_GA100

enum class Generation : uint8_t { kAmpere, kAda, kHopper, kBlackwell };
std::string_view generation_name(Generation g);

// QMD layouts: V03_00 (clc6c0qmd.h, also in clc7c0/clc9c0/clcbc0qmd.h), V04_00 (clcbc0qmd.h),
// V05_00 (clcdc0qmd.h, identical in clcec0qmd.h).
enum class QmdVersion : uint8_t { kV3 = 3, kV4 = 4, kV5 = 5 };

// What one GPU gets: the classes baregrad allocates and the limits the encoders check.
struct GpuClasses {
  Generation generation;
  uint32_t architecture;
  uint32_t implementation;
  uint32_t compute;
  uint32_t copy;
  uint32_t gpfifo;
  uint32_t usermode;
  QmdVersion qmd;
  // The SM shared-memory carveouts in KiB, ascending (the largest is the per-SM limit).
  std::span<const uint16_t> smem_carveouts_kib;
};

// The classes for a GPU from NV2080_CTRL_CMD_MC_GET_ARCH_INFO's architecture/implementation;
// InvalidArgument naming the known architectures for anything else.
Result<GpuClasses> select_classes(uint32_t architecture, uint32_t implementation);

// "HOPPER_COMPUTE_A (0xcbc0)" for the classes above, "class 0x..." for others.
std::string class_name(uint32_t cls);

// The QMD versions the compute class defines (Hopper's clcbc0qmd.h has both V03_00 and V04_00).
bool qmd_version_supported(uint32_t compute_class, QmdVersion v);

// Address widths of the methods whose upper halves are narrower than 32 bits; addresses at or
// above 1 << bits are refused by the builders.
int semaphore_address_bits(uint32_t gpfifo_class);      // SEM_ADDR_HI_OFFSET: 7:0 or 24:0
int copy_address_bits(uint32_t copy_class);             // OFFSET_IN_UPPER_UPPER: 16:0 or 24:0
int local_memory_address_bits(uint32_t compute_class);  // SET_SHADER_LOCAL_MEMORY_A: 16:0/24:0
// Whether the copy class has SET_SEMAPHORE_PAYLOAD_UPPER and LAUNCH_DMA_SEMAPHORE_PAYLOAD_SIZE
// (AMPERE_DMA_COPY_A does not: its semaphores are 32-bit).
bool copy_has_64bit_semaphore(uint32_t copy_class);

}  // namespace baregrad::nv
