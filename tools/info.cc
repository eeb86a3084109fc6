// bare_info: what each device is. `./bare info` lists every device of this build and whether it
// opens; `./bare info DEV...` describes the named ones (MOCK+NV only when named: it is a test
// instrument, a fake GPU; MOCK+AMD likewise). For NVIDIA GPUs: the driver and the struct layouts
// chosen for it, the GPU, its architecture and the classes the driver selected, SMs and memory;
// for AMD GPUs: KFD, the gfx target and what the driver takes from its row, CUs, LDS, memory.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/tool_main.h"
#include "drivers/amd/device.h"
#include "drivers/amd/libdrm.h"
#include "drivers/nv/device.h"
#include "runtime/cl/cl_device.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/device.h"
#include "runtime/hcq_device.h"

namespace baregrad {
namespace {

std::string gib(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
  return b;
}

// Whether `d` runs on a fake GPU (a MOCK+ device).
bool fake(const runtime::Device& d) { return d.name().rfind("MOCK+", 0) == 0; }

// The kernel shapes the code generator gives a GPU target (compiler/opt/heuristic.cc).
void describe_kernels(const compiler::TargetInfo& t) {
  std::string s = "work-groups of up to " + std::to_string(t.max_block) + " threads (LOCAL, 3-D)";
  if (t.has_local) s += "; shared memory (GROUP, GROUPTOP, STAGE)";
  s += t.warp_size > 1 ? "; warp exchanges of " + std::to_string(t.warp_size) + " lanes"
                       : "; no warp exchanges";
  s += t.buffer_align > 1
           ? "; buffers " + std::to_string(t.buffer_align) + "-byte aligned (vector accesses)"
           : "; element-aligned buffers";
  std::printf("  kernels        %s\n", s.c_str());
}

void describe_nv(runtime::HcqDevice& d, nv::Device& dev) {
  const nv::BringUp& b = dev.info();
  const nv::GpuClasses& c = b.classes;
  const nv::RmIface& rm = dev.rm().iface();
  std::printf("%s: %s%s\n", d.name().c_str(), b.name.c_str(),
              fake(d) ? " (a fake GPU: a test instrument)" : "");
  std::printf("  driver         %s (struct layouts of branch %d)\n", rm.driver_version().c_str(),
              nv::rm_branch_number(rm.branch()));
  std::printf("  PCI            %04x:%02x:%02x.%x, device id 0x%04x, /dev/nvidia%u\n",
              b.card.pci.domain, b.card.pci.bus, b.card.pci.slot, b.card.pci.function,
              b.card.pci.device_id, b.card.minor_number);
  std::printf("  architecture   %s, %s (MC_GET_ARCH_INFO 0x%x / 0x%x)\n",
              std::string(nv::generation_name(c.generation)).c_str(), b.arch.c_str(),
              c.architecture, c.implementation);
  std::printf("  compute class  %s, QMD V0%d_00\n", nv::class_name(c.compute).c_str(),
              static_cast<int>(c.qmd));
  std::printf("  copy class     %s\n", nv::class_name(c.copy).c_str());
  std::printf("  channel class  %s\n", nv::class_name(c.gpfifo).c_str());
  std::printf("  usermode class %s\n", nv::class_name(c.usermode).c_str());
  std::printf("  SMs            %u (%u TPCs x %u SMs; %u warps per SM)\n", b.gr.sms, b.gr.tpcs,
              b.gr.sm_per_tpc, b.gr.max_warps_per_sm);
  std::printf("  memory         %s (%s usable)\n", gib(b.vram_bytes).c_str(),
              gib(b.heap_bytes).c_str());
  std::printf("  shared memory  %u KiB per block at most\n", dev.limits().max_shared_bytes >> 10);
  std::printf("  compiler       %s: LLVM NVPTX, then ptxas%s\n", d.target_info().name.c_str(),
              fake(d) ? "; the fake GPU runs each cubin's host twin" : "");
  describe_kernels(d.target_info());
}

void describe_amd(runtime::HcqDevice& d, amd::Device& dev) {
  amd::KfdIface& kfd = dev.kfd();
  const amd::KfdNodeProperties& p = kfd.node().props;
  const amd::ArchInfo& a = dev.arch();
  std::printf("%s: %s%s\n", d.name().c_str(), kfd.where().c_str(),
              fake(d) ? " (a fake GPU: a test instrument)" : "");
  std::printf("  driver         KFD %s; /dev/dri/renderD%u; PCI device id 0x%04x\n",
              kfd.version().str().c_str(), p.drm_render_minor, p.device_id);
  std::printf("  architecture   %s (gfx_target_version %u; GC %u.%u.%u); wave%u; %s PM4; SDMA %d\n",
              std::string(a.name).c_str(), p.gfx_target_version, a.gc_major, a.gc_minor,
              a.gc_revision, a.default_wave_size, a.pm4 == amd::Pm4Family::kSoc15 ? "soc15" : "nv",
              static_cast<int>(a.sdma));
  uint32_t cus = p.simd_per_cu ? p.simd_count / p.simd_per_cu : 0;
  std::printf("  compute units  %u (%u SIMDs; %u XCC%s); %u KiB of LDS\n", cus, p.simd_count,
              p.num_xcc, p.num_xcc == 1 ? "" : "s", p.lds_size_in_kb);
  if (p.local_mem_size) std::printf("  memory         %s\n", gib(p.local_mem_size).c_str());
  if (fake(d)) {
    std::printf("  libdrm         not queried (a fake GPU has no DRM device)\n");
  } else if (Result<amd::AmdgpuDrmInfo> m = amd::amdgpu_drm_info(kfd.render_fd()); m.ok()) {
    std::printf(
        "  libdrm         %s; %s %d.%d.%d (interface %u.%u); VRAM %s (%s CPU-visible), GTT %s\n",
        m->marketing_name.empty() ? "(no marketing name)" : m->marketing_name.c_str(),
        m->driver.c_str(), m->major, m->minor, m->patch, m->interface_major, m->interface_minor,
        gib(m->vram_bytes).c_str(), gib(m->vram_cpu_visible_bytes).c_str(),
        gib(m->gtt_bytes).c_str());
  } else {
    std::printf("  libdrm         not queried: %s\n", m.status().message().c_str());
  }
  std::printf("  queues         %s compute queue (AMD_AQL=%d), SDMA copy queue\n",
              dev.aql() ? "AQL" : "PM4", dev.aql() ? 1 : 0);
  std::printf("  compiler       %s: LLVM AMDGPU, then ld.lld%s\n", d.target_info().name.c_str(),
              fake(d) ? "; the fake GPU runs each code object's host twin" : "");
  describe_kernels(d.target_info());
}

// What DRM sees (libdrm): tells a missing KFD (amdgpu loaded, no /dev/kfd) from a missing GPU.
void describe_drm() {
  Result<std::vector<amd::DrmRenderNode>> nodes = amd::drm_render_nodes();
  if (!nodes.ok()) {
    std::printf("  DRM            not listed: %s\n", nodes.status().message().c_str());
    return;
  }
  if (nodes->empty()) std::printf("  DRM            no render node (no /dev/dri)\n");
  for (const amd::DrmRenderNode& r : *nodes) {
    std::printf("  DRM            %s", r.path.c_str());
    if (r.pci)
      std::printf(" (PCI %04x:%04x rev %02x at %s%s)", r.vendor_id, r.device_id, r.revision,
                  r.pci_slot.c_str(), r.vendor_id == 0x1002 ? ", AMD" : "");
    std::printf("\n");
  }
}

// Opens `name` and describes it; false (with the reason printed) when it does not open.
bool describe(const std::string& name) {
  auto dev = runtime::open_device(name);
  if (!dev.ok()) {
    std::printf("%s: not available: %s\n", name.c_str(), dev.status().message().c_str());
    if (name == "AMD" || name.rfind("AMD:", 0) == 0) describe_drm();
    return false;
  }
  if (auto* hd = dynamic_cast<runtime::HcqDevice*>(dev->get())) {
    if (auto* nvd = dynamic_cast<nv::Device*>(&hd->hcq())) {
      describe_nv(*hd, *nvd);
      return true;
    }
    if (auto* amdd = dynamic_cast<amd::Device*>(&hd->hcq())) {
      describe_amd(*hd, *amdd);
      return true;
    }
  }
  if (auto* cl = dynamic_cast<runtime::ClDevice*>(dev->get())) {
    const runtime::ClDeviceInfo& i = cl->info();
    std::printf("%s: %s (%s)\n", cl->name().c_str(), i.name.c_str(), i.platform.c_str());
    std::printf("  version        %s, driver %s; platform %s\n", i.version.c_str(),
                i.driver_version.c_str(), i.platform_version.c_str());
    std::printf("  compute units  %u; work-groups of at most %zu; %s of local memory\n",
                i.compute_units, i.max_work_group_size,
                (std::to_string(i.local_mem >> 10) + " KiB").c_str());
    std::printf("  memory         %s; fp64 %s; fp32 divide and sqrt %s\n",
                gib(i.global_mem).c_str(), i.fp64 ? "yes" : "no",
                i.correctly_rounded_divide_sqrt ? "correctly rounded" : "within OpenCL's ulps");
    std::printf("  compiler       %s: our OpenCL C, built by the platform (clBuildProgram)\n",
                cl->target_info().name.c_str());
    describe_kernels(cl->target_info());
    return true;
  }
  const compiler::TargetInfo& t = (*dev)->target_info();
  std::printf("%s: %s, %d threads%s\n", (*dev)->name().c_str(), t.name.c_str(), t.threads,
              name == "NULL" ? " (compiles; runs nothing)" : "");
  return true;
}

// The vendor stack (DEV=CUDA): what libcuda reports.
void describe_cuda() {
  auto info = runtime::CudaDevice::probe();
  if (!info.ok()) {
    std::printf("CUDA: not available: %s\n", info.status().message().c_str());
    return;
  }
  std::printf("CUDA: driver API %s (%s), %zu device(s)\n", info->driver_version_str().c_str(),
              info->library.c_str(), info->devices.size());
  for (const runtime::CudaDeviceInfo& d : info->devices)
    std::printf("  CUDA:%d  %s, compute capability %d.%d, %d SMs, %s; cubins for sm_%d\n",
                d.ordinal, d.name.c_str(), d.cc_major, d.cc_minor, d.sm_count,
                gib(d.total_mem).c_str(), d.cubin_sm);
}

// Every OpenCL device of every platform (DEV=CL is CL:0).
void describe_cl() {
  auto info = runtime::ClDevice::probe();
  if (!info.ok()) {
    std::printf("CL: not available: %s\n", info.status().message().c_str());
    return;
  }
  size_t n = 0;
  for (const runtime::ClPlatformInfo& p : info->platforms) n += p.devices.size();
  std::printf("CL: %zu platform(s), %zu device(s) (%s)\n", info->platforms.size(), n,
              info->library.c_str());
  for (const runtime::ClPlatformInfo& p : info->platforms)
    for (const runtime::ClDeviceInfo& d : p.devices)
      std::printf("  CL:%d  %s (%s), %u compute units, %s\n", d.index, d.name.c_str(),
                  p.name.c_str(), d.compute_units, gib(d.global_mem).c_str());
}

int usage() {
  std::printf(
      "usage: bare info [DEV...]\n\n"
      "Without arguments: every device of this build (CPU, CPU:<n>, CPU:C, NULL, NV:<n>, AMD:<n>, "
      "CUDA:<n>, CL:<n>)\nand whether it opens. With names: those devices only (MOCK+NV and "
      "MOCK+AMD, the fake GPUs, only when named).\n");
  return 0;
}

int info_main(int argc, char** argv) {
  std::vector<std::string> names;
  for (int i = 1; i < argc; i++) {
    if (!std::strcmp(argv[i], "-h") || !std::strcmp(argv[i], "--help")) return usage();
    names.push_back(argv[i]);
  }
  if (!names.empty()) {
    bool all = true;
    for (const std::string& n : names) all = describe(n) && all;
    return all ? 0 : 1;
  }
  for (const char* n : {"CPU", "CPU:C", "NULL"}) describe(n);
  // Every NVIDIA GPU the driver lists (NV is NV:0).
  auto first = runtime::open_device("NV");
  if (first.ok()) {
    auto& nv0 = dynamic_cast<runtime::HcqDevice&>(**first);
    auto& dev0 = dynamic_cast<nv::Device&>(nv0.hcq());
    size_t cards = dev0.rm().iface().cards().size();
    describe_nv(nv0, dev0);
    for (size_t i = 1; i < cards; i++) describe("NV:" + std::to_string(i));
  } else {
    std::printf("NV: not available: %s\n", first.status().message().c_str());
  }
  // Every AMD GPU KFD lists (AMD is AMD:0).
  auto amd0 = runtime::open_device("AMD");
  if (amd0.ok()) {
    auto& h = dynamic_cast<runtime::HcqDevice&>(**amd0);
    auto& dev = dynamic_cast<amd::Device&>(h.hcq());
    int gpus = dev.kfd().gpu_count();
    describe_amd(h, dev);
    for (int i = 1; i < gpus; i++) describe("AMD:" + std::to_string(i));
  } else {
    std::printf("AMD: not available: %s\n", amd0.status().message().c_str());
    describe_drm();
  }
  describe_cuda();
  describe_cl();
  return 0;
}

}  // namespace
}  // namespace baregrad

int main(int argc, char** argv) {
  return baregrad::run_tool("bare_info", [&] { return baregrad::info_main(argc, argv); });
}
