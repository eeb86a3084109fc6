#include "drivers/mock/nvgpu/memory.h"

#include <string>

#include "base/format.h"
#include "drivers/nv/classes.h"

namespace baregrad::mock {

Status RangeMemory::add(uint64_t va, void* host, size_t bytes) {
  if (bytes == 0 || va + bytes < va) {
    return invalid_argument("GPU range at " + hex(va) + " of " + std::to_string(bytes) +
                            " bytes: empty or wrapping");
  }
  std::lock_guard lock(mu_);
  auto next = ranges_.lower_bound(va);
  bool overlaps_next = next != ranges_.end() && next->first < va + bytes;
  bool overlaps_prev =
      next != ranges_.begin() && std::prev(next)->first + std::prev(next)->second.bytes > va;
  if (overlaps_next || overlaps_prev) {
    return invalid_argument("GPU range at " + hex(va) + " of " + std::to_string(bytes) +
                            " bytes overlaps a mapped range");
  }
  ranges_.emplace(va, Range{static_cast<uint8_t*>(host), bytes});
  return {};
}

Status RangeMemory::remove(uint64_t va) {
  std::lock_guard lock(mu_);
  if (ranges_.erase(va) == 0) return not_found("no GPU range starts at " + hex(va));
  return {};
}

std::optional<uint8_t*> RangeMemory::resolve(uint64_t va, size_t bytes) {
  if (va + bytes < va) return std::nullopt;
  std::lock_guard lock(mu_);
  auto it = ranges_.upper_bound(va);
  if (it == ranges_.begin()) return std::nullopt;
  --it;
  uint64_t offset = va - it->first;
  if (offset >= it->second.bytes || bytes > it->second.bytes - offset) return std::nullopt;
  return it->second.host + offset;
}

}  // namespace baregrad::mock
