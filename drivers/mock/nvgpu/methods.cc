// The methods the fake GPU executes, with offsets and fields written from NVIDIA's headers:
//   host:    clc56f.h NVC56F_* (OGD classes/host; the same offsets in OGKM clc86f.h, clc96f.h),
//            semantics from dev_pbdma.ref.txt "Host Semaphore Methods";
//   compute: clc6c0.h, clc7c0.h, clc9c0.h, clcbc0.h, clcdc0.h, clcec0.h NV*C0_* (same offsets);
//   copy:    clc6b5.h, clc7b5.h, clc8b5.h, clc9b5.h, clcab5.h NV*B5_* (same offsets).
#include <algorithm>
#include <atomic>
#include <cstring>
#include <initializer_list>

#include "base/check.h"
#include "base/format.h"
#include "drivers/mock/nvgpu/channel.h"
#include "drivers/mock/nvgpu/qmd_decode.h"

namespace baregrad::mock {
namespace {

// Host methods (NVC56F_*).
constexpr uint32_t kSetObject = 0x0000, kNop = 0x0008, kNonStallInterrupt = 0x0020;
constexpr uint32_t kSemAddrLo = 0x005c, kSemAddrHi = 0x0060, kSemPayloadLo = 0x0064,
                   kSemPayloadHi = 0x0068, kSemExecute = 0x006c, kWfi = 0x0078;
// SEM_EXECUTE: OPERATION 2:0, ACQUIRE_SWITCH_TSG 12, RELEASE_WFI 20, PAYLOAD_SIZE 24,
// RELEASE_TIMESTAMP 25, REDUCTION 30:27, REDUCTION_FORMAT 31.
enum : uint32_t { kAcquire, kRelease, kAcqStrictGeq, kAcqCircGeq, kAcqAnd, kAcqNor, kReduction };
constexpr uint32_t kSemExecuteFields =
    0x7 | 1u << 12 | 1u << 20 | 1u << 24 | 1u << 25 | 0xfu << 27 | 1u << 31;

// Compute methods (NV*C0_*).
constexpr uint32_t kSharedWindowA = 0x02a0, kSharedWindowB = 0x02a4, kSendPcasA = 0x02b4,
                   kSendSignalingPcas2B = 0x02c0, kLocalNonThrottledA = 0x02e4,
                   kLocalNonThrottledB = 0x02e8, kLocalNonThrottledC = 0x02ec,
                   kLocalMemoryA = 0x0790, kLocalMemoryB = 0x0794, kLocalWindowA = 0x07b0,
                   kLocalWindowB = 0x07b4, kInvalidateShaderCachesNoWfi = 0x1698;
// INVALIDATE_SHADER_CACHES_NO_WFI: INSTRUCTION 0, GLOBAL_DATA 4, CONSTANT 12.
constexpr uint32_t kInvalidateFields = 1u << 0 | 1u << 4 | 1u << 12;
// SEND_SIGNALING_PCAS2_B_PCAS_ACTION (3:0) values that schedule the QMD, and those that do not.
constexpr bool pcas_schedules(uint32_t a) { return a == 2 || a == 3 || (a >= 9 && a <= 11); }
constexpr bool pcas_no_launch(uint32_t a) { return a == 0 || a == 1 || a == 8; }

// Copy methods (NV*B5_*).
constexpr uint32_t kSetSemaphoreA = 0x0240, kSetSemaphoreB = 0x0244, kSetSemaphorePayload = 0x0248,
                   kSetSemaphorePayloadUpper = 0x024c, kLaunchDma = 0x0300, kOffsetInUpper = 0x0400,
                   kOffsetInLower = 0x0404, kOffsetOutUpper = 0x0408, kOffsetOutLower = 0x040c,
                   kLineLengthIn = 0x0418, kLineCount = 0x041c;
// LAUNCH_DMA fields modelled: DATA_TRANSFER_TYPE 1:0, FLUSH_ENABLE 2, SEMAPHORE_TYPE 4:3,
// SRC/DST_MEMORY_LAYOUT 7/8 (PITCH 1), FLUSH_TYPE 25, DISABLE_PLC 26, SEMAPHORE_PAYLOAD_SIZE 27.
constexpr uint32_t kDmaFields = 0x3 | 1u << 2 | 0x3u << 3 | 1u << 7 | 1u << 8 | 1u << 25 | 1u << 26;
constexpr uint32_t kDmaPayloadSize64 = 1u << 27;
constexpr uint32_t kDmaSemaphoreConditionalIntr = 3;

constexpr int kMaxChainedQmds = 1 << 16;  // a longer DEPENDENT_QMD0 chain is taken for a cycle

uint64_t load(uint8_t* p, bool b64) {
  if (b64)
    return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(p))
        .load(std::memory_order_acquire);
  return std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(p)).load(std::memory_order_acquire);
}

void store(uint8_t* p, uint64_t v, bool b64) {
  if (b64) {
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(p)).store(v, std::memory_order_release);
  } else {
    std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(p))
        .store(static_cast<uint32_t>(v), std::memory_order_release);
  }
}

bool is_copy_class(uint32_t cls) { return (cls & 0xff) == 0xb5; }

// OFFSET_IN/OUT_UPPER_UPPER and SET_SEMAPHORE_A_UPPER: 16:0 on AMPERE_DMA_COPY_A/B, 24:0 after.
uint32_t copy_upper_mask(uint32_t cls) {
  return cls == nv::kAmpereDmaCopyA || cls == nv::kAmpereDmaCopyB ? 0x1ffff : 0x1ffffff;
}
// SET_SEMAPHORE_PAYLOAD_UPPER and LAUNCH_DMA_SEMAPHORE_PAYLOAD_SIZE: not in AMPERE_DMA_COPY_A.
bool copy_has_payload_upper(uint32_t cls) { return cls != nv::kAmpereDmaCopyA; }

}  // namespace

bool is_compute_class(uint32_t cls) { return (cls & 0xff) == 0xc0; }

uint32_t local_memory_upper_mask(uint32_t compute_class) {
  switch (compute_class) {
    case nv::kAmpereComputeA:
    case nv::kAmpereComputeB:
    case nv::kAdaComputeA:
      return 0x1ffff;
  }
  return 0x1ffffff;
}

std::string_view method_name(uint32_t cls, uint32_t m) {
  if (m < 0x100) {
    switch (m) {
      case kSetObject:
        return "SET_OBJECT";
      case kNop:
        return "NOP";
      case kNonStallInterrupt:
        return "NON_STALL_INTERRUPT";
      case kSemAddrLo:
        return "SEM_ADDR_LO";
      case kSemAddrHi:
        return "SEM_ADDR_HI";
      case kSemPayloadLo:
        return "SEM_PAYLOAD_LO";
      case kSemPayloadHi:
        return "SEM_PAYLOAD_HI";
      case kSemExecute:
        return "SEM_EXECUTE";
      case kWfi:
        return "WFI";
    }
    return "";
  }
  if (is_compute_class(cls)) {
    switch (m) {
      case kSharedWindowA:
        return "SET_SHADER_SHARED_MEMORY_WINDOW_A";
      case kSharedWindowB:
        return "SET_SHADER_SHARED_MEMORY_WINDOW_B";
      case kSendPcasA:
        return "SEND_PCAS_A";
      case kSendSignalingPcas2B:
        return "SEND_SIGNALING_PCAS2_B";
      case kLocalNonThrottledA:
        return "SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A";
      case kLocalNonThrottledB:
        return "SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_B";
      case kLocalNonThrottledC:
        return "SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C";
      case kLocalMemoryA:
        return "SET_SHADER_LOCAL_MEMORY_A";
      case kLocalMemoryB:
        return "SET_SHADER_LOCAL_MEMORY_B";
      case kLocalWindowA:
        return "SET_SHADER_LOCAL_MEMORY_WINDOW_A";
      case kLocalWindowB:
        return "SET_SHADER_LOCAL_MEMORY_WINDOW_B";
      case kInvalidateShaderCachesNoWfi:
        return "INVALIDATE_SHADER_CACHES_NO_WFI";
    }
    return "";
  }
  if (is_copy_class(cls)) {
    switch (m) {
      case kSetSemaphoreA:
        return "SET_SEMAPHORE_A";
      case kSetSemaphoreB:
        return "SET_SEMAPHORE_B";
      case kSetSemaphorePayload:
        return "SET_SEMAPHORE_PAYLOAD";
      case kSetSemaphorePayloadUpper:
        return "SET_SEMAPHORE_PAYLOAD_UPPER";
      case kLaunchDma:
        return "LAUNCH_DMA";
      case kOffsetInUpper:
        return "OFFSET_IN_UPPER";
      case kOffsetInLower:
        return "OFFSET_IN_LOWER";
      case kOffsetOutUpper:
        return "OFFSET_OUT_UPPER";
      case kOffsetOutLower:
        return "OFFSET_OUT_LOWER";
      case kLineLengthIn:
        return "LINE_LENGTH_IN";
      case kLineCount:
        return "LINE_COUNT";
    }
  }
  return "";
}

// ---- host -----------------------------------------------------------------------------------

Step ChannelRunner::host_method(uint32_t subchannel, uint32_t m, uint32_t data) {
  switch (m) {
    case kSetObject:
      return set_object(subchannel, data);
    case kNop:
    case kWfi:  // everything before it has completed: the fake GPU runs methods synchronously
      return Step::kNext;
    case kNonStallInterrupt:
      count(&GpuCounters::non_stall_interrupts);
      return Step::kNext;
    case kSemAddrLo:
    case kSemAddrHi:
    case kSemPayloadLo:
    case kSemPayloadHi:
      ch_.host[m] = data;
      return Step::kNext;
    case kSemExecute:
      return sem_execute(data);
  }
  return fault(FaultKind::kIllegalMethod, "host method not modelled by the fake GPU");
}

Step ChannelRunner::set_object(uint32_t subchannel, uint32_t data) {
  uint32_t cls = data & 0xffff;  // NVCLASS 15:0 (ENGINE 20:16 only matters for SW classes)
  if (subchannel >= 5 || (data >> 16) != 0) {
    return fault(FaultKind::kIllegalMethod, "SET_OBJECT " + hex(data) + " on subchannel " +
                                                std::to_string(subchannel) +
                                                ": software classes are not modelled");
  }
  // dev_ram.ref: on GR, subchannel 1 is compute and 4 is GRCOPY; other runlists ignore it.
  nv::Generation g = gpu_.generation();
  auto one_of = [cls](std::initializer_list<uint32_t> ids) {
    return std::find(ids.begin(), ids.end(), cls) != ids.end();
  };
  bool compute = false, copy = false;
  switch (g) {
    case nv::Generation::kAmpere:
      compute = one_of({nv::kAmpereComputeA, nv::kAmpereComputeB});
      copy = one_of({nv::kAmpereDmaCopyA, nv::kAmpereDmaCopyB});
      break;
    case nv::Generation::kAda:
      compute = cls == nv::kAdaComputeA;
      copy = cls == nv::kAmpereDmaCopyB;
      break;
    case nv::Generation::kHopper:
      compute = cls == nv::kHopperComputeA;
      copy = cls == nv::kHopperDmaCopyA;
      break;
    case nv::Generation::kBlackwell:
      compute = one_of({nv::kBlackwellComputeA, nv::kBlackwellComputeB});
      copy = one_of({nv::kBlackwellDmaCopyA, nv::kBlackwellDmaCopyB});
      break;
  }
  bool fits = ch_.cfg.engine == ChannelEngine::kCompute
                  ? (subchannel == 1 && compute) || (subchannel == 4 && copy)
                  : copy;
  if (!fits) {
    return fault(FaultKind::kIllegalClass,
                 "SET_OBJECT " + nv::class_name(cls) + " on subchannel " +
                     std::to_string(subchannel) + " of a " +
                     (ch_.cfg.engine == ChannelEngine::kCompute ? "compute" : "copy") +
                     " channel of a " + std::string(nv::generation_name(g)) +
                     " GPU (compute classes go on subchannel 1, copy classes on 4)");
  }
  ch_.classes[subchannel] = cls;
  return Step::kNext;
}

Step ChannelRunner::sem_execute(uint32_t data) {
  if ((data & ~kSemExecuteFields) != 0) {
    return fault(FaultKind::kIllegalValue, "SEM_EXECUTE " + hex(data) + " sets bits " +
                                               hex(data & ~kSemExecuteFields) +
                                               " that are no field of it");
  }
  uint32_t op = data & 7;
  bool b64 = (data >> 24 & 1) != 0, timestamp = (data >> 25 & 1) != 0;
  uint32_t hi = ch_.host_data(kSemAddrHi);
  uint32_t hi_mask = gpu_.host_class() == nv::kAmpereChannelGpfifoA ? 0xff : 0x1ffffff;
  if (Step s = check_field(hi, hi_mask,
                           hi_mask == 0xff ? "SEM_ADDR_HI_OFFSET 7:0" : "SEM_ADDR_HI_OFFSET 24:0");
      s != Step::kNext) {
    return s;
  }
  // SEM_ADDR_LO_OFFSET is 31:2: Host does not store bits 1:0.
  uint64_t addr = uint64_t{hi} << 32 | (ch_.host_data(kSemAddrLo) & ~3u);
  uint64_t payload = uint64_t{ch_.host_data(kSemPayloadHi)} << 32 | ch_.host_data(kSemPayloadLo);
  if (op == kRelease) {
    return release(addr, payload, b64, timestamp, "semaphore release (SEM_EXECUTE)");
  }
  if (op <= kAcqNor) return acquire(addr, payload, b64, op);
  return fault(FaultKind::kIllegalValue,
               "SEM_EXECUTE operation " + std::to_string(op) +
                   (op == kReduction ? " (REDUCTION) is not modelled" : " is reserved"));
}

Step ChannelRunner::acquire(uint64_t addr, uint64_t payload, bool b64, uint32_t op) {
  if (b64 && addr % 8 != 0) {
    return fault(FaultKind::kIllegalValue,
                 "64-bit semaphore acquire at " + hex(addr) + ": not 8-byte aligned");
  }
  auto p = access(addr, b64 ? 8 : 4, Access::kRead, "semaphore acquire (SEM_EXECUTE)");
  if (!p) return Step::kStop;
  CHECK(reinterpret_cast<uintptr_t>(*p) % (b64 ? 8 : 4) == 0) << "unaligned host semaphore";
  uint64_t mask = b64 ? ~0ull : 0xffffffffull;
  uint64_t v = load(*p, b64), pv = payload & mask;
  bool ok = false;
  switch (op) {
    case kAcquire:
      ok = v == pv;
      break;
    case kAcqStrictGeq:
      ok = v >= pv;
      break;
    case kAcqCircGeq:  // the two's complement difference is non-negative, modulo the width
      ok = b64 ? static_cast<int64_t>(v - pv) >= 0
               : static_cast<int32_t>(static_cast<uint32_t>(v - pv)) >= 0;
      break;
    case kAcqAnd:
      ok = (v & pv) != 0;
      break;
    case kAcqNor:
      ok = (~(v | pv) & mask) != 0;
      break;
  }
  if (!ok) {
    if (!ch_.blocked) count(&GpuCounters::acquire_blocks);
    ch_.blocked = true;
    return Step::kBlocked;
  }
  ch_.blocked = false;
  count(&GpuCounters::semaphore_acquires);
  return Step::kNext;
}

// dev_pbdma.ref: a release with a timestamp writes 16 bytes {payload (bytes 4..7 zero for a
// 32-bit payload), timer} at a 16-byte aligned address, the timer first. The copy engine and
// QMD releases are taken to use the same structure.
Step ChannelRunner::release(
    uint64_t addr, uint64_t payload, bool b64, bool timestamp, std::string_view what) {
  uint32_t bytes = timestamp ? 16 : b64 ? 8 : 4;
  if (addr % bytes != 0) {
    return fault(FaultKind::kIllegalValue, std::string(what) + " at " + hex(addr) + ": a " +
                                               (timestamp ? "semaphore with a timestamp (16 bytes)"
                                                : b64     ? "64-bit semaphore"
                                                          : "32-bit semaphore") +
                                               " must be " + std::to_string(bytes) +
                                               "-byte aligned");
  }
  auto p = access(addr, bytes, Access::kWrite, what);
  if (!p) return Step::kStop;
  CHECK(reinterpret_cast<uintptr_t>(*p) % (b64 || timestamp ? 8 : 4) == 0)
      << "unaligned host semaphore";
  if (timestamp) {
    store(*p + 8, FakeNvGpu::timestamp_ns(), true);
    if (!b64) store(*p + 4, 0, false);
  }
  store(*p, payload, b64);
  count(&GpuCounters::semaphore_releases);
  return Step::kNext;
}

Step ChannelRunner::check_field(uint32_t data, uint32_t mask, std::string_view field) {
  if ((data & ~mask) == 0) return Step::kNext;
  return fault(FaultKind::kIllegalValue, hex(data) + " sets bits " + hex(data & ~mask) +
                                             " outside " + std::string(field) + " of " +
                                             nv::class_name(cls_));
}

// ---- compute --------------------------------------------------------------------------------

Step ChannelRunner::compute_method(uint32_t m, uint32_t data) {
  switch (m) {
    case kSharedWindowA:
      return check_field(data, 0x1ffff, "BASE_ADDRESS_UPPER 16:0");
    case kLocalWindowA:
      return check_field(data, 0x1ffff, "BASE_ADDRESS_UPPER 16:0");
    case kLocalMemoryA:
      return check_field(
          data, local_memory_upper_mask(cls_),
          local_memory_upper_mask(cls_) == 0x1ffff ? "ADDRESS_UPPER 16:0" : "ADDRESS_UPPER 24:0");
    case kLocalNonThrottledA:
      return check_field(data, 0xff, "SIZE_UPPER 7:0");
    case kLocalNonThrottledC:  // MAX_SM_COUNT 8:0, MAX_PLURAL/SINGLETON_TPC_GPC_COUNT 31:16
      return check_field(data, 0xffff01ff, "MAX_SM_COUNT 8:0 and the TPC/GPC counts 31:16");
    case kSharedWindowB:
    case kLocalWindowB:
    case kLocalMemoryB:
    case kLocalNonThrottledB:
    case kSendPcasA:  // QMD_ADDRESS_SHIFTED8 31:0
      return Step::kNext;
    case kInvalidateShaderCachesNoWfi:
      if ((data & ~kInvalidateFields) != 0) {
        return fault(FaultKind::kIllegalValue,
                     hex(data) + " sets bits that are no field of the method");
      }
      count(&GpuCounters::shader_cache_invalidates);
      return Step::kNext;
    case kSendSignalingPcas2B: {
      uint32_t action = data & 0xf;
      if (data != action || (!pcas_schedules(action) && !pcas_no_launch(action))) {
        return fault(FaultKind::kIllegalValue,
                     hex(data) +
                         ": only PCAS_ACTION (3:0) NOP, INVALIDATE, PREFETCH and "
                         "the *SCHEDULE actions are modelled");
      }
      if (!pcas_schedules(action)) return Step::kNext;
      Step s = launch(uint64_t{ch_.engine_data(subchannel_, kSendPcasA)} << 8);
      qmd_va_ = 0;
      return s;
    }
  }
  return fault(FaultKind::kIllegalMethod, "method not modelled by the fake GPU");
}

Step ChannelRunner::launch(uint64_t qmd_va) {
  nv::Generation g = gpu_.generation();
  for (int n = 0;; n++) {
    qmd_va_ = qmd_va;
    if (n == kMaxChainedQmds) {
      return fault(FaultKind::kBadQmd,
                   "over " + std::to_string(kMaxChainedQmds) + " chained QMDs (a cycle?)");
    }
    auto head = access(qmd_va, kQmdHeadBytes, Access::kRead, "QMD");
    if (!head) return Step::kStop;
    uint32_t version = qmd_declared_version(g, {*head, kQmdHeadBytes});
    if (!qmd_version_runs(g, version)) {
      return fault(FaultKind::kBadQmd, "QMD_MAJOR_VERSION " + std::to_string(version) +
                                           " is not one a " + std::string(nv::generation_name(g)) +
                                           " GPU runs");
    }
    size_t size = qmd_size(version);
    auto full = access(qmd_va, size, Access::kRead, "QMD");
    if (!full) return Step::kStop;
    std::array<uint8_t, 384> bytes{};
    std::memcpy(bytes.data(), *full, size);
    auto d = decode_qmd(version, {bytes.data(), size});
    if (!d.ok()) return fault(FaultKind::kBadQmd, d.status().message());
    LaunchInfo li{.program_va = d->program_va,
                  .grid = d->grid,
                  .block = d->block,
                  .shared_memory_bytes = d->shared_memory_bytes,
                  .registers = d->registers,
                  .cbank0_va = d->cbank0_va,
                  .cbank0 = {},
                  .qmd_va = qmd_va,
                  .token = ch_.cfg.token};
    if (d->cbank0_valid && d->cbank0_bytes > 0) {
      auto cb = access(d->cbank0_va, d->cbank0_bytes, Access::kRead, "constant bank 0");
      if (!cb) return Step::kStop;
      li.cbank0 = {*cb, d->cbank0_bytes};
    }
    KernelExecutor& e = gpu_.executor_ != nullptr ? *gpu_.executor_ : gpu_.twins_;
    Status st = e.launch(li);
    if (!st.ok()) return fault(FaultKind::kLaunch, st.message());
    count(&GpuCounters::launches);
    progressed_ = true;
    for (const QmdSemaphore& r : d->releases) {
      Step s = release(r.address, r.payload, r.payload64, r.timestamp, "QMD release semaphore");
      if (s != Step::kNext) return s;
    }
    if (!d->dependent_qmd_va) return Step::kNext;
    qmd_va = *d->dependent_qmd_va;
  }
}

// ---- copy -----------------------------------------------------------------------------------

Step ChannelRunner::copy_method(uint32_t m, uint32_t data) {
  switch (m) {
    case kSetSemaphoreA:
    case kOffsetInUpper:
    case kOffsetOutUpper:
      return check_field(data, copy_upper_mask(cls_),
                         copy_upper_mask(cls_) == 0x1ffff ? "UPPER 16:0" : "UPPER 24:0");
    case kSetSemaphorePayloadUpper:
      if (!copy_has_payload_upper(cls_)) break;
      return Step::kNext;
    case kSetSemaphoreB:
    case kSetSemaphorePayload:
    case kOffsetInLower:
    case kOffsetOutLower:
    case kLineLengthIn:
    case kLineCount:
      return Step::kNext;
    case kLaunchDma:
      return launch_dma(data);
  }
  return fault(FaultKind::kIllegalMethod, "method not modelled by the fake GPU");
}

Step ChannelRunner::launch_dma(uint32_t data) {
  uint32_t fields = kDmaFields | (copy_has_payload_upper(cls_) ? kDmaPayloadSize64 : 0);
  if ((data & ~fields) != 0) {
    return fault(FaultKind::kIllegalValue,
                 "LAUNCH_DMA " + hex(data) + " sets bits " + hex(data & ~fields) +
                     " the fake GPU does not model (interrupts, multi-line, remap, physical "
                     "addresses, reductions, scrub, ...)");
  }
  auto get = [&](uint32_t method) { return uint64_t{ch_.engine_data(subchannel_, method)}; };
  if ((data & 3) != 0) {  // DATA_TRANSFER_TYPE PIPELINED or NON_PIPELINED
    if ((data >> 7 & 1) == 0 || (data >> 8 & 1) == 0) {
      return fault(FaultKind::kIllegalValue,
                   "LAUNCH_DMA " + hex(data) + ": block-linear layouts are not modelled");
    }
    uint64_t src = get(kOffsetInUpper) << 32 | get(kOffsetInLower);
    uint64_t dst = get(kOffsetOutUpper) << 32 | get(kOffsetOutLower);
    size_t n = get(kLineLengthIn);
    if (n > 0) {
      auto s = access(src, n, Access::kRead, "copy source (LAUNCH_DMA)");
      if (!s) return Step::kStop;
      auto d = access(dst, n, Access::kWrite, "copy destination (LAUNCH_DMA)");
      if (!d) return Step::kStop;
      std::memmove(*d, *s, n);
    }
    count(&GpuCounters::copies);
    count(&GpuCounters::bytes_copied, n);
  }
  uint32_t semaphore = data >> 3 & 3;  // SEMAPHORE_TYPE: NONE, ONE_WORD, FOUR_WORD, COND_INTR
  if (semaphore == 0) return Step::kNext;
  if (semaphore == kDmaSemaphoreConditionalIntr) {
    return fault(FaultKind::kIllegalValue,
                 "LAUNCH_DMA SEMAPHORE_TYPE RELEASE_CONDITIONAL_INTR_SEMAPHORE is not modelled");
  }
  bool b64 = (data & kDmaPayloadSize64) != 0;
  uint64_t addr = get(kSetSemaphoreA) << 32 | get(kSetSemaphoreB);
  uint64_t payload = get(kSetSemaphorePayload) | (b64 ? get(kSetSemaphorePayloadUpper) << 32 : 0);
  return release(addr, payload, b64, semaphore == 2, "copy-engine semaphore release (LAUNCH_DMA)");
}

}  // namespace baregrad::mock
