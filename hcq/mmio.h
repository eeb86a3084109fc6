#pragma once

// Typed access to device-mapped memory (MMIO registers, doorbell pages, rings) and doorbells.
// Every access is one volatile load or store of exactly the width asked, naturally aligned and
// CHECKed against the window: an overrun is a bug caught at the access, not on the GPU.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "base/check.h"

namespace baregrad::hcq {

// An integer type one MMIO access can move without tearing.
template <class T>
concept MmioValue = std::is_integral_v<T> && !std::is_same_v<T, bool> &&
                    (sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8);

// A typed window over mapped memory. A view: copying it does not copy or own the memory.
class Mmio {
 public:
  Mmio() = default;
  // `bytes` bytes starting at `base` (nullptr only when bytes == 0).
  Mmio(void* base, size_t bytes) : base_(static_cast<uint8_t*>(base)), size_(bytes) {
    CHECK(base != nullptr || bytes == 0) << "Mmio over nullptr with " << bytes << " bytes";
  }

  // One volatile load of sizeof(T) bytes at `byte_offset`.
  template <MmioValue T>
  T read(size_t byte_offset) const {
    return *static_cast<const volatile T*>(at(byte_offset, sizeof(T)));
  }
  // One volatile store of sizeof(T) bytes at `byte_offset`.
  template <MmioValue T>
  void write(size_t byte_offset, T value) const {
    *static_cast<volatile T*>(at(byte_offset, sizeof(T))) = value;
  }
  // The window [offset, offset + bytes) of this one.
  Mmio sub(size_t offset, size_t bytes) const {
    check_range(offset, bytes);
    return Mmio(base_ + offset, bytes);
  }

  void* base() const { return base_; }
  size_t size() const { return size_; }

 private:
  void check_range(size_t offset, size_t bytes) const {
    CHECK(offset <= size_ && bytes <= size_ - offset)
        << "MMIO range [" << offset << ", +" << bytes << ") outside a window of " << size_
        << " bytes";
  }
  void* at(size_t offset, size_t width) const {
    check_range(offset, width);
    uint8_t* ptr = base_ + offset;
    CHECK_EQ(reinterpret_cast<uintptr_t>(ptr) % width, 0u)
        << "misaligned " << width << "-byte MMIO access at offset " << offset;
    return ptr;
  }

  uint8_t* base_ = nullptr;
  size_t size_ = 0;
};

// Rings a doorbell: a release fence, then one volatile store of the value.
class Doorbell {
 public:
  Doorbell() = default;
  // The `width_bits` (32 or 64) register at `offset` in `window`; bounds and alignment are
  // CHECKed here, so ring() cannot fail later.
  Doorbell(Mmio window, size_t offset, int width_bits) : width_bits_(width_bits) {
    CHECK(width_bits == 32 || width_bits == 64) << "doorbell width " << width_bits << " bits";
    reg_ = window.sub(offset, static_cast<size_t>(width_bits / 8));
    CHECK_EQ(reinterpret_cast<uintptr_t>(reg_.base()) % reg_.size(), 0u)
        << "misaligned doorbell at offset " << offset;
  }

  // Ordering: every store made before ring() (commands, ring contents, write pointer) is visible
  // to the device before the doorbell store. A 32-bit doorbell CHECKs that `value` fits.
  void ring(uint64_t value) const {
    CHECK(valid()) << "ring() on an empty Doorbell";
    CHECK(width_bits_ == 64 || value <= std::numeric_limits<uint32_t>::max())
        << "value " << value << " too wide for a 32-bit doorbell";
    std::atomic_thread_fence(std::memory_order_release);
#if defined(__aarch64__)
    // NOTE: the C++ fence is `dmb ish` (inner shareable); a PCIe device is outside that domain,
    // so order the stores for it as the kernel's writel() does.
    asm volatile("dmb oshst" ::: "memory");
#endif
    if (width_bits_ == 64) {
      reg_.write<uint64_t>(0, value);
    } else {
      reg_.write<uint32_t>(0, static_cast<uint32_t>(value));
    }
  }

  bool valid() const { return width_bits_ != 0; }
  int width_bits() const { return width_bits_; }

 private:
  Mmio reg_;
  int width_bits_ = 0;
};

}  // namespace baregrad::hcq
