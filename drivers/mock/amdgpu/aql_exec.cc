// AQL packets as the CP's AQL front end executes them on KFD AQL queues. Decoded from
// ROCm/ROCR-Runtime src/inc/hsa.h (hsa_packet_header_t, hsa_packet_type_t,
// hsa_kernel_dispatch_packet_t, hsa_barrier_and/or_packet_t), src/inc/amd_hsa_signal.h
// (amd_signal_t: value at 0x08, event_mailbox_ptr 0x10, event_id 0x18), AMD's
// amd_aql_pm4_ib_packet_t (format 1 at bits 31:16 of dword 0, an INDIRECT_BUFFER in dwords 1-4,
// dw_count_remain, completion_signal at 56), LLVM's kernel_descriptor_t (kernarg_size at 8,
// kernel_code_entry_byte_offset at 16, compute_pgm_rsrc2 at 52) and amd_queue_t (LLVM
// amd/device-libs/ockl/inc/amd_hsa_queue.h: read_dispatch_id at 128, then
// read_dispatch_id_field_base_byte_offset 136, compute_tmpring_size 140,
// scratch_backing_memory_location 160, scratch_wave64_lane_byte_size 176).
#include <atomic>
#include <cstring>

#include "base/format.h"
#include "drivers/mock/amdgpu/fake_gpu.h"

namespace baregrad::mock {
namespace {

constexpr uint64_t kPacketBytes = 64;
constexpr uint32_t kTypeVendorSpecific = 0, kTypeInvalid = 1, kTypeKernelDispatch = 2;
constexpr uint32_t kTypeBarrierAnd = 3, kTypeBarrierOr = 5;
constexpr uint32_t kPm4IbFormat = 1;  // AMD_AQL_PM4_IB_FORMAT
constexpr uint32_t kPacket3IndirectBuffer = 0x3f;
constexpr uint64_t kSignalValue = 0x08, kSignalMailbox = 0x10, kSignalEventId = 0x18;
constexpr uint64_t kQueueReadDispatchId = 128, kQueueTmpringSize = 140;
constexpr uint64_t kQueueScratchBase = 160, kQueueScratchLaneBytes = 176;

template <class T>
T get(const uint8_t* slot, size_t offset) {
  T v;
  std::memcpy(&v, slot + offset, sizeof(T));
  return v;
}

}  // namespace

bool FakeAmdGpu::run_aql_queue(Queue& q) {
  bool progressed = false;
  const uint64_t slots = q.info.ring_size / kPacketBytes;
  for (;;) {
    // NOTE: the write pointer is write_dispatch_id (packets); a slot is taken once its header
    // leaves INVALID, so a packet published before the write pointer moved waits for it.
    std::optional<uint64_t> wptr = read_wptr(q);
    if (!wptr || *wptr == q.rptr) return progressed;
    const uint64_t va = q.info.ring_va + (q.rptr % slots) * kPacketBytes;
    if (slots == 0 || *wptr < q.rptr || *wptr - q.rptr > slots) {
      bad_packet(q, va,
                 "write_dispatch_id " + std::to_string(*wptr) + " is not within one ring (" +
                     std::to_string(slots) + " packets) after read_dispatch_id " +
                     std::to_string(q.rptr));
      return progressed;
    }
    uint8_t* slot = access(q, va, kPacketBytes, va, "AQL packet");
    if (slot == nullptr) return progressed;
    std::atomic_ref<uint16_t> header(*reinterpret_cast<uint16_t*>(slot));
    if ((header.load(std::memory_order_acquire) & 0xff) == kTypeInvalid) return progressed;
    Step s = exec_aql(q, slot, va, &progressed);
    if (s != Step::kNext) return progressed;
    const uint64_t signal = get<uint64_t>(slot, 56);
    if (signal != 0) {  // completion_signal: decrement, then the event the signal names
      if (signal % 8 != 0) {
        bad_packet(q, va, "completion signal at " + hex(signal) + " is not 8-aligned");
        return progressed;
      }
      uint8_t* sig = access(q, signal, 32, va, "completion signal");
      if (sig == nullptr) return progressed;
      std::atomic_ref<int64_t>(*reinterpret_cast<int64_t*>(sig + kSignalValue))
          .fetch_sub(1, std::memory_order_acq_rel);
      count(&AmdGpuCounters::signals);
      uint64_t mailbox = get<uint64_t>(sig, kSignalMailbox);
      uint32_t event = get<uint32_t>(sig, kSignalEventId);
      if (mailbox != 0) {
        if (!store(q, mailbox, 8, event, va, "completion signal event mailbox")) return progressed;
        interrupt(event);
      }
    }
    header.store(kTypeInvalid, std::memory_order_release);
    q.rptr++;
    q.blocked = false;
    progressed = true;
    count(&AmdGpuCounters::packets);
    if (!write_rptr(q)) return progressed;
  }
}

FakeAmdGpu::Step FakeAmdGpu::exec_aql(Queue& q, uint8_t* slot, uint64_t va, bool* progressed) {
  const uint32_t dw0 = get<uint32_t>(slot, 0), type = dw0 & 0xff;
  switch (type) {
    case kTypeKernelDispatch: {
      const uint32_t dims = dw0 >> 16 & 3;  // setup DIMENSIONS 1:0
      if (dims == 0) return bad_packet(q, va, "KERNEL_DISPATCH with 0 dimensions");
      uint32_t wg[3], grid[3];
      for (uint32_t i = 0; i < 3; i++) {
        wg[i] = i < dims ? get<uint16_t>(slot, 4 + 2 * i) : 1;
        grid[i] = i < dims ? get<uint32_t>(slot, 12 + 4 * i) : 1;
        if (wg[i] == 0 || grid[i] % wg[i] != 0) {
          return bad_packet(q, va,
                            "KERNEL_DISPATCH dimension " + std::to_string(i) + ": grid_size " +
                                std::to_string(grid[i]) + " is not a multiple of workgroup_size " +
                                std::to_string(wg[i]) + " (partial work-groups are not " +
                                "modelled)");
        }
      }
      const uint64_t kd = get<uint64_t>(slot, 32), kernarg = get<uint64_t>(slot, 40);
      if (kd % 64 != 0) return bad_packet(q, va, "kernel_object " + hex(kd) + " not 64-aligned");
      uint8_t* desc = access(q, kd, 64, va, "kernel descriptor");
      if (desc == nullptr) return Step::kStop;
      AmdLaunch l;
      l.code_va = kd + static_cast<uint64_t>(get<int64_t>(desc, 16));
      l.kernarg_va = kernarg;
      const uint32_t kernarg_size = get<uint32_t>(desc, 8);
      if (kernarg_size != 0) {
        uint8_t* p = access(q, kernarg, kernarg_size, va, "kernarg segment");
        if (p == nullptr) return Step::kStop;
        l.kernargs = {p, kernarg_size};
      }
      l.grid = {grid[0] / wg[0], grid[1] / wg[1], grid[2] / wg[2]};
      l.block = {wg[0], wg[1], wg[2]};
      l.lds_bytes = get<uint32_t>(slot, 28);  // group_segment_size
      // COMPUTE_PGM_RSRC2 bit 0 (the private segment) or a private_segment_size: the CP hands
      // each wave COMPUTE_TMPRING_SIZE.WAVESIZE units of the scratch that the queue's amd_queue_t
      // describes. It finds that block from the read pointer KFD was given (read_dispatch_id)
      // minus read_dispatch_id_field_base_byte_offset, which must say so.
      const uint32_t private_size = get<uint32_t>(slot, 24);
      if ((get<uint32_t>(desc, 52) & 1) != 0 || private_size != 0) {
        const uint64_t rd = q.info.read_pointer_address;
        auto field = load(q, rd + 8, 4, va, "amd_queue_t.read_dispatch_id_field_base_byte_offset");
        if (!field) return Step::kStop;
        if (*field != kQueueReadDispatchId)
          return bad_packet(q, va,
                            "a scratch dispatch, but amd_queue_t.read_dispatch_id_field_base_" +
                                std::string("byte_offset is ") + std::to_string(*field) +
                                " (128 expected): the CP cannot find the queue's scratch");
        const uint64_t amdq = rd - kQueueReadDispatchId;
        auto tmpring = load(q, amdq + kQueueTmpringSize, 4, va, "amd_queue_t.compute_tmpring_size");
        auto base =
            load(q, amdq + kQueueScratchBase, 8, va, "amd_queue_t.scratch_backing_memory_location");
        auto lane = load(q, amdq + kQueueScratchLaneBytes, 4, va,
                         "amd_queue_t.scratch_wave64_lane_byte_size");
        if (!tmpring || !base || !lane) return Step::kStop;
        const uint64_t wave_units = *tmpring >> 12;
        if (wave_units == 0 || *lane < private_size)
          return bad_packet(q, va,
                            "a dispatch of " + std::to_string(private_size) +
                                " scratch bytes per work-item, but the queue's amd_queue_t has " +
                                "compute_tmpring_size " + hex(*tmpring) + " and " +
                                std::to_string(*lane) + " bytes per lane");
        const uint64_t bytes = wave_units * arch_->scratch_align_bytes;
        if (access(q, *base, bytes, va,
                   "scratch of a wave (" + std::to_string(bytes) + " bytes)") == nullptr)
          return Step::kStop;
      }
      l.queue_id = q.info.id;
      l.packet_va = va;
      return launch(q, l);
    }
    case kTypeBarrierAnd:
    case kTypeBarrierOr: {
      // dep_signal[5] at 8..47: AND waits for every non-zero one to reach 0, OR for any.
      bool any_dep = false, any_zero = false, all_zero = true;
      for (size_t i = 0; i < 5; i++) {
        const uint64_t dep = get<uint64_t>(slot, 8 + 8 * i);
        if (dep == 0) continue;
        auto v = load(q, dep + kSignalValue, 8, va, "barrier dep_signal " + std::to_string(i));
        if (!v) return Step::kStop;
        any_dep = true;
        if (*v == 0) {
          any_zero = true;
        } else {
          all_zero = false;
        }
      }
      bool done = type == kTypeBarrierAnd ? all_zero : (!any_dep || any_zero);
      return done ? Step::kNext : block(q);
    }
    case kTypeVendorSpecific: {
      if ((dw0 >> 16) != kPm4IbFormat) {
        return bad_packet(q, va,
                          "vendor-specific AQL packet of format " + std::to_string(dw0 >> 16) +
                              " (only PM4-IB, 1, is modelled)");
      }
      if (!q.aql_ib) {  // dwords 1-4 are one INDIRECT_BUFFER packet
        uint32_t ib[4];
        std::memcpy(ib, slot + 4, sizeof(ib));
        if (ib[0] >> 30 != 3 || (ib[0] >> 8 & 0xff) != kPacket3IndirectBuffer ||
            (ib[0] >> 16 & 0x3fff) != 2) {
          return bad_packet(
              q, va, "PM4-IB AQL packet does not hold INDIRECT_BUFFER (header " + hex(ib[0]) + ")");
        }
        uint32_t skip = 0;
        if (exec_pm4(q, ib, va + 4, &skip) != Step::kNext) return Step::kStop;
        q.aql_ib = true;
      }
      Step s = run_ibs(q, progressed);
      if (s == Step::kNext) q.aql_ib = false;
      return s;
    }
  }
  return bad_packet(q, va,
                    "AQL packet type " + std::to_string(type) + " (header " + hex(dw0 & 0xffff) +
                        ") is not modelled");
}

}  // namespace baregrad::mock
