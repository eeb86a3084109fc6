// QMD decoding as the fake GPU's compute front end does it. The field positions of each version
// are written again here from NVIDIA's qmd headers, independently of drivers/nv/qmd_layout.cc,
// so that a launch on the fake GPU checks the QMD encoder against the headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "base/status.h"
#include "drivers/nv/classes.h"
#include "hcq/hcq.h"

namespace baregrad::mock {

// A semaphore a QMD writes when its grid completes.
struct QmdSemaphore {
  uint64_t address = 0;
  uint64_t payload = 0;
  bool payload64 = false;  // RELEASE*_PAYLOAD64B
  bool timestamp = false;  // STRUCTURE_SIZE FOUR_WORDS: payload, then the timer at +8
};

struct DecodedQmd {
  uint32_t version = 0;  // QMD_MAJOR_VERSION
  uint64_t program_va = 0;
  hcq::Dim3 grid, block;
  uint32_t shared_memory_bytes = 0;
  uint32_t registers = 0;
  bool cbank0_valid = false;
  uint64_t cbank0_va = 0;
  uint32_t cbank0_bytes = 0;
  std::vector<QmdSemaphore> releases;        // the enabled release slots, in slot order
  std::optional<uint64_t> dependent_qmd_va;  // DEPENDENT_QMD0 (action QMD_SCHEDULE), enabled
};

// Bytes of a QMD the GPU reads before it knows the version (every version's
// QMD_MAJOR_VERSION lies in them).
constexpr size_t kQmdHeadBytes = 256;

// The QMD_MAJOR_VERSION the QMD declares, read where `g`'s compute class reads it (MW(583:580)
// up to V04_00, MW(471:468) in V05_00). `head` holds at least kQmdHeadBytes bytes.
uint32_t qmd_declared_version(nv::Generation g, std::span<const uint8_t> head);
// Whether `g`'s compute classes run QMDs of `version`: Ampere and Ada 3, Hopper 3 and 4
// (clcbc0qmd.h defines both), Blackwell 5.
bool qmd_version_runs(nv::Generation g, uint32_t version);
// 256 for version 3, 384 for 4 and 5; 0 for others.
size_t qmd_size(uint32_t version);

// Decodes a QMD of `version` (qmd.size() >= qmd_size(version)). InvalidArgument for what the
// fake GPU does not run: a minor version other than 0, a queue QMD, a release reduction, a
// release structure size that contradicts PAYLOAD64B, a dependent action other than
// QMD_SCHEDULE.
Result<DecodedQmd> decode_qmd(uint32_t version, std::span<const uint8_t> qmd);

}  // namespace baregrad::mock
