#pragma once

// A kernel on the CPU device: a function with the CPU ABI of compiler/program.h, linked into
// the process (Device::load_program) or given directly (the conformance suite's kernels).

#include <memory>
#include <string>
#include <vector>

#include "drivers/cpu/iface_host.h"
#include "hcq/hcq.h"

namespace baregrad::cpu {

class Program final : public hcq::Program {
 public:
  using Fn = KernelFn;
  // `buf_bytes[i]` is how many bytes the kernel may touch from buffer i (checked at exec);
  // `code`, when given, keeps `fn`'s code linked while the program lives. Whoever launches a
  // program keeps it until the launch retired (a hung one never does: runtime::HcqDevice).
  // `serial`: every launch runs on the engine's own thread, its items in one range (a kernel
  // too small to repay waking the pool's workers).
  Program(std::string name,
          Fn fn,
          std::vector<size_t> buf_bytes,
          int num_vars,
          std::shared_ptr<const void> code = nullptr,
          bool serial = false)
      : hcq::Program(std::move(name), static_cast<int>(buf_bytes.size()), num_vars),
        fn_(fn),
        buf_bytes_(std::move(buf_bytes)),
        code_(std::move(code)),
        serial_(serial) {}
  Fn fn() const { return fn_; }
  const std::vector<size_t>& buf_bytes() const { return buf_bytes_; }
  bool serial() const { return serial_; }

 private:
  Fn fn_;
  std::vector<size_t> buf_bytes_;
  std::shared_ptr<const void> code_;
  bool serial_;
};

}  // namespace baregrad::cpu
