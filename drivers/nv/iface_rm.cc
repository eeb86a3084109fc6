// RmIface: the process's connection to the RM and UVM drivers, and the ioctl primitives.

#include "drivers/nv/iface_rm.h"

#include <fcntl.h>

#include <cctype>
#include <cstring>
#include <utility>

#include "base/format.h"
#include "base/log.h"
#include "drivers/nv/iface_rm_internal.h"
#include "drivers/nv/rm_status.h"

namespace baregrad::nv {

std::string nv_device_path(uint32_t minor) { return "/dev/nvidia" + std::to_string(minor); }

Status device_open_error(const Status& s, const std::string& path) {
  if (s.code() == StatusCode::kFailedPrecondition) {
    return failed_precondition("cannot open " + path +
                               ": permission denied (add the user to the video group, or make "
                               "the device node readable and writable): " +
                               s.message());
  }
  if (s.code() != StatusCode::kNotFound) return s;
  if (path == kNvCtlPath) {
    return not_found(
        "no NVIDIA GPU: /dev/nvidiactl does not exist (is the nvidia kernel module "
        "loaded?)");
  }
  if (path == kNvUvmPath) {
    return not_found(
        "no /dev/nvidia-uvm: the nvidia-uvm kernel module is not loaded (modprobe "
        "nvidia-uvm; `nvidia-modprobe -u -c 0` creates the device node)");
  }
  return not_found(path +
                   " does not exist although the driver lists this GPU (`nvidia-modprobe "
                   "-c <minor>` creates the device node)");
}

RmIface::RmIface(hcq::Os& os, hcq::Fd ctl) : os_(os), ctl_(std::move(ctl)) {}

Result<std::unique_ptr<RmIface>> RmIface::open(hcq::Os& os, RmVaOptions va) {
  Result<hcq::Fd> ctl = hcq::open_fd(os, kNvCtlPath, O_RDWR);
  if (!ctl.ok()) return device_open_error(ctl.status(), kNvCtlPath);
  std::unique_ptr<RmIface> iface(new RmIface(os, std::move(*ctl)));
  RETURN_IF_ERROR(iface->check_version());

  Nvos21Parameters root{};
  root.h_class = kNv01RootClient;
  std::string call = "NV_ESC_RM_ALLOC of " + rm_class_name(kNv01RootClient);
  RETURN_IF_ERROR(iface->escape(iface->ctl_fd(), kNvEscRmAlloc, &root, sizeof(root), call));
  if (root.status != rm_status::NV_OK) return rm_error(call, root.status);
  iface->root_ = root.h_object_new;

  RETURN_IF_ERROR(iface->open_uvm());
  RETURN_IF_ERROR(iface->read_cards());
  ASSIGN_OR_RETURN(iface->low_va_, VaRange::reserve(os, "low (CPU-visible)", va.low_base,
                                                    va.low_size, va.low_limit));
  ASSIGN_OR_RETURN(iface->high_va_,
                   VaRange::reserve(os, "high", va.high_base, va.high_size, va.high_limit));
  return iface;
}

RmIface::~RmIface() {
  if (root_ == 0) return;
  Status s = free(0, root_);
  if (!s.ok()) BG_LOG(1) << "nv: freeing the root client: " << s;
}

Status RmIface::check_version() {
  NvIoctlRmApiVersion query{};
  query.cmd = kNvRmApiVersionCmdQuery;
  Status s = escape(ctl_fd(), kNvEscCheckVersionStr, &query, sizeof(query),
                    "NV_ESC_CHECK_VERSION_STR (query)");
  query.version_string[sizeof(query.version_string) - 1] = '\0';
  if (s.ok() && query.reply == kNvRmApiVersionReplyRecognized && query.version_string[0] != 0) {
    version_ = query.version_string;
  } else {
    Result<std::string> text = os_.read_file(kNvVersionPath);
    if (!text.ok()) {
      return failed_precondition(
          "cannot read the NVIDIA driver version: " +
          (s.ok() ? std::string("the driver did not answer the query") : s.message()) + "; " +
          text.status().message());
    }
    version_ = *text;
  }
  while (!version_.empty() && std::isspace(static_cast<unsigned char>(version_.back()))) {
    version_.pop_back();
  }
  ASSIGN_OR_RETURN(branch_, rm_branch_for_version(version_));
  BG_LOG(1) << "nv: driver " << version_ << ", layouts of branch " << rm_branch_number(branch_);
  return Status();
}

Status RmIface::open_uvm() {
  Result<hcq::Fd> uvm = hcq::open_fd(os_, kNvUvmPath, O_RDWR);
  if (!uvm.ok()) return device_open_error(uvm.status(), kNvUvmPath);
  uvm_ = std::move(*uvm);
  UvmInitializeParams init{};
  RETURN_IF_ERROR(this->uvm(kUvmInitialize, &init, sizeof(init), "UVM_INITIALIZE"));

  Result<hcq::Fd> mm = hcq::open_fd(os_, kNvUvmPath, O_RDWR);
  if (!mm.ok()) return device_open_error(mm.status(), kNvUvmPath);
  uvm_mm_ = std::move(*mm);
  UvmMmInitializeParams mm_init{};
  mm_init.uvm_fd = uvm_.get();
  // NOTE: tolerated, as tinygrad does ("CUDA hits it too"); UVM works without it.
  Status s =
      this->uvm(kUvmMmInitialize, &mm_init, sizeof(mm_init), "UVM_MM_INITIALIZE", uvm_mm_.get());
  if (!s.ok()) BG_LOG(1) << "nv: " << s.message() << " (ignored)";
  return Status();
}

Status RmIface::read_cards() {
  std::vector<NvIoctlCardInfo> info(kCardInfoEntries);
  RETURN_IF_ERROR(escape(ctl_fd(), kNvEscCardInfo, info.data(),
                         info.size() * sizeof(NvIoctlCardInfo), "NV_ESC_CARD_INFO"));
  for (const NvIoctlCardInfo& c : info) {
    if (!c.valid) continue;
    cards_.push_back(RmCard{c.gpu_id, c.minor_number, c.pci_info, c.fb_size});
  }
  if (cards_.empty()) {
    return not_found("no NVIDIA GPU: driver " + version_ + " lists none (NV_ESC_CARD_INFO)");
  }
  return Status();
}

Status RmIface::escape(int fd, uint32_t escape, void* arg, size_t bytes, const std::string& what) {
  return os_.ioctl(fd, nv_ioctl_request(escape, bytes), arg, what);
}

Result<uint32_t> RmIface::alloc(uint32_t parent,
                                uint32_t cls,
                                const void* params,
                                uint32_t params_size) {
  Nvos21Parameters p{};
  p.h_root = root_;
  p.h_object_parent = parent;
  p.h_class = cls;
  p.p_alloc_parms = reinterpret_cast<uint64_t>(params);
  p.params_size = params == nullptr ? 0 : params_size;
  std::string call = "NV_ESC_RM_ALLOC of " + rm_class_name(cls) + " under handle " + hex(parent);
  RETURN_IF_ERROR(escape(ctl_fd(), kNvEscRmAlloc, &p, sizeof(p), call));
  if (p.status != rm_status::NV_OK) return rm_error(call, p.status);
  return p.h_object_new;
}

Status RmIface::control(uint32_t object, uint32_t cmd, void* params, uint32_t params_size) {
  Nvos54Parameters p{};
  p.h_client = root_;
  p.h_object = object;
  p.cmd = cmd;
  p.params = reinterpret_cast<uint64_t>(params);
  p.params_size = params_size;
  std::string call = "NV_ESC_RM_CONTROL " + rm_control_name(cmd) + " on handle " + hex(object);
  RETURN_IF_ERROR(escape(ctl_fd(), kNvEscRmControl, &p, sizeof(p), call));
  if (p.status != rm_status::NV_OK) return rm_error(call, p.status);
  return Status();
}

Status RmIface::free(uint32_t parent, uint32_t object) {
  Nvos00Parameters p{};
  p.h_root = root_;
  p.h_object_parent = parent;
  p.h_object_old = object;
  std::string call = "NV_ESC_RM_FREE of handle " + hex(object) + " under handle " + hex(parent);
  RETURN_IF_ERROR(escape(ctl_fd(), kNvEscRmFree, &p, sizeof(p), call));
  if (p.status != rm_status::NV_OK) return rm_error(call, p.status);
  return Status();
}

Status RmIface::uvm(
    unsigned long request, void* params, size_t size, const std::string& what, int fd) {
  CHECK_EQ(size, uvm_params_size(branch_, request))
      << what << " on branch " << rm_branch_number(branch_);
  RETURN_IF_ERROR(os_.ioctl(fd < 0 ? uvm_.get() : fd, request, params, what));
  uint32_t status;
  std::memcpy(&status, static_cast<char*>(params) + uvm_status_offset(branch_, request),
              sizeof(status));
  if (status != rm_status::NV_OK) return rm_error(what, status);
  return Status();
}

}  // namespace baregrad::nv
