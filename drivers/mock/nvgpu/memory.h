// GPU memory as a fake GPU sees it. Every access the fake GPU makes goes through resolve(), so
// an address no live allocation covers becomes a recorded MMU fault, never a host crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>

#include "base/status.h"

namespace baregrad::mock {

class GpuMemory {
 public:
  virtual ~GpuMemory() = default;
  // The host address of GPU VAs [va, va + bytes) when one live allocation holds all of them;
  // nullopt otherwise (the GPU turns that into an MMU fault). Called from any thread.
  virtual std::optional<uint8_t*> resolve(uint64_t va, size_t bytes) = 0;
};

// Host ranges registered by hand: what unit tests map their buffers with. The fake RM keeps
// its own GpuMemory over its allocations. Thread-safe.
class RangeMemory final : public GpuMemory {
 public:
  // Maps [va, va + bytes) to host memory at `host` (GPU VA and host address may differ).
  // InvalidArgument for an empty range, one that wraps, or one overlapping a mapped range.
  Status add(uint64_t va, void* host, size_t bytes);
  // Unmaps the range that starts at `va`; NotFound when none does.
  Status remove(uint64_t va);

  std::optional<uint8_t*> resolve(uint64_t va, size_t bytes) override;

 private:
  struct Range {
    uint8_t* host;
    size_t bytes;
  };
  std::mutex mu_;
  std::map<uint64_t, Range> ranges_;  // by first VA
};

}  // namespace baregrad::mock
