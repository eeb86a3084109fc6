#pragma once

// Every HCQ backend as a runtime device: a compiler::Target composed with an hcq::Device.
// Kernels compile through the target and load with hcq::Device::load_program; memory comes
// from the HCQ allocator, host copies go through its staging buffers, launches run on the
// compute queue and device copies on the copy queue (both ordered by the timeline); argument
// blocks are retired by timeline value, graphs are hcq::Graphs, and PROFILE=1 writes a trace.

#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "compiler/target/target.h"
#include "hcq/hcq.h"
#include "runtime/device.h"
#include "runtime/program_cache.h"

namespace baregrad::runtime {

class HcqDevice final : public Device {
 public:
  // Device `name` compiling with `target` for `dev` (profiling as options() say). The target
  // may refer to `dev` (a MOCK+ target registers twins with it): it is destroyed first.
  HcqDevice(std::string name,
            std::unique_ptr<compiler::Target> target,
            std::unique_ptr<hcq::Device> dev);
  ~HcqDevice() override;

  std::string name() const override { return name_; }
  bool host_addressable() const override { return hcq_->host_addressable(); }
  const compiler::TargetInfo& target_info() const override { return target_->info(); }
  std::string compiler_key() const override { return name() + " " + target_->cache_key(); }
  Result<Buffer> alloc(size_t bytes) override;
  Result<Buffer> adopt_host(void* host, size_t bytes) override;
  void free(Buffer b) override;
  Status copy_in(Buffer dst, const void* src, size_t bytes) override;
  // On a device that executes nothing (NULL), zeros: nothing was ever computed.
  Status copy_out(void* dst, Buffer src, size_t bytes) override;
  // On the copy queue (the compute queue without one), ordered on the timeline like launches.
  Status copy(Buffer dst, Buffer src, size_t bytes) override;
  // target().compile(), then hcq().load_program(); cached per (AST, opts).
  Result<std::shared_ptr<Program>> compile(
      const compiler::UOpPtr& ast,
      const std::optional<std::vector<compiler::Opt>>& opts = std::nullopt) override;
  ProgramCacheStats program_cache_stats() const override { return programs_.stats(); }
  // Loads a kernel compiled by target() (a test or a capsule may alter its spec first):
  // hcq().load_program() of its binary; not cached.
  Result<std::shared_ptr<Program>> load(compiler::CompiledKernel&& k);
  // Asynchronous: returns once submitted (under DEBUG=1 once done, to time it); faults show at
  // the next synchronize() or copy_out().
  Status launch(const Program& prg,
                std::span<const Buffer> bufs,
                std::span<const int64_t> vars = {}) override;
  Status synchronize() override;
  Result<std::unique_ptr<Graph>> make_graph(const std::vector<GraphLaunch>& launches,
                                            size_t num_inputs) override;

  // The HCQ device underneath (queues, signals, allocator) and the target.
  hcq::Device& hcq() { return *hcq_; }
  const compiler::Target& target() const { return *target_; }

 private:
  // Frees the argument blocks of finished launches (all of them after a synchronize).
  void retire_locked(bool all);
  void write_profile();

  std::string name_;
  std::unique_ptr<hcq::Device> hcq_;
  std::unique_ptr<compiler::Target> target_;  // after hcq_: destroyed before it
  std::mutex launch_mu_;
  std::unique_ptr<hcq::HwQueue> queue_;       // the compute queue, under launch_mu_
  std::unique_ptr<hcq::HwQueue> copy_queue_;  // device-to-device copies, under launch_mu_
  struct InFlight {
    uint64_t timeline_value;  // done once the timeline reaches it
    hcq::Buffer args_mem;
    std::unique_ptr<hcq::ArgsState> args;
    std::shared_ptr<const Program> prg;  // kept loaded while it may run
  };
  std::deque<InFlight> in_flight_;  // under launch_mu_
  ProgramCache programs_;
};

}  // namespace baregrad::runtime
