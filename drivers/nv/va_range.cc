#include "drivers/nv/va_range.h"

#include <sys/mman.h>

#include <iterator>
#include <optional>
#include <utility>

#include "base/check.h"
#include "base/format.h"
#include "base/log.h"
#include "drivers/nv/classes.h"

namespace baregrad::nv {
namespace {

constexpr int kReserveFlags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
constexpr uint64_t kFallbackBase = 1ull << 30;

std::string describe(uint64_t base, uint64_t size) {
  return "[" + hex(base) + ", +" + hex(size) + ")";
}

}  // namespace

VaRange::VaRange(hcq::Os& os, std::string name, hcq::Mapping reservation)
    : os_(os),
      name_(std::move(name)),
      reservation_(std::move(reservation)),
      base_(reinterpret_cast<uint64_t>(reservation_.get())),
      size_(reservation_.size()) {
  free_.emplace(base_, size_);
}

Result<std::unique_ptr<VaRange>> VaRange::reserve(
    hcq::Os& os, std::string name, uint64_t preferred_base, uint64_t size, uint64_t limit) {
  // Exactly [base, base + bytes), or nothing.
  auto fixed = [&os](uint64_t base, uint64_t bytes) -> std::optional<hcq::Mapping> {
    void* want = reinterpret_cast<void*>(base);
    Result<hcq::Mapping> m =
        hcq::map(os, want, bytes, PROT_NONE, kReserveFlags | MAP_FIXED_NOREPLACE, -1, 0);
    if (!m.ok()) return std::nullopt;
    if (m->get() != want) return std::nullopt;  // a kernel without NOREPLACE took it as a hint
    return std::move(*m);
  };
  auto made = [&](hcq::Mapping m) {
    return std::unique_ptr<VaRange>(new VaRange(os, std::move(name), std::move(m)));
  };
  if (auto m = fixed(preferred_base, size)) return made(std::move(*m));

  // Taken: let the kernel place it, which is fine when it stays below `limit`.
  uint64_t base = 0;
  Result<hcq::Mapping> any = hcq::map(os, nullptr, size, PROT_NONE, kReserveFlags, -1, 0);
  if (any.ok()) {
    base = reinterpret_cast<uint64_t>(any->get());
    if (base + size <= limit) {
      BG_LOG(1) << "nv: " << name << " VA range " << describe(preferred_base, size)
                << " is taken; using " << describe(base, size);
      return made(std::move(*any));
    }
    any->reset();
  }
  // NOTE: sanitizers keep most of the address space for shadow memory (ASan leaves the first
  // 2 GiB below 2^40; TSan refuses an 8 TiB reservation outright): smaller ranges, from 1 GiB
  // up in steps of their size (several devices of one process each need one), or wherever the
  // kernel puts them below `limit`.
  constexpr int kTriesPerSize = 64;
  for (uint64_t bytes = size; bytes >= size / 1024 && bytes >= (64 << 20); bytes /= 2) {
    for (int k = 0; k < kTriesPerSize; k++) {
      uint64_t at = kFallbackBase + static_cast<uint64_t>(k) * bytes;
      if (at + bytes > limit) break;
      if (auto m = fixed(at, bytes)) {
        BG_LOG(1) << "nv: " << name << " VA range " << describe(preferred_base, size)
                  << " is taken; using " << describe(at, bytes);
        return made(std::move(*m));
      }
    }
    Result<hcq::Mapping> m = hcq::map(os, nullptr, bytes, PROT_NONE, kReserveFlags, -1, 0);
    if (m.ok() && reinterpret_cast<uint64_t>(m->get()) + bytes <= limit) {
      BG_LOG(1) << "nv: " << name << " VA range " << describe(preferred_base, size)
                << " is taken; using " << describe(reinterpret_cast<uint64_t>(m->get()), bytes);
      return made(std::move(*m));
    }
  }
  return resource_exhausted(
      "cannot reserve the " + name + " VA range: " + describe(preferred_base, size) +
      " is taken, the kernel offers " +
      (any.ok() ? describe(base, size) + " which ends above " + hex(limit)
                : std::string("no place for it (") + any.status().message() + ")") +
      ", and no range of at least " + hex(std::max<uint64_t>(size / 1024, 64 << 20)) +
      " fits from " + hex(kFallbackBase) + " up or below the limit either");
}

Result<uint64_t> VaRange::alloc(uint64_t bytes, uint64_t align) {
  CHECK(bytes > 0 && bytes % 4096 == 0) << "VA allocation of " << bytes << " bytes";
  CHECK(align != 0 && (align & (align - 1)) == 0) << "alignment " << align;
  std::lock_guard lock(mu_);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    uint64_t start = (it->first + align - 1) & ~(align - 1);
    uint64_t end = it->first + it->second;
    if (start < it->first || start > end || end - start < bytes) continue;
    uint64_t block = it->first, block_bytes = it->second;
    free_.erase(it);
    if (start > block) free_.emplace(block, start - block);
    if (start + bytes < block + block_bytes) {
      free_.emplace(start + bytes, block + block_bytes - start - bytes);
    }
    return start;
  }
  return resource_exhausted("the " + name_ + " VA range " + describe(base_, size_) +
                            " has no free " + hex(bytes) + " bytes aligned to " + hex(align));
}

void VaRange::free(uint64_t va, uint64_t bytes) {
  CHECK(contains(va, bytes)) << "freeing " << describe(va, bytes) << " outside the " << name_
                             << " VA range " << describe(base_, size_);
  std::lock_guard lock(mu_);
  auto next = free_.lower_bound(va);
  CHECK(next == free_.end() || next->first >= va + bytes) << "double free of VA " << va;
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    CHECK_LE(prev->first + prev->second, va) << "double free of VA " << va;
    if (prev->first + prev->second == va) {
      va = prev->first;
      bytes += prev->second;
      free_.erase(prev);
    }
  }
  if (next != free_.end() && next->first == va + bytes) {
    bytes += next->second;
    free_.erase(next);
  }
  free_.emplace(va, bytes);
}

Status VaRange::rereserve(uint64_t va, uint64_t bytes) {
  CHECK(contains(va, bytes)) << "re-reserving " << describe(va, bytes) << " outside the " << name_
                             << " VA range";
  ASSIGN_OR_RETURN(void* got, os_.mmap(reinterpret_cast<void*>(va), bytes, PROT_NONE,
                                       kReserveFlags | MAP_FIXED, -1, 0));
  CHECK_EQ(reinterpret_cast<uint64_t>(got), va) << "MAP_FIXED moved the mapping";
  return Status();
}

}  // namespace baregrad::nv
