// FakeKfd process setup (version, VM, runtime) and memory: allocation, GPU mapping, CPU mmap
// targets and resolve().

#include <bit>
#include <cerrno>

#include "base/format.h"
#include "drivers/mock/amd/fake_kfd_state.h"

namespace baregrad::mock {

using namespace amd;

int FakeKfd::State::get_version(KfdIoctlGetVersionArgs& a) {
  a.major_version = cfg.major;
  a.minor_version = cfg.minor;
  return 0;
}

int FakeKfd::State::acquire_vm(KfdIoctlAcquireVmArgs& a) {
  KfdGpuState* g = gpu_by_id(a.gpu_id);
  if (g == nullptr) return refuse(EINVAL, "ACQUIRE_VM: no gpu_id " + hex(a.gpu_id));
  auto f = fds.find(static_cast<int>(a.drm_fd));
  if (f == fds.end() || f->second.kind != KfdFdKind::kRender ||
      gpus[f->second.gpu].gpu_id != a.gpu_id) {
    return refuse(EINVAL, "ACQUIRE_VM: fd " + std::to_string(a.drm_fd) +
                              " is not the render node of gpu_id " + hex(a.gpu_id));
  }
  if (g->acquired_fd >= 0 && g->acquired_fd != static_cast<int>(a.drm_fd)) {
    return refuse(EBUSY, "ACQUIRE_VM: gpu_id " + hex(a.gpu_id) + " already has a VM");
  }
  g->acquired_fd = static_cast<int>(a.drm_fd);
  return 0;
}

int FakeKfd::State::runtime_enable(KfdIoctlRuntimeEnableArgs& a) {
  if (!version_at_least(1, 13)) return refuse(EINVAL, "RUNTIME_ENABLE: KFD before 1.13");
  if (!queues.empty()) return refuse(EEXIST, "RUNTIME_ENABLE: the process has queues");
  runtime_mode = a.mode_mask;
  return 0;
}

const KfdAllocState* FakeKfd::State::mapped_at(uint64_t va, uint64_t len, int gpu) const {
  for (const auto& [h, a] : allocs) {
    const FakeKfdAllocation& i = a.info;
    if (!i.gpu_mapped || (gpu >= 0 && i.gpu != gpu)) continue;
    if (va >= i.va && len <= i.size && va - i.va <= i.size - len) return &a;
  }
  return nullptr;
}

int FakeKfd::State::alloc_memory(KfdIoctlAllocMemoryOfGpuArgs& a) {
  std::string call = "ALLOC_MEMORY_OF_GPU of " + hex(a.size) + " bytes at " + hex(a.va_addr);
  KfdGpuState* g = gpu_by_id(a.gpu_id);
  if (g == nullptr || g->acquired_fd < 0) {
    return refuse(EINVAL, call + ": gpu_id " + hex(a.gpu_id) + " unknown or without a VM");
  }
  uint32_t type = a.flags & kKfdIocAllocMemTypeMask;
  if (!std::has_single_bit(type)) return refuse(EINVAL, call + ": flags " + hex(a.flags));
  if (a.size == 0 || a.size % kKfdPage != 0 || a.va_addr == 0 || a.va_addr % kKfdPage != 0) {
    return refuse(EINVAL, call + ": size or VA not page-aligned (the fake is strict)");
  }
  uint64_t fixed = type == kKfdIocAllocMemFlagsDoorbell    ? kKfdDoorbellBytes
                   : type == kKfdIocAllocMemFlagsMmioRemap ? kKfdPage
                                                           : 0;
  if (fixed != 0 && a.size != fixed) return refuse(EINVAL, call + ": needs " + hex(fixed));
  if (type == kKfdIocAllocMemFlagsUserptr && (a.mmap_offset == 0 || a.mmap_offset % kKfdPage)) {
    return refuse(EINVAL, call + ": userptr address " + hex(a.mmap_offset));
  }
  int gpu = static_cast<int>(g - gpus.data());
  for (const auto& [h, o] : allocs) {
    if (o.info.gpu == gpu && o.info.va < a.va_addr + a.size &&
        a.va_addr < o.info.va + o.info.size) {
      return refuse(EINVAL, call + ": overlaps handle " + hex(h));
    }
  }
  bool vram = type == kKfdIocAllocMemFlagsVram;
  if (vram && g->vram_used + a.size > g->cfg.vram_bytes) {
    return refuse(ENOMEM, call + ": " + hex(g->vram_used) + " bytes of VRAM already used");
  }
  KfdAllocState s;
  if (type == kKfdIocAllocMemFlagsVram || type == kKfdIocAllocMemFlagsGtt) {
    Result<std::shared_ptr<KfdBacking>> mem = KfdBacking::create(a.size, "fake-kfd-bo");
    if (!mem.ok()) return refuse(ENOMEM, call + ": " + mem.status().message());
    s.mem = *mem;
    a.mmap_offset = next_mmap_offset;
    next_mmap_offset += a.size;
  } else if (type == kKfdIocAllocMemFlagsDoorbell) {
    s.mem = g->doorbells;
    a.mmap_offset = kKfdMmapTypeDoorbell | (uint64_t{a.gpu_id} << kKfdMmapGpuIdShift);
  } else if (type == kKfdIocAllocMemFlagsMmioRemap) {
    s.mem = g->mmio;
    a.mmap_offset = kKfdMmapTypeMmio | (uint64_t{a.gpu_id} << kKfdMmapGpuIdShift);
  }
  a.handle = (uint64_t{a.gpu_id} << 32) | next_idr++;  // MAKE_HANDLE(gpu_id, idr handle)
  s.info = FakeKfdAllocation{gpu, a.handle, a.va_addr, a.size, a.mmap_offset, a.flags, false, {}};
  if (vram) g->vram_used += a.size;
  allocs.emplace(a.handle, std::move(s));
  return 0;
}

int FakeKfd::State::free_memory(KfdIoctlFreeMemoryOfGpuArgs& a) {
  auto it = allocs.find(a.handle);
  if (it == allocs.end()) return refuse(EINVAL, "FREE_MEMORY_OF_GPU: no handle " + hex(a.handle));
  if (it->second.info.gpu_mapped) {
    return refuse(EBUSY, "FREE_MEMORY_OF_GPU: handle " + hex(a.handle) + " is still GPU-mapped");
  }
  if (it->second.info.flags & kKfdIocAllocMemFlagsVram) {
    gpus[it->second.info.gpu].vram_used -= it->second.info.size;
  }
  allocs.erase(it);
  return 0;
}

int FakeKfd::State::map_memory(KfdIoctlMapMemoryToGpuArgs& a, bool map) {
  std::string call = std::string(map ? "MAP_MEMORY_TO_GPU" : "UNMAP_MEMORY_FROM_GPU") +
                     " of handle " + hex(a.handle);
  auto it = allocs.find(a.handle);
  if (it == allocs.end()) return refuse(EINVAL, call + ": no such handle");
  if (a.n_devices == 0 || a.device_ids_array_ptr == 0 || a.n_success > a.n_devices) {
    return refuse(EINVAL, call + ": no devices");
  }
  const uint32_t* ids = reinterpret_cast<const uint32_t*>(a.device_ids_array_ptr);
  FakeKfdAllocation& info = it->second.info;
  for (; a.n_success < a.n_devices; ++a.n_success) {
    KfdGpuState* g = gpu_by_id(ids[a.n_success]);
    // NOTE: one GPU per allocation in the fake, except GTT (system memory, which every GPU of
    // the process reaches: the event page): VRAM peer mappings are not modelled.
    bool gtt = (info.flags & kKfdIocAllocMemFlagsGtt) != 0;
    if (g == nullptr || g->acquired_fd < 0 || (g - gpus.data() != info.gpu && !gtt)) {
      return refuse(EINVAL, call + ": gpu_id " + hex(ids[a.n_success]));
    }
    if (!map && !info.gpu_mapped) return refuse(EINVAL, call + ": not mapped");
    info.gpu_mapped = map;
  }
  return 0;
}

std::shared_ptr<KfdBacking> FakeKfd::State::mmap_target(
    const KfdFakeFd& f, uint64_t offset, uint64_t len, uint64_t* alloc_handle, int* err) {
  std::string call = "mmap of " + hex(len) + " bytes at offset " + hex(offset);
  if (f.kind == KfdFdKind::kRender) {
    for (auto& [h, a] : allocs) {
      if (a.info.gpu == f.gpu && a.mem != nullptr && a.info.mmap_offset == offset &&
          len <= a.info.size &&
          (a.info.flags & (kKfdIocAllocMemFlagsVram | kKfdIocAllocMemFlagsGtt))) {
        *alloc_handle = h;
        return a.mem;
      }
    }
    *err = refuse(EINVAL, call + " of a render node: no allocation there");
    return nullptr;
  }
  uint32_t gpu_id = static_cast<uint32_t>((offset & kKfdMmapGpuIdMask) >> kKfdMmapGpuIdShift);
  uint64_t type = offset & (3ull << kKfdMmapTypeShift);
  KfdGpuState* g = gpu_by_id(gpu_id);
  uint64_t low = offset & ~(kKfdMmapGpuIdMask | (3ull << kKfdMmapTypeShift));
  if (g != nullptr && low == 0 && type == kKfdMmapTypeDoorbell && len == kKfdDoorbellBytes) {
    return g->doorbells;
  }
  if (g != nullptr && low == 0 && type == kKfdMmapTypeMmio && len == kKfdPage) {
    for (auto& [h, a] : allocs) {
      if (a.mem == g->mmio) *alloc_handle = h;
    }
    return g->mmio;
  }
  *err = refuse(EINVAL, call + " of /dev/kfd: not a doorbell or MMIO page");
  return nullptr;
}

std::optional<uint8_t*> FakeKfd::resolve(uint64_t va, size_t len) const {
  std::lock_guard lock(s_->mu);
  const KfdAllocState* a = s_->mapped_at(va, len, -1);
  if (a == nullptr) return std::nullopt;
  if (a->mem == nullptr) return reinterpret_cast<uint8_t*>(va);  // userptr: the memory itself
  return a->mem->host + (va - a->info.va);
}

}  // namespace baregrad::mock
