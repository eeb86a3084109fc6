// The CPU device: kernels compiled in-process (LLVM) or by clang (C), run on every core by the
// CPU HCQ device (drivers/cpu): memory, copies and launches all go through its queues. With
// the NULL executor (DEV=NULL) the same kernels compile and nothing runs.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "compiler/program.h"
#include "hcq/hcq.h"
#include "runtime/cpu/object_loader.h"
#include "runtime/device.h"

namespace baregrad::runtime {

enum class CpuBackend { kLlvm, kClang };

class CpuDevice : public Device {
 public:
  // `threads` <= 0 means every core (or options().threads when set). Throws baregrad::Error
  // when the HCQ device cannot start.
  explicit CpuDevice(CpuBackend backend = CpuBackend::kLlvm, int threads = 0, bool null = false);
  ~CpuDevice() override;

  std::string name() const override;
  // True unless this is the NULL device (whose kernels never run).
  bool host_addressable() const override { return !null_; }
  const compiler::TargetInfo& target() const override { return target_; }
  Result<Buffer> alloc(size_t bytes) override;
  void free(Buffer b) override;
  Status copy_in(Buffer dst, const void* src, size_t bytes) override;
  Status copy_out(void* dst, Buffer src, size_t bytes) override;
  Result<std::shared_ptr<Program>> compile(
      const compiler::UOpPtr& ast,
      const std::optional<std::vector<compiler::Opt>>& opts = std::nullopt) override;
  // Asynchronous: returns once submitted (under DEBUG=1 once done, to time it); faults show at
  // the next synchronize() or copy_out().
  Status launch(const Program& prg,
                std::span<const Buffer> bufs,
                std::span<const int64_t> vars = {}) override;
  Status synchronize() override;
  Result<std::unique_ptr<Graph>> make_graph(const std::vector<GraphLaunch>& launches,
                                            size_t num_inputs) override;
  // The HCQ device underneath (queues, signals, allocator).
  hcq::Device& hcq() { return *hcq_; }

 private:
  Result<std::shared_ptr<Program>> build(const compiler::UOpPtr& ast,
                                         const std::optional<std::vector<compiler::Opt>>& opts);

  CpuBackend backend_;
  compiler::TargetInfo target_;
  std::unique_ptr<compiler::Renderer> renderer_;
  std::unique_ptr<compiler::Compiler> compiler_;
  ObjectLoader loader_;
  bool null_;
  std::unique_ptr<hcq::Device> hcq_;
  // Frees the argument blocks of finished launches (all of them after a synchronize).
  void retire_locked(bool all);
  // PROFILE=1: the device's Chrome trace to PROFILE_PATH with the device name added.
  void write_profile();

  std::mutex launch_mu_;
  std::unique_ptr<hcq::HwQueue> queue_;  // the compute queue, under launch_mu_
  struct InFlight {
    uint64_t timeline_value;  // done once the timeline reaches it
    hcq::Buffer args_mem;
    std::unique_ptr<hcq::ArgsState> args;
  };
  std::deque<InFlight> in_flight_;  // under launch_mu_
  std::mutex mu_;
  // (AST, opts) -> program; the entry holds the AST so its address stays unique.
  std::map<std::pair<const compiler::UOp*, std::string>,
           std::pair<compiler::UOpPtr, std::shared_ptr<Program>>>
      programs_;
};

}  // namespace baregrad::runtime
