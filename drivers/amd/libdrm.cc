#include "drivers/amd/libdrm.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "base/dl.h"

namespace baregrad::amd {
namespace {

// xf86drm.h (libdrm 2.4.114).
constexpr int kDrmNodeRender = 2, kDrmNodeMax = 3, kDrmBusPci = 0, kMaxDevices = 64;
struct DrmPciBusInfo {
  uint16_t domain;
  uint8_t bus, dev, func;
};
struct DrmPciDeviceInfo {
  uint16_t vendor_id, device_id, subvendor_id, subdevice_id;
  uint8_t revision_id;
};
struct DrmDevice {
  char** nodes;         // kDrmNodeMax entries
  int available_nodes;  // bit per DRM_NODE_*
  int bustype;
  DrmPciBusInfo* businfo_pci;        // a union of pointers; PCI when bustype is DRM_BUS_PCI
  DrmPciDeviceInfo* deviceinfo_pci;  // likewise
};
struct DrmVersion {
  int version_major, version_minor, version_patchlevel;
  int name_len;
  char* name;
  int date_len;
  char* date;
  int desc_len;
  char* desc;
};
// amdgpu_drm.h.
constexpr unsigned kAmdgpuInfoVramGtt = 0x14;
struct AmdgpuInfoVramGtt {
  uint64_t vram_size, vram_cpu_accessible_size, gtt_size;
};

struct Libdrm {
  int (*drmGetDevices2)(uint32_t, DrmDevice**, int);
  void (*drmFreeDevices)(DrmDevice**, int);
  DrmVersion* (*drmGetVersion)(int);
  void (*drmFreeVersion)(DrmVersion*);
};
struct LibdrmAmdgpu {
  int (*amdgpu_device_initialize)(int, uint32_t*, uint32_t*, void**);
  int (*amdgpu_device_deinitialize)(void*);
  const char* (*amdgpu_get_marketing_name)(void*);
  int (*amdgpu_query_info)(void*, unsigned, unsigned, void*);
};

std::string package_of(const std::string& path) {
  return path == kLibdrm         ? " (Debian package libdrm2)"
         : path == kLibdrmAmdgpu ? " (Debian package libdrm-amdgpu1)"
                                 : "";
}

// Loads the library once per path and process (never closed: libdrm keeps state).
template <class Api>
Result<const Api*> load(const std::string& path,
                        const std::string& what,
                        Status (*fill)(void*, const std::string&, const std::string&, Api*)) {
  static std::mutex mu;
  static auto* loaded = new std::vector<std::pair<std::string, Api>>();
  std::lock_guard lock(mu);
  for (const auto& [p, api] : *loaded)
    if (p == path) return &api;
  Result<void*> lib = dl_open(path, what);
  if (!lib.ok()) return Status(lib.status().code(), lib.status().message() + package_of(path));
  Api api{};
  RETURN_IF_ERROR(fill(*lib, path, what, &api));
  loaded->emplace_back(path, api);
  return &loaded->back().second;
}

Status fill_libdrm(void* lib, const std::string& path, const std::string& what, Libdrm* api) {
  BG_DL_RESOLVE(drmGetDevices2);
  BG_DL_RESOLVE(drmFreeDevices);
  BG_DL_RESOLVE(drmGetVersion);
  BG_DL_RESOLVE(drmFreeVersion);
  return Status();
}

Status fill_amdgpu(void* lib, const std::string& path, const std::string& what, LibdrmAmdgpu* api) {
  BG_DL_RESOLVE(amdgpu_device_initialize);
  BG_DL_RESOLVE(amdgpu_device_deinitialize);
  BG_DL_RESOLVE(amdgpu_get_marketing_name);
  BG_DL_RESOLVE(amdgpu_query_info);
  return Status();
}

}  // namespace

Result<std::vector<DrmRenderNode>> drm_render_nodes(const std::string& libdrm) {
  ASSIGN_OR_RETURN(const Libdrm* drm, load<Libdrm>(libdrm, "libdrm", fill_libdrm));
  DrmDevice* devices[kMaxDevices] = {};
  int n = drm->drmGetDevices2(0, devices, kMaxDevices);
  if (n == -ENOENT) return std::vector<DrmRenderNode>{};  // no /dev/dri: no DRM device at all
  if (n < 0) {
    return unavailable("drmGetDevices2 (" + libdrm + ") failed: " + std::strerror(-n) + " (errno " +
                       std::to_string(-n) + ")");
  }
  std::vector<DrmRenderNode> out;
  for (int i = 0; i < n && i < kMaxDevices; i++) {
    const DrmDevice* d = devices[i];
    if (d == nullptr || (d->available_nodes & (1 << kDrmNodeRender)) == 0 || d->nodes == nullptr ||
        d->nodes[kDrmNodeRender] == nullptr)
      continue;
    DrmRenderNode r;
    r.path = d->nodes[kDrmNodeRender];
    if (d->bustype == kDrmBusPci && d->businfo_pci && d->deviceinfo_pci) {
      r.pci = true;
      r.vendor_id = d->deviceinfo_pci->vendor_id;
      r.device_id = d->deviceinfo_pci->device_id;
      r.revision = d->deviceinfo_pci->revision_id;
      char slot[32];
      std::snprintf(slot, sizeof(slot), "%04x:%02x:%02x.%x", d->businfo_pci->domain,
                    d->businfo_pci->bus, d->businfo_pci->dev, d->businfo_pci->func);
      r.pci_slot = slot;
    }
    out.push_back(std::move(r));
  }
  drm->drmFreeDevices(devices, n < kMaxDevices ? n : kMaxDevices);
  static_assert(kDrmNodeMax > kDrmNodeRender);
  return out;
}

Result<AmdgpuDrmInfo> amdgpu_drm_info(int render_fd,
                                      const std::string& libdrm,
                                      const std::string& libdrm_amdgpu) {
  ASSIGN_OR_RETURN(const Libdrm* drm, load<Libdrm>(libdrm, "libdrm", fill_libdrm));
  std::string where = "DRM device fd " + std::to_string(render_fd);
  errno = 0;
  DrmVersion* v = drm->drmGetVersion(render_fd);
  if (v == nullptr) {
    int e = errno;
    return failed_precondition(where + " is not a DRM device: drmGetVersion failed" +
                               (e ? ": " + std::string(std::strerror(e)) : std::string()));
  }
  AmdgpuDrmInfo info;
  info.driver = v->name ? std::string(v->name, static_cast<size_t>(std::max(v->name_len, 0))) : "";
  info.major = v->version_major;
  info.minor = v->version_minor;
  info.patch = v->version_patchlevel;
  drm->drmFreeVersion(v);
  if (info.driver != "amdgpu")
    return failed_precondition(where + " is driven by '" + info.driver + "', not amdgpu");
  ASSIGN_OR_RETURN(const LibdrmAmdgpu* amdgpu,
                   load<LibdrmAmdgpu>(libdrm_amdgpu, "libdrm_amdgpu", fill_amdgpu));
  void* dev = nullptr;
  if (int r = amdgpu->amdgpu_device_initialize(render_fd, &info.interface_major,
                                               &info.interface_minor, &dev);
      r != 0) {
    return unavailable("amdgpu_device_initialize on " + where +
                       " failed: " + std::strerror(r < 0 ? -r : r));
  }
  if (const char* name = amdgpu->amdgpu_get_marketing_name(dev)) info.marketing_name = name;
  AmdgpuInfoVramGtt m{};
  int r = amdgpu->amdgpu_query_info(dev, kAmdgpuInfoVramGtt, sizeof(m), &m);
  amdgpu->amdgpu_device_deinitialize(dev);
  if (r != 0)
    return unavailable("amdgpu_query_info(AMDGPU_INFO_VRAM_GTT) on " + where +
                       " failed: " + std::strerror(r < 0 ? -r : r));
  info.vram_bytes = m.vram_size;
  info.vram_cpu_visible_bytes = m.vram_cpu_accessible_size;
  info.gtt_bytes = m.gtt_size;
  return info;
}

}  // namespace baregrad::amd
