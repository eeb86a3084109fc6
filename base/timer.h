#pragma once

#include <chrono>
#include <cstdint>
#include <iomanip>
#include <string>
#include <utility>

#include "base/log.h"

namespace baregrad {

// Monotonic time (steady clock) in nanoseconds since an unspecified epoch.
inline uint64_t now_ns() {
  auto since_epoch = std::chrono::steady_clock::now().time_since_epoch();
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(since_epoch).count());
}

// Monotonic time (steady clock) in milliseconds since an unspecified epoch.
inline double now_ms() { return static_cast<double>(now_ns()) * 1e-6; }

// Times its own lifetime. On destruction stores the milliseconds in *out_ms (when given) and
// logs "name: X.XX ms" at DEBUG>=2.
class ScopedTimer {
 public:
  explicit ScopedTimer(std::string name, double* out_ms = nullptr)
      : name_(std::move(name)), out_ms_(out_ms), start_ns_(now_ns()) {}
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;
  ~ScopedTimer() {
    double ms = elapsed_ms();
    if (out_ms_ != nullptr) *out_ms_ = ms;
    BG_LOG(2) << name_ << ": " << std::fixed << std::setprecision(2) << ms << " ms";
  }

  // Milliseconds since construction.
  double elapsed_ms() const { return static_cast<double>(now_ns() - start_ns_) * 1e-6; }

 private:
  std::string name_;
  double* out_ms_;
  uint64_t start_ns_;
};

}  // namespace baregrad
