// KfdIface memory: allocation at a reserved VA, CPU mapping over it, GPU mapping, and release.

#include <sys/mman.h>

#include <utility>

#include "base/align.h"
#include "base/format.h"
#include "base/log.h"
#include "drivers/amd/iface_kfd.h"

namespace baregrad::amd {
namespace {

std::string alloc_text(uint64_t size, KfdMemKind kind, bool cpu_access, const std::string& where) {
  return "KFD alloc of " + hex(size) + " bytes of " + std::string(kfd_mem_kind_name(kind)) +
         (cpu_access ? " (CPU-visible)" : "") + " on " + where;
}

// Sizes KFD takes for the kinds with a fixed size; 0 for any.
uint64_t fixed_size(KfdMemKind kind) {
  if (kind == KfdMemKind::kDoorbell) return kKfdDoorbellPageBytes;
  if (kind == KfdMemKind::kMmioRemap) return kKfdMmioRemapBytes;
  return 0;
}

}  // namespace

std::string_view kfd_mem_kind_name(KfdMemKind kind) {
  switch (kind) {
    case KfdMemKind::kVram:
      return "VRAM";
    case KfdMemKind::kGtt:
      return "GTT";
    case KfdMemKind::kUserptr:
      return "userptr";
    case KfdMemKind::kDoorbell:
      return "doorbell";
    case KfdMemKind::kMmioRemap:
      return "MMIO remap";
  }
  return "?";
}

uint32_t kfd_alloc_flags(KfdMemKind kind, bool cpu_access) {
  uint32_t flags = kKfdIocAllocMemFlagsWritable | kKfdIocAllocMemFlagsNoSubstitute;
  switch (kind) {
    case KfdMemKind::kVram:
      flags |= kKfdIocAllocMemFlagsVram | kKfdIocAllocMemFlagsExecutable;
      break;
    case KfdMemKind::kGtt:
      flags |= kKfdIocAllocMemFlagsGtt | kKfdIocAllocMemFlagsExecutable |
               kKfdIocAllocMemFlagsCoherent | kKfdIocAllocMemFlagsUncached;
      break;
    case KfdMemKind::kUserptr:
      flags |= kKfdIocAllocMemFlagsUserptr | kKfdIocAllocMemFlagsExecutable;
      cpu_access = true;
      break;
    case KfdMemKind::kDoorbell:
      flags |= kKfdIocAllocMemFlagsDoorbell;
      break;
    case KfdMemKind::kMmioRemap:
      flags |= kKfdIocAllocMemFlagsMmioRemap | kKfdIocAllocMemFlagsCoherent |
               kKfdIocAllocMemFlagsUncached;
      break;
  }
  if (cpu_access) flags |= kKfdIocAllocMemFlagsPublic;
  return flags;
}

// ---- KfdMemory ---------------------------------------------------------------------------------

KfdMemory::KfdMemory(KfdMemory&& o) noexcept
    : iface_(std::exchange(o.iface_, nullptr)),
      handle_(o.handle_),
      va_(o.va_),
      size_(o.size_),
      kind_(o.kind_),
      cpu_(o.cpu_),
      allocated_(std::exchange(o.allocated_, false)),
      gpu_mapped_(std::exchange(o.gpu_mapped_, false)),
      range_(std::move(o.range_)) {}

KfdMemory& KfdMemory::operator=(KfdMemory&& o) noexcept {
  if (this != &o) {
    (void)free();
    iface_ = std::exchange(o.iface_, nullptr);
    handle_ = o.handle_, va_ = o.va_, size_ = o.size_, kind_ = o.kind_, cpu_ = o.cpu_;
    allocated_ = std::exchange(o.allocated_, false);
    gpu_mapped_ = std::exchange(o.gpu_mapped_, false);
    range_ = std::move(o.range_);
  }
  return *this;
}

KfdMemory::~KfdMemory() {
  Status s = free();
  if (!s.ok()) BG_LOG(1) << "amd: releasing KFD memory at " << hex(va_) << ": " << s;
}

Status KfdMemory::free() {
  if (iface_ == nullptr) return Status();
  Status first;
  if (gpu_mapped_) first = iface_->unmap_from_gpu(handle_);
  gpu_mapped_ = false;
  range_.reset();
  if (allocated_) {
    Status s = iface_->free_handle(handle_);
    if (first.ok()) first = std::move(s);
  }
  allocated_ = false;
  iface_ = nullptr;
  return first;
}

void KfdMemory::pin() {
  range_.release();
  allocated_ = gpu_mapped_ = false;
  iface_ = nullptr;
}

// ---- KfdIface ----------------------------------------------------------------------------------

Result<KfdMemory> KfdIface::alloc(uint64_t size, KfdMemKind kind, bool cpu_access) {
  std::string what = alloc_text(size, kind, cpu_access, where());
  if (size == 0) return invalid_argument(what + ": size 0");
  if (kind == KfdMemKind::kDoorbell && cpu_access) {
    return invalid_argument(what + ": the CPU reaches doorbells through a queue's doorbell page");
  }
  uint64_t fixed = fixed_size(kind);
  if (fixed != 0 && size != fixed) {
    return invalid_argument(what + ": KFD takes exactly " + hex(fixed) + " bytes of this kind");
  }
  KfdMemory m;
  m.kind_ = kind;
  m.size_ = round_up(size, kKfdPageBytes);
  m.cpu_ = cpu_access || kind == KfdMemKind::kUserptr;
  bool user = kind == KfdMemKind::kUserptr;
  // Userptr: the process memory itself. Else a reservation whose address becomes the GPU VA.
  ASSIGN_OR_RETURN(
      m.range_,
      hcq::map(*os_, nullptr, m.size_, user ? PROT_READ | PROT_WRITE : PROT_NONE,
               user ? MAP_SHARED | MAP_ANONYMOUS : MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
               0));
  m.va_ = reinterpret_cast<uint64_t>(m.range_.get());

  KfdIoctlAllocMemoryOfGpuArgs a{};
  a.va_addr = m.va_;
  a.size = m.size_;
  a.gpu_id = gpu_id();
  a.flags = kfd_alloc_flags(kind, cpu_access);
  a.mmap_offset = user ? m.va_ : 0;
  Status s = kfd_ioctl(kAmdkfdIocAllocMemoryOfGpu, &a, "AMDKFD_IOC_ALLOC_MEMORY_OF_GPU");
  if (!s.ok()) {
    Status e = in_context(what, s);
    if (s.code() == StatusCode::kInvalidArgument && kind == KfdMemKind::kVram && cpu_access) {
      return Status(e.code(), e.message() +
                                  "; host-visible VRAM needs resizable BAR (enable it, and "
                                  "above-4G decoding, in the firmware setup)");
    }
    return e;
  }
  m.iface_ = this;  // from here on m releases what it holds
  m.handle_ = a.handle;
  m.allocated_ = true;
  if (m.cpu_ && !user) {
    int fd = kind == KfdMemKind::kMmioRemap ? kfd_.get() : render_fd_;
    Result<void*> p = os_->mmap(reinterpret_cast<void*>(m.va_), m.size_, PROT_READ | PROT_WRITE,
                                MAP_SHARED | MAP_FIXED, fd, static_cast<off_t>(a.mmap_offset));
    if (!p.ok()) return in_context(what + ": mapping it for the CPU", p.status());
  }
  RETURN_IF_ERROR(in_context(what, map_to_gpu(m.handle_)));
  m.gpu_mapped_ = true;
  return m;
}

Status KfdIface::map_to_gpu(uint64_t handle) {
  uint32_t ids[1] = {gpu_id()};
  KfdIoctlMapMemoryToGpuArgs a{};
  a.handle = handle;
  a.device_ids_array_ptr = reinterpret_cast<uint64_t>(ids);
  a.n_devices = 1;
  RETURN_IF_ERROR(kfd_ioctl(kAmdkfdIocMapMemoryToGpu, &a, "AMDKFD_IOC_MAP_MEMORY_TO_GPU"));
  if (a.n_success != 1) {
    return internal("AMDKFD_IOC_MAP_MEMORY_TO_GPU of handle " + hex(handle) + " mapped it on " +
                    std::to_string(a.n_success) + " of 1 GPUs");
  }
  return Status();
}

Status KfdIface::unmap_from_gpu(uint64_t handle) {
  uint32_t ids[1] = {gpu_id()};
  KfdIoctlUnmapMemoryFromGpuArgs a{};
  a.handle = handle;
  a.device_ids_array_ptr = reinterpret_cast<uint64_t>(ids);
  a.n_devices = 1;
  return in_context(
      "unmapping KFD handle " + hex(handle) + " from " + where(),
      kfd_ioctl(kAmdkfdIocUnmapMemoryFromGpu, &a, "AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU"));
}

Status KfdIface::free_handle(uint64_t handle) {
  KfdIoctlFreeMemoryOfGpuArgs a{handle};
  return in_context("freeing KFD handle " + hex(handle) + " on " + where(),
                    kfd_ioctl(kAmdkfdIocFreeMemoryOfGpu, &a, "AMDKFD_IOC_FREE_MEMORY_OF_GPU"));
}

}  // namespace baregrad::amd
