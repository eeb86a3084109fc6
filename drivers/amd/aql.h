// HSA AQL packets (64 bytes, 16 dwords) for the AQL compute queue: kernel dispatch, barrier-AND,
// and AMD's vendor-specific packet that calls a PM4 indirect buffer.
//
// Publication order: a packet slot holds HSA_PACKET_TYPE_INVALID in its header until the body is
// complete. The encoders write dwords 1..15 and return dword 0 (header | setup or format << 16)
// without writing it; the submitter stores that word last with release semantics
// (aql_publish), then rings the doorbell. The CP may read the slot as soon as dword 0 changes.
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace baregrad::amd {

// Source: ROCm/ROCR-Runtime src/inc/hsa.h (hsa_packet_type_t, hsa_fence_scope_t,
// hsa_packet_header_t: TYPE 7:0, BARRIER 8, SCACQUIRE_FENCE_SCOPE 10:9,
// SCRELEASE_FENCE_SCOPE 12:11; HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS 1:0).
enum class AqlPacketType : uint32_t {
  kVendorSpecific = 0,
  kInvalid = 1,
  kKernelDispatch = 2,
  kBarrierAnd = 3,
  kAgentDispatch = 4,
  kBarrierOr = 5,
};
enum class FenceScope : uint32_t { kNone = 0, kAgent = 1, kSystem = 2 };

struct AqlHeader {
  bool barrier = true;  // start only when all prior packets in the queue are complete
  FenceScope acquire = FenceScope::kSystem;
  FenceScope release = FenceScope::kSystem;
};

using AqlSlot = std::span<uint32_t, 16>;

// The 16-bit AQL header of a packet of `type`.
uint16_t aql_header(AqlPacketType type, AqlHeader h);

struct KernelDispatch {
  uint32_t dims = 3;                         // 1..3 (setup DIMENSIONS)
  std::array<uint16_t, 3> workgroup_size{};  // work-items per work-group
  std::array<uint32_t, 3> grid_size{};       // work-items (not work-groups) per dimension
  uint32_t private_segment_size = 0;         // bytes per work-item
  uint32_t group_segment_size = 0;           // bytes of LDS per work-group
  uint64_t kernel_object = 0;                // kernel descriptor VA (64-aligned)
  uint64_t kernarg_address = 0;              // kernarg segment VA (16-aligned)
  uint64_t completion_signal = 0;            // amd_signal_t VA, or 0
};
// hsa_kernel_dispatch_packet_t: writes dwords 1..15; returns dword 0 = header | setup << 16.
uint32_t encode_kernel_dispatch(AqlSlot slot, const KernelDispatch& d, AqlHeader h = {});

// hsa_barrier_and_packet_t: waits until every non-zero dep_signal reaches 0. Writes dwords
// 1..15; returns dword 0 (the header; reserved0 is 0).
uint32_t encode_barrier_and(AqlSlot slot,
                            const std::array<uint64_t, 5>& dep_signal,
                            uint64_t completion_signal,
                            AqlHeader h = {});

// AMD vendor-specific packet (amd_aql_pm4_ib_packet_t, pm4_ib_format 1): the CP runs the
// `ib_dwords` PM4 words at `ib_va` as an INDIRECT_BUFFER. Writes dwords 1..15; returns dword 0
// = header | 1 << 16.
uint32_t encode_pm4_ib(
    AqlSlot slot, uint64_t ib_va, uint32_t ib_dwords, uint64_t completion_signal, AqlHeader h = {});

// Stores dword 0 of a filled slot with release order: the body is visible before the header.
void aql_publish(AqlSlot slot, uint32_t header_word);

}  // namespace baregrad::amd
