// The fake RM: NV escapes on /dev/nvidiactl and /dev/nvidiaN and the object tree.

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "base/format.h"
#include "drivers/mock/nv/fake_nv_state.h"
#include "drivers/nv/gpfifo.h"
#include "drivers/nv/rm_status.h"

namespace baregrad::mock {
namespace {

using namespace nv;
using namespace nv::rm_status;

constexpr uint32_t kVoltaUsermodeA = 0xc361, kBlackwellUsermodeA = 0xc761;  // g_allclasses.h
constexpr uint32_t kTuringChannelGpfifoA = 0xc46f;

bool is_gpfifo(uint32_t c) {
  return c == kAmpereChannelGpfifoA || c == kHopperChannelGpfifoA ||
         c == kBlackwellChannelGpfifoA || c == kBlackwellChannelGpfifoB;
}
bool is_usermode(uint32_t c) {
  return c == kVoltaUsermodeA || c == kTuringUsermodeA || c == kAmpereUsermodeA ||
         c == kHopperUsermodeA || c == kBlackwellUsermodeA;
}
bool is_compute(uint32_t c) {
  return c == kAmpereComputeA || c == kAmpereComputeB || c == kAdaComputeA ||
         c == kHopperComputeA || c == kBlackwellComputeA || c == kBlackwellComputeB;
}
bool is_copy(uint32_t c) {
  return c == kAmpereDmaCopyA || c == kAmpereDmaCopyB || c == kHopperDmaCopyA ||
         c == kBlackwellDmaCopyA || c == kBlackwellDmaCopyB;
}

// The classes NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2 reports: the bring-up classes of each chip's
// list in g_gpu_class_list.c (595.45.04), not the whole list.
}  // namespace

std::vector<uint32_t> fake_class_list(const FakeNvGpuConfig& g) {
  std::vector<uint32_t> l = {kNv01MemorySystem,     kNv01MemoryLocalUser,
                             kNv01MemoryVirtual,    kNv01MemorySystemOsDescriptor,
                             kFermiContextShareA,   kFermiVaspaceA,
                             kKeplerChannelGroupA,  kGt200Debugger,
                             kTuringChannelGpfifoA, kAmpereChannelGpfifoA,
                             kVoltaUsermodeA,       kTuringUsermodeA,
                             kAmpereUsermodeA};
  auto add = [&l](std::initializer_list<uint32_t> more) { l.insert(l.end(), more); };
  switch (g.architecture) {
    case kArchGa100:
      if (g.implementation == kImplGa100) {
        add({kAmpereComputeA, kAmpereDmaCopyA});
      } else {
        add({kAmpereComputeB, kAmpereDmaCopyB});
      }
      break;
    case kArchAd100:
      add({kAdaComputeA, kAmpereDmaCopyB});
      break;
    case kArchGh100:
      add({kHopperChannelGpfifoA, kHopperUsermodeA, kHopperComputeA, kHopperDmaCopyA});
      break;
    case kArchGb100:
      add({kHopperChannelGpfifoA, kBlackwellChannelGpfifoA, kHopperUsermodeA, kBlackwellComputeA,
           kBlackwellDmaCopyA});
      break;
    case kArchGb200:
      add({kHopperChannelGpfifoA, kBlackwellChannelGpfifoA, kBlackwellChannelGpfifoB,
           kHopperUsermodeA, kBlackwellUsermodeA, kBlackwellComputeB, kBlackwellDmaCopyB});
      break;
    default:
      break;  // an unknown architecture: only the generic classes
  }
  return l;
}

namespace {

// The NV_CHANNEL_ALLOC_PARAMS fields the fake reads, from either layout.
struct ChannelFields {
  uint32_t error, buffer, entries, ctxshare, userd;
  uint64_t ring, userd_offset;
};
template <class P>
ChannelFields channel_fields(const void* params) {
  P p;
  std::memcpy(&p, params, sizeof(p));
  return {p.h_object_error,    p.h_object_buffer, p.gp_fifo_entries, p.h_context_share,
          p.h_userd_memory[0], p.gp_fifo_offset,  p.userd_offset[0]};
}

// The NVOS46 fields, from either layout; writes dma_offset and status back.
struct DmaFields {
  uint32_t client, device, dma, memory, flags;
  uint64_t offset, length, dma_offset;
  uint32_t* status;
  uint64_t* dma_offset_out;
};
template <class P>
DmaFields dma_fields(void* arg) {
  P* p = static_cast<P*>(arg);
  return {p->h_client, p->h_device, p->h_dma,      p->h_memory, p->flags,
          p->offset,   p->length,   p->dma_offset, &p->status,  &p->dma_offset};
}

uint32_t* status_field(RmBranch b, uint32_t escape, void* arg) {
  char* base = static_cast<char*>(arg);
  switch (escape) {
    case kNvEscRmAlloc:
      return &static_cast<Nvos21Parameters*>(arg)->status;
    case kNvEscRmControl:
      return &static_cast<Nvos54Parameters*>(arg)->status;
    case kNvEscRmFree:
      return &static_cast<Nvos00Parameters*>(arg)->status;
    case kNvEscRmAllocMemory:
      return &static_cast<Nvos02ParametersWithFd*>(arg)->params.status;
    case kNvEscRmMapMemory:
      return &static_cast<Nvos33ParametersWithFd*>(arg)->params.status;
    case kNvEscRmMapMemoryDma:
      return reinterpret_cast<uint32_t*>(base + (b == RmBranch::k570
                                                     ? offsetof(Nvos46Parameters570, status)
                                                     : offsetof(Nvos46Parameters580, status)));
    default:
      return nullptr;
  }
}

}  // namespace

FakeObject* FakeNvKernel::State::find(uint32_t client, uint32_t handle) {
  auto c = clients.find(client);
  if (c == clients.end()) return nullptr;
  auto o = c->second.objects.find(handle);
  return o == c->second.objects.end() ? nullptr : &o->second;
}

int FakeNvKernel::State::rm_escape(int fd, FakeFd& f, uint32_t escape, void* arg, size_t size) {
  auto reject = [&](const std::string& why) {
    note(nv_escape_name(escape) + " on " + f.path + ": " + why);
    return EINVAL;
  };
  bool ctl = f.kind == FdKind::kCtl;
  if (escape == kNvEscCardInfo || escape == kNvEscAttachGpusToFd) {
    size_t unit = escape == kNvEscCardInfo ? sizeof(NvIoctlCardInfo) : sizeof(uint32_t);
    if (size == 0 || size % unit != 0) return reject("an array size of " + std::to_string(size));
  } else {
    if (!branch && escape != kNvEscCheckVersionStr) {
      return reject("driver " + cfg.driver_version + " has no layout in the fake");
    }
    uint32_t want = nv_escape_size(branch.value_or(RmBranch::k580), escape);
    if (want == 0) return reject("an escape the fake does not model");
    if (size != want) {
      return reject("the request carries " + std::to_string(size) + " bytes; branch " +
                    std::to_string(rm_branch_number(branch.value_or(RmBranch::k580))) +
                    " expects " + std::to_string(want));
    }
  }
  if (escape == kNvEscRmAllocMemory ? ctl : (!ctl && escape != kNvEscRegisterFd)) {
    return reject(ctl ? "a /dev/nvidiaN-only escape" : "a /dev/nvidiactl-only escape");
  }
  if (uint32_t* status = status_field(branch.value_or(RmBranch::k580), escape, arg)) {
    if (auto r = take_rule(FailRule::Kind::kEscape, escape)) {
      *status = r->status;
      return 0;
    }
  }

  switch (escape) {
    case kNvEscCheckVersionStr: {
      auto* p = static_cast<NvIoctlRmApiVersion*>(arg);
      bool query = p->cmd == kNvRmApiVersionCmdQuery;
      bool match = std::strncmp(p->version_string, cfg.driver_version.c_str(),
                                sizeof(p->version_string)) == 0;
      p->reply = kNvRmApiVersionReplyRecognized;
      std::memset(p->version_string, 0, sizeof(p->version_string));
      std::strncpy(p->version_string, cfg.driver_version.c_str(), sizeof(p->version_string) - 1);
      return query || match ? 0 : EINVAL;
    }
    case kNvEscCardInfo: {
      auto* cards = static_cast<NvIoctlCardInfo*>(arg);
      size_t n = size / sizeof(NvIoctlCardInfo);
      std::memset(arg, 0, size);
      for (size_t i = 0; i < std::min(n, gpus.size()); ++i) {
        cards[i].valid = 1;
        cards[i].pci_info.bus = static_cast<uint8_t>(gpus[i].gpu_id >> 8);
        cards[i].pci_info.vendor_id = 0x10de;
        cards[i].pci_info.device_id = gpus[i].cfg.pci_device_id;
        cards[i].gpu_id = gpus[i].gpu_id;
        cards[i].fb_size = 64ull << 30;
        cards[i].minor_number = static_cast<uint32_t>(i);
      }
      return 0;
    }
    case kNvEscAttachGpusToFd:
      return 0;
    case kNvEscRegisterFd: {
      int ctl_fd = static_cast<NvIoctlRegisterFd*>(arg)->ctl_fd;
      auto it = fds.find(ctl_fd);
      if (it == fds.end() || it->second.kind != FdKind::kCtl || ctl_fd == fd) {
        return reject("ctl_fd " + std::to_string(ctl_fd) + " is not another /dev/nvidiactl fd");
      }
      if (f.registered_ctl >= 0) return reject("the fd is registered already");
      f.registered_ctl = ctl_fd;
      return 0;
    }
    case kNvEscRmAlloc: {
      auto* p = static_cast<Nvos21Parameters*>(arg);
      p->status = rm_alloc(fd, *p);
      return 0;
    }
    case kNvEscRmControl: {
      auto* p = static_cast<Nvos54Parameters*>(arg);
      p->status = rm_control(fd, *p);
      return 0;
    }
    case kNvEscRmFree: {
      auto* p = static_cast<Nvos00Parameters*>(arg);
      p->status = rm_free(fd, *p);
      return 0;
    }
    case kNvEscRmAllocMemory: {
      auto* p = static_cast<Nvos02ParametersWithFd*>(arg);
      p->params.status = rm_alloc_memory(f, *p);
      return 0;
    }
    case kNvEscRmMapMemory: {
      auto* p = static_cast<Nvos33ParametersWithFd*>(arg);
      p->params.status = rm_map_memory(fd, *p);
      return 0;
    }
    case kNvEscRmMapMemoryDma:
      rm_map_memory_dma(fd, arg);  // writes its status into the struct
      return 0;
    default:
      return reject("an escape the fake does not model");
  }
}

uint32_t FakeNvKernel::State::rm_alloc(int fd, Nvos21Parameters& p) {
  std::string what = "NV_ESC_RM_ALLOC of " + rm_class_name(p.h_class);
  auto refuse = [&](uint32_t status, const std::string& why) {
    note(what + ": " + why + ": " + rm_status_text(status));
    return status;
  };
  if (auto r = take_rule(FailRule::Kind::kAlloc, p.h_class)) return r->status;
  if (p.h_class == kNv01RootClient) {
    uint32_t h = p.h_object_new != 0 ? p.h_object_new : next_client++;
    if (clients.contains(h)) return refuse(NV_ERR_INSERT_DUPLICATE_NAME, "client handle in use");
    FakeClient& c = clients[h];
    c.ctl_fd = fd;
    c.objects[h] = FakeObject{.handle = h, .cls = p.h_class, .kind = ObjKind::kClient};
    p.h_object_new = h;
    return NV_OK;
  }
  auto cit = clients.find(p.h_root);
  if (cit == clients.end() || cit->second.ctl_fd != fd) {
    return refuse(NV_ERR_INVALID_CLIENT, "client " + hex(p.h_root));
  }
  FakeClient& c = cit->second;
  auto parent = c.objects.find(p.h_object_parent);
  if (parent == c.objects.end()) {
    return refuse(NV_ERR_INVALID_OBJECT_PARENT, "no parent " + hex(p.h_object_parent));
  }
  uint32_t want = rm_alloc_params_size(*branch, p.h_class);
  if (want != 0 && (p.p_alloc_parms == 0 || p.params_size != want)) {
    return refuse(NV_ERR_INVALID_ARGUMENT, "parameters of " + std::to_string(p.params_size) +
                                               " bytes; branch " +
                                               std::to_string(rm_branch_number(*branch)) +
                                               " expects " + std::to_string(want));
  }
  uint32_t h = p.h_object_new;
  if (h == 0) {
    h = c.next_handle++;
  } else if (c.objects.contains(h)) {
    return refuse(NV_ERR_INSERT_DUPLICATE_NAME, "handle " + hex(h) + " in use");
  }
  FakeObject obj{
      .handle = h, .parent = p.h_object_parent, .cls = p.h_class, .gpu = parent->second.gpu};
  uint32_t status = alloc_check(c, p, obj);
  if (status != NV_OK) return refuse(status, "under " + hex(p.h_object_parent));
  c.objects[h] = std::move(obj);
  c.objects[p.h_object_parent].children.push_back(h);
  p.h_object_new = h;
  return NV_OK;
}

uint32_t FakeNvKernel::State::alloc_check(FakeClient& c,
                                          const Nvos21Parameters& p,
                                          FakeObject& obj) {
  const FakeObject& parent = c.objects[p.h_object_parent];
  const void* params = reinterpret_cast<const void*>(p.p_alloc_parms);
  auto parent_is = [&](ObjKind k) { return parent.kind == k; };
  auto listed = [&](uint32_t cls) {
    std::vector<uint32_t> l = fake_class_list(gpus[obj.gpu].cfg);
    return std::find(l.begin(), l.end(), cls) != l.end();
  };
  uint32_t cls = p.h_class;
  if (cls == kNv01Device0) {
    if (!parent_is(ObjKind::kClient)) return NV_ERR_INVALID_OBJECT_PARENT;
    uint32_t id = static_cast<const Nv0080AllocParameters*>(params)->device_id;
    if (id >= gpus.size()) return NV_ERR_INVALID_ARGUMENT;
    obj.kind = ObjKind::kDevice;
    obj.gpu = static_cast<int>(id);
    return NV_OK;
  }
  if (obj.gpu < 0) return NV_ERR_INVALID_OBJECT_PARENT;  // everything else lives under a device
  if (cls == kNv20Subdevice0 || cls == kNv01MemoryVirtual || cls == kFermiVaspaceA ||
      cls == kKeplerChannelGroupA || cls == kGt200Debugger || cls == kNv01MemoryLocalUser ||
      cls == kNv01MemorySystem) {
    if (!parent_is(ObjKind::kDevice)) return NV_ERR_INVALID_OBJECT_PARENT;
  }
  switch (cls) {
    case kNv20Subdevice0:
      obj.kind = ObjKind::kSubdevice;
      return NV_OK;
    case kNv01MemoryVirtual:
      obj.kind = ObjKind::kVirtmem;
      return NV_OK;
    case kFermiVaspaceA:
      obj.kind = ObjKind::kVaspace;
      obj.vaspace_flags = static_cast<const NvVaspaceAllocationParameters570*>(params)->flags;
      return NV_OK;
    case kKeplerChannelGroupA:
      obj.kind = ObjKind::kChannelGroup;
      return NV_OK;
    case kGt200Debugger: {
      uint32_t target = static_cast<const Nv83deAllocParameters*>(params)->h_class3d_object;
      auto t = c.objects.find(target);
      if (t == c.objects.end() || t->second.kind != ObjKind::kEngine) {
        return NV_ERR_INVALID_OBJECT_HANDLE;
      }
      obj.kind = ObjKind::kDebugger;
      obj.debug_target = target;
      return NV_OK;
    }
    case kNv01MemoryLocalUser:
    case kNv01MemorySystem: {
      const auto* m = static_cast<const NvMemoryAllocationParams*>(params);
      if (m->size == 0 || (m->alignment & (m->alignment - 1)) != 0) return NV_ERR_INVALID_ARGUMENT;
      FakeGpuState& g = gpus[obj.gpu];
      bool video = cls == kNv01MemoryLocalUser;
      if (video && m->size > g.cfg.vram_bytes - g.vram_used) return NV_ERR_NO_MEMORY;
      auto mem = FakeBacking::create(m->size, "fake-nv-memory");
      if (!mem.ok()) {
        note(mem.status().message());
        return NV_ERR_NO_MEMORY;
      }
      if (video) g.vram_used += m->size;
      obj.kind = ObjKind::kMemory;
      obj.mem = *mem;
      return NV_OK;
    }
    case kFermiContextShareA: {
      if (!parent_is(ObjKind::kChannelGroup)) return NV_ERR_INVALID_OBJECT_PARENT;
      uint32_t vs = static_cast<const NvCtxshareAllocationParameters*>(params)->h_va_space;
      auto v = c.objects.find(vs);
      if (v == c.objects.end() || v->second.kind != ObjKind::kVaspace || v->second.gpu != obj.gpu) {
        return NV_ERR_INVALID_OBJECT_HANDLE;
      }
      obj.kind = ObjKind::kCtxshare;
      obj.vaspace = vs;
      return NV_OK;
    }
    default:
      break;
  }
  if (!listed(cls)) return NV_ERR_INVALID_CLASS;
  if (is_usermode(cls)) {
    if (!parent_is(ObjKind::kSubdevice)) return NV_ERR_INVALID_OBJECT_PARENT;
    obj.kind = ObjKind::kUsermode;
    obj.mem = gpus[obj.gpu].usermode;
    return NV_OK;
  }
  if (is_gpfifo(cls)) return alloc_channel(c, p, obj);
  if (is_compute(cls) || is_copy(cls)) {
    if (!parent_is(ObjKind::kChannel)) return NV_ERR_INVALID_OBJECT_PARENT;
    FakeObject& ch = c.objects[p.h_object_parent];
    if (ch.has_engine) return NV_ERR_INVALID_STATE;  // the fake runs one engine per channel
    obj.kind = ObjKind::kEngine;
    ch.has_engine = true;
    ch.channel.engine_class = cls;
    ch.channel.compute = is_compute(cls);
    FakeNvChannel added = ch.channel;
    if (channel_added) pending.push_back([hook = channel_added, added] { hook(added); });
    return NV_OK;
  }
  note("NV_ESC_RM_ALLOC: class " + hex(cls) + " is not modelled");
  return NV_ERR_INVALID_CLASS;
}

uint32_t FakeNvKernel::State::alloc_channel(FakeClient& c,
                                            const Nvos21Parameters& p,
                                            FakeObject& obj) {
  const FakeObject& parent = c.objects[p.h_object_parent];
  if (parent.kind != ObjKind::kChannelGroup) return NV_ERR_INVALID_OBJECT_PARENT;
  const void* params = reinterpret_cast<const void*>(p.p_alloc_parms);
  ChannelFields f = *branch == RmBranch::k610 ? channel_fields<NvChannelAllocParams610>(params)
                                              : channel_fields<NvChannelAllocParams570>(params);
  auto memory = [&](uint32_t h) -> FakeObject* {
    auto it = c.objects.find(h);
    return it != c.objects.end() && it->second.kind == ObjKind::kMemory ? &it->second : nullptr;
  };
  auto ctx = c.objects.find(f.ctxshare);
  if (ctx == c.objects.end() || ctx->second.kind != ObjKind::kCtxshare ||
      ctx->second.parent != p.h_object_parent) {
    note("channel: hContextShare " + hex(f.ctxshare) + " is not a ctxshare of its group");
    return NV_ERR_INVALID_OBJECT_HANDLE;
  }
  FakeObject* buffer = memory(f.buffer);
  FakeObject* userd = memory(f.userd);
  if (buffer == nullptr || userd == nullptr || (f.error != 0 && memory(f.error) == nullptr)) {
    note("channel: hObjectBuffer, hUserdMemory[0] or hObjectError is not a memory object");
    return NV_ERR_INVALID_OBJECT_HANDLE;
  }
  if (f.entries < 2 || (f.entries & (f.entries - 1)) != 0) return NV_ERR_INVALID_ARGUMENT;
  // NOTE: the fake GPU reads rings and USERD by VA, so both need their DMA mapping first.
  uint64_t ring_bytes = uint64_t{f.entries} * kGpEntryBytes;
  if (!buffer->dma_va || f.ring < *buffer->dma_va ||
      f.ring + ring_bytes > *buffer->dma_va + buffer->mem->size) {
    note("channel: gpFifoOffset " + hex(f.ring) + " is not inside hObjectBuffer's mapping");
    return NV_ERR_INVALID_OFFSET;
  }
  if (!userd->dma_va || f.userd_offset + kUserdBytes > userd->mem->size) {
    note("channel: USERD at offset " + hex(f.userd_offset) + " is not mapped memory");
    return NV_ERR_INVALID_OFFSET;
  }
  obj.kind = ObjKind::kChannel;
  obj.channel = FakeNvChannel{.gpu = obj.gpu,
                              .handle = obj.handle,
                              .gpfifo_class = p.h_class,
                              .token = next_token++,
                              .ring_va = f.ring,
                              .entries = f.entries,
                              .userd_va = *userd->dma_va + f.userd_offset,
                              .error_notifier = f.error};
  return NV_OK;
}

void FakeNvKernel::State::free_object(FakeClient& c, uint32_t handle) {
  auto it = c.objects.find(handle);
  if (it == c.objects.end()) return;
  std::vector<uint32_t> children = it->second.children;
  for (uint32_t child : children) free_object(c, child);
  it = c.objects.find(handle);
  FakeObject& o = it->second;
  if (o.kind == ObjKind::kChannel && o.has_engine && channel_removed) {
    pending.push_back([hook = channel_removed, ch = o.channel] { hook(ch); });
  }
  if (o.kind == ObjKind::kMemory && o.cls == kNv01MemoryLocalUser) {
    gpus[o.gpu].vram_used -= o.mem->size;
  }
  auto parent = c.objects.find(o.parent);
  if (parent != c.objects.end() && parent->first != handle) {
    std::erase(parent->second.children, handle);
  }
  c.objects.erase(it);
}

void FakeNvKernel::State::free_clients_of(int ctl_fd) {
  for (auto it = clients.begin(); it != clients.end();) {
    if (it->second.ctl_fd != ctl_fd) {
      ++it;
      continue;
    }
    free_object(it->second, it->first);
    it = clients.erase(it);
  }
}

uint32_t FakeNvKernel::State::rm_free(int fd, const Nvos00Parameters& p) {
  auto cit = clients.find(p.h_root);
  if (cit == clients.end() || cit->second.ctl_fd != fd) {
    note("NV_ESC_RM_FREE: client " + hex(p.h_root) + ": NV_ERR_INVALID_CLIENT");
    return NV_ERR_INVALID_CLIENT;
  }
  if (p.h_object_old == p.h_root) {
    free_object(cit->second, p.h_root);
    clients.erase(cit);
    return NV_OK;
  }
  if (!cit->second.objects.contains(p.h_object_old)) {
    note("NV_ESC_RM_FREE: no handle " + hex(p.h_object_old));
    return NV_ERR_INVALID_OBJECT_HANDLE;
  }
  free_object(cit->second, p.h_object_old);
  return NV_OK;
}

uint32_t FakeNvKernel::State::rm_alloc_memory(FakeFd& f, Nvos02ParametersWithFd& w) {
  Nvos02Parameters& p = w.params;
  std::string what = "NV_ESC_RM_ALLOC_MEMORY of " + rm_class_name(p.h_class);
  auto refuse = [&](uint32_t status, const std::string& why) {
    note(what + ": " + why + ": " + rm_status_text(status));
    return status;
  };
  auto cit = clients.find(p.h_root);
  if (cit == clients.end() || f.registered_ctl != cit->second.ctl_fd) {
    return refuse(NV_ERR_INVALID_CLIENT, "the fd is not registered with the client's ctl fd");
  }
  FakeClient& c = cit->second;
  if (p.h_class != kNv01MemorySystemOsDescriptor) return refuse(NV_ERR_NOT_SUPPORTED, "class");
  auto parent = c.objects.find(p.h_object_parent);
  if (parent == c.objects.end() || parent->second.kind != ObjKind::kDevice ||
      parent->second.gpu != f.gpu) {
    return refuse(NV_ERR_INVALID_OBJECT_PARENT, "parent " + hex(p.h_object_parent));
  }
  if (p.h_object_new == 0 || c.objects.contains(p.h_object_new)) {
    return refuse(NV_ERR_INSERT_DUPLICATE_NAME, "handle " + hex(p.h_object_new));
  }
  uint64_t size = p.limit + 1;
  if (p.p_memory % 4096 != 0 || size % 4096 != 0 || size == 0) {
    return refuse(NV_ERR_INVALID_ARGUMENT, "an unaligned range");
  }
  std::vector<unsigned char> pages(size / 4096);
  if (::mincore(reinterpret_cast<void*>(p.p_memory), size, pages.data()) != 0) {
    return refuse(NV_ERR_INVALID_ADDRESS, "process memory not mapped at " + hex(p.p_memory));
  }
  FakeObject obj{.handle = p.h_object_new,
                 .parent = p.h_object_parent,
                 .cls = p.h_class,
                 .kind = ObjKind::kMemory,
                 .gpu = f.gpu};
  obj.mem = std::make_shared<FakeBacking>();
  obj.mem->host = reinterpret_cast<uint8_t*>(p.p_memory);
  obj.mem->size = size;
  c.objects[p.h_object_new] = std::move(obj);
  parent->second.children.push_back(p.h_object_new);
  return NV_OK;
}

uint32_t FakeNvKernel::State::rm_map_memory(int fd, Nvos33ParametersWithFd& w) {
  Nvos33Parameters& p = w.params;
  auto refuse = [&](uint32_t status, const std::string& why) {
    note("NV_ESC_RM_MAP_MEMORY of " + hex(p.h_memory) + ": " + why + ": " + rm_status_text(status));
    return status;
  };
  auto cit = clients.find(p.h_client);
  if (cit == clients.end() || cit->second.ctl_fd != fd) return refuse(NV_ERR_INVALID_CLIENT, "");
  FakeObject* dev = find(p.h_client, p.h_device);
  FakeObject* mem = find(p.h_client, p.h_memory);
  if (dev == nullptr || (dev->kind != ObjKind::kDevice && dev->kind != ObjKind::kSubdevice)) {
    return refuse(NV_ERR_INVALID_OBJECT_HANDLE, "hDevice " + hex(p.h_device));
  }
  if (mem == nullptr || (mem->kind != ObjKind::kMemory && mem->kind != ObjKind::kUsermode) ||
      mem->gpu != dev->gpu) {
    return refuse(NV_ERR_INVALID_OBJECT_HANDLE, "not a memory object of that device");
  }
  if (mem->cls == kNv01MemorySystemOsDescriptor) return refuse(NV_ERR_NOT_SUPPORTED, "");
  if (p.length == 0 || p.offset + p.length > mem->mem->size) {
    return refuse(NV_ERR_INVALID_LIMIT, "[" + hex(p.offset) + ", +" + hex(p.length) + ") of " +
                                            hex(mem->mem->size) + " bytes");
  }
  auto target = fds.find(w.fd);
  bool system = mem->cls == kNv01MemorySystem;
  if (target == fds.end() ||
      (system ? target->second.kind != FdKind::kCtl
              : target->second.kind != FdKind::kDevice || target->second.gpu != mem->gpu)) {
    return refuse(NV_ERR_INVALID_ARGUMENT,
                  "fd " + std::to_string(w.fd) + " is not a " +
                      (system ? "/dev/nvidiactl fd" : "/dev/nvidiaN fd of the GPU"));
  }
  // Offsets within the object are applied at mmap; the context covers [offset, +length).
  target->second.ctx = MmapContext{mem->mem, p.offset + p.length, p.h_client, p.h_memory};
  return NV_OK;
}

uint32_t FakeNvKernel::State::rm_map_memory_dma(int fd, void* arg) {
  DmaFields d = *branch == RmBranch::k570 ? dma_fields<Nvos46Parameters570>(arg)
                                          : dma_fields<Nvos46Parameters580>(arg);
  auto refuse = [&](uint32_t status, const std::string& why) {
    note("NV_ESC_RM_MAP_MEMORY_DMA of " + hex(d.memory) + ": " + why + ": " +
         rm_status_text(status));
    *d.status = status;
    return status;
  };
  auto cit = clients.find(d.client);
  if (cit == clients.end() || cit->second.ctl_fd != fd) return refuse(NV_ERR_INVALID_CLIENT, "");
  FakeObject* dma = find(d.client, d.dma);
  FakeObject* mem = find(d.client, d.memory);
  if (dma == nullptr || dma->kind != ObjKind::kVirtmem || dma->parent != d.device) {
    return refuse(NV_ERR_INVALID_OBJECT_HANDLE, "hDma " + hex(d.dma));
  }
  if (mem == nullptr || mem->kind != ObjKind::kMemory || mem->gpu != dma->gpu) {
    return refuse(NV_ERR_INVALID_OBJECT_HANDLE, "not a memory object of the device");
  }
  if ((d.flags & kNvos46FlagsDmaOffsetFixedTrue) == 0) {
    return refuse(NV_ERR_NOT_SUPPORTED, "the fake maps at fixed offsets only");
  }
  if (d.dma_offset % 4096 != 0) return refuse(NV_ERR_INVALID_OFFSET, hex(d.dma_offset));
  if (d.length == 0 || d.offset + d.length > mem->mem->size) {
    return refuse(NV_ERR_INVALID_LIMIT, "length " + hex(d.length));
  }
  mem->dma_va = d.dma_offset - d.offset;
  *d.dma_offset_out = d.dma_offset;
  *d.status = NV_OK;
  return NV_OK;
}

}  // namespace baregrad::mock
