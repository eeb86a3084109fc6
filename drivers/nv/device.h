// The NVIDIA HCQ device: an RM bring-up (iface_rm.h) with a compute and a copy GPFIFO channel,
// an allocator over RM memory (GPU VA == CPU VA), and queues that record pushbuffer methods
// (queue.h). A mock device (MockHooks) runs the same code against the fake kernel driver and
// the fake GPU, whose progress needs the CPU.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "drivers/nv/gpfifo.h"
#include "drivers/nv/iface_rm.h"
#include "drivers/nv/program.h"
#include "hcq/hcq.h"
#include "hcq/mmio.h"

namespace baregrad::nv {

// A fault the GPU reported (the mock's fake GPU; on hardware the channel's error notifier).
struct GpuFault {
  std::string line;  // the GPU's own description
  uint64_t address = 0;
  uint32_t token = 0;   // the channel
  uint64_t qmd_va = 0;  // the QMD being launched, 0 outside a launch
  bool mmu = false;     // an MMU fault: `address` is the faulting VA
};

// What a mock device needs besides the fake hcq::Os.
struct MockHooks {
  std::string name = "MOCK+NV";
  std::string peer_group = "MOCK+NV";
  std::function<void()> pump;                     // rings pending doorbells, runs the GPU
  std::function<std::vector<GpuFault>()> faults;  // every fault so far, oldest first
  std::shared_ptr<void> keepalive;                // the fakes: destroyed after the device
};

class Device : public hcq::Device {
 public:
  // Opens the RM (RmIface::open), brings GPU `index` up and sets its channels up.
  static Result<std::unique_ptr<Device>> create(hcq::Os& os,
                                                int index = 0,
                                                std::unique_ptr<MockHooks> mock = nullptr);
  ~Device() override;

  hcq::Allocator& allocator() override { return *allocator_; }
  std::unique_ptr<hcq::HwQueue> compute_queue() override;
  std::unique_ptr<hcq::HwQueue> copy_queue() override;
  // Mock: rings pending doorbells and runs the fake GPU; then reports new GPU faults.
  void progress() override;
  std::string peer_group() const override { return peer_group_; }

  const BringUp& info() const { return gpu_->info(); }
  const GpuClasses& classes() const { return gpu_->info().classes; }
  RmGpu& rm() { return *gpu_; }
  const LaunchLimits& limits() const { return limits_; }

  // ---- for queues ----
  // Copies `words` into the channel's pushbuffer ring and submits them (publish()).
  Status submit_words(hcq::Engine e, std::span<const uint32_t> words);
  // Submits the segment of `words` words at `va`: GP entry (waiting for ring space, with the
  // queue timeout), USERD GPPut, full fence, doorbell; then reports faults (mock: runs the GPU).
  Status publish(hcq::Engine e, uint64_t va, uint32_t words);
  // Remembers which kernel the QMD at `qmd_va` launches, for fault reports.
  void note_qmd(uint64_t qmd_va, const std::string& kernel);
  void forget_qmd(uint64_t qmd_va);

 private:
  struct Channel {
    std::string name;
    RmChannel rm;
    std::unique_ptr<GpFifoRing> ring;
    hcq::Mmio userd, entries;
    hcq::Buffer pushbuf;     // the ring of pushbuffer words unbound submissions are copied into
    size_t pushbuf_put = 0;  // in words
    std::mutex mu;
  };

  Device(std::string name, std::unique_ptr<MockHooks> mock);
  Status setup();
  Status setup_channel(Channel& ch, const RmChannel& rm, const char* name);
  Channel& channel(hcq::Engine e) { return e == hcq::Engine::kCompute ? compute_ : copy_; }
  // The fault report for `f`: the fault, the allocation owning its address, channel, kernel.
  std::string report(const GpuFault& f);

  std::unique_ptr<MockHooks> mock_;  // first: its fakes outlive everything below
  std::string peer_group_;
  std::unique_ptr<RmIface> iface_;
  std::unique_ptr<RmGpu> gpu_;
  std::unique_ptr<hcq::Allocator> allocator_;
  hcq::Doorbell doorbell_;
  Channel compute_, copy_;
  hcq::Buffer local_memory_;
  LaunchLimits limits_;
  std::mutex qmd_mu_;
  std::map<uint64_t, std::string> qmd_kernels_;
  bool timeline_ready_ = false;
  size_t faults_seen_ = 0;
  std::mutex fault_mu_;
};

}  // namespace baregrad::nv
