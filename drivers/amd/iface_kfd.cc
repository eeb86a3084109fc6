// KfdIface: opening a GPU through KFD (topology, version, render node, VM) and the ioctl door.

#include "drivers/amd/iface_kfd.h"

#include <fcntl.h>

#include <map>
#include <mutex>
#include <utility>

#include "base/format.h"
#include "base/log.h"

namespace baregrad::amd {
namespace {

constexpr const char* kGroupsHint = "add the user to the render and video groups";

// The message for a failed open of /dev/kfd or a render node.
Status device_open_error(const Status& s, const std::string& path) {
  if (s.code() == StatusCode::kFailedPrecondition) {
    return failed_precondition("cannot open " + path + ": permission denied (" + kGroupsHint +
                               "): " + s.message());
  }
  if (s.code() != StatusCode::kNotFound) return s;
  if (path == kKfdPath) {
    return not_found(
        "no AMD GPU: /dev/kfd does not exist (load the amdgpu kernel module: modprobe amdgpu)");
  }
  return not_found(path +
                   " does not exist although KFD lists this GPU (is amdgpu's DRM driver "
                   "bound to it?)");
}

}  // namespace

std::string render_node_path(uint32_t minor) { return "/dev/dri/renderD" + std::to_string(minor); }

std::string KfdVersion::str() const { return std::to_string(major) + "." + std::to_string(minor); }

KfdIface::KfdIface(std::shared_ptr<hcq::Os> os, hcq::Fd kfd)
    : os_(std::move(os)), kfd_(std::move(kfd)) {}

KfdIface::~KfdIface() { doorbells_.reset(); }

Result<std::unique_ptr<KfdIface>> KfdIface::open(std::shared_ptr<hcq::Os> os, int index) {
  Result<hcq::Fd> kfd = hcq::open_fd(*os, kKfdPath, O_RDWR);
  if (!kfd.ok()) return device_open_error(kfd.status(), kKfdPath);
  std::unique_ptr<KfdIface> iface(new KfdIface(os, std::move(*kfd)));

  Result<std::vector<KfdGpuNode>> gpus = read_kfd_topology(*os);
  if (!gpus.ok()) return in_context("reading the KFD topology", gpus.status());
  if (gpus->empty()) {
    return not_found(std::string("no AMD GPU: KFD lists no GPU node under ") +
                     kKfdTopologyNodesPath);
  }
  iface->gpu_count_ = static_cast<int>(gpus->size());
  if (index < 0 || index >= iface->gpu_count_) {
    return not_found("no AMD GPU " + std::to_string(index) + ": KFD lists " +
                     std::to_string(iface->gpu_count_) + " GPU" +
                     (iface->gpu_count_ == 1 ? "" : "s") + " (indices 0.." +
                     std::to_string(iface->gpu_count_ - 1) + ")");
  }
  iface->index_ = index;
  iface->node_ = (*gpus)[index];
  RETURN_IF_ERROR(iface->check_version());
  RETURN_IF_ERROR(iface->open_render_node());

  KfdIoctlAcquireVmArgs vm{};
  vm.drm_fd = static_cast<uint32_t>(iface->render_fd());
  vm.gpu_id = iface->gpu_id();
  RETURN_IF_ERROR(in_context("acquiring the VM of " + iface->where(),
                             iface->kfd_ioctl(kAmdkfdIocAcquireVm, &vm, "AMDKFD_IOC_ACQUIRE_VM")));
  // NOTE: mode_mask 0 ("runtime enabled, no debugger") as tinygrad sends it; KFD refuses it
  // (EEXIST) once the process has queues, so it goes before any.
  KfdIoctlRuntimeEnableArgs rt{};
  RETURN_IF_ERROR(
      in_context("enabling the runtime on " + iface->where(),
                 iface->kfd_ioctl(kAmdkfdIocRuntimeEnable, &rt, "AMDKFD_IOC_RUNTIME_ENABLE")));
  BG_LOG(1) << "amd: " << iface->where() << " through KFD " << iface->version_.str();
  return iface;
}

Status KfdIface::check_version() {
  KfdIoctlGetVersionArgs v{};
  RETURN_IF_ERROR(kfd_ioctl(kAmdkfdIocGetVersion, &v, "AMDKFD_IOC_GET_VERSION"));
  version_ = {v.major_version, v.minor_version};
  if (version_.major != kMinKfdVersion.major || version_ < kMinKfdVersion) {
    return failed_precondition("KFD " + version_.str() + " is not supported: baregrad needs KFD " +
                               kMinKfdVersion.str() +
                               " or a later 1.x (AMDKFD_IOC_RUNTIME_ENABLE; update the kernel or "
                               "the amdgpu-dkms driver)");
  }
  return Status();
}

KfdProcess& KfdProcess::of(const hcq::Os& os) {
  static auto* processes = new std::map<uint64_t, KfdProcess>();  // never freed, as KFD's state
  return (*processes)[os.instance()];
}

std::mutex& KfdProcess::mu() {
  static std::mutex mu;
  return mu;
}

Status KfdIface::open_render_node() {
  std::string path = render_node_path(node_.props.drm_render_minor);
  std::lock_guard lock(KfdProcess::mu());
  KfdProcess& p = KfdProcess::of(*os_);
  if (auto it = p.render_fds.find(path); it != p.render_fds.end()) {
    render_fd_ = it->second;
    return Status();
  }
  Result<int> fd = os_->open(path, O_RDWR);
  if (!fd.ok()) return device_open_error(fd.status(), path);
  render_fd_ = *fd;
  p.render_fds.emplace(path, *fd);
  return Status();
}

std::string KfdIface::where() const {
  return "AMD GPU " + std::to_string(index_) + " (gpu_id " + hex(node_.gpu_id) + ", " +
         gfx_arch_name(node_.props.gfx_target_version) + ")";
}

Status KfdIface::kfd_ioctl(unsigned long request, void* arg, const char* name) {
  return os_->ioctl(kfd_.get(), request, arg, name);
}

}  // namespace baregrad::amd
