// The table of the KFD requests baregrad sends, for messages and the fake kernel's checks.

#include "drivers/amd/kfd_abi.h"

#include <array>

#include "base/format.h"

namespace baregrad::amd {
namespace {

constexpr std::array<KfdIoctlInfo, 14> kIoctls = {{
    {0x01, kAmdkfdIocGetVersion, "AMDKFD_IOC_GET_VERSION"},
    {0x02, kAmdkfdIocCreateQueue, "AMDKFD_IOC_CREATE_QUEUE"},
    {0x03, kAmdkfdIocDestroyQueue, "AMDKFD_IOC_DESTROY_QUEUE"},
    {0x08, kAmdkfdIocCreateEvent, "AMDKFD_IOC_CREATE_EVENT"},
    {0x09, kAmdkfdIocDestroyEvent, "AMDKFD_IOC_DESTROY_EVENT"},
    {0x0a, kAmdkfdIocSetEvent, "AMDKFD_IOC_SET_EVENT"},
    {0x0c, kAmdkfdIocWaitEvents, "AMDKFD_IOC_WAIT_EVENTS"},
    {0x14, kAmdkfdIocGetProcessAperturesNew, "AMDKFD_IOC_GET_PROCESS_APERTURES_NEW"},
    {0x15, kAmdkfdIocAcquireVm, "AMDKFD_IOC_ACQUIRE_VM"},
    {0x16, kAmdkfdIocAllocMemoryOfGpu, "AMDKFD_IOC_ALLOC_MEMORY_OF_GPU"},
    {0x17, kAmdkfdIocFreeMemoryOfGpu, "AMDKFD_IOC_FREE_MEMORY_OF_GPU"},
    {0x18, kAmdkfdIocMapMemoryToGpu, "AMDKFD_IOC_MAP_MEMORY_TO_GPU"},
    {0x19, kAmdkfdIocUnmapMemoryFromGpu, "AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU"},
    {0x25, kAmdkfdIocRuntimeEnable, "AMDKFD_IOC_RUNTIME_ENABLE"},
}};

}  // namespace

const KfdIoctlInfo* kfd_ioctl_info(uint32_t nr) {
  for (const KfdIoctlInfo& i : kIoctls) {
    if (i.nr == nr) return &i;
  }
  return nullptr;
}

const KfdIoctlInfo* kfd_ioctl_info(std::string_view name) {
  for (const KfdIoctlInfo& i : kIoctls) {
    if (name == i.name) return &i;
  }
  return nullptr;
}

std::string kfd_ioctl_name(uint32_t nr) {
  const KfdIoctlInfo* info = kfd_ioctl_info(nr);
  return info != nullptr ? info->name : "AMDKFD ioctl " + hex(nr);
}

}  // namespace baregrad::amd
