#pragma once

// A kernel on the CPU device: a function with the CPU ABI of compiler/program.h, linked into
// the process (Device::load_program) or given directly (the conformance suite's kernels).

#include <memory>
#include <string>
#include <vector>

#include "drivers/cpu/iface_host.h"
#include "hcq/hcq.h"

namespace baregrad::cpu {

class Device;

class Program final : public hcq::Program {
 public:
  using Fn = KernelFn;
  // `buf_bytes[i]` is how many bytes the kernel may touch from buffer i (checked at exec);
  // `code`, when given, keeps `fn`'s code linked while the program lives, and past that when
  // `dev` (which the program must not outlive) is abandoned(): a hung kernel may be running it.
  Program(std::string name,
          Fn fn,
          std::vector<size_t> buf_bytes,
          int num_vars,
          std::shared_ptr<const void> code = nullptr,
          const Device* dev = nullptr)
      : hcq::Program(std::move(name), static_cast<int>(buf_bytes.size()), num_vars),
        fn_(fn),
        buf_bytes_(std::move(buf_bytes)),
        code_(std::move(code)),
        dev_(dev) {}
  ~Program() override;
  Fn fn() const { return fn_; }
  const std::vector<size_t>& buf_bytes() const { return buf_bytes_; }

 private:
  Fn fn_;
  std::vector<size_t> buf_bytes_;
  std::shared_ptr<const void> code_;
  const Device* dev_;
};

}  // namespace baregrad::cpu
