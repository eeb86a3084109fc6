#include "drivers/nv/device.h"

#include <unistd.h>

#include <array>
#include <atomic>
#include <cstring>
#include <thread>

#include "base/align.h"
#include "base/format.h"
#include "base/log.h"
#include "drivers/nv/compute_queue.h"
#include "drivers/nv/copy_queue.h"
#include "drivers/nv/methods.h"
#include "drivers/nv/pushbuf.h"

namespace baregrad::nv {
namespace {

constexpr size_t kMinPushbufRingBytes = 256;  // the channel setup and its release fit
// Local memory provisioned per thread at first: the reserve every launch needs (see
// kLocalReserveBytes in program.h), rounded to 32 as tinygrad rounds it.
constexpr uint32_t kLocalBytesPerThread = 0x240;
constexpr uint64_t kLocalTpcAlign = 0x8000;

// RM memory behind hcq buffers: device memory is video memory (CPU-mapped on request), host
// memory pinned process memory, uncached host memory (signals) RM-owned system memory. Small
// device buffers that may be cached (not nolru) share 2 MiB slabs, one power-of-two size class
// per slab, as one RM object each would cost an RM handle and a GPU mapping (and the fake
// kernel a memfd); nolru buffers are always their own RM allocation, so freeing one unmaps it.
class RmAllocator : public hcq::Allocator {
 public:
  RmAllocator(hcq::Device& dev, RmGpu& gpu) : hcq::Allocator(dev), gpu_(gpu) {}

 protected:
  Result<hcq::Buffer> raw_alloc(size_t bytes, hcq::BufferSpec spec) override {
    if (!spec.host && !spec.nolru && bytes <= kSlabMaxChunk) return slab_alloc(bytes, spec);
    RmMemoryRequest req{.size = bytes,
                        .kind = !spec.host      ? RmMemoryKind::kVideo
                                : spec.uncached ? RmMemoryKind::kSystem
                                                : RmMemoryKind::kHost,
                        .cpu_access = spec.cpu_access || spec.host};
    ASSIGN_OR_RETURN(RmAllocation a, gpu_.alloc_memory(req));
    {
      std::lock_guard lock(mu_);
      live_[a.va] = a;
    }
    return hcq::Buffer{a.va, bytes, a.cpu(), a.handle, spec};
  }
  void raw_free(const hcq::Buffer& b) override {
    RmAllocation a;
    {
      std::lock_guard lock(mu_);
      if (auto sub = chunk_slab_.find(b.va); sub != chunk_slab_.end()) {
        uint64_t base = sub->second;
        chunk_slab_.erase(sub);
        Slab& slab = slabs_.at(base);
        slab.free.push_back(b.va);
        if (slab.free.size() < kSlabBytes / slab.chunk) {
          if (slab.free.size() == 1) partial_[{slab.chunk, slab.cpu_access}].push_back(base);
          return;
        }
        a = slab.mem;  // the slab is empty: give it back
        std::erase(partial_[{slab.chunk, slab.cpu_access}], base);
        slabs_.erase(base);
      } else {
        auto it = live_.find(b.va);
        CHECK(it != live_.end()) << "free of an unknown NV allocation at " << hex(b.va);
        a = it->second;
        live_.erase(it);
      }
    }
    Status s = gpu_.free_memory(a);
    if (!s.ok()) BG_LOG(0) << s;
  }

 private:
  static constexpr uint64_t kSlabBytes = 2 << 20;
  static constexpr size_t kSlabMaxChunk = 64 << 10;
  struct Slab {
    RmAllocation mem;
    size_t chunk;
    bool cpu_access;
    std::vector<uint64_t> free;  // chunk addresses
  };

  Result<hcq::Buffer> slab_alloc(size_t bytes, hcq::BufferSpec spec) {
    size_t chunk = 256;
    while (chunk < bytes) chunk *= 2;
    std::pair<size_t, bool> cls{chunk, spec.cpu_access};
    std::lock_guard lock(mu_);
    std::vector<uint64_t>& partial = partial_[cls];
    if (partial.empty()) {
      ASSIGN_OR_RETURN(RmAllocation a, gpu_.alloc_memory({.size = kSlabBytes,
                                                          .kind = RmMemoryKind::kVideo,
                                                          .cpu_access = spec.cpu_access}));
      Slab slab{a, chunk, spec.cpu_access, {}};
      for (uint64_t off = kSlabBytes; off >= chunk; off -= chunk)
        slab.free.push_back(a.va + off - chunk);
      slabs_.emplace(a.va, std::move(slab));
      partial.push_back(a.va);
    }
    uint64_t base = partial.back();
    Slab& slab = slabs_.at(base);
    uint64_t va = slab.free.back();
    slab.free.pop_back();
    if (slab.free.empty()) partial.pop_back();
    chunk_slab_[va] = base;
    void* cpu = slab.mem.cpu_mapped ? reinterpret_cast<void*>(va) : nullptr;
    return hcq::Buffer{va, bytes, cpu, slab.mem.handle, spec};
  }

  RmGpu& gpu_;
  std::mutex mu_;
  std::map<uint64_t, RmAllocation> live_;
  std::map<uint64_t, Slab> slabs_;                                    // by base
  std::map<uint64_t, uint64_t> chunk_slab_;                           // chunk in use -> slab base
  std::map<std::pair<size_t, bool>, std::vector<uint64_t>> partial_;  // slabs with free chunks
};

}  // namespace

Device::Device(std::shared_ptr<hcq::Os> os, DeviceOptions options)
    : hcq::Device(options.name), os_(std::move(os)), options_(std::move(options)) {}

Result<std::unique_ptr<Device>> Device::create(std::shared_ptr<hcq::Os> os,
                                               int index,
                                               DeviceOptions options) {
  if (options.pushbuf_ring_bytes % 4 != 0 || options.pushbuf_ring_bytes < kMinPushbufRingBytes)
    return invalid_argument("NV device: a pushbuffer ring of " +
                            std::to_string(options.pushbuf_ring_bytes) +
                            " bytes (a multiple of 4, at least " +
                            std::to_string(kMinPushbufRingBytes) + ", is needed)");
  std::unique_ptr<Device> dev(new Device(std::move(os), std::move(options)));
  ASSIGN_OR_RETURN(dev->iface_, RmIface::open(*dev->os_));
  ASSIGN_OR_RETURN(dev->gpu_, bring_up(*dev->iface_, index));
  // NOTE: peer mappings are bookkeeping only on hardware (no GPU page-table entries in the
  // other device's VA space yet), so each device is its own peer group unless told otherwise.
  dev->peer_group_ = !dev->options_.peer_group.empty()
                         ? dev->options_.peer_group
                         : dev->name() + ":" + std::to_string(getpid()) + ":" +
                               hex(reinterpret_cast<uint64_t>(dev.get()));
  dev->allocator_ = std::make_unique<RmAllocator>(*dev, *dev->gpu_);
  RETURN_IF_ERROR(dev->init_timeline());
  dev->timeline_ready_ = true;
  RETURN_IF_ERROR(dev->setup());
  return dev;
}

Status Device::setup() {
  const BringUp& info = gpu_->info();
  doorbell_ = hcq::Doorbell(hcq::Mmio(info.usermode_page, kUsermodeBytes), kDoorbellOffset, 32);
  RETURN_IF_ERROR(setup_channel(compute_, info.compute, "compute queue"));
  RETURN_IF_ERROR(setup_channel(copy_, info.copy, "copy queue"));

  const GpuClasses& c = info.classes;
  uint32_t carveout = c.smem_carveouts_kib.empty() ? 100 : c.smem_carveouts_kib.back();
  limits_.max_shared_bytes = (carveout - 1) << 10;

  // Channel setup: bind the engine classes (compute channel: compute on 1, copy on 4 for its
  // copies), then the compute engine's shader memory windows, then its local memory.
  hcq::CmdStream cs("channel setup of " + name(), 64);
  PushBuffer pb(cs);
  emit_set_object(pb, Subchannel::kCompute, c.compute);
  emit_set_object(pb, Subchannel::kCopy, c.copy);
  RETURN_IF_ERROR(emit_shader_memory_windows(pb, kLocalMemoryWindow, kSharedMemoryWindow));
  RETURN_IF_ERROR(submit_words(hcq::Engine::kCompute, cs.words()));
  RETURN_IF_ERROR(ensure_local_memory(kLocalBytesPerThread));
  cs.clear();
  emit_set_object(pb, Subchannel::kCopy, c.copy);
  RETURN_IF_ERROR(submit_words(hcq::Engine::kCopy, cs.words()));
  return error();
}

Status Device::ensure_local_memory(uint32_t bytes) {
  std::lock_guard lock(local_mu_);
  if (bytes <= local_per_thread_.load()) return Status();
  const BringUp& info = gpu_->info();
  // As tinygrad sizes it: per thread (rounded to 32), x 32 lanes, x warps per SM, x SMs per
  // TPC, for every TPC.
  uint64_t per_thread = round_up(bytes, 32);
  uint32_t warps = info.gr.max_warps_per_sm ? info.gr.max_warps_per_sm : 64;
  uint32_t sm_per_tpc = info.gr.sm_per_tpc ? info.gr.sm_per_tpc : 2;
  uint64_t per_tpc =
      round_up(round_up(per_thread * 32, 0x200) * warps * sm_per_tpc, kLocalTpcAlign);
  uint64_t tpcs = info.gr.tpcs ? info.gr.tpcs : 1;
  auto mem = allocator_->alloc(per_tpc * tpcs, {.nolru = true});
  if (!mem.ok())
    return resource_exhausted(
        name() + ": " + std::to_string(per_thread) + " bytes of local memory per thread need " +
        std::to_string(per_tpc * tpcs >> 20) + " MiB (" + std::to_string(per_tpc) +
        " bytes for each of " + std::to_string(tpcs) + " TPCs): " + mem.status().message());
  hcq::CmdStream cs("local memory of " + name(), 16);
  PushBuffer pb(cs);
  Status s = emit_shader_local_memory(pb, info.classes, static_cast<int64_t>(mem->va), per_tpc);
  if (s.ok()) s = submit_words(hcq::Engine::kCompute, cs.words());
  if (!s.ok()) {
    allocator_->free(*mem);
    return s;
  }
  if (local_memory_.size) old_local_memory_.push_back(local_memory_);
  local_memory_ = *mem;
  local_per_thread_.store(static_cast<uint32_t>(per_thread));
  BG_LOG(1) << name() << ": local memory " << per_thread << " bytes per thread ("
            << (per_tpc * tpcs >> 20) << " MiB)";
  return Status();
}

Status Device::setup_channel(Channel& ch, const RmChannel& rm, const char* what) {
  ch.name = std::string(what) + " of " + name();
  ch.rm = rm;
  ch.ring = std::make_unique<GpFifoRing>(rm.entries, rm.work_submit_token);
  ch.entries = hcq::Mmio(reinterpret_cast<void*>(rm.ring_va), size_t{rm.entries} * kGpEntryBytes);
  ch.userd = hcq::Mmio(reinterpret_cast<void*>(rm.userd_va), kUserdBytes);
  ASSIGN_OR_RETURN(ch.pushbuf,
                   allocator_->alloc(options_.pushbuf_ring_bytes,
                                     {.host = true, .cpu_access = true, .nolru = true}));
  // The completion counter and its release (64-bit, after WFI: the engine finished the work
  // before it, so its QMDs and ring words may be reused); the payload is patched per submission.
  ASSIGN_OR_RETURN(ch.done, new_signal("ring completions of the " + ch.name));
  ch.release = std::make_unique<hcq::CmdStream>("completion release of the " + ch.name, 8);
  PushBuffer pb(*ch.release);
  return emit_semaphore_release(pb, gpu_->info().classes, static_cast<int64_t>(ch.done->va()),
                                hcq::Value::sym(0));
}

Device::~Device() {
  if (timeline_ready_) (void)synchronize(std::chrono::milliseconds(5000));
  for (Channel* ch : {&compute_, &copy_}) {
    // The GPU may still read ring words submitted outside the timeline.
    if (ch->done && !failed()) (void)wait_completed(*ch, ch->seq.load(), "teardown");
    if (ch->pushbuf.size) allocator_->free(ch->pushbuf);
    ch->done.reset();  // its slot goes back before release_memory()
  }
  if (local_memory_.size) allocator_->free(local_memory_);
  for (const hcq::Buffer& b : old_local_memory_) allocator_->free(b);
  if (allocator_) release_memory();
  allocator_.reset();
  compute_.rm.error_notifier_cpu = copy_.rm.error_notifier_cpu = nullptr;  // unmapped with gpu_
  gpu_.reset();
  iface_.reset();
}

std::unique_ptr<hcq::HwQueue> Device::compute_queue() {
  return std::make_unique<ComputeQueue>(*this);
}

std::unique_ptr<hcq::HwQueue> Device::copy_queue() { return std::make_unique<CopyQueue>(*this); }

Result<std::unique_ptr<hcq::Program>> Device::load_program(const Binary& b) {
  const std::string& arch = info().arch;  // "sm_90"
  // A cubin runs on its own sm and on later minors of the same major (sm_86 on sm_89).
  bool runs = b.format == BinaryFormat::kCubin && b.arch.size() == arch.size() &&
              b.arch.compare(0, arch.size() - 1, arch, 0, arch.size() - 1) == 0 &&
              b.arch.back() <= arch.back();
  if (!runs)
    return invalid_argument("load " + b.entry + " on " + name() + " (" + arch + "): a " +
                            binary_format_name(b.format) + " binary for " + b.arch +
                            " (this device runs cubins for " + arch + ")");
  auto elf = std::span(reinterpret_cast<const uint8_t*>(b.code.data()), b.code.size());
  Result<std::unique_ptr<Program>> loaded =
      Program::load(*this, elf, b.entry, b.num_bufs, b.num_vars, b.id);
  if (!loaded.ok())
    return Status(loaded.status().code(),
                  "load " + b.entry + " on " + name() + ": " + loaded.status().message());
  std::unique_ptr<Program> prg = std::move(*loaded);
  BG_LOG(1) << "loaded " << b.entry << " on " << name() << " at " << hex(prg->code_va()) << " ("
            << prg->registers() << " registers)";
  return std::unique_ptr<hcq::Program>(std::move(prg));
}

Status Device::submit_words(hcq::Engine e, std::span<const uint32_t> words, uint64_t* sequence) {
  Channel& ch = channel(e);
  size_t cap = ch.pushbuf.size / 4, n = words.size() + ch.release->size();
  if (n > cap)
    return resource_exhausted(ch.name + ": a submission of " + std::to_string(words.size()) +
                              " words (" + std::to_string(n) +
                              " with the completion release) cannot fit the pushbuffer ring of " +
                              std::to_string(cap));
  std::lock_guard submit(ch.submit_mu);
  // After the last submission, or from the start when the words do not fit before the end.
  size_t put = ch.pushbuf_put + n > cap ? 0 : ch.pushbuf_put;
  RETURN_IF_ERROR(wait_ring_space(ch, put, n));
  uint64_t seq = ch.seq.load() + 1;
  auto* dst = static_cast<uint32_t*>(ch.pushbuf.cpu) + put;
  if (!words.empty()) std::memcpy(dst, words.data(), words.size() * 4);  // none: a bare fence
  ch.release->apply(std::array<int64_t, 1>{static_cast<int64_t>(seq)});
  std::memcpy(dst + words.size(), ch.release->words().data(), ch.release->size() * 4);
  size_t old_put = ch.pushbuf_put;
  ch.in_flight.push_back({put, put + n, seq});
  ch.pushbuf_put = put + n;
  ch.seq.store(seq);
  Status s = publish(e, ch.pushbuf.va + put * 4, static_cast<uint32_t>(n));
  if (!s.ok()) {  // nothing was published: the words and the sequence number are free again
    ch.in_flight.pop_back();
    ch.pushbuf_put = old_put;
    ch.seq.store(seq - 1);
    return s;
  }
  if (sequence) *sequence = seq;
  return Status();
}

uint64_t Device::completed_sequence(hcq::Engine e) {
  Channel& ch = channel(e);
  return ch.done ? ch.done->value() : 0;
}

Status Device::wait_sequence(hcq::Engine e, uint64_t seq) {
  Channel& ch = channel(e);
  return wait_completed(ch, seq, "waiting for a queue's submissions");
}

Status Device::wait_ring_space(Channel& ch, size_t put, size_t n) {
  // Done submissions give their words back first.
  uint64_t completed = ch.done->value();
  while (!ch.in_flight.empty() && ch.in_flight.front().seq <= completed) ch.in_flight.pop_front();
  // in_flight runs in ring order from pushbuf_put: first those in the tail a wrap skips (older,
  // not overwritten), then those [put, put + n) overlaps, then the rest.
  bool wrap = put != ch.pushbuf_put;
  size_t overwritten = 0;
  uint64_t want = 0;
  for (size_t i = 0; i < ch.in_flight.size(); i++) {
    const RingUse& u = ch.in_flight[i];
    if (u.begin < put + n && put < u.end) {
      overwritten = i + 1;
      want = u.seq;
    } else if (!(wrap && u.begin >= ch.pushbuf_put)) {
      break;
    }
  }
  if (overwritten == 0) return Status();
  RETURN_IF_ERROR(wait_completed(
      ch, want, "the pushbuffer ring (" + std::to_string(ch.pushbuf.size) + " bytes) is full"));
  ch.in_flight.erase(ch.in_flight.begin(), ch.in_flight.begin() + overwritten);
  return Status();
}

Status Device::wait_completed(Channel& ch, uint64_t seq, const std::string& what) {
  uint64_t seen = ch.done->value();
  auto t0 = std::chrono::steady_clock::now();
  int spins = 0;
  while (seen < seq) {
    // Without ch.mu: bound submissions go on meanwhile (a simulated GPU runs in progress()).
    progress();
    RETURN_IF_ERROR(error());
    uint64_t now_seen = ch.done->value();
    auto now = std::chrono::steady_clock::now();
    if (now_seen != seen) {  // the GPU moves: the timeout restarts
      seen = now_seen;
      t0 = now;
    } else if (now - t0 > options_.timeout) {
      return deadline_exceeded(ch.name + ": " + what + ": ring submission " + std::to_string(seq) +
                               " not complete after " + std::to_string(options_.timeout.count()) +
                               " ms (the GPU completed up to submission " + std::to_string(seen) +
                               ")");
    }
    if (spins < 1000) {
      spins++;
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  return Status();
}

Status Device::publish(hcq::Engine e, uint64_t va, uint32_t words) {
  RETURN_IF_ERROR(error());
  Channel& ch = channel(e);
  {
    std::unique_lock lock(ch.mu);
    auto t0 = std::chrono::steady_clock::now();
    uint32_t last_get = ch.userd.read<uint32_t>(kUserdGpGet);
    for (;;) {
      uint32_t get = ch.userd.read<uint32_t>(kUserdGpGet);
      if (ch.ring->check_space(1, get).ok()) break;
      RETURN_IF_ERROR(error());
      if (get != last_get) {
        last_get = get;
        t0 = std::chrono::steady_clock::now();
      } else if (std::chrono::steady_clock::now() - t0 > options_.timeout) {
        return deadline_exceeded(ch.name + ": the GPFIFO ring stayed full for " +
                                 std::to_string(options_.timeout.count()) + " ms");
      }
      lock.unlock();
      progress();
      std::this_thread::yield();
      lock.lock();
    }
    ASSIGN_OR_RETURN(GpSubmit s, ch.ring->push(va, words, ch.userd.read<uint32_t>(kUserdGpGet)));
    // The documented order: ring[slot] = entry; USERD GPPut; full fence; doorbell.
    ch.entries.write<uint64_t>(size_t{s.slot} * kGpEntryBytes, s.entry);
    ch.userd.write<uint32_t>(kUserdGpPut, s.gp_put);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    doorbell_.ring(s.doorbell);
  }
  // A fault found here fails the device; the submission itself was published.
  progress();
  return Status();
}

void Device::note_qmd(uint64_t qmd_va, const std::string& kernel) {
  std::lock_guard lock(qmd_mu_);
  qmd_kernels_[qmd_va] = kernel;
}

void Device::forget_qmd(uint64_t qmd_va) {
  std::lock_guard lock(qmd_mu_);
  qmd_kernels_.erase(qmd_va);
}

}  // namespace baregrad::nv
