// Method builders over the pushbuffer encoder: semaphores, barriers, object binding, kernel
// launch, shader memory setup and copies, in the forms tinygrad's NV backend emits them.
// Each returns InvalidArgument for a constant address the method cannot hold; symbolic values
// are the caller's to keep in range. Offsets are the same in every class of a kind this
// driver selects (checked per class; see README.md).
#pragma once

#include <cstdint>

#include "base/status.h"
#include "drivers/nv/classes.h"
#include "drivers/nv/pushbuf.h"
#include "hcq/cmdstream.h"

namespace baregrad::nv {

// Host methods (clc56f.h NVC56F_*; the same offsets in clc86f.h and clc96f.h).
constexpr uint32_t kSetObject = 0x0000;          // NVC56F_SET_OBJECT (and NVC6C0_/NVC6B5_)
constexpr uint32_t kNonStallInterrupt = 0x0020;  // NVC56F_NON_STALL_INTERRUPT
constexpr uint32_t kSemAddrLo = 0x005c;          // NVC56F_SEM_ADDR_LO, then _HI,
constexpr uint32_t kSemExecute = 0x006c;         // _PAYLOAD_LO/_HI, NVC56F_SEM_EXECUTE
// NVC56F_SEM_EXECUTE fields.
constexpr uint32_t kSemOperationRelease = 1;           // OPERATION 2:0 RELEASE
constexpr uint32_t kSemOperationAcqCircGeq = 3;        // OPERATION 2:0 ACQ_CIRC_GEQ
constexpr uint32_t kSemReleaseWfiEn = 1u << 20;        // RELEASE_WFI 20:20 EN (DIS = 0)
constexpr uint32_t kSemPayloadSize64Bit = 1u << 24;    // PAYLOAD_SIZE 24:24 64BIT
constexpr uint32_t kSemReleaseTimestampEn = 1u << 25;  // RELEASE_TIMESTAMP 25:25 EN

// Compute methods (clc6c0.h NVC6C0_*; the same offsets in clc7c0/c9c0/cbc0/cdc0/cec0.h).
constexpr uint32_t kSetShaderSharedMemoryWindowA = 0x02a0;       // then _B
constexpr uint32_t kSendPcasA = 0x02b4;                          // SEND_PCAS_A
constexpr uint32_t kSendSignalingPcas2B = 0x02c0;                // SEND_SIGNALING_PCAS2_B
constexpr uint32_t kSetShaderLocalMemoryNonThrottledA = 0x02e4;  // then _B, _C
constexpr uint32_t kSetShaderLocalMemoryA = 0x0790;              // then _B
constexpr uint32_t kSetShaderLocalMemoryWindowA = 0x07b0;        // then _B
constexpr uint32_t kInvalidateShaderCachesNoWfi = 0x1698;        // INVALIDATE_SHADER_CACHES_NO_WFI
// INVALIDATE_SHADER_CACHES_NO_WFI fields.
constexpr uint32_t kInvalidateInstruction = 1u << 0;  // INSTRUCTION 0:0 TRUE
constexpr uint32_t kInvalidateGlobalData = 1u << 4;   // GLOBAL_DATA 4:4 TRUE
constexpr uint32_t kInvalidateConstant = 1u << 12;    // CONSTANT 12:12 TRUE
// SEND_SIGNALING_PCAS2_B_PCAS_ACTION 3:0 (tinygrad: PREFETCH_SCHEDULE; Mesa NVK:
// INVALIDATE_COPY_SCHEDULE).
enum class PcasAction : uint32_t { kInvalidateCopySchedule = 3, kPrefetchSchedule = 9 };

// Copy methods (clc6b5.h NVC6B5_*; the same offsets in clc7b5/c8b5/c9b5/cab5.h).
constexpr uint32_t kCopySetSemaphoreA = 0x0240;  // SET_SEMAPHORE_A, _B, _PAYLOAD, _PAYLOAD_UPPER
constexpr uint32_t kCopyLaunchDma = 0x0300;      // LAUNCH_DMA
constexpr uint32_t kCopyOffsetInUpper = 0x0400;  // OFFSET_IN_UPPER/LOWER, OFFSET_OUT_UPPER/LOWER
constexpr uint32_t kCopyLineLengthIn = 0x0418;   // LINE_LENGTH_IN
// LAUNCH_DMA fields.
constexpr uint32_t kDmaTransferNonPipelined = 2;        // DATA_TRANSFER_TYPE 1:0 NON_PIPELINED
constexpr uint32_t kDmaFlushEnable = 1u << 2;           // FLUSH_ENABLE 2:2 TRUE
constexpr uint32_t kDmaSemaphoreNoTimestamp = 1u << 3;  // SEMAPHORE_TYPE 4:3 = 1 (ONE_WORD)
constexpr uint32_t kDmaSemaphoreTimestamp = 2u << 3;    // SEMAPHORE_TYPE 4:3 = 2 (FOUR_WORD)
constexpr uint32_t kDmaSrcPitch = 1u << 7;              // SRC_MEMORY_LAYOUT 7:7 PITCH
constexpr uint32_t kDmaDstPitch = 1u << 8;              // DST_MEMORY_LAYOUT 8:8 PITCH
constexpr uint32_t kDmaSemaphorePayload64 = 1u << 27;   // SEMAPHORE_PAYLOAD_SIZE 27:27 TWO_WORD
constexpr uint64_t kCopyChunkBytes = 1ull << 31;        // tinygrad's largest single LAUNCH_DMA

// The shader memory windows tinygrad uses (any 4 GiB-aligned hole works; cb0 must name them).
constexpr uint64_t kLocalMemoryWindow = 0x729300000000;
constexpr uint64_t kSharedMemoryWindow = 0x729400000000;

enum class PayloadSize : uint8_t { k32, k64 };
struct Release {
  PayloadSize size = PayloadSize::k64;
  bool timestamp = false;  // also write the GPU clock (ns) at addr + 8 (addr 16-aligned)
  bool wfi = true;         // host release only: RELEASE_WFI (wait for the engine to be idle)
};

// SET_OBJECT binding `cls` (<= 0xffff) to subchannel `sc`.
void emit_set_object(PushBuffer& pb, Subchannel sc, uint32_t cls);

// Host semaphore release after the work before it is idle (RELEASE_WFI; with r.wfi false, as
// soon as Host reaches it): writes `payload` at `addr` (4-aligned for 32 bits, 8-aligned for
// 64, 16-aligned with a timestamp). Works on compute and copy channels.
Status emit_semaphore_release(
    PushBuffer& pb, const GpuClasses& gpu, hcq::Value addr, hcq::Value payload, Release r = {});
// Host semaphore acquire: stalls the channel until *addr >= value (ACQ_CIRC_GEQ, i.e. compared
// as a wrapping difference, as tinygrad does).
Status emit_semaphore_acquire(PushBuffer& pb,
                              const GpuClasses& gpu,
                              hcq::Value addr,
                              hcq::Value value,
                              PayloadSize size = PayloadSize::k64);
// NON_STALL_INTERRUPT 0 (tinygrad emits it after a compute release; nothing waits on it).
void emit_non_stall_interrupt(PushBuffer& pb);

// The compute barrier: INVALIDATE_SHADER_CACHES_NO_WFI of instruction, global data, constant.
void emit_invalidate_shader_caches(PushBuffer& pb);
// Launches the QMD at `qmd_va` (256-aligned, below 2^40): SEND_PCAS_A, SEND_SIGNALING_PCAS2_B.
Status emit_launch(PushBuffer& pb,
                   uint64_t qmd_va,
                   PcasAction action = PcasAction::kPrefetchSchedule);

// SET_SHADER_LOCAL_MEMORY_WINDOW_A/B then SET_SHADER_SHARED_MEMORY_WINDOW_A/B (below 2^49).
Status emit_shader_memory_windows(PushBuffer& pb, uint64_t local_window, uint64_t shared_window);
// The local-memory (stack/spill) backing store: SET_SHADER_LOCAL_MEMORY_A/B = `va`, then
// SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A/B = `bytes_per_tpc` (< 2^40), _C = 0xff (MAX_SM_COUNT).
Status emit_shader_local_memory(PushBuffer& pb,
                                const GpuClasses& gpu,
                                hcq::Value va,
                                uint64_t bytes_per_tpc);

// A 1-D pitch copy of `bytes` from `src` to `dst`: OFFSET_IN/OUT, LINE_LENGTH_IN, LAUNCH_DMA
// (NON_PIPELINED, pitch to pitch), one launch per kCopyChunkBytes. A constant size over one
// chunk needs constant addresses; a symbolic size is one launch (< 2^32 at submit).
Status emit_copy(
    PushBuffer& pb, const GpuClasses& gpu, hcq::Value dst, hcq::Value src, hcq::Value bytes);
// Copy-engine semaphore release after the copies before it (LAUNCH_DMA with FLUSH_ENABLE and no
// transfer). 64-bit payloads need SET_SEMAPHORE_PAYLOAD_UPPER (not on AMPERE_DMA_COPY_A).
Status emit_copy_semaphore_release(
    PushBuffer& pb, const GpuClasses& gpu, hcq::Value addr, hcq::Value payload, Release r = {});

}  // namespace baregrad::nv
