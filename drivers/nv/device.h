// The NVIDIA HCQ device: an RM bring-up (iface_rm.h) with a compute and a copy GPFIFO channel,
// an allocator over RM memory (GPU VA == CPU VA), queues that record pushbuffer methods
// (compute_queue.h, copy_queue.h) and cubins loaded into GPU memory (program.h). Everything it
// asks of the kernel goes through the hcq::Os it is given.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
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
#include "hcq/code_ranges.h"
#include "hcq/hcq.h"
#include "hcq/mmio.h"

namespace baregrad::nv {

// Names, sizes and limits of a device (tests make the ring small and the timeout short).
struct DeviceOptions {
  std::string name = "NV";  // the device's name in messages ("NV:1")
  // Devices whose queues reach each other's memory and signals share a peer group; "" puts
  // the device in a group of its own (peer mappings have no GPU page-table entries yet).
  std::string peer_group = "";
  size_t pushbuf_ring_bytes = 4 << 20;  // per channel, for unbound submissions (a multiple of 4)
  // How long a submission waits for pushbuffer ring or GPFIFO space that the GPU does not free.
  std::chrono::milliseconds timeout = hcq::default_timeout();
};

class Device : public hcq::Device {
 public:
  // Opens the RM through `os` (RmIface::open), brings GPU `index` up and sets its channels
  // up. The device keeps `os` alive (hcq::unowned() passes one the caller keeps alive).
  static Result<std::unique_ptr<Device>> create(std::shared_ptr<hcq::Os> os,
                                                int index = 0,
                                                DeviceOptions options = {});
  ~Device() override;

  hcq::Allocator& allocator() override { return *allocator_; }
  std::unique_ptr<hcq::HwQueue> compute_queue() override;
  std::unique_ptr<hcq::HwQueue> copy_queue() override;
  // Loads a cubin (BinaryFormat::kCubin for this GPU's sm, or an earlier minor of its major):
  // Program::load, remembering the binary's id with its code range.
  Result<std::unique_ptr<hcq::Program>> load_program(const Binary& binary) override;
  // The Os's progress() (a simulated GPU runs there), then each channel's error notifier
  // status (one load per channel); when RM wrote one, queries the debugger and sets the sticky
  // error to the fault report (device_fault.cc).
  void progress() override;
  // Per busy channel: GP entries fetched and ring submissions completed, the kernels of the
  // submission it is executing and the semaphore it waits for, if any (device_fault.cc).
  std::string describe_hang() override;
  std::string peer_group() const override { return peer_group_; }

  const BringUp& info() const { return gpu_->info(); }
  const GpuClasses& classes() const { return gpu_->info().classes; }
  RmGpu& rm() { return *gpu_; }
  const LaunchLimits& limits() const { return limits_; }
  // Local memory (stacks, spills) provisioned per thread; grows with ensure_local_memory().
  uint32_t local_bytes_per_thread() const { return local_per_thread_.load(); }
  // Provisions at least `bytes` of local memory per thread: a larger backing store, and its
  // SET_SHADER_LOCAL_MEMORY methods on the compute channel, ahead of anything submitted later
  // (the old store stays allocated for launches already submitted, until the device closes).
  // ResourceExhausted naming the sizes when the memory cannot be had.
  Status ensure_local_memory(uint32_t bytes);

  // ---- for queues ----
  // Copies `words` into the channel's pushbuffer ring, then a host release (after WFI) of the
  // channel's completion counter with the submission's sequence number (returned in
  // `*sequence`), and submits them (publish()). Waits (with options' timeout) until the GPU
  // completed the earlier submissions whose ring words it overwrites.
  Status submit_words(hcq::Engine e, std::span<const uint32_t> words, uint64_t* sequence = nullptr);
  // The sequence number of the channel's last ring submission (0: none yet).
  uint64_t last_sequence(hcq::Engine e) { return channel(e).seq.load(); }
  // The channel's completion counter: its ring submissions up to this one are done.
  uint64_t completed_sequence(hcq::Engine e);
  // Waits (progress(), options' timeout) until completed_sequence(e) >= seq.
  Status wait_sequence(hcq::Engine e, uint64_t seq);
  // Submits the segment of `words` words at `va`: GP entry (waiting for ring space, with the
  // queue timeout), USERD GPPut, full fence, doorbell; then reports faults (progress()).
  Status publish(hcq::Engine e, uint64_t va, uint32_t words);
  // Remembers which kernel the QMD at `qmd_va` launches, for fault reports.
  void note_qmd(uint64_t qmd_va, const std::string& kernel);
  void forget_qmd(uint64_t qmd_va);
  // Remembers that kernel `name` (of the Binary whose id is `binary_id`, "" when unknown) has
  // its code at [code_va, code_va + bytes), for fault reports that name the kernel by the
  // faulting PC (Program::load; programs whose code was placed otherwise).
  void register_program(uint64_t code_va,
                        uint64_t bytes,
                        const std::string& name,
                        const std::string& binary_id = "") {
    programs_.add(code_va, bytes, name, binary_id);
  }
  void unregister_program(uint64_t code_va) { programs_.remove(code_va); }
  // The kernel whose registered code holds `pc`, or "" when none does.
  std::string program_at(uint64_t pc) { return programs_.name_at(pc); }
  // The binary id of the program whose registered code starts at `code_va` ("" when none).
  std::string binary_at(uint64_t code_va) { return programs_.binary_at(code_va); }

 private:
  // Words [begin, end) of the pushbuffer ring, owned by ring submission `seq` until done.
  struct RingUse {
    size_t begin, end;
    uint64_t seq;
  };
  struct Channel {
    std::string name;
    RmChannel rm;
    std::unique_ptr<GpFifoRing> ring;
    hcq::Mmio userd, entries;
    std::mutex mu;  // the GPFIFO ring, USERD and the doorbell
    // Ring submissions, under submit_mu (held across the wait for ring space, so that sequence
    // numbers reach the GPU in order).
    std::mutex submit_mu;
    hcq::Buffer pushbuf;     // the ring of pushbuffer words unbound submissions are copied into
    size_t pushbuf_put = 0;  // in words
    std::deque<RingUse> in_flight;            // oldest first, in ring order from pushbuf_put
    std::atomic<uint64_t> seq{0};             // the last sequence number handed out
    std::unique_ptr<hcq::Signal> done;        // the completion counter (host memory)
    std::unique_ptr<hcq::CmdStream> release;  // the release of `done`, payload symbolic
  };

  Device(std::shared_ptr<hcq::Os> os, DeviceOptions options);
  Status setup();
  Status setup_channel(Channel& ch, const RmChannel& rm, const char* name);
  Channel& channel(hcq::Engine e) { return e == hcq::Engine::kCompute ? compute_ : copy_; }
  // Waits until the GPU completed the ring submissions whose words [put, put + n) overwrites.
  Status wait_ring_space(Channel& ch, size_t put, size_t n);
  // Waits until ch's completion counter reaches `seq`; DeadlineExceeded names `what`.
  Status wait_completed(Channel& ch, uint64_t seq, const std::string& what);
  // The fault report once a channel's error notifier is set: the RC error and engine, the
  // channel(s), the MMU fault (address, type, access, owning buffer) and SM error state from the
  // debugger, the kernel by PC or by the faulting submission's QMDs.
  std::string report();
  // The kernels whose QMDs the submission that channel `ch` was executing launches.
  std::vector<std::string> kernels_of_current_submission(Channel& ch);

  std::shared_ptr<hcq::Os> os_;  // first: it outlives everything below
  DeviceOptions options_;
  std::string peer_group_;
  std::unique_ptr<RmIface> iface_;
  std::unique_ptr<RmGpu> gpu_;
  std::unique_ptr<hcq::Allocator> allocator_;
  hcq::Doorbell doorbell_;
  Channel compute_, copy_;
  hcq::Buffer local_memory_;
  std::vector<hcq::Buffer> old_local_memory_;  // replaced stores, freed at destruction
  std::atomic<uint32_t> local_per_thread_{0};
  std::mutex local_mu_;
  LaunchLimits limits_;
  std::mutex qmd_mu_;
  std::map<uint64_t, std::string> qmd_kernels_;
  bool timeline_ready_ = false;
  std::mutex fault_mu_;
  bool fault_reported_ = false;  // under fault_mu_
  hcq::CodeRanges programs_;
};

}  // namespace baregrad::nv
