#include "drivers/nv/methods.h"

#include <algorithm>
#include <string>
#include <string_view>

#include "base/check.h"
#include "base/format.h"

namespace baregrad::nv {
namespace {

using hcq::Value;

// OK for a symbolic address; else the address must be `align`-aligned and below 2^bits, the
// width class `cls` (or method `method` when cls is 0) gives it.
Status check_address(std::string_view what,
                     Value addr,
                     uint64_t align,
                     int bits,
                     uint32_t cls,
                     std::string_view method = {}) {
  if (addr.symbolic()) return {};
  uint64_t a = static_cast<uint64_t>(addr.imm);
  if (a % align == 0 && a >> bits == 0) return {};
  return invalid_argument(std::string(what) + " at " + hex(a) + ": the address must be " +
                          std::to_string(align) + "-byte aligned and below 2^" +
                          std::to_string(bits) + " (" +
                          (cls != 0 ? class_name(cls) : std::string(method)) + ")");
}

uint32_t lo32(uint64_t v) { return static_cast<uint32_t>(v); }
uint32_t hi32(uint64_t v) { return static_cast<uint32_t>(v >> 32); }

void emit_one_copy(PushBuffer& pb, Value dst, Value src, Value bytes) {
  pb.inc(Subchannel::kCopy, kCopyOffsetInUpper,
         {Word::hi(src), Word::lo(src), Word::hi(dst), Word::lo(dst)});
  pb.inc(Subchannel::kCopy, kCopyLineLengthIn, {Word::lo(bytes)});
  pb.inc(Subchannel::kCopy, kCopyLaunchDma,
         {kDmaTransferNonPipelined | kDmaSrcPitch | kDmaDstPitch});
}

}  // namespace

void emit_set_object(PushBuffer& pb, Subchannel sc, uint32_t cls) {
  CHECK_LE(cls, 0xffffu) << "SET_OBJECT NVCLASS is 15:0";
  pb.inc(sc, kSetObject, {cls});
}

Status emit_semaphore_release(
    PushBuffer& pb, const GpuClasses& gpu, Value addr, Value payload, Release r) {
  bool b64 = r.size == PayloadSize::k64;
  if (r.timestamp && !addr.symbolic() && addr.imm % 16 != 0) {
    // The release writes 16 bytes (payload, then the timer at +8).
    return invalid_argument("semaphore release with timestamp (SEM_EXECUTE RELEASE_TIMESTAMP) at " +
                            hex(static_cast<uint64_t>(addr.imm)) +
                            ": the address must be 16-byte aligned");
  }
  RETURN_IF_ERROR(check_address("semaphore release", addr, b64 ? 8 : 4,
                                semaphore_address_bits(gpu.gpfifo), gpu.gpfifo));
  uint32_t exec = kSemOperationRelease | (r.wfi ? kSemReleaseWfiEn : 0) |
                  (b64 ? kSemPayloadSize64Bit : 0) | (r.timestamp ? kSemReleaseTimestampEn : 0);
  pb.inc(Subchannel::kHost, kSemAddrLo,
         {Word::lo(addr), Word::hi(addr), Word::lo(payload), Word::hi(payload), exec});
  return {};
}

Status emit_semaphore_acquire(
    PushBuffer& pb, const GpuClasses& gpu, Value addr, Value value, PayloadSize size) {
  bool b64 = size == PayloadSize::k64;
  RETURN_IF_ERROR(check_address("semaphore acquire", addr, b64 ? 8 : 4,
                                semaphore_address_bits(gpu.gpfifo), gpu.gpfifo));
  uint32_t exec = kSemOperationAcqCircGeq | (b64 ? kSemPayloadSize64Bit : 0);
  pb.inc(Subchannel::kHost, kSemAddrLo,
         {Word::lo(addr), Word::hi(addr), Word::lo(value), Word::hi(value), exec});
  return {};
}

void emit_non_stall_interrupt(PushBuffer& pb) {
  pb.inc(Subchannel::kHost, kNonStallInterrupt, {0u});
}

void emit_invalidate_shader_caches(PushBuffer& pb) {
  pb.inc(Subchannel::kCompute, kInvalidateShaderCachesNoWfi,
         {kInvalidateInstruction | kInvalidateGlobalData | kInvalidateConstant});
}

Status emit_launch(PushBuffer& pb, uint64_t qmd_va, PcasAction action) {
  if (qmd_va % 256 != 0 || qmd_va >> 40 != 0) {
    return invalid_argument("launch of the QMD at " + hex(qmd_va) +
                            ": SEND_PCAS_A takes a 256-byte aligned address below 2^40");
  }
  pb.inc(Subchannel::kCompute, kSendPcasA, {lo32(qmd_va >> 8)});
  pb.inc(Subchannel::kCompute, kSendSignalingPcas2B, {static_cast<uint32_t>(action)});
  return {};
}

Status emit_shader_memory_windows(PushBuffer& pb, uint64_t local_window, uint64_t shared_window) {
  // SET_SHADER_{LOCAL,SHARED}_MEMORY_WINDOW_A_BASE_ADDRESS_UPPER is 16:0 in every class.
  RETURN_IF_ERROR(check_address("local memory window",
                                Value::of(static_cast<int64_t>(local_window)), 1, 49, 0,
                                "SET_SHADER_LOCAL_MEMORY_WINDOW_A"));
  RETURN_IF_ERROR(check_address("shared memory window",
                                Value::of(static_cast<int64_t>(shared_window)), 1, 49, 0,
                                "SET_SHADER_SHARED_MEMORY_WINDOW_A"));
  pb.inc(Subchannel::kCompute, kSetShaderLocalMemoryWindowA,
         {hi32(local_window), lo32(local_window)});
  pb.inc(Subchannel::kCompute, kSetShaderSharedMemoryWindowA,
         {hi32(shared_window), lo32(shared_window)});
  return {};
}

Status emit_shader_local_memory(PushBuffer& pb,
                                const GpuClasses& gpu,
                                Value va,
                                uint64_t bytes_per_tpc) {
  RETURN_IF_ERROR(
      check_address("local memory", va, 1, local_memory_address_bits(gpu.compute), gpu.compute));
  if (bytes_per_tpc >> 40 != 0) {
    return invalid_argument("local memory of " + std::to_string(bytes_per_tpc) +
                            " bytes per TPC: SET_SHADER_LOCAL_MEMORY_NON_THROTTLED takes < 2^40");
  }
  pb.inc(Subchannel::kCompute, kSetShaderLocalMemoryA, {Word::hi(va), Word::lo(va)});
  pb.inc(Subchannel::kCompute, kSetShaderLocalMemoryNonThrottledA,
         {hi32(bytes_per_tpc), lo32(bytes_per_tpc), 0xffu});
  return {};
}

Status emit_copy(PushBuffer& pb, const GpuClasses& gpu, Value dst, Value src, Value bytes) {
  int bits = copy_address_bits(gpu.copy);
  if (bytes.symbolic()) {
    RETURN_IF_ERROR(check_address("copy source", src, 1, bits, gpu.copy));
    RETURN_IF_ERROR(check_address("copy destination", dst, 1, bits, gpu.copy));
    emit_one_copy(pb, dst, src, bytes);
    return {};
  }
  if (bytes.imm < 0) return invalid_argument("copy of " + std::to_string(bytes.imm) + " bytes");
  uint64_t n = static_cast<uint64_t>(bytes.imm);
  if (n == 0) return {};
  if (n > kCopyChunkBytes && (src.symbolic() || dst.symbolic())) {
    return invalid_argument("copy of " + std::to_string(n) + " bytes (over " +
                            std::to_string(kCopyChunkBytes) +
                            " per LAUNCH_DMA) between symbolic addresses");
  }
  // The last byte of each range must be addressable too.
  auto last = [&](Value v) {  // in uint64_t: no signed overflow for absurd sizes
    return v.symbolic() ? v : Value::of(static_cast<int64_t>(static_cast<uint64_t>(v.imm) + n - 1));
  };
  for (Value v : {src, last(src)}) {
    RETURN_IF_ERROR(check_address("copy source", v, 1, bits, gpu.copy));
  }
  for (Value v : {dst, last(dst)}) {
    RETURN_IF_ERROR(check_address("copy destination", v, 1, bits, gpu.copy));
  }
  for (uint64_t off = 0; off < n; off += kCopyChunkBytes) {
    auto at = [&](Value v) {
      return v.symbolic() ? v : Value::of(v.imm + static_cast<int64_t>(off));
    };
    uint64_t len = std::min(kCopyChunkBytes, n - off);
    emit_one_copy(pb, at(dst), at(src), Value::of(static_cast<int64_t>(len)));
  }
  return {};
}

Status emit_copy_semaphore_release(
    PushBuffer& pb, const GpuClasses& gpu, Value addr, Value payload, Release r) {
  bool b64 = r.size == PayloadSize::k64;
  if (b64 && !copy_has_64bit_semaphore(gpu.copy)) {
    return invalid_argument("64-bit copy-engine semaphore release on " + class_name(gpu.copy) +
                            ": the class has no SET_SEMAPHORE_PAYLOAD_UPPER; release through "
                            "the host semaphore instead");
  }
  RETURN_IF_ERROR(check_address("copy semaphore release", addr, b64 ? 8 : 4,
                                copy_address_bits(gpu.copy), gpu.copy));
  if (b64) {
    pb.inc(Subchannel::kCopy, kCopySetSemaphoreA,
           {Word::hi(addr), Word::lo(addr), Word::lo(payload), Word::hi(payload)});
  } else {
    pb.inc(Subchannel::kCopy, kCopySetSemaphoreA,
           {Word::hi(addr), Word::lo(addr), Word::lo(payload)});
  }
  uint32_t launch = kDmaFlushEnable |
                    (r.timestamp ? kDmaSemaphoreTimestamp : kDmaSemaphoreNoTimestamp) |
                    (b64 ? kDmaSemaphorePayload64 : 0);
  pb.inc(Subchannel::kCopy, kCopyLaunchDma, {launch});
  return {};
}

}  // namespace baregrad::nv
