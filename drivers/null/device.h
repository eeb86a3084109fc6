#pragma once

// DEV=NULL: an HCQ device that accepts every command and executes none, for compile-only runs
// and for measuring the host side alone. Signals and timestamps still complete (at submit), so
// the timeline protocol and every wait work; kernels, copies and queue waits do nothing.

#include <memory>

#include "hcq/hcq.h"

namespace baregrad::null {

class Device final : public hcq::Device {
 public:
  static Result<std::unique_ptr<Device>> create();
  ~Device() override;

  // Device memory is address space only; CPU-visible memory is real host memory.
  hcq::Allocator& allocator() override { return *allocator_; }
  std::unique_ptr<hcq::HwQueue> compute_queue() override;
  std::unique_ptr<hcq::HwQueue> copy_queue() override;
  // Any binary: a program of its name and arity that never runs (its code is not linked).
  Result<std::unique_ptr<hcq::Program>> load_program(const Binary& binary) override;
  bool executes() const override { return false; }

 private:
  Device();
  std::unique_ptr<hcq::Allocator> allocator_;
};

}  // namespace baregrad::null
