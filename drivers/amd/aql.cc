#include "drivers/amd/aql.h"

#include <atomic>
#include <cstring>

#include "base/check.h"
#include "drivers/amd/pm4.h"

namespace baregrad::amd {
namespace {

// Source: ROCm/ROCR-Runtime src/inc/hsa.h (hsa_packet_header_t bit offsets).
constexpr uint32_t kHeaderBarrierShift = 8;
constexpr uint32_t kHeaderAcquireShift = 9;
constexpr uint32_t kHeaderReleaseShift = 11;
// Source: ROCm aqlprofile amd_aql_pm4_ib_packet.h (AMD_AQL_PM4_IB_FORMAT = 1,
// AMD_AQL_PM4_IB_DW_COUNT_REMAIN = 10: header + format, pm4_ib_command[4], dw_count_remain,
// reserved[8], completion_signal); tinygrad ops_amd.py AMDComputeAQLQueue._pm4_pkt.
constexpr uint32_t kPm4IbFormat = 1;
constexpr uint32_t kPm4IbDwCountRemain = 10;

uint32_t lo32(uint64_t v) { return static_cast<uint32_t>(v); }
uint32_t hi32(uint64_t v) { return static_cast<uint32_t>(v >> 32); }

// Dwords 12..15 of every packet: reserved2 (0) and the completion signal.
void put_tail(AqlSlot slot, uint64_t completion_signal) {
  slot[12] = 0;
  slot[13] = 0;
  slot[14] = lo32(completion_signal);
  slot[15] = hi32(completion_signal);
}

}  // namespace

uint16_t aql_header(AqlPacketType type, AqlHeader h) {
  return static_cast<uint16_t>(static_cast<uint32_t>(type) |
                               (h.barrier ? 1u : 0u) << kHeaderBarrierShift |
                               static_cast<uint32_t>(h.acquire) << kHeaderAcquireShift |
                               static_cast<uint32_t>(h.release) << kHeaderReleaseShift);
}

uint32_t encode_kernel_dispatch(AqlSlot slot, const KernelDispatch& d, AqlHeader h) {
  CHECK(d.dims >= 1 && d.dims <= 3) << "AQL dispatch of " << d.dims << " dimensions";
  // hsa_kernel_dispatch_packet_t: header u16 @0, setup u16 @2, workgroup_size_x/y/z u16 @4/6/8,
  // reserved0 u16 @10, grid_size_x/y/z u32 @12/16/20, private_segment_size u32 @24,
  // group_segment_size u32 @28, kernel_object u64 @32, kernarg_address u64 @40,
  // reserved2 u64 @48, completion_signal u64 @56.
  slot[1] = d.workgroup_size[0] | static_cast<uint32_t>(d.workgroup_size[1]) << 16;
  slot[2] = d.workgroup_size[2];
  slot[3] = d.grid_size[0];
  slot[4] = d.grid_size[1];
  slot[5] = d.grid_size[2];
  slot[6] = d.private_segment_size;
  slot[7] = d.group_segment_size;
  slot[8] = lo32(d.kernel_object);
  slot[9] = hi32(d.kernel_object);
  slot[10] = lo32(d.kernarg_address);
  slot[11] = hi32(d.kernarg_address);
  put_tail(slot, d.completion_signal);
  return aql_header(AqlPacketType::kKernelDispatch, h) | d.dims << 16;
}

uint32_t encode_barrier_and(AqlSlot slot,
                            const std::array<uint64_t, 5>& dep_signal,
                            uint64_t completion_signal,
                            AqlHeader h) {
  // hsa_barrier_and_packet_t: header u16 @0, reserved0 u16 @2, reserved1 u32 @4,
  // dep_signal[5] u64 @8..40, reserved2 u64 @48, completion_signal u64 @56.
  slot[1] = 0;
  for (size_t i = 0; i < dep_signal.size(); i++) {
    slot[2 + 2 * i] = lo32(dep_signal[i]);
    slot[3 + 2 * i] = hi32(dep_signal[i]);
  }
  put_tail(slot, completion_signal);
  return aql_header(AqlPacketType::kBarrierAnd, h);
}

uint32_t encode_pm4_ib(
    AqlSlot slot, uint64_t ib_va, uint32_t ib_dwords, uint64_t completion_signal, AqlHeader h) {
  auto ib = indirect_buffer_packet(ib_va, ib_dwords);
  for (size_t i = 0; i < ib.size(); i++) slot[1 + i] = ib[i];
  slot[5] = kPm4IbDwCountRemain;
  for (size_t i = 6; i < 14; i++) slot[i] = 0;  // reserved[8]
  slot[14] = lo32(completion_signal);
  slot[15] = hi32(completion_signal);
  return aql_header(AqlPacketType::kVendorSpecific, h) | kPm4IbFormat << 16;
}

void aql_publish(AqlSlot slot, uint32_t header_word) {
  std::atomic_ref<uint32_t>(slot[0]).store(header_word, std::memory_order_release);
}

namespace {
template <class T>
void put_at(std::span<uint8_t, AmdQueueLayout::kBytes> q, size_t offset, T v) {
  std::memcpy(q.data() + offset, &v, sizeof(T));
}
}  // namespace

void init_amd_queue(std::span<uint8_t, AmdQueueLayout::kBytes> q,
                    uint32_t max_cu_id,
                    uint32_t max_wave_id) {
  using L = AmdQueueLayout;
  std::memset(q.data(), 0, q.size());
  put_at<uint32_t>(q, L::kQueueProperties, L::kPropertiesIsPtr64 | L::kPropertiesEnableProfiling);
  put_at<uint32_t>(q, L::kReadDispatchIdFieldBaseByteOffset, L::kReadDispatchId);
  put_at<uint32_t>(q, L::kMaxCuId, max_cu_id);
  put_at<uint32_t>(q, L::kMaxWaveId, max_wave_id);
}

void set_amd_queue_scratch(std::span<uint8_t, AmdQueueLayout::kBytes> q, const AqlScratch& s) {
  using L = AmdQueueLayout;
  for (size_t i = 0; i < 4; i++)
    put_at<uint32_t>(q, L::kScratchResourceDescriptor + 4 * i, s.rsrc[i]);
  put_at<uint64_t>(q, L::kScratchBackingMemoryLocation, s.va);
  put_at<uint64_t>(q, L::kScratchBackingMemoryByteSize, s.bytes);
  put_at<uint32_t>(q, L::kScratchWave64LaneByteSize, s.lane_bytes);
  // Last, with release order: a CP that sees the new ring size sees the memory it describes.
  std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(q.data() + L::kComputeTmpringSize))
      .store(s.tmpring_size, std::memory_order_release);
}

}  // namespace baregrad::amd
