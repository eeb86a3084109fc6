// What runs a kernel dispatch on the fake AMD GPU. The fake GPU decodes a PM4 DISPATCH_DIRECT (with
// the COMPUTE_* registers) or an AQL kernel-dispatch packet into an AmdLaunch and hands it to an
// AmdKernelExecutor; the one a mock device uses is AmdTwinRegistry: per code address, a
// host-compiled twin of the kernel that reads its arguments from the kernarg segment.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <unordered_map>

#include "base/status.h"
#include "hcq/hcq.h"

namespace baregrad::mock {

// One kernel dispatch as the GPU decoded it.
struct AmdLaunch {
  // The first instruction: (COMPUTE_PGM_HI << 32 | COMPUTE_PGM_LO) << 8 (PM4), or the kernel
  // descriptor's VA + kernel_code_entry_byte_offset (AQL).
  uint64_t code_va = 0;
  // The kernarg segment: the COMPUTE_USER_DATA pair where the kernel takes its kernarg pointer
  // (PM4: AmdKernelExecutor::kernarg_user_sgpr), or the packet's kernarg_address (AQL).
  uint64_t kernarg_va = 0;
  // The kernarg bytes as resolved in GPU memory: the descriptor's kernarg_size (AQL); PM4 says
  // nothing of the size, so min(256, bytes to the end of the allocation holding kernarg_va).
  // Empty when kernarg_va is 0 (PM4) or kernarg_size is 0 (AQL).
  std::span<const uint8_t> kernargs;
  hcq::Dim3 grid, block;   // grid in work-groups, block in work-items (NUM_THREAD_X/Y/Z)
  uint32_t lds_bytes = 0;  // PM4: COMPUTE_PGM_RSRC2.LDS_SIZE * 512; AQL: group_segment_size
  uint32_t queue_id = 0;   // the KFD queue
  uint64_t packet_va = 0;  // the DISPATCH_DIRECT header or the AQL packet
};

class AmdKernelExecutor {
 public:
  virtual ~AmdKernelExecutor() = default;
  // Runs the grid to completion before returning. A non-OK status stops the queue with a kLaunch
  // fault carrying the message. Runs under the fake GPU's lock on the pumping thread; it may call
  // back into the GPU (nested pumps return at once).
  virtual Status launch(const AmdLaunch& l) = 0;
  // Which user SGPR (a pair from it) holds the kernarg pointer of the kernel at `code_va`: its
  // code object's ABI, which the shader knows and the CP does not (4 after a private segment
  // buffer V#, as gfx9 kernels take one; else 0). The fake GPU reads the PM4 dispatch's kernarg
  // pointer from COMPUTE_USER_DATA_<n> and _<n + 1>.
  virtual uint32_t kernarg_user_sgpr(uint64_t code_va) {
    (void)code_va;
    return 0;
  }
};

// Host twins by code VA. Thread-safe; a twin runs outside the registry's lock, so it may add or
// remove twins.
class AmdTwinRegistry final : public AmdKernelExecutor {
 public:
  using Twin =
      std::function<void(std::span<const uint8_t> kernargs, hcq::Dim3 grid, hcq::Dim3 block)>;

  // Registers (or replaces) the twin of the kernel whose first instruction is at `code_va`,
  // which takes its kernarg pointer in user SGPRs `kernarg_sgpr` and the next.
  void add(uint64_t code_va, Twin twin, uint32_t kernarg_sgpr = 0);
  // Forgets the twin at `code_va`; a no-op when there is none.
  void remove(uint64_t code_va);
  // How many twins are registered.
  size_t size();

  // Runs the twin; NotFound "launch of unknown kernel code at 0x..." when none is registered.
  Status launch(const AmdLaunch& l) override;
  // What add() registered for `code_va` (0 for an unknown kernel).
  uint32_t kernarg_user_sgpr(uint64_t code_va) override;

 private:
  struct Entry {
    Twin twin;
    uint32_t kernarg_sgpr = 0;
  };
  std::mutex mu_;
  std::unordered_map<uint64_t, Entry> twins_;
};

}  // namespace baregrad::mock
