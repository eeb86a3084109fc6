// A range of process virtual addresses reserved PROT_NONE for baregrad's fixed mappings (GPU VA
// equals CPU VA), with a first-fit allocator over it. Nothing else in the process can land in a
// reserved range, so later MAP_FIXED mappings there clobber nothing.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "base/status.h"
#include "hcq/os.h"

namespace baregrad::nv {

class VaRange {
 public:
  // Reserves `size` bytes at `preferred_base` (MAP_FIXED_NOREPLACE). When that address is taken
  // (a sanitizer's shadow, another mapping) the kernel places the range, if it then ends at or
  // below `limit`; else a smaller range (down to size / 128) at 1 GiB. Errors name the attempts.
  static Result<std::unique_ptr<VaRange>> reserve(
      hcq::Os& os, std::string name, uint64_t preferred_base, uint64_t size, uint64_t limit);

  const std::string& name() const { return name_; }
  uint64_t base() const { return base_; }
  uint64_t size() const { return size_; }
  bool contains(uint64_t va, uint64_t bytes) const {
    return va >= base_ && bytes <= size_ && va - base_ <= size_ - bytes;
  }

  // `bytes` (> 0, a multiple of 4 KiB) at an address aligned to `align` (a power of two);
  // ResourceExhausted naming the range, its size and the request.
  Result<uint64_t> alloc(uint64_t bytes, uint64_t align);
  // Returns [va, va + bytes) from alloc() to the free list.
  void free(uint64_t va, uint64_t bytes);
  // Maps PROT_NONE over [va, va + bytes) again, replacing (unmapping) whatever was mapped there.
  Status rereserve(uint64_t va, uint64_t bytes);

 private:
  VaRange(hcq::Os& os, std::string name, hcq::Mapping reservation);

  hcq::Os& os_;
  std::string name_;
  hcq::Mapping reservation_;
  uint64_t base_, size_;
  std::mutex mu_;
  std::map<uint64_t, uint64_t> free_;  // start -> bytes, disjoint and coalesced
};

}  // namespace baregrad::nv
