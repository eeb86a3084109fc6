// What runs a grid on the fake GPU. The fake GPU decodes the QMD and hands the launch to a
// KernelExecutor; the one a mock device uses is TwinRegistry: per program address, a host-compiled
// twin of the kernel that reads its arguments from constant bank 0.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <unordered_map>

#include "base/status.h"
#include "hcq/hcq.h"

namespace baregrad::mock {

// One grid as the QMD describes it (fields decoded by the fake GPU from the QMD's own layout).
struct LaunchInfo {
  uint64_t program_va = 0;           // PROGRAM_ADDRESS (<< 4 on V05_00)
  hcq::Dim3 grid, block;             // grid in CTAs, CTA in threads
  uint32_t shared_memory_bytes = 0;  // SHARED_MEMORY_SIZE (<< 7 on V05_00)
  uint32_t registers = 0;            // REGISTER_COUNT(_V)
  uint64_t cbank0_va = 0;            // CONSTANT_BUFFER_ADDR(0); 0 when bank 0 is not valid
  // Constant bank 0 (SIZE_SHIFTED4 << 4 bytes) as resolved in GPU memory; empty when not valid.
  std::span<const uint8_t> cbank0;
  uint64_t qmd_va = 0;  // the QMD that launched it
  uint32_t token = 0;   // the channel (work-submit token)
};

class KernelExecutor {
 public:
  virtual ~KernelExecutor() = default;
  // Runs the grid to completion before returning. A non-OK status stops the channel with a
  // launch fault carrying the status message. Runs under the fake GPU's lock, on the thread that
  // pumped the GPU; it may call back into the GPU (nested pumps return at once).
  virtual Status launch(const LaunchInfo& li) = 0;
};

// Host twins by program VA. Thread-safe; a twin runs outside the registry's lock, so it may add
// or remove twins.
class TwinRegistry final : public KernelExecutor {
 public:
  using Twin =
      std::function<void(std::span<const uint8_t> cbank0, hcq::Dim3 grid, hcq::Dim3 block)>;

  // Registers (or replaces) the twin of the kernel whose code starts at `program_va`.
  void add(uint64_t program_va, Twin twin);
  // Forgets the twin at `program_va` (the program was freed); a no-op when there is none.
  void remove(uint64_t program_va);
  // How many twins are registered.
  size_t size();

  // Runs the twin; NotFound "launch of unknown program at 0x..." when none is registered.
  Status launch(const LaunchInfo& li) override;

 private:
  std::mutex mu_;
  std::unordered_map<uint64_t, Twin> twins_;
};

}  // namespace baregrad::mock
