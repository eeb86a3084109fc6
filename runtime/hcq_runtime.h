// What every runtime device over an HCQ device shares: memory from the HCQ allocator, host
// copies through its staging buffers, launches on the compute queue and device copies on the
// copy queue (both ordered by the timeline), argument blocks retired by timeline value, graphs
// as hcq::Graph, the program cache and the PROFILE=1 trace. A backend (CPU, NV) supplies the
// compile step and each program's hcq form.
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hcq/hcq.h"
#include "runtime/device.h"
#include "runtime/program_cache.h"

namespace baregrad::runtime {

class HcqRuntimeDevice : public Device {
 public:
  ~HcqRuntimeDevice() override;

  Result<Buffer> alloc(size_t bytes) override;
  void free(Buffer b) override;
  Status copy_in(Buffer dst, const void* src, size_t bytes) override;
  Status copy_out(void* dst, Buffer src, size_t bytes) override;
  // On the copy queue (the compute queue without one), ordered on the timeline like launches.
  Status copy(Buffer dst, Buffer src, size_t bytes) override;
  // Cached per (AST, opts); build() on a miss.
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

 protected:
  // How a program of this device launches: its loaded form and the launch dimensions.
  struct LaunchShape {
    const hcq::Program* prg = nullptr;
    hcq::Dim3 grid, block;
  };

  HcqRuntimeDevice() = default;
  // Takes the HCQ device (its compute queue; profiling as options() say).
  void attach(std::unique_ptr<hcq::Device> dev);
  // Waits for the device, drops the queue and writes the PROFILE=1 trace. Backends whose
  // members launches use (loaded code, twins) call it first in their destructor; idempotent.
  void shutdown();
  // Lowers, renders, compiles and loads `ast` (the cache is compile()'s).
  virtual Result<std::shared_ptr<Program>> build(
      const compiler::UOpPtr& ast, const std::optional<std::vector<compiler::Opt>>& opts) = 0;
  virtual LaunchShape shape(const Program& prg) const = 0;

 private:
  // Frees the argument blocks of finished launches (all of them after a synchronize).
  void retire_locked(bool all);
  void write_profile();

  std::unique_ptr<hcq::Device> hcq_;
  std::mutex launch_mu_;
  std::unique_ptr<hcq::HwQueue> queue_;       // the compute queue, under launch_mu_
  std::unique_ptr<hcq::HwQueue> copy_queue_;  // device-to-device copies, under launch_mu_
  struct InFlight {
    uint64_t timeline_value;  // done once the timeline reaches it
    hcq::Buffer args_mem;
    std::unique_ptr<hcq::ArgsState> args;
  };
  std::deque<InFlight> in_flight_;  // under launch_mu_
  ProgramCache programs_;
  bool shut_down_ = false;
};

}  // namespace baregrad::runtime
