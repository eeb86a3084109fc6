// DEV=NULL: an HCQ device that accepts every command and executes none, for compile-only runs
// and for measuring the host side alone. Signals and timestamps still complete (at submit), so
// the timeline protocol and every wait work; kernels, copies and queue waits do nothing.
#pragma once

#include <memory>

#include "hcq/hcq.h"

namespace baregrad::drivers::null {

// A kernel that never runs.
class Program : public hcq::Program {
 public:
  using hcq::Program::Program;
};

class Device : public hcq::Device {
 public:
  static Result<std::unique_ptr<Device>> create();
  ~Device() override;

  hcq::Allocator& allocator() override { return *allocator_; }
  std::unique_ptr<hcq::HwQueue> compute_queue() override;
  std::unique_ptr<hcq::HwQueue> copy_queue() override;
  bool executes() const override { return false; }

 private:
  Device();
  std::unique_ptr<hcq::Allocator> allocator_;
};

}  // namespace baregrad::drivers::null
