// RmGpu memory: allocation, CPU mapping at the GPU VA, GPU mapping through UVM, and free.

#include <fcntl.h>
#include <sys/mman.h>

#include "base/format.h"
#include "drivers/nv/iface_rm.h"
#include "drivers/nv/iface_rm_internal.h"
#include "drivers/nv/rm_status.h"

namespace baregrad::nv {
namespace {

constexpr uint32_t kSmallPage = 4 << 10;
constexpr uint32_t kHugePage = 2 << 20;
constexpr uint64_t kHugePageThreshold = 8 << 20;  // tinygrad: video memory >= 8 MiB uses 2 MiB

std::string range_text(uint64_t va, uint64_t bytes) {
  return "[" + hex(va) + ", +" + hex(bytes) + ")";
}

NvMemoryAllocationParams memory_params(uint32_t root, const RmAllocation& a, bool contiguous) {
  bool system = a.kind == RmMemoryKind::kSystem;
  bool huge = a.page_size > kSmallPage;
  NvMemoryAllocationParams p{};
  p.owner = root;
  p.type = system ? kNvos32TypeNotifier : kNvos32TypeImage;
  p.flags = kNvos32AllocFlagsMapNotRequired | kNvos32AllocFlagsMemoryHandleProvided |
            kNvos32AllocFlagsAlignmentForce | kNvos32AllocFlagsIgnoreBankPlacement |
            (system ? 0 : kNvos32AllocFlagsPersistentVidmem);
  p.attr =
      (contiguous ? kNvos32AttrPhysicalityContiguous : kNvos32AttrPhysicalityAllowNoncontiguous) |
      (huge ? kNvos32AttrPageSizeHuge : 0) | (system ? kNvos32AttrLocationPci : 0);
  p.attr2 = (system ? kNvos32Attr2GpuCacheableNo : kNvos32Attr2GpuCacheableYes) |
            (huge ? kNvos32Attr2PageSizeHuge2mb : 0) | kNvos32Attr2ZbcPreferNoZbc;
  p.format = kNvMemoryFormat;
  p.size = a.size;
  p.alignment = a.page_size;
  p.limit = a.size - 1;
  return p;
}

template <class P>
Status map_dma(RmIface& iface, uint32_t device, uint32_t virtmem, const RmAllocation& a) {
  P p{};
  p.h_client = iface.root();
  p.h_device = device;
  p.h_dma = virtmem;
  p.h_memory = a.handle;
  p.length = a.size;
  p.flags = kNvos46FlagsPageSize4kb | kNvos46FlagsCacheSnoopEnable | kNvos46FlagsDmaOffsetFixedTrue;
  p.dma_offset = a.va;
  std::string call =
      "NV_ESC_RM_MAP_MEMORY_DMA of handle " + hex(a.handle) + " at " + range_text(a.va, a.size);
  RETURN_IF_ERROR(iface.escape(iface.ctl_fd(), kNvEscRmMapMemoryDma, &p, sizeof(p), call));
  if (p.status != rm_status::NV_OK) return rm_error(call, p.status);
  if (p.dma_offset != a.va) {
    return internal(call + ": RM mapped it at " + hex(p.dma_offset));
  }
  return Status();
}

}  // namespace

Result<void*> RmGpu::map_to_cpu(uint32_t handle, uint64_t bytes, void* at, bool system) {
  // One mmap context per file: a fresh /dev/nvidiaN fd (video memory, the usermode page) or
  // /dev/nvidiactl fd (system memory). The mapping keeps the file alive after the fd closes.
  hcq::Fd fd;
  if (system) {
    Result<hcq::Fd> ctl = hcq::open_fd(iface_.os(), kNvCtlPath, O_RDWR);
    if (!ctl.ok()) return device_open_error(ctl.status(), kNvCtlPath);
    fd = std::move(*ctl);
  } else {
    ASSIGN_OR_RETURN(fd, open_device_fd());
  }
  Nvos33ParametersWithFd p{};
  p.params.h_client = iface_.root();
  p.params.h_device = info_.device;
  p.params.h_memory = handle;
  p.params.length = bytes;
  p.fd = fd.get();
  std::string call =
      "NV_ESC_RM_MAP_MEMORY of handle " + hex(handle) + " (" + hex(bytes) + " bytes)";
  RETURN_IF_ERROR(iface_.escape(iface_.ctl_fd(), kNvEscRmMapMemory, &p, sizeof(p), call));
  if (p.params.status != rm_status::NV_OK) return rm_error(call, p.params.status);
  int flags = MAP_SHARED | (at != nullptr ? MAP_FIXED : 0);
  return iface_.os().mmap(at, bytes, PROT_READ | PROT_WRITE, flags, fd.get(), 0);
}

Status RmGpu::uvm_free(uint64_t va, uint64_t bytes) {
  std::string what = "UVM_FREE of " + range_text(va, bytes);
  if (iface_.branch() >= RmBranch::k590) {
    UvmFreeParams590 p{va, 0};
    return iface_.uvm(kUvmFree, &p, sizeof(p), what);
  }
  UvmFreeParams570 p{va, bytes, 0};
  return iface_.uvm(kUvmFree, &p, sizeof(p), what);
}

Status RmGpu::map_to_gpu(const RmAllocation& a) {
  UvmCreateExternalRangeParams range{a.va, a.size, 0};
  RETURN_IF_ERROR(iface_.uvm(kUvmCreateExternalRange, &range, sizeof(range),
                             "UVM_CREATE_EXTERNAL_RANGE of " + range_text(a.va, a.size)));
  Undo undo;
  undo.add([&] { (void)uvm_free(a.va, a.size); });
  RETURN_IF_ERROR(iface_.branch() == RmBranch::k570
                      ? map_dma<Nvos46Parameters570>(iface_, info_.device, info_.virtmem, a)
                      : map_dma<Nvos46Parameters580>(iface_, info_.device, info_.virtmem, a));

  auto map = std::make_unique<UvmMapExternalAllocationParams>();
  map->base = a.va;
  map->length = a.size;
  map->per_gpu_attributes[0].gpu_uuid = info_.uuid;
  map->per_gpu_attributes[0].gpu_mapping_type = kUvmGpuMappingTypeReadWriteAtomic;
  map->gpu_attributes_count = 1;
  map->rm_ctrl_fd = iface_.ctl_fd();
  map->h_client = iface_.root();
  map->h_memory = a.handle;
  RETURN_IF_ERROR(iface_.uvm(kUvmMapExternalAllocation, map.get(), sizeof(*map),
                             "UVM_MAP_EXTERNAL_ALLOCATION of handle " + hex(a.handle) + " at " +
                                 range_text(a.va, a.size)));
  undo.dismiss();
  return Status();
}

Result<RmAllocation> RmGpu::alloc_memory(const RmMemoryRequest& req) {
  if (req.size == 0) return invalid_argument("NV memory allocation of 0 bytes");
  RmAllocation a;
  a.kind = req.kind;
  a.page_size =
      req.kind == RmMemoryKind::kVideo && req.size >= kHugePageThreshold ? kHugePage : kSmallPage;
  a.size = round_up(req.size, a.page_size);
  a.cpu_mapped = req.cpu_access || req.kind == RmMemoryKind::kHost;
  VaRange& range = a.cpu_mapped ? iface_.low_va() : iface_.high_va();
  ASSIGN_OR_RETURN(a.va, range.alloc(a.size, a.page_size));
  Undo undo;
  undo.add([&] { range.free(a.va, a.size); });
  auto unmap_cpu = [&] { (void)range.rereserve(a.va, a.size); };

  if (req.kind == RmMemoryKind::kHost) {
    RETURN_IF_ERROR(iface_.os().mmap(reinterpret_cast<void*>(a.va), a.size, PROT_READ | PROT_WRITE,
                                     MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0));
    undo.add(unmap_cpu);
    Nvos02ParametersWithFd p{};
    p.params.h_root = iface_.root();
    p.params.h_object_parent = info_.device;
    p.params.h_object_new = iface_.next_client_handle();
    p.params.h_class = kNv01MemorySystemOsDescriptor;
    p.params.flags = kNvos02FlagsPhysicalityNoncontiguous | kNvos02FlagsCoherencyCached |
                     kNvos02FlagsMappingNoMap;
    p.params.p_memory = a.va;
    p.params.limit = a.size - 1;
    p.fd = -1;
    std::string call = "NV_ESC_RM_ALLOC_MEMORY of " + rm_class_name(kNv01MemorySystemOsDescriptor) +
                       " at " + range_text(a.va, a.size) + " under handle " + hex(info_.device);
    RETURN_IF_ERROR(iface_.escape(dev_.get(), kNvEscRmAllocMemory, &p, sizeof(p), call));
    if (p.params.status != rm_status::NV_OK) return rm_error(call, p.params.status);
    a.handle = p.params.h_object_new;
  } else {
    uint32_t cls = req.kind == RmMemoryKind::kSystem ? kNv01MemorySystem : kNv01MemoryLocalUser;
    ASSIGN_OR_RETURN(
        a.handle, iface_.alloc(info_.device, cls, memory_params(iface_.root(), a, req.contiguous)));
  }
  undo.add([&] { (void)iface_.free(info_.device, a.handle); });
  if (req.cpu_access && req.kind != RmMemoryKind::kHost) {
    RETURN_IF_ERROR(map_to_cpu(a.handle, a.size, reinterpret_cast<void*>(a.va),
                               req.kind == RmMemoryKind::kSystem));
    undo.add(unmap_cpu);
  }
  RETURN_IF_ERROR(map_to_gpu(a));
  undo.dismiss();
  return a;
}

Status RmGpu::free_memory(const RmAllocation& a) {
  Status first;
  auto keep = [&first](Status s) {
    if (first.ok() && !s.ok()) first = std::move(s);
  };
  VaRange& range = a.cpu_mapped ? iface_.low_va() : iface_.high_va();
  keep(uvm_free(a.va, a.size));
  if (a.cpu_mapped) keep(range.rereserve(a.va, a.size));
  keep(iface_.free(info_.device, a.handle));
  range.free(a.va, a.size);
  return first;
}

}  // namespace baregrad::nv
