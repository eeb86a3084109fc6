// Scratch (the private segment): how big a device's scratch buffer must be for a per-work-item
// need, and the COMPUTE_TMPRING_SIZE that describes it to the CP, as tinygrad's
// AMDDevice._ensure_has_local_memory sizes them: every scratch wave slot of every CU holds a
// wave of 64 lanes at the aligned per-lane size.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "drivers/amd/arch.h"
#include "drivers/amd/topology.h"

namespace baregrad::amd {

struct ScratchLayout {
  uint32_t bytes_per_lane = 0;  // the need rounded up to the arch's granule / 64
  uint64_t bytes = 0;           // the whole buffer (every XCC)
  uint32_t tmpring_size = 0;    // COMPUTE_TMPRING_SIZE: WAVES 11:0, WAVESIZE from bit 12
};

// The layout for `private_segment_size` bytes per work-item on `arch` with `props`' CUs and
// scratch slots. FailedPrecondition when the topology lacks them (max_slots_scratch_cu 0) or the
// per-wave size does not fit COMPUTE_TMPRING_SIZE.WAVESIZE.
Result<ScratchLayout> scratch_layout(const ArchInfo& arch,
                                     const KfdNodeProperties& props,
                                     uint32_t private_segment_size);

// The private segment buffer V# (4 user SGPRs) of a gfx9 kernel: scratch at `va` (0: none; a
// stray scratch access then faults at 0). Words 1..3 as tinygrad writes them: SWIZZLE_ENABLE,
// NUM_RECORDS 0xffffffff, and its DST_SEL / format word 0x20c14000.
void private_segment_buffer(uint64_t va, uint32_t out[4]);

}  // namespace baregrad::amd
