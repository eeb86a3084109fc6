// The AMD HCQ device: a GPU opened through KFD (iface_kfd.h) with a PM4 compute queue and an
// SDMA copy queue (ring.h), an allocator over KFD memory (GPU VA == CPU VA), queues that record
// PM4 and SDMA packets (compute_queue.h, copy_queue.h) and HSA code objects loaded into GPU
// memory (program.h). Host waits sleep in AMDKFD_IOC_WAIT_EVENTS on the device's signal event
// (every signal the queues write also interrupts), at most kEventWaitMs between checks; the
// memory and hardware exception events KFD raises become the sticky error with a fault report
// (device_fault.cc). Everything it asks of the kernel goes through the hcq::Os it is given.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "drivers/amd/arch.h"
#include "drivers/amd/iface_kfd.h"
#include "drivers/amd/program.h"
#include "drivers/amd/ring.h"
#include "hcq/code_ranges.h"
#include "hcq/hcq.h"

namespace baregrad::amd {

// Which compute queue a device drives. PM4: the MEC runs our packets, dispatches included. AQL:
// the CP's HSA front end takes kernel dispatch packets, and the PM4 between them runs as PM4-IB
// packets (tinygrad's AMD_AQL). kAuto is AQL on a GPU with several XCCs (a PM4 queue drives
// every XCC, so it needs PRED_EXEC per XCC, which baregrad does not emit) and PM4 elsewhere, as
// tinygrad chooses.
enum class ComputeQueueMode : uint8_t { kAuto, kPm4, kAql };

// Names, sizes and limits of a device (tests make the rings small and the timeout short).
struct DeviceOptions {
  std::string name;  // "" -> "AMD" for GPU 0, "AMD:<n>" for GPU n
  // Devices whose queues reach each other's memory and signals share a peer group; "" puts the
  // device in a group of its own (no peer GPU mappings yet).
  std::string peer_group;
  ComputeQueueMode compute = ComputeQueueMode::kAuto;
  size_t compute_ring_bytes = 1 << 20;  // PM4 or AQL ring, a power of two (tinygrad: 16 MiB)
  size_t copy_ring_bytes = 1 << 20;     // SDMA ring, a power of two
  // How long a submission waits for ring space, or a queue for its submissions, without the
  // engine making progress.
  std::chrono::milliseconds timeout = hcq::default_timeout();
};

// The mode the AMD_AQL option names: "" kAuto, "0" kPm4, "1" kAql; InvalidArgument naming the
// value otherwise.
Result<ComputeQueueMode> compute_queue_mode(std::string_view amd_aql);

// The longest a host wait sleeps in AMDKFD_IOC_WAIT_EVENTS before it checks its signal again.
constexpr uint32_t kEventWaitMs = 1;

// The CWSR (context save/restore) sizes KFD expects for a GPU (Linux amdkfd/kfd_queue.c,
// kfd_queue_ctx_save_restore_size). NOTE: from that function as read, not checked on hardware;
// the fake KFD does not check them.
struct CwsrSizes {
  uint32_t ctx_save_restore_size = 0;  // cwsr_size: ctl stack + work-group data, per XCC
  uint32_t ctl_stack_size = 0;
  uint32_t debug_memory_size = 0;
  uint64_t buffer_bytes = 0;  // (ctx_save_restore_size + debug_memory_size) * XCCs, page-rounded
};
CwsrSizes cwsr_sizes(const KfdNodeProperties& props);

class Device : public hcq::Device {
 public:
  // Opens GPU `index` through KFD (KfdIface::open), checks its gfx target against the supported
  // ones (FailedPrecondition naming it and them), creates the event, the compute and copy
  // queues and the timeline. FailedPrecondition for a PM4 compute queue on a GPU with several
  // XCCs. The device keeps `os` alive.
  static Result<std::unique_ptr<Device>> create(std::shared_ptr<hcq::Os> os,
                                                int index = 0,
                                                DeviceOptions options = {});
  ~Device() override;

  hcq::Allocator& allocator() override { return *allocator_; }
  std::unique_ptr<hcq::HwQueue> compute_queue() override;
  std::unique_ptr<hcq::HwQueue> copy_queue() override;
  // Loads an HSA code object (BinaryFormat::kAmdHsa for this GPU's gfx): Program::load.
  Result<std::unique_ptr<hcq::Program>> load_program(const Binary& binary) override;
  // The Os's progress() (a simulated GPU runs there), then AMDKFD_IOC_WAIT_EVENTS on the signal,
  // memory and hardware exception events for up to kEventWaitMs (0 once failed); a memory or
  // hardware exception sets the sticky error to its fault report (device_fault.cc).
  void progress() override;
  // Per queue with submissions in flight: how many completed, the kernels of the oldest and
  // the signal it waits for, if any (device_fault.cc).
  std::string describe_hang() override;
  std::string peer_group() const override { return peer_group_; }

  const ArchInfo& arch() const { return *arch_; }
  // Whether the compute queue is AQL (options().compute resolved at create()).
  bool aql() const { return aql_; }
  KfdIface& kfd() { return *kfd_; }
  const DeviceOptions& options() const { return options_; }
  // The KFD signal event every queue signal interrupts (its id and mailbox).
  const KfdEvent& signal_event() const { return signal_event_; }
  Ring& ring(hcq::Engine e) { return e == hcq::Engine::kCompute ? *compute_ring_ : *copy_ring_; }

  // Progress without sleeping: the Os's progress() and an immediate event check.
  void poll();

  // The scratch dispatches use: its VA (0 before a program needed any) and COMPUTE_TMPRING_SIZE.
  struct Scratch {
    uint64_t va = 0;
    uint32_t tmpring_size = 0;
  };
  Scratch scratch();
  // Grows the scratch (scratch.h) for a program needing `bytes_per_item` per work-item. An
  // outgrown buffer stays allocated while the device lives (work in flight may use it).
  // On an AQL device it also describes the buffer in the queue's amd_queue_t, where the CP
  // finds it (one XCC's share per XCC, as tinygrad). FailedPrecondition on a PM4 device with
  // several XCCs (each XCC needs its own base there).
  Status ensure_scratch(uint32_t bytes_per_item);
  // Remembers that kernel `name` (of the Binary whose id is `binary_id`) has its code at
  // [code_va, code_va + bytes), for fault reports.
  void register_program(uint64_t code_va,
                        uint64_t bytes,
                        const std::string& name,
                        const std::string& binary_id = "") {
    programs_.add(code_va, bytes, name, binary_id);
  }
  void unregister_program(uint64_t code_va) { programs_.remove(code_va); }
  // The kernel whose registered code holds `va`, or "" when none does.
  std::string program_at(uint64_t va) { return programs_.name_at(va); }
  // The binary id of the program whose code starts at `code_va` ("" when none).
  std::string binary_at(uint64_t code_va) { return programs_.binary_at(code_va); }

 private:
  Device(std::shared_ptr<hcq::Os> os, DeviceOptions options);
  Status setup();
  // Waits for events up to `ms`; reports an exception as the sticky error.
  void check_events(uint32_t ms);
  // The report of a memory exception: the address, its buffer or kernel, the busy queues.
  std::string memory_fault_report(const KfdMemoryException& m);
  // "; the compute queue of AMD was executing submission 3 (launches 'k')" for busy rings.
  std::string busy_queues();

  std::shared_ptr<hcq::Os> os_;  // first: it outlives everything below
  DeviceOptions options_;
  std::string peer_group_;
  std::unique_ptr<KfdIface> kfd_;
  const ArchInfo* arch_ = nullptr;
  bool aql_ = false;
  std::unique_ptr<hcq::Allocator> allocator_;
  KfdEvent signal_event_, memory_event_, hw_event_;
  KfdMemory pointers_;    // read/write pointer slots of both rings, and amd_queue_t (GTT)
  KfdMemory eop_, cwsr_;  // the compute queue's end-of-pipe buffer and CWSR area (VRAM)
  std::unique_ptr<Ring> compute_ring_, copy_ring_;
  bool timeline_ready_ = false;
  std::mutex fault_mu_;
  bool event_error_logged_ = false;  // under fault_mu_
  std::mutex scratch_mu_;
  uint32_t scratch_per_item_ = 0;       // under scratch_mu_
  Scratch scratch_;                     // under scratch_mu_
  std::vector<KfdMemory> scratch_mem_;  // under scratch_mu_; the last is scratch_
  hcq::CodeRanges programs_;
};

}  // namespace baregrad::amd
