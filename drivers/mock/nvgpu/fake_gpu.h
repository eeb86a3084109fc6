// A fake NVIDIA GPU: a test instrument that executes what the NVIDIA driver writes, the way the
// hardware would, so that the real driver code runs in CI. It reads GP entries between its
// GPGet and USERD's GPPut, decodes each pushbuffer segment method by method (host, compute and
// copy classes of one generation), runs semaphores, copies and QMD launches against GpuMemory,
// and hands grids to a KernelExecutor. Every decode is written from NVIDIA's headers and
// manuals independently of drivers/nv's encoders (README.md names each source).
//
// Anything it cannot resolve or does not know is a recorded Fault that kills the channel
// (sticky, like a channel error); it never crashes the host and never busy-waits.
//
// How a mock device drives it:
//   1. add_channel() per GPFIFO channel the driver allocates (the fake RM does this);
//   2. the driver writes ring[slot], USERD GPPut, then rings: ring(work_submit_token);
//   3. its waits pump run_until_idle() (progress()) until signals arrive or they time out;
//   4. twins().add(program_va, twin) per loaded program (or set_executor() for another one);
//   5. on_fault() tells the fake kernel driver, which writes the channel's error notifier;
//      faults() lists them for tests.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "drivers/mock/nvgpu/executor.h"
#include "drivers/mock/nvgpu/memory.h"
#include "drivers/nv/classes.h"

namespace baregrad::mock {

enum class ChannelEngine : uint8_t { kCompute, kCopy };

struct ChannelConfig {
  uint64_t ring_va = 0;       // GPFIFO ring: ring_entries 8-byte GP entries
  uint32_t ring_entries = 0;  // >= 2
  uint64_t userd_va = 0;      // USERD: GPGet at +0x88 (written by the GPU), GPPut at +0x8c
  ChannelEngine engine = ChannelEngine::kCompute;
  uint32_t token = 0;  // the work-submit token a doorbell names
};

enum class FaultKind : uint8_t {
  kMmuFault,       // an access no live allocation covers (or inject_mmu_fault_at)
  kGpEntry,        // a bad GP entry or GPPut (control opcode, segment over 2^40, GPPut >= size)
  kPushbuffer,     // a malformed pushbuffer (SEC_OP, a burst past the segment end)
  kIllegalMethod,  // a method the bound class lacks, or an engine method before SET_OBJECT
  kIllegalClass,   // SET_OBJECT of a class this generation/engine/subchannel does not run
  kIllegalValue,   // a known method with data the GPU refuses (alignment, reserved bits)
  kBadQmd,         // a QMD the GPU cannot run (version, type, reduction, dependent action)
  kLaunch,         // the KernelExecutor refused the grid (e.g. an unknown program)
};
// "MMU fault", "illegal method", ...: how Fault::to_string() starts.
std::string_view fault_kind_name(FaultKind k);

enum class Access : uint8_t { kNone, kRead, kWrite };

// What the GPU records when it stops a channel.
struct Fault {
  static constexpr uint32_t kNoMethod = 0xffffffff;
  FaultKind kind = FaultKind::kMmuFault;
  uint32_t token = 0;  // the channel
  // MMU faults: the first byte of the access no allocation covers. Otherwise the pushbuffer
  // address of the method's header, the ring slot or USERD GPPut (GP entries), or the QMD.
  uint64_t address = 0;
  Access access = Access::kNone;
  uint32_t subchannel = 0;
  uint32_t cls = 0;             // the class the method went to (host class for host methods)
  uint32_t method = kNoMethod;  // method byte offset; kNoMethod outside a method
  uint64_t pushbuffer_va = 0;   // the header of the method being executed; 0 outside one
  uint64_t qmd_va = 0;          // the QMD being launched; 0 outside a launch
  std::string what;             // what the GPU was doing and why it stopped
  // One line: kind, access, address, channel, class/subchannel/method, QMD, then `what`.
  std::string to_string() const;
};

// What the GPU has done, for tests and the fake RM's statistics.
struct GpuCounters {
  uint64_t doorbells = 0, lost_doorbells = 0, unknown_doorbells = 0;
  uint64_t gp_entries = 0, methods = 0;
  uint64_t semaphore_releases = 0, semaphore_acquires = 0, acquire_blocks = 0;
  uint64_t non_stall_interrupts = 0, shader_cache_invalidates = 0;
  uint64_t launches = 0, copies = 0, bytes_copied = 0;
};

// One channel as the GPU sees it.
struct ChannelStatus {
  uint32_t gp_get = 0;   // the next GP entry the channel fetches (also written to USERD)
  bool busy = false;     // inside a pushbuffer segment
  bool blocked = false;  // waiting in a semaphore acquire
  bool dead = false;     // stopped by a fault (see faults())
  bool hung = false;     // inject_hang()
  std::array<uint32_t, 8> classes{};  // SET_OBJECT per subchannel; 0 when none
  // Compute state (SET_SHADER_* methods), decoded from the class's fields.
  uint64_t local_memory_va = 0;             // SET_SHADER_LOCAL_MEMORY_A/B
  uint64_t local_memory_bytes_per_tpc = 0;  // SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A/B
  uint32_t local_memory_max_sm_count = 0;   // SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C
  uint64_t local_memory_window = 0;         // SET_SHADER_LOCAL_MEMORY_WINDOW_A/B
  uint64_t shared_memory_window = 0;        // SET_SHADER_SHARED_MEMORY_WINDOW_A/B
};

class FakeNvGpu {
 public:
  // A GPU of `generation` over `memory` (not owned; must outlive the GPU). Launches go to the
  // built-in TwinRegistry until set_executor().
  explicit FakeNvGpu(GpuMemory& memory, nv::Generation generation = nv::Generation::kHopper);
  ~FakeNvGpu();
  FakeNvGpu(const FakeNvGpu&) = delete;
  FakeNvGpu& operator=(const FakeNvGpu&) = delete;

  // The generation whose classes and QMD versions this GPU runs.
  nv::Generation generation() const { return generation_; }
  // The GPFIFO class host-method faults name (AMPERE/HOPPER/BLACKWELL_CHANNEL_GPFIFO_A).
  uint32_t host_class() const;

  // ---- channels (what the fake RM does) ------------------------------------------------------
  // Adds a channel with GPGet 0. InvalidArgument for a token in use, fewer than 2 entries, or an
  // unaligned ring (8) or USERD (4). Nothing is read until the first pump.
  Status add_channel(const ChannelConfig& c);
  // Forgets a channel (the RM freed it); NotFound for an unknown token. Not from a launch.
  Status remove_channel(uint32_t token);

  // ---- kernels -------------------------------------------------------------------------------
  // The built-in executor: host twins by program VA (thread-safe).
  TwinRegistry& twins() { return twins_; }
  // Sends launches to `e` (not owned); nullptr: back to twins().
  void set_executor(KernelExecutor* e);

  // ---- what the driver does ------------------------------------------------------------------
  // The doorbell: `token` written to the usermode page at +0x90 (NOTIFY_CHANNEL_PENDING). Runs
  // the GPU until idle unless the doorbell is lost (inject_lost_doorbell); an unknown token is
  // counted and ignored.
  void ring(uint32_t token);
  // Runs every live channel until none makes progress: GP entries from GPGet to USERD GPPut,
  // methods in order, a blocked acquire re-checked once per pass (the channel resumes at that
  // method). Returns whether anything progressed. Thread-safe; a call from inside a launch (on
  // the pumping thread) returns false at once and the running pump goes on.
  bool run_until_idle();

  // ---- what tests and fault reports read -----------------------------------------------------
  // Every fault so far, in the order they happened (one per dead channel).
  std::vector<Fault> faults() const;
  // Calls `hook` with each fault as the GPU records it (what a GPU's fault interrupt is to the
  // kernel driver): on the pumping thread, with the channels locked, no other lock held.
  void on_fault(std::function<void(const Fault&)> hook);
  // What the GPU has done so far.
  GpuCounters counters() const;
  // A snapshot of one channel; NotFound for an unknown token.
  Result<ChannelStatus> channel_status(uint32_t token);
  // The GPU timer semaphores with timestamps write: steady-clock nanoseconds.
  static uint64_t timestamp_ns();

  // ---- fault injection -----------------------------------------------------------------------
  // Treats `va` as unmapped: any later access covering it is an MMU fault at `va`.
  void inject_mmu_fault_at(uint64_t va);
  // The channel stops making progress for good (no fault recorded): host waits time out.
  void inject_hang(uint32_t token);
  // The next `n` doorbells are dropped; their work runs at the next doorbell or pump.
  void inject_lost_doorbell(uint32_t n);

  struct Channel;  // drivers/mock/nvgpu/channel.h

 private:
  friend class ChannelRunner;
  class Lock;
  Channel* find(uint32_t token);
  bool run_channel(Channel& ch);

  GpuMemory& memory_;
  nv::Generation generation_;
  TwinRegistry twins_;
  KernelExecutor* executor_ = nullptr;  // nullptr: twins_

  // Channel state; the pumping thread holds it while it executes (launches included).
  std::recursive_mutex mu_;
  int depth_ = 0;  // lock depth of the holder; > 1 inside a launch's callback
  std::vector<std::unique_ptr<Channel>> channels_;

  // Faults, counters and injections; never held while calling out.
  mutable std::mutex info_mu_;
  std::vector<Fault> faults_;
  std::function<void(const Fault&)> fault_hook_;
  GpuCounters counters_;
  std::set<uint64_t> fault_vas_;
  std::set<uint32_t> hung_;
  uint32_t lost_doorbells_ = 0;
};

}  // namespace baregrad::mock
