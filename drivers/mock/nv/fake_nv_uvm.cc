// The fake nvidia-uvm: the VA space of the first initialized UVM fd, GPU and VA-space
// registration, external ranges and their mappings, channel registration.

#include <cerrno>
#include <cstring>
#include <iterator>

#include "base/format.h"
#include "drivers/mock/nv/fake_nv_state.h"
#include "drivers/nv/rm_status.h"

namespace baregrad::mock {
namespace {

using namespace nv;
using namespace nv::rm_status;

bool aligned_4k(uint64_t base, uint64_t length) {
  return base % 4096 == 0 && length % 4096 == 0 && length != 0 && base + length > base;
}

}  // namespace

int FakeNvKernel::State::gpu_of_uuid(const NvProcessorUuid& uuid) const {
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (std::memcmp(gpus[i].uuid.uuid, uuid.uuid, sizeof(uuid.uuid)) == 0) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

bool FakeNvKernel::State::overlaps(uint64_t base, uint64_t length) const {
  auto it = uvm.lower_bound(base);
  if (it != uvm.end() && it->first < base + length) return true;
  if (it == uvm.begin()) return false;
  const UvmRange& prev = std::prev(it)->second;
  return prev.base + prev.length > base;
}

int FakeNvKernel::State::uvm_ioctl(int fd, FakeFd& f, unsigned long request, void* arg) {
  if (!branch) {
    note(uvm_ioctl_name(request) + ": driver " + cfg.driver_version + " has no layout in the fake");
    return EINVAL;
  }
  size_t size = uvm_params_size(*branch, request);
  if (size == 0) {
    note(uvm_ioctl_name(request) + ": not modelled");
    return EINVAL;
  }
  uint32_t status;
  if (auto r = take_rule(FailRule::Kind::kUvm, request)) {
    status = r->status;
  } else if (!f.uvm_initialized && request != kUvmInitialize && request != kUvmMmInitialize) {
    status = NV_ERR_ILLEGAL_ACTION;
  } else {
    status = uvm_dispatch(fd, f, request, arg);
  }
  if (status != NV_OK) note(uvm_ioctl_name(request) + ": " + rm_status_text(status));
  std::memcpy(static_cast<char*>(arg) + uvm_status_offset(*branch, request), &status,
              sizeof(status));
  return 0;
}

uint32_t FakeNvKernel::State::uvm_dispatch(int fd, FakeFd& f, unsigned long request, void* arg) {
  auto registered = [this](const NvProcessorUuid& uuid) -> FakeGpuState* {
    int gpu = gpu_of_uuid(uuid);
    return gpu >= 0 && gpus[gpu].uvm_registered ? &gpus[gpu] : nullptr;
  };
  auto ctl_client = [this](int ctl_fd, uint32_t client) {
    auto c = clients.find(client);
    return c != clients.end() && c->second.ctl_fd == ctl_fd;
  };
  switch (request) {
    case kUvmInitialize: {
      auto* p = static_cast<UvmInitializeParams*>(arg);
      if (f.uvm_initialized || (p->flags & ~uint64_t{3}) != 0) return NV_ERR_INVALID_ARGUMENT;
      f.uvm_initialized = true;
      if (uvm_fd < 0) uvm_fd = fd;
      return NV_OK;
    }
    case kUvmMmInitialize: {
      auto* p = static_cast<UvmMmInitializeParams*>(arg);
      auto other = fds.find(p->uvm_fd);
      if (other == fds.end() || other->second.kind != FdKind::kUvm ||
          !other->second.uvm_initialized || p->uvm_fd == fd) {
        return NV_ERR_INVALID_ARGUMENT;
      }
      return cfg.mm_initialize_status;
    }
    case kUvmRegisterGpu: {
      auto* p = static_cast<UvmRegisterGpuParams*>(arg);
      int gpu = gpu_of_uuid(p->gpu_uuid);
      if (gpu < 0 || gpus[gpu].uvm_registered) return NV_ERR_INVALID_DEVICE;
      gpus[gpu].uvm_registered = true;
      p->numa_enabled = 0;
      p->numa_node_id = -1;
      return NV_OK;
    }
    case kUvmUnregisterGpu: {
      FakeGpuState* g = registered(static_cast<UvmUnregisterGpuParams*>(arg)->gpu_uuid);
      if (g == nullptr) return NV_ERR_INVALID_DEVICE;
      int gpu = static_cast<int>(g - gpus.data());
      std::erase_if(uvm, [gpu](const auto& r) { return r.second.gpu == gpu; });
      g->uvm_registered = false;
      g->uvm_vaspace = 0;
      return NV_OK;
    }
    case kUvmRegisterGpuVaspace: {
      auto* p = static_cast<UvmRegisterGpuVaspaceParams*>(arg);
      FakeGpuState* g = registered(p->gpu_uuid);
      if (g == nullptr) return NV_ERR_INVALID_DEVICE;
      if (g->uvm_vaspace != 0) return NV_ERR_INVALID_DEVICE;
      if (!ctl_client(p->rm_ctrl_fd, p->h_client)) return NV_ERR_INVALID_ARGUMENT;
      FakeObject* vs = find(p->h_client, p->h_va_space);
      if (vs == nullptr || vs->kind != ObjKind::kVaspace || &gpus[vs->gpu] != g ||
          (vs->vaspace_flags & kNvVaspaceAllocationFlagsIsExternallyOwned) == 0) {
        note("UVM_REGISTER_GPU_VASPACE: " + hex(p->h_va_space) +
             " is not an externally owned FERMI_VASPACE_A of that GPU");
        return NV_ERR_INVALID_ARGUMENT;
      }
      g->uvm_vaspace = p->h_va_space;
      g->uvm_vaspace_client = p->h_client;
      return NV_OK;
    }
    case kUvmUnregisterGpuVaspace: {
      FakeGpuState* g = registered(static_cast<UvmUnregisterGpuVaspaceParams*>(arg)->gpu_uuid);
      if (g == nullptr || g->uvm_vaspace == 0) return NV_ERR_INVALID_DEVICE;
      int gpu = static_cast<int>(g - gpus.data());
      // Channels registered in the VA space go with it.
      std::erase_if(uvm, [gpu](const auto& r) { return r.second.channel && r.second.gpu == gpu; });
      g->uvm_vaspace = 0;
      return NV_OK;
    }
    case kUvmRegisterChannel: {
      auto* p = static_cast<UvmRegisterChannelParams*>(arg);
      FakeGpuState* g = registered(p->gpu_uuid);
      if (g == nullptr || g->uvm_vaspace == 0) return NV_ERR_INVALID_DEVICE;
      if (!ctl_client(p->rm_ctrl_fd, p->h_client)) return NV_ERR_INVALID_ARGUMENT;
      FakeObject* ch = find(p->h_client, p->h_channel);
      if (ch == nullptr || ch->kind != ObjKind::kChannel) return NV_ERR_INVALID_OBJECT_HANDLE;
      if (!aligned_4k(p->base, p->length)) return NV_ERR_INVALID_ADDRESS;
      if (overlaps(p->base, p->length)) return NV_ERR_UVM_ADDRESS_IN_USE;
      uvm[p->base] = UvmRange{.base = p->base,
                              .length = p->length,
                              .channel = true,
                              .client = p->h_client,
                              .handle = p->h_channel,
                              .gpu = static_cast<int>(g - gpus.data())};
      return NV_OK;
    }
    case kUvmCreateExternalRange: {
      auto* p = static_cast<UvmCreateExternalRangeParams*>(arg);
      if (!aligned_4k(p->base, p->length)) return NV_ERR_INVALID_ADDRESS;
      if (overlaps(p->base, p->length)) return NV_ERR_UVM_ADDRESS_IN_USE;
      uvm[p->base] = UvmRange{.base = p->base, .length = p->length};
      return NV_OK;
    }
    case kUvmMapExternalAllocation: {
      auto* p = static_cast<UvmMapExternalAllocationParams*>(arg);
      auto it = uvm.find(p->base);
      if (it == uvm.end() || it->second.channel || p->length > it->second.length) {
        note("UVM_MAP_EXTERNAL_ALLOCATION: no external range starts at " + hex(p->base));
        return NV_ERR_INVALID_ADDRESS;
      }
      if (p->gpu_attributes_count == 0 || p->gpu_attributes_count > 256) {
        return NV_ERR_INVALID_ARGUMENT;
      }
      int gpu = -1;
      for (uint64_t i = 0; i < p->gpu_attributes_count; ++i) {
        FakeGpuState* g = registered(p->per_gpu_attributes[i].gpu_uuid);
        if (g == nullptr || g->uvm_vaspace == 0) return NV_ERR_INVALID_DEVICE;
        if (gpu < 0) gpu = static_cast<int>(g - gpus.data());
      }
      if (!ctl_client(p->rm_ctrl_fd, p->h_client)) return NV_ERR_INVALID_ARGUMENT;
      FakeObject* mem = find(p->h_client, p->h_memory);
      if (mem == nullptr || mem->kind != ObjKind::kMemory) return NV_ERR_INVALID_OBJECT_HANDLE;
      if (p->offset % 4096 != 0 || p->offset + p->length > mem->mem->size) {
        return NV_ERR_INVALID_LIMIT;
      }
      UvmRange& r = it->second;
      r.mem = mem->mem;
      r.offset = p->offset;
      r.client = p->h_client;
      r.handle = p->h_memory;
      r.gpu = gpu;
      return NV_OK;
    }
    case kUvmFree: {
      uint64_t base;
      std::memcpy(&base, arg, sizeof(base));  // both layouts start with base
      auto it = uvm.find(base);
      if (it == uvm.end() || it->second.channel) return NV_ERR_INVALID_ADDRESS;
      if (*branch < RmBranch::k590 &&
          static_cast<UvmFreeParams570*>(arg)->length != it->second.length) {
        return NV_ERR_INVALID_ADDRESS;
      }
      uvm.erase(it);
      return NV_OK;
    }
    default:
      return NV_ERR_NOT_SUPPORTED;
  }
}

}  // namespace baregrad::mock
