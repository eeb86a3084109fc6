// A fake AMD GPU: a test instrument that executes what the AMD driver writes into its KFD queues
// the way the CP and SDMA engines would, so that the real driver code runs in CI. It reads each
// queue of one FakeKfd GPU from its read pointer to the write pointer the driver stored, decodes
// PM4 type-3 packets (compute queues), SDMA packets (SDMA queues) and AQL packets (AQL queues),
// runs them against the fake KFD's memory (resolve()) and hands dispatches to an
// AmdKernelExecutor. Every decode is written from the Linux and ROCR headers (README.md names
// each source), independently of drivers/amd's encoders.
//
// Anything it cannot resolve or does not know is a recorded AmdGpuFault that stops that queue for
// good; a VM fault is also raised in the fake KFD as a memory exception. It never crashes the
// host on garbage and never busy-waits: an unsatisfied wait blocks the queue at that packet and
// is checked again at the next pump.
//
// How a mock device drives it:
//   1. FakeAmdGpu gpu(kfd, index) after the FakeKfd exists: it takes the KFD's doorbell and
//      progress hooks, so the driver's doorbells and waits (FakeKfd::progress) run the GPU;
//   2. per loaded program, twins().add(code_va, twin) (or set_executor());
//   3. on_fault() / faults() for fault reports; the driver sees VM faults via WAIT_EVENTS.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "drivers/amd/arch.h"
#include "drivers/mock/amd/fake_kfd.h"
#include "drivers/mock/amdgpu/executor.h"

namespace baregrad::mock {

// What the GPU records when it stops a queue.
struct AmdGpuFault {
  enum class Kind {
    kVmFault,    // an access no GPU-mapped allocation covers (or inject_vm_fault_at)
    kBadPacket,  // an unknown opcode, a malformed header or field, a bad write pointer
    kLaunch,     // the AmdKernelExecutor refused the dispatch (e.g. unknown code VA)
    kHang,       // reserved for a watchdog; inject_hang() records nothing
  } kind = Kind::kVmFault;
  uint32_t queue_id = 0;
  uint64_t address = 0;    // VM faults: the first byte not mapped; otherwise the packet VA
  uint64_t packet_va = 0;  // the packet (or ring slot) being executed
  std::string what;        // what the GPU was doing and why it stopped
  // One line: "VM fault at 0x... on queue 2, packet at 0x...: <what>".
  std::string to_string() const;
};

// What the GPU has done, for tests.
struct AmdGpuCounters {
  uint64_t doorbells = 0, lost_doorbells = 0;
  uint64_t packets = 0;                   // PM4 (rings and IBs), SDMA and AQL packets completed
  uint64_t dispatches = 0;                // launches handed to the executor
  uint64_t copies = 0, bytes_copied = 0;  // SDMA COPY_LINEAR packets
  uint64_t signals = 0;        // memory writes of RELEASE_MEM / FENCE / AQL completion signals
  uint64_t waits_blocked = 0;  // times a queue started blocking in a wait
  uint64_t interrupts = 0;     // events signalled in the fake KFD
};

class FakeAmdGpu {
 public:
  // GPU `gpu` (index into the FakeKfd's GPUs) of `kfd` (not owned; outlives this). Installs the
  // KFD's on_doorbell and on_progress hooks (replacing any: one FakeAmdGpu per FakeKfd).
  // CHECK-fails for a GPU index or gfx_target_version drivers/amd does not know.
  explicit FakeAmdGpu(FakeKfd& kfd, int gpu = 0);
  // Removes the hooks.
  ~FakeAmdGpu();
  FakeAmdGpu(const FakeAmdGpu&) = delete;
  FakeAmdGpu& operator=(const FakeAmdGpu&) = delete;

  const amd::ArchInfo& arch() const { return *arch_; }

  // The built-in executor: host twins by code VA (thread-safe).
  AmdTwinRegistry& twins() { return twins_; }
  // Sends launches to `e` (not owned); nullptr: back to twins().
  void set_executor(AmdKernelExecutor* e);

  // Runs every queue of this GPU until none progresses. Returns whether anything progressed.
  // Thread-safe; a call from inside a launch (on the pumping thread) returns false at once.
  bool run_until_idle();

  // Every fault so far, oldest first (one per stopped queue).
  std::vector<AmdGpuFault> faults() const;
  // Called with each fault as it is recorded, on the pumping thread, before the KFD memory
  // exception is raised.
  void on_fault(std::function<void(const AmdGpuFault&)> hook);
  AmdGpuCounters counters() const;
  // What RELEASE_MEM (GPU clock), SDMA TIMESTAMP and COPY_DATA (GPU clock) write: steady-clock ns.
  static uint64_t timestamp_ns();

  // ---- fault injection ------------------------------------------------------------------------
  // Any later access covering `va` is a VM fault at `va`.
  void inject_vm_fault_at(uint64_t va);
  // Queue `queue_id` stops making progress for good (no fault recorded): waits time out.
  void inject_hang(uint32_t queue_id);
  // The next `n` doorbells of this GPU's queues are dropped; the work runs at the next pump.
  void inject_lost_doorbell(uint32_t n);

 private:
  enum class Step { kNext, kBlocked, kStop };
  struct IbFrame {
    uint64_t va = 0;
    uint32_t dwords = 0, pos = 0;
  };
  struct Queue {
    FakeKfdQueue info;
    uint64_t rptr = 0;         // in the queue's units: PM4 dwords, SDMA bytes, AQL packets
    bool dead = false;         // stopped by a fault
    bool blocked = false;      // waiting at the packet at rptr (or in an IB)
    bool aql_ib = false;       // AQL: the PM4-IB packet at rptr has started its IB
    std::vector<IbFrame> ibs;  // PM4 indirect buffers being run, innermost last
    std::unordered_map<uint32_t, uint32_t> regs;  // SET_SH_REG / SET_UCONFIG_REG by address
  };
  class Lock;

  // fake_gpu.cc
  void doorbell(const FakeKfdQueue& q, uint64_t value);
  void sync_queues();
  bool run_queue(Queue& q);
  // The host bytes of [va, va + len), or nullptr after recording a VM fault.
  uint8_t* access(Queue& q, uint64_t va, size_t len, uint64_t packet_va, const std::string& what);
  Step fault(Queue& q, AmdGpuFault::Kind k, uint64_t address, uint64_t packet_va, std::string what);
  Step bad_packet(Queue& q, uint64_t packet_va, std::string what);
  Step launch(Queue& q, const AmdLaunch& l);
  // The executor launches go to: set_executor()'s, else twins().
  AmdKernelExecutor& executor() { return executor_ != nullptr ? *executor_ : twins_; }
  // Atomic 4- or 8-byte memory accesses (acquire loads, release stores) at a naturally aligned
  // VA; nullopt / false after recording a fault (a misaligned VA is a kBadPacket).
  std::optional<uint64_t> load(
      Queue& q, uint64_t va, int bytes, uint64_t packet_va, const std::string& what);
  bool store(Queue& q,
             uint64_t va,
             int bytes,
             uint64_t value,
             uint64_t packet_va,
             const std::string& what);
  // Reads the driver's 64-bit write pointer; nullopt after a fault.
  std::optional<uint64_t> read_wptr(Queue& q);
  bool write_rptr(Queue& q);
  void interrupt(uint32_t event_id);
  void count(uint64_t AmdGpuCounters::* field, uint64_t n = 1);
  // Marks `q` blocked (counting the start of a block) and returns kBlocked.
  Step block(Queue& q);

  // pm4_exec.cc
  bool run_pm4_queue(Queue& q);
  // Runs q.ibs until they are done (kNext), a wait blocks or a fault stops the queue.
  Step run_ibs(Queue& q, bool* progressed);
  // One type-3 packet (header included) at `va`; *skip: dwords after it PRED_EXEC drops.
  Step exec_pm4(Queue& q, std::span<const uint32_t> pkt, uint64_t va, uint32_t* skip);
  Step pm4_release_mem(Queue& q, std::span<const uint32_t> body, uint64_t va);
  Step pm4_wait_reg_mem(Queue& q, std::span<const uint32_t> body, uint64_t va, bool is64);
  Step pm4_copy_data(Queue& q, std::span<const uint32_t> body, uint64_t va);
  Step pm4_dispatch(Queue& q, std::span<const uint32_t> body, uint64_t va);

  // sdma_exec.cc
  bool run_sdma_queue(Queue& q);
  Step exec_sdma(Queue& q, std::span<const uint32_t> pkt, uint64_t va);

  // aql_exec.cc
  bool run_aql_queue(Queue& q);
  Step exec_aql(Queue& q, uint8_t* slot, uint64_t va, bool* progressed);

  FakeKfd& kfd_;
  const int gpu_;
  const amd::ArchInfo* arch_;
  AmdTwinRegistry twins_;
  AmdKernelExecutor* executor_ = nullptr;  // nullptr: twins_

  // Queue state; the pumping thread holds it while it executes (launches included).
  std::recursive_mutex mu_;
  int depth_ = 0;  // lock depth of the holder; > 1 inside a launch's callback
  std::map<uint32_t, std::unique_ptr<Queue>> queues_;  // by KFD queue id

  // Faults, counters and injections; never held while calling out.
  mutable std::mutex info_mu_;
  std::vector<AmdGpuFault> faults_;
  std::function<void(const AmdGpuFault&)> fault_hook_;
  AmdGpuCounters counters_;
  std::set<uint64_t> fault_vas_;
  std::set<uint32_t> hung_;
  uint32_t lost_doorbells_ = 0;
};

}  // namespace baregrad::mock
