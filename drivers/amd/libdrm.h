// What libdrm says of the machine's DRM devices and of an amdgpu device, for discovery and
// reports (`bare info`): the render nodes with their PCI identity (drmGetDevices2), the kernel
// driver's name and version (drmGetVersion), and amdgpu's interface version, marketing name and
// memory sizes (libdrm_amdgpu). Loaded at run time (Debian's libdrm2 and libdrm-amdgpu1; nothing
// links against them), so a machine without them, or without AMD, builds and runs everything
// else. The driver itself needs none of it: KFD's topology names the render node.
//
// Declarations are our own, from libdrm 2.4.114's xf86drm.h (drmDevice, drmPciBusInfo,
// drmPciDeviceInfo, drmVersion, DRM_NODE_RENDER 2, DRM_NODE_MAX 3, DRM_BUS_PCI 0), amdgpu.h
// (amdgpu_device_initialize / _deinitialize, amdgpu_get_marketing_name, amdgpu_query_info) and
// amdgpu_drm.h (AMDGPU_INFO_VRAM_GTT 0x14, drm_amdgpu_info_vram_gtt).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace baregrad::amd {

// The libraries, as dlopen finds them.
constexpr const char* kLibdrm = "libdrm.so.2";
constexpr const char* kLibdrmAmdgpu = "libdrm_amdgpu.so.1";

// A DRM device with a render node.
struct DrmRenderNode {
  std::string path;  // "/dev/dri/renderD128"
  bool pci = false;  // on the PCI bus (the ids and slot below are set)
  uint16_t vendor_id = 0, device_id = 0;
  uint8_t revision = 0;
  std::string pci_slot;  // "0000:03:00.0"
};

// Every DRM device with a render node (drmGetDevices2). NotFound naming the library and its
// Debian package when libdrm cannot be loaded (`libdrm` replaces its name, for tests);
// Unavailable with the errno when the enumeration fails. No devices (no /dev/dri: libdrm
// answers ENOENT) is an empty list.
Result<std::vector<DrmRenderNode>> drm_render_nodes(const std::string& libdrm = kLibdrm);

struct AmdgpuDrmInfo {
  std::string driver;                                 // the kernel driver (drmGetVersion): "amdgpu"
  int major = 0, minor = 0, patch = 0;                // its version
  uint32_t interface_major = 0, interface_minor = 0;  // amdgpu_device_initialize
  std::string marketing_name;  // "" when libdrm_amdgpu does not know the ASIC
  uint64_t vram_bytes = 0, vram_cpu_visible_bytes = 0, gtt_bytes = 0;
};

// What the kernel and libdrm_amdgpu say of the DRM device open at `render_fd` (a render node;
// the fd stays the caller's). NotFound when a library cannot be loaded; FailedPrecondition when
// the fd is not a DRM device or its driver is not amdgpu, naming what it is.
Result<AmdgpuDrmInfo> amdgpu_drm_info(int render_fd,
                                      const std::string& libdrm = kLibdrm,
                                      const std::string& libdrm_amdgpu = kLibdrmAmdgpu);

}  // namespace baregrad::amd
