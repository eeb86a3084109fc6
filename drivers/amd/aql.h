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

// amd_queue_t, the 256-byte (64-aligned) block an AQL queue's read and write pointers live in:
// KFD is given &read_dispatch_id and &write_dispatch_id, and the CP finds the rest of the block
// (the scratch it hands to dispatches) from the read pointer and
// read_dispatch_id_field_base_byte_offset. Byte offsets. Source: LLVM
// amd/device-libs/ockl/inc/amd_hsa_queue.h (amd_queue_t after the 40-byte hsa_queue_t of
// ROCR's hsa.h); tinygrad ops_amd.py create_queue / _ensure_has_local_memory for the fields it
// fills.
struct AmdQueueLayout {
  static constexpr size_t kBytes = 256;
  static constexpr size_t kWriteDispatchId = 56;  // u64: packets published (the write pointer)
  static constexpr size_t kMaxCuId = 72, kMaxWaveId = 76;  // u32
  static constexpr size_t kReadDispatchId = 128;  // u64: packets consumed (the read pointer)
  static constexpr size_t kReadDispatchIdFieldBaseByteOffset = 136;  // u32
  static constexpr size_t kComputeTmpringSize = 140;                 // u32
  static constexpr size_t kScratchResourceDescriptor = 144;          // u32[4]
  static constexpr size_t kScratchBackingMemoryLocation = 160;       // u64
  static constexpr size_t kScratchBackingMemoryByteSize = 168;       // u64
  static constexpr size_t kScratchWave64LaneByteSize = 176;          // u32
  static constexpr size_t kQueueProperties = 180;                    // u32
  // amd_queue_properties_t: IS_PTR64 bit 1, ENABLE_PROFILING bit 3.
  static constexpr uint32_t kPropertiesIsPtr64 = 1u << 1, kPropertiesEnableProfiling = 1u << 3;
};

// Fills a fresh amd_queue_t at `q` (AmdQueueLayout::kBytes): zero, then queue_properties
// (IS_PTR64 | ENABLE_PROFILING), read_dispatch_id_field_base_byte_offset, max_cu_id and
// max_wave_id, as tinygrad does.
void init_amd_queue(std::span<uint8_t, AmdQueueLayout::kBytes> q,
                    uint32_t max_cu_id,
                    uint32_t max_wave_id);

// The scratch of an AQL queue's dispatches: the backing memory (`va`, `bytes` for one XCC),
// COMPUTE_TMPRING_SIZE, the private segment buffer V# (`rsrc`) and the per-lane bytes of a
// wave64 (the per-work-item need).
struct AqlScratch {
  uint64_t va = 0, bytes = 0;
  uint32_t tmpring_size = 0;
  uint32_t rsrc[4] = {};
  uint32_t lane_bytes = 0;
};
void set_amd_queue_scratch(std::span<uint8_t, AmdQueueLayout::kBytes> q, const AqlScratch& s);

}  // namespace baregrad::amd
