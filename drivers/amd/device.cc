#include "drivers/amd/device.h"

#include <unistd.h>

#include <algorithm>
#include <bit>

#include "base/align.h"
#include "base/format.h"
#include "base/log.h"
#include "drivers/amd/aql.h"
#include "drivers/amd/compute_queue.h"
#include "drivers/amd/copy_queue.h"
#include "drivers/amd/scratch.h"

namespace baregrad::amd {
namespace {

constexpr size_t kMinRingBytes = 4096;
// The compute queue's end-of-pipe buffer: RELEASE_MEM needs one (tinygrad: 0x1000 of VRAM).
constexpr uint64_t kEopBytes = 0x1000;
// The pointer page: the PM4 compute queue's rptr and wptr, the SDMA queue's, and the AQL
// compute queue's amd_queue_t (64-aligned), which holds that queue's pointers.
constexpr uint64_t kComputePointers = 0, kCopyPointers = 64, kAmdQueue = 256;

// KFD memory behind hcq buffers: device memory is VRAM (CPU-mapped, PUBLIC, on request), host
// memory (pinned or uncached: staging, signals, argument blocks) is CPU-mapped GTT. One KFD
// allocation per buffer (whole pages).
class KfdAllocator : public hcq::Allocator {
 public:
  KfdAllocator(hcq::Device& dev, KfdIface& kfd) : hcq::Allocator(dev), kfd_(kfd) {}

 protected:
  Result<hcq::Buffer> raw_alloc(size_t bytes, hcq::BufferSpec spec) override {
    KfdMemKind kind = spec.host ? KfdMemKind::kGtt : KfdMemKind::kVram;
    ASSIGN_OR_RETURN(KfdMemory m, kfd_.alloc(bytes, kind, spec.cpu_access || spec.host));
    hcq::Buffer b{m.va(), bytes, m.cpu(), m.handle(), spec};
    std::lock_guard lock(mu_);
    live_.emplace(m.va(), std::move(m));
    return b;
  }
  void raw_free(const hcq::Buffer& b) override {
    KfdMemory m;
    {
      std::lock_guard lock(mu_);
      auto it = live_.find(b.va);
      CHECK(it != live_.end()) << "free of an unknown AMD allocation at " << hex(b.va);
      m = std::move(it->second);
      live_.erase(it);
    }
    if (Status s = m.free(); !s.ok()) BG_LOG(0) << s;
  }

 private:
  KfdIface& kfd_;
  std::mutex mu_;
  std::map<uint64_t, KfdMemory> live_;
};

}  // namespace

CwsrSizes cwsr_sizes(const KfdNodeProperties& p) {
  // Source: Linux amdkfd/kfd_queue.c: kfd_get_vgpr_size_per_cu, WG_CONTEXT_DATA_SIZE_PER_CU
  // (VGPR + SGPR 0x4000 + LDS 0x10000 + HWREG 0x1000 per CU), CNTL_STACK_BYTES_PER_WAVE (12 from
  // gfx10.1, else 8), the 40-byte save-area header, DEBUGGER_BYTES_PER_WAVE 32 aligned to 64.
  uint32_t v = p.gfx_target_version;
  uint32_t xccs = std::max(1u, p.num_xcc);
  uint32_t vgpr = v == 90010 || v == 90402 ? 0x80000 : v >= 110000 ? 0x60000 : 0x40000;
  uint32_t simd_per_cu = std::max(1u, p.simd_per_cu);
  uint32_t cu = std::max(1u, p.simd_count / simd_per_cu / xccs);
  uint32_t waves =
      v < 100100 ? std::min(cu * 40, p.array_count / std::max(1u, p.simd_arrays_per_engine) * 512)
                 : cu * 32;
  uint64_t wg_data = round_up(uint64_t{cu} * (vgpr + 0x4000 + 0x10000 + 0x1000), kKfdPageBytes);
  uint64_t ctl = round_up(40 + uint64_t{waves} * (v >= 100100 ? 12 : 8) + 8, kKfdPageBytes);
  CwsrSizes s;
  s.ctl_stack_size = static_cast<uint32_t>(ctl);
  s.ctx_save_restore_size = static_cast<uint32_t>(ctl + wg_data);
  s.debug_memory_size = static_cast<uint32_t>(round_up(uint64_t{waves} * 32, 64));
  s.buffer_bytes =
      round_up(uint64_t{s.ctx_save_restore_size + s.debug_memory_size} * xccs, kKfdPageBytes);
  return s;
}

Result<ComputeQueueMode> compute_queue_mode(std::string_view v) {
  if (v.empty()) return ComputeQueueMode::kAuto;
  if (v == "0") return ComputeQueueMode::kPm4;
  if (v == "1") return ComputeQueueMode::kAql;
  return invalid_argument("AMD_AQL=" + std::string(v) +
                          ": must be 1 (AQL compute queue), 0 (PM4) or empty (AQL on GPUs with "
                          "several XCCs, else PM4)");
}

Device::Device(std::shared_ptr<hcq::Os> os, DeviceOptions options)
    : hcq::Device(options.name), os_(std::move(os)), options_(std::move(options)) {}

Result<std::unique_ptr<Device>> Device::create(std::shared_ptr<hcq::Os> os,
                                               int index,
                                               DeviceOptions options) {
  for (auto [what, bytes] : {std::pair{"compute", options.compute_ring_bytes},
                             std::pair{"copy", options.copy_ring_bytes}}) {
    if (!std::has_single_bit(bytes) || bytes < kMinRingBytes)
      return invalid_argument("AMD device: a " + std::string(what) + " ring of " +
                              std::to_string(bytes) + " bytes (a power of two, at least " +
                              std::to_string(kMinRingBytes) + ", is needed)");
  }
  if (options.name.empty()) options.name = index == 0 ? "AMD" : "AMD:" + std::to_string(index);
  std::unique_ptr<Device> dev(new Device(std::move(os), std::move(options)));
  ASSIGN_OR_RETURN(dev->kfd_, KfdIface::open(dev->os_, index));
  uint32_t target = dev->kfd_->node().props.gfx_target_version;
  Result<const ArchInfo*> arch = arch_for_target_version(target);
  if (!arch.ok()) {
    std::string supported;
    for (const ArchInfo& a : supported_archs())
      supported += (supported.empty() ? "" : ", ") + std::string(a.name);
    return failed_precondition("AMD GPU " + std::to_string(index) + " is " + gfx_name(target) +
                               ", which baregrad does not support (" + supported + ")");
  }
  dev->arch_ = *arch;
  uint32_t xccs = std::max(1u, dev->kfd_->node().props.num_xcc);
  ComputeQueueMode mode = dev->options_.compute;
  if (mode == ComputeQueueMode::kPm4 && xccs > 1)
    return failed_precondition(
        "AMD GPU " + std::to_string(index) + " (" + std::string(dev->arch_->name) + ") has " +
        std::to_string(xccs) +
        " XCCs: a PM4 compute queue there needs PRED_EXEC per XCC, which baregrad does not "
        "emit; use the AQL compute queue (AMD_AQL=1, or leave AMD_AQL unset)");
  dev->aql_ = mode == ComputeQueueMode::kAql || (mode == ComputeQueueMode::kAuto && xccs > 1);
  // NOTE: no GPU page-table entries in another device's VA space yet: a group of its own.
  dev->peer_group_ = !dev->options_.peer_group.empty()
                         ? dev->options_.peer_group
                         : dev->name() + ":" + std::to_string(getpid()) + ":" +
                               hex(reinterpret_cast<uint64_t>(dev.get()));
  dev->allocator_ = std::make_unique<KfdAllocator>(*dev, *dev->kfd_);
  RETURN_IF_ERROR(dev->setup());
  RETURN_IF_ERROR(dev->init_timeline());
  dev->timeline_ready_ = true;
  return dev;
}

Status Device::setup() {
  ASSIGN_OR_RETURN(signal_event_, kfd_->create_event(KfdEventType::kSignal, true));
  ASSIGN_OR_RETURN(memory_event_, kfd_->create_event(KfdEventType::kMemory, false));
  ASSIGN_OR_RETURN(hw_event_, kfd_->create_event(KfdEventType::kHwException, false));
  ASSIGN_OR_RETURN(pointers_, kfd_->alloc(kKfdPageBytes, KfdMemKind::kGtt, true));
  ASSIGN_OR_RETURN(eop_, kfd_->alloc(kEopBytes, KfdMemKind::kVram, false));
  CwsrSizes cwsr = cwsr_sizes(kfd_->node().props);
  ASSIGN_OR_RETURN(cwsr_, kfd_->alloc(cwsr.buffer_bytes, KfdMemKind::kVram, false));
  auto* ptrs = static_cast<uint8_t*>(pointers_.cpu());
  const KfdNodeProperties& p = kfd_->node().props;
  if (aql_) {
    uint32_t cus = p.simd_per_cu ? p.simd_count / p.simd_per_cu : 0;
    init_amd_queue(
        std::span<uint8_t, AmdQueueLayout::kBytes>(ptrs + kAmdQueue, AmdQueueLayout::kBytes),
        std::max(cus, 1u) - 1, std::max(p.max_waves_per_simd * p.simd_per_cu, 1u) - 1);
  }

  compute_ring_ =
      std::make_unique<Ring>(*this, aql_ ? Ring::Kind::kAql : Ring::Kind::kPm4,
                             std::string(aql_ ? "AQL " : "") + "compute queue of " + name());
  KfdQueueRequest creq{.type = aql_ ? KfdQueueType::kComputeAql : KfdQueueType::kCompute,
                       .eop = &eop_,
                       .ctx_save_restore = &cwsr_,
                       .ctx_save_restore_size = cwsr.ctx_save_restore_size,
                       .ctl_stack_size = cwsr.ctl_stack_size};
  uint64_t rptr = aql_ ? kAmdQueue + AmdQueueLayout::kReadDispatchId : kComputePointers;
  uint64_t wptr = aql_ ? kAmdQueue + AmdQueueLayout::kWriteDispatchId : kComputePointers + 8;
  RETURN_IF_ERROR(compute_ring_->init(*kfd_, options_.compute_ring_bytes, ptrs, pointers_.va(),
                                      rptr, wptr, creq));
  copy_ring_ = std::make_unique<Ring>(*this, Ring::Kind::kSdma, "copy queue (SDMA) of " + name());
  RETURN_IF_ERROR(copy_ring_->init(*kfd_, options_.copy_ring_bytes, ptrs, pointers_.va(),
                                   kCopyPointers, kCopyPointers + 8,
                                   KfdQueueRequest{.type = KfdQueueType::kSdma}));
  BG_LOG(1) << name() << ": " << kfd_->where() << ", KFD " << kfd_->version().str() << ", "
            << (aql_ ? "AQL" : "PM4") << " compute queue " << compute_ring_->queue_id()
            << ", SDMA queue " << copy_ring_->queue_id() << ", CWSR " << cwsr.buffer_bytes
            << " bytes";
  return Status();
}

Device::~Device() {
  if (timeline_ready_) (void)synchronize(std::chrono::milliseconds(5000));
  for (Ring* r : {compute_ring_.get(), copy_ring_.get()}) {
    // The engine may still read ring words submitted outside the timeline.
    if (r && !failed()) (void)r->wait(r->last_seq(), "teardown");
  }
  if (allocator_) {
    for (Ring* r : {compute_ring_.get(), copy_ring_.get()})
      if (r) r->release();  // its completion counter goes back before release_memory()
    release_memory();
  }
  compute_ring_.reset();
  copy_ring_.reset();
  allocator_.reset();
  scratch_mem_.clear();
  cwsr_ = {};
  eop_ = {};
  pointers_ = {};
  hw_event_ = {};
  memory_event_ = {};
  signal_event_ = {};
  kfd_.reset();
}

Device::Scratch Device::scratch() {
  std::lock_guard lock(scratch_mu_);
  return scratch_;
}

Status Device::ensure_scratch(uint32_t bytes_per_item) {
  std::lock_guard lock(scratch_mu_);
  if (bytes_per_item <= scratch_per_item_) return Status();
  const KfdNodeProperties& p = kfd_->node().props;
  if (p.num_xcc > 1 && !aql_)
    return failed_precondition(std::to_string(bytes_per_item) +
                               " bytes of scratch per work-item on " + kfd_->where() +
                               ", which has " + std::to_string(p.num_xcc) +
                               " XCCs: the PM4 queue cannot give each XCC its scratch");
  ASSIGN_OR_RETURN(ScratchLayout l, scratch_layout(*arch_, p, bytes_per_item));
  ASSIGN_OR_RETURN(KfdMemory m, kfd_->alloc(l.bytes, KfdMemKind::kVram, false));
  scratch_ = {m.va(), l.tmpring_size};
  if (aql_) {
    // NOTE: as tinygrad: the buffer holds one share per XCC, and the CP (not checked on
    // hardware here) hands each XCC its own.
    AqlScratch a{.va = m.va(),
                 .bytes = l.bytes / std::max(1u, p.num_xcc),
                 .tmpring_size = l.tmpring_size,
                 .lane_bytes = l.bytes_per_lane};
    private_segment_buffer(m.va(), a.rsrc);
    set_amd_queue_scratch(
        std::span<uint8_t, AmdQueueLayout::kBytes>(
            static_cast<uint8_t*>(pointers_.cpu()) + kAmdQueue, AmdQueueLayout::kBytes),
        a);
  }
  scratch_mem_.push_back(std::move(m));
  scratch_per_item_ = l.bytes_per_lane;
  BG_LOG(1) << name() << ": scratch of " << l.bytes << " bytes (" << l.bytes_per_lane
            << " per lane) at " << hex(scratch_.va) << ", COMPUTE_TMPRING_SIZE "
            << hex(l.tmpring_size);
  return Status();
}

std::unique_ptr<hcq::HwQueue> Device::compute_queue() {
  return std::make_unique<ComputeQueue>(*this);
}

std::unique_ptr<hcq::HwQueue> Device::copy_queue() { return std::make_unique<CopyQueue>(*this); }

Result<std::unique_ptr<hcq::Program>> Device::load_program(const Binary& b) {
  std::string where = "load " + b.entry + " on " + name() + " (" + std::string(arch_->name) + ")";
  if (b.format != BinaryFormat::kAmdHsa || b.arch != arch_->name) {
    std::string format = binary_format_name(b.format);
    std::string article = std::string("aeiou").find(format[0]) == std::string::npos ? "a " : "an ";
    return invalid_argument(where + ": " + article + format + " binary for " + b.arch +
                            " (this device runs amdhsa code objects for " +
                            std::string(arch_->name) + ")");
  }
  Result<std::unique_ptr<Program>> p = Program::load(*this, *arch_, b);
  if (!p.ok()) return Status(p.status().code(), where + ": " + p.status().message());
  BG_LOG(1) << "loaded " << b.entry << " on " << name() << " at " << hex((*p)->code_va());
  return std::unique_ptr<hcq::Program>(std::move(*p));
}

}  // namespace baregrad::amd
