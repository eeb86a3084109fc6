// The hardware-command-queue contract: the one header a driver author reads.
//
// A device exposes memory (Allocator, Buffer), 64-bit memory semaphores (Signal) and queues that
// record commands (HwQueue) and publish them in submit(). All ordering between queues, devices
// and the CPU goes through signals. Every submission follows the timeline protocol:
//   q.wait(dev.timeline(), dev.timeline_value() - 1) ... .signal(dev.timeline(),
//   dev.next_timeline())
// so the timeline's value tells the CPU how far the device got. Every wait has a timeout; a
// fault or a hang puts the device into a sticky error state that every later call reports.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/binary.h"
#include "base/status.h"
#include "hcq/cmdstream.h"

namespace baregrad::hcq {

class Device;

// How long a wait may see no progress before it reports a hang: HANG_TIMEOUT_MS (30 s).
std::chrono::milliseconds default_timeout();
// Past this timeline value Device::synchronize() swaps to the shadow signal and restarts at 1:
// devices compare 32-bit payloads.
constexpr uint64_t kTimelineWrap = 1ull << 31;

struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
};

// ---- memory --------------------------------------------------------------------------------

struct BufferSpec {
  bool host = false;        // system memory, pinned (else device memory)
  bool cpu_access = false;  // mapped into the CPU
  bool uncached = false;    // uncached CPU and device access (signals)
  bool nolru = false;       // freed for real instead of cached for reuse
  bool external = false;    // memory the allocator adopted (adopt()): never cached or released
  auto operator<=>(const BufferSpec&) const = default;
};

// A range of device memory. GPU VA equals CPU VA for CPU-visible buffers where the driver
// allows it; `cpu` is null when the CPU cannot see the memory.
struct Buffer {
  uint64_t va = 0;
  size_t size = 0;
  void* cpu = nullptr;
  uint64_t handle = 0;  // the driver's handle of the allocation (views share it)
  BufferSpec spec;

  // Bytes [offset, offset + bytes) of this buffer; CHECKs the bounds.
  Buffer view(size_t offset, size_t bytes) const;
};

// Device memory with LRU reuse by (size, spec) and host copies through staging buffers.
class Allocator {
 public:
  explicit Allocator(Device& dev);
  virtual ~Allocator();
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  // `bytes` (> 0) of memory; a cached buffer of the same size and spec when there is one.
  // ResourceExhausted names the size and what is in use.
  Result<Buffer> alloc(size_t bytes, BufferSpec spec = {});
  // Returns a buffer from alloc() (not a view). It is cached for reuse unless spec.nolru; work
  // already submitted may still use it, since reuse is ordered by the queues.
  void free(const Buffer& b);
  // `bytes` (> 0) of host memory at `host`, owned by the caller, as a buffer of this device
  // (device address == host address): only for devices whose queues address host memory
  // directly. free() forgets it without releasing it; the caller keeps the memory alive and
  // unchanged in size until then. InvalidArgument when it overlaps a buffer of this allocator.
  Result<Buffer> adopt(void* host, size_t bytes);
  // Frees every cached buffer, after the device is idle.
  Status clear_cache();
  // Frees the staging buffers (drivers call it, then clear_cache(), before tearing down).
  void release_staging();
  // Host -> device in staging chunks through the copy queue (the compute queue when there is
  // none); returns once `src` may be reused. The copies are ordered on the timeline.
  Status copy_in(const Buffer& dst, const void* src, size_t bytes);
  // Device -> host; synchronizes first and returns with `dst` filled.
  Status copy_out(void* dst, const Buffer& src, size_t bytes);
  // The allocation holding device address `va` (in use or cached: both are mapped, and so are
  // buffers of other devices mapped in with map_into), for address checks and fault reports.
  std::optional<Buffer> find(uint64_t va) const;
  // Makes `b`, an allocation of this device, usable by `peer`'s queues (same address). Fails
  // with Unimplemented when the devices share no peer group. Freeing `b` unmaps it from every
  // peer still open.
  Status map_into(const Buffer& b, Device& peer);
  size_t used_bytes() const;
  size_t cached_bytes() const;
  // Counts unmappings: a range find() returned stays mapped while this is unchanged.
  uint64_t unmap_generation() const { return unmap_generation_.load(std::memory_order_acquire); }

  static constexpr size_t kStagingBytes = 2 << 20;  // one staging chunk
  static constexpr int kStagingCount = 4;

 protected:
  // The driver's allocation and release; never called with bytes == 0, and possibly called
  // from several threads at once.
  virtual Result<Buffer> raw_alloc(size_t bytes, BufferSpec spec) = 0;
  virtual void raw_free(const Buffer& b) = 0;

 private:
  struct Staging {
    Buffer buf;
    uint64_t free_after = 0;  // timeline value after which the device is done with it,
    uint64_t epoch = 0;       // in this timeline epoch (an older epoch means free)
  };
  Status ensure_staging();
  Status wait_staging(const Staging& st);

  Device& dev_;
  std::mutex copy_mu_;  // one host copy at a time owns the staging buffers
  mutable std::mutex mu_;
  std::multimap<std::pair<size_t, BufferSpec>, Buffer> cache_;
  std::map<uint64_t, Buffer> live_;     // in use, by va
  std::map<uint64_t, Buffer> mapped_;   // in use or cached, by va
  std::map<uint64_t, Buffer> foreign_;  // other devices' buffers mapped into this one
  std::map<uint64_t, std::vector<Allocator*>> peers_;  // our buffers mapped into others
  // Drops every peer mapping of our buffer at `va` (it is being unmapped).
  void unmap_from_peers(uint64_t va);
  size_t cached_bytes_ = 0, used_bytes_ = 0;
  std::atomic<uint64_t> unmap_generation_{0};
  std::vector<Staging> staging_;
  size_t next_staging_ = 0;
};

// ---- signals -------------------------------------------------------------------------------

// The 16 bytes of a signal in memory every queue and the CPU can access.
struct SignalSlot {
  std::atomic<uint64_t> value;
  std::atomic<uint64_t> timestamp;  // device clock in ns, written by timestamp()
};
static_assert(sizeof(SignalSlot) == 16);

// A 64-bit memory semaphore. Freed signals return their slot to the device's pool.
class Signal {
 public:
  Signal(Device& dev, SignalSlot* slot, uint64_t va, std::string name);
  ~Signal();
  Signal(const Signal&) = delete;
  Signal& operator=(const Signal&) = delete;

  uint64_t value() const { return slot_->value.load(std::memory_order_acquire); }
  void set(uint64_t v) { slot_->value.store(v, std::memory_order_release); }
  uint64_t timestamp_ns() const { return slot_->timestamp.load(std::memory_order_acquire); }
  // Device address of the value; the timestamp is at va() + 8.
  uint64_t va() const { return va_; }
  const std::string& name() const { return name_; }
  Device& device() const { return dev_; }

  // Waits on the CPU until value() >= v: spins briefly, yields for up to 2 ms, then sleeps on a
  // futex 1 ms at a time, calling the device's progress() between sleeps. The timeout restarts
  // whenever the value changes. DeadlineExceeded names the signal, the expected and the seen
  // value; a device in the error state returns its error at once.
  Status wait(uint64_t v, std::chrono::milliseconds timeout = default_timeout()) const;
  // Wakes CPU threads sleeping in wait() on `slot` (software devices call it after a write).
  static void wake_waiters(const SignalSlot* slot);

 private:
  Device& dev_;
  SignalSlot* slot_;
  uint64_t va_;
  std::string name_;
};

// ---- programs ------------------------------------------------------------------------------

// A kernel-argument block in device-visible memory: `prefix` driver bytes, then one 64-bit
// address per buffer, then one 64-bit value per scalar. Symbolic entries are patched by apply().
class ArgsState {
 public:
  ArgsState(Buffer mem, size_t prefix, int num_bufs, int num_vars);
  void set_buf(int i, Value va);
  void set_var(int i, Value v);
  // Writes the symbolic entries whose variables changed (a queue calls it at submit).
  void apply(std::span<const int64_t> vars) const;
  const Buffer& mem() const { return mem_; }
  int num_bufs() const { return num_bufs_; }
  int num_vars() const { return num_vars_; }

 private:
  void put(size_t offset, Value v);
  Buffer mem_;
  size_t prefix_;
  int num_bufs_, num_vars_;
  mutable PatchTable patches_;
};

// A kernel loaded on a device.
class Program {
 public:
  Program(std::string name, int num_bufs, int num_vars)
      : name_(std::move(name)), num_bufs_(num_bufs), num_vars_(num_vars) {}
  virtual ~Program() = default;
  const std::string& name() const { return name_; }
  int num_bufs() const { return num_bufs_; }
  int num_vars() const { return num_vars_; }
  // Bytes of driver data before the buffer addresses in the argument block.
  virtual size_t args_prefix() const { return 0; }
  // Checks a launch before anything is recorded (grid and block limits of the device).
  virtual Status check_launch(Dim3 grid, Dim3 block) const;

 private:
  std::string name_;
  int num_bufs_, num_vars_;
};

// ---- queues --------------------------------------------------------------------------------

enum class Engine : uint8_t { kCompute, kCopy };

// Records commands; nothing reaches the device before submit(). Methods return *this. The
// commands of one queue run in order, each finished (its writes visible) before the next
// starts; queues are ordered against each other only through signals. A queue must outlive
// its submissions (a bound queue's destructor waits for the device).
class HwQueue {
 public:
  HwQueue(Device& dev, Engine engine) : dev_(dev), engine_(engine) {}
  virtual ~HwQueue() = default;
  Device& device() const { return dev_; }
  Engine engine() const { return engine_; }

  // Stalls the queue until signal `s` >= v.
  virtual HwQueue& wait(const Signal& s, Value v) = 0;
  // After every earlier command completed, writes v to `s`.
  virtual HwQueue& signal(const Signal& s, Value v) = 0;
  // After every earlier command completed, writes the device clock (ns) to s's timestamp.
  virtual HwQueue& timestamp(const Signal& s) = 0;
  // Earlier writes become visible to later commands, other queues and the CPU.
  virtual HwQueue& memory_barrier() = 0;
  // Compute queues: runs `prg` over `grid` workgroups of `block` threads with `args`, which
  // must stay alive until the device finished the launch.
  virtual HwQueue& exec(const Program& prg, const ArgsState& args, Dim3 grid, Dim3 block) = 0;
  // Copies `bytes` from device address `src` to `dst`.
  virtual HwQueue& copy(Value dst, Value src, Value bytes) = 0;
  // Moves the recorded commands into device-visible memory once, so that each later submit
  // only enqueues a reference to them (and patches write there).
  virtual Status bind() = 0;
  // Patches the symbolic values that changed, then publishes the commands: reserve ring space,
  // write them (or a reference), release fence, write pointer, doorbell. Can be repeated.
  virtual Status submit(std::span<const int64_t> vars = {}) = 0;
  // Forgets the recorded commands (and a refusal).
  virtual void reset() = 0;

  // OK, or why a command was refused when it was recorded (an exec on a copy queue, a copy
  // past a buffer's end, a full command buffer, a signal outside the device's peer group).
  // submit() returns it and publishes nothing.
  const Status& refusal() const { return refused_; }

 protected:
  // Refuses the command being recorded; the first refusal stands until reset().
  void refuse(Status s) {
    if (refused_.ok()) refused_ = std::move(s);
  }
  void clear_refusal() { refused_ = Status(); }
  // Refuses a signal whose memory this device's queues cannot reach; true when usable.
  bool check_signal(const Signal& s, const char* what);
  // Refuses an exec on a queue that is not a compute queue, or whose argument block has another
  // arity than `prg`; `queue` names this queue in the message. True when it may go on.
  bool check_exec(const Program& prg, const ArgsState& args, const std::string& queue);
  // `prg` as driver `driver`'s program type P, or null after refusing another driver's program.
  template <class P>
  const P* program_of(const Program& prg, const std::string& queue, const char* driver) {
    const auto* p = dynamic_cast<const P*>(&prg);
    if (!p)
      refuse(invalid_argument("exec of '" + prg.name() + "' on the " + queue +
                              ": not a program of the " + driver + " driver"));
    return p;
  }
  // Refuses a copy whose constant source or destination range does not lie in one allocation
  // of the device (symbolic ranges are the engine's to check); true when it may be recorded.
  bool check_copy(Value dst, Value src, Value bytes, const std::string& queue);

 private:
  Device& dev_;
  Engine engine_;
  Status refused_;
};

// ---- devices -------------------------------------------------------------------------------

class Device {
 public:
  virtual ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const std::string& name() const { return name_; }
  virtual Allocator& allocator() = 0;
  // A new, empty queue for this device; copy_queue() is null without a copy engine.
  virtual std::unique_ptr<HwQueue> compute_queue() = 0;
  virtual std::unique_ptr<HwQueue> copy_queue() { return nullptr; }
  // Loads a compiled kernel (links, uploads and relocates its code as the device needs) and
  // returns it ready for exec(); the program must not outlive the device. InvalidArgument
  // names the binary's format and arch when the device cannot run them, or what in the code
  // object is malformed.
  virtual Result<std::unique_ptr<Program>> load_program(const Binary& binary) = 0;
  // Called by waits between polls: a device whose progress needs the CPU advances here.
  virtual void progress() {}
  // What the device's queues were doing when synchronize() timed out (which commands each one
  // was executing, what it waits for), appended to the sticky error; empty when unknown.
  virtual std::string describe_hang() { return {}; }
  // Whether queues execute what they record (DEV=NULL does not).
  virtual bool executes() const { return true; }
  // Whether device addresses are host addresses the CPU may read and write in place (once
  // synchronize() returned): true for the CPU device only.
  virtual bool host_addressable() const { return false; }
  // Devices whose signals and memory each other's queues can reach share a peer group.
  virtual std::string peer_group() const { return name_; }

  // A signal from the device's pool, initially `initial`.
  Result<std::unique_ptr<Signal>> new_signal(std::string name, uint64_t initial = 0);
  // The timeline: next_timeline() returns the value the next submission signals (and advances
  // it); timeline_value() - 1 is the last one handed out.
  Signal& timeline() { return *timelines_[active_.load(std::memory_order_acquire)]; }
  uint64_t timeline_value() const { return timeline_value_.load(); }
  uint64_t next_timeline() { return timeline_value_.fetch_add(1); }
  // Counts timeline wraps: a value recorded in an older epoch has been reached.
  uint64_t timeline_epoch() const { return epoch_.load(std::memory_order_acquire); }
  // Waits until the device finished everything submitted. Past 2^31 the timeline swaps to its
  // shadow signal and restarts at 1, since devices compare 32-bit payloads.
  Status synchronize(std::chrono::milliseconds timeout = default_timeout());

  // The sticky error: OK until a fault or hang, then that error forever.
  Status error() const;
  // Records a fault (the first one wins) and wakes every waiter.
  void set_error(Status s);
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // Counts work items a software engine finished (the CPU device's kernels report each chunk):
  // waits take a change as progress, so a long kernel is not mistaken for a hang while a
  // kernel stuck in one item still is.
  void note_work_done() { work_done_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t work_done() const { return work_done_.load(std::memory_order_relaxed); }
  // Whether a CPU thread may be sleeping in Signal::wait (so a software queue must wake it).
  bool has_waiters() const { return waiters_.load(std::memory_order_seq_cst) > 0; }

  // Resets `q`, records q.wait(timeline, v - 1), `body`, q.signal(timeline, v) for the next
  // timeline value v and submits it, holding the device's submit lock so that concurrent
  // submitters reach the rings in timeline order; `vars` are the symbolic values. Returns v.
  Result<uint64_t> submit_on_timeline(HwQueue& q,
                                      const std::function<void(HwQueue&)>& body,
                                      std::span<const int64_t> vars = {},
                                      std::string_view label = {});

  // ---- profiling: while on, every submit_on_timeline body is bracketed with timestamps ----
  struct ProfileEvent {
    std::string name;  // the submission's label
    Engine engine;
    uint64_t start_ns, end_ns;  // device clock
  };
  void set_profiling(bool on) { profiling_.store(on); }
  bool profiling() const { return profiling_.load(); }
  // The recorded events, oldest first (synchronizes first), and forgets them.
  Result<std::vector<ProfileEvent>> take_profile();

  // The name of the live signal whose value is at `va` ("?" when none), for reports.
  std::string signal_name(uint64_t va) const;

  // Takes the next timeline value v under the submit lock and calls submit(v), which publishes
  // work that signals v (a graph's queues, say); when it fails, v is handed out again.
  Result<uint64_t> submit_with_timeline(const std::function<Status(uint64_t v)>& submit);

  // Test hook: pretends `v - 1` timeline values were already used (idle device only).
  Status set_timeline_for_test(uint64_t v);

 protected:
  explicit Device(std::string name) : name_(std::move(name)) {}
  // Creates the timeline signals; drivers call it once the allocator works.
  Status init_timeline();
  // Returns the signal pages to the allocator; drivers call it before destroying the allocator.
  void free_signal_pages();
  // Frees the staging buffers, the allocator's cache and the signal pages, in that order:
  // drivers call it in their destructor once their queues are idle and their engines stopped.
  void release_memory();

 private:
  friend class Signal;
  void release_slot(SignalSlot* slot, uint64_t va);

  std::string name_;
  mutable std::mutex mu_;
  std::vector<Buffer> signal_pages_;
  std::vector<SignalSlot*> free_slots_;
  std::map<uint64_t, std::string> signal_names_;  // live signals by va
  std::unique_ptr<Signal> timelines_[2];          // the active one and its shadow
  std::atomic<int> active_{0};
  std::atomic<uint64_t> timeline_value_{1};
  std::atomic<uint64_t> epoch_{0};
  std::atomic<bool> failed_{false};
  std::atomic<int> waiters_{0};
  std::atomic<uint64_t> work_done_{0};
  std::atomic<bool> profiling_{false};
  struct PendingEvent {
    std::string name;
    Engine engine;
    std::unique_ptr<Signal> start, end;
  };
  std::vector<PendingEvent> pending_events_;  // under submit_mu_
  Status error_;
  std::mutex submit_mu_;
};

// Writes `events` of each (device name, events) as a Chrome trace (JSON) that Perfetto opens:
// a process per device, a thread per queue, complete events in microseconds.
Status write_chrome_trace(
    const std::string& path,
    const std::vector<std::pair<std::string, std::vector<Device::ProfileEvent>>>& devices);

}  // namespace baregrad::hcq
