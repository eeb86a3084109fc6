// RmGpu: the bring-up steps of one GPU, and bring_up() which runs them in order.

#include <fcntl.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "base/format.h"
#include "base/log.h"
#include "drivers/nv/gpfifo.h"
#include "drivers/nv/iface_rm.h"
#include "drivers/nv/iface_rm_internal.h"
#include "drivers/nv/rm_status.h"

namespace baregrad::nv {
namespace {

constexpr uint64_t kVirtmemLimit = 0x1ffffffffffff;  // tinygrad's NV01_MEMORY_VIRTUAL limit
constexpr uint64_t kVaspaceBase = 0x1000;            // FERMI_VASPACE_A vaBase
constexpr uint64_t kVaspaceSize = 0x1fffffb000000;   // and vaSize (tinygrad's)
constexpr uint64_t kChannelUvmBytes = 64ull << 20;   // UVM_REGISTER_CHANNEL range
constexpr uint64_t kGpfifoSlotAlign = 1ull << 20;    // one channel's ring + USERD

template <class P>
P vaspace_params() {
  P p{};
  p.flags =
      kNvVaspaceAllocationFlagsIsExternallyOwned | kNvVaspaceAllocationFlagsEnablePageFaulting;
  p.va_base = kVaspaceBase;
  p.va_size = kVaspaceSize;
  return p;
}

template <class P>
void fill_channel(P& p,
                  uint32_t error,
                  uint32_t area,
                  uint64_t ring_va,
                  uint32_t entries,
                  uint32_t ctxshare,
                  uint64_t userd_offset) {
  p.h_object_error = error;
  p.h_object_buffer = area;
  p.gp_fifo_offset = ring_va;
  p.gp_fifo_entries = entries;
  p.h_context_share = ctxshare;
  p.h_userd_memory[0] = area;
  p.userd_offset[0] = userd_offset;
}

template <class P>
Result<std::pair<uint64_t, uint64_t>> fb_sizes(RmIface& iface, uint32_t subdevice) {
  P p{};
  p.fb_info_list_size = 2;
  p.fb_info_list[0].index = kFbInfoIndexRamSize;
  p.fb_info_list[1].index = kFbInfoIndexHeapSize;
  RETURN_IF_ERROR(iface.control(subdevice, kNv2080CtrlCmdFbGetInfoV2, p));
  return std::pair<uint64_t, uint64_t>{uint64_t{p.fb_info_list[0].data} << 10,
                                       uint64_t{p.fb_info_list[1].data} << 10};
}

template <class P>
Result<std::string> gpu_name(RmIface& iface, uint32_t subdevice) {
  P p{};
  RETURN_IF_ERROR(iface.control(subdevice, kNv2080CtrlCmdGpuGetNameString, p));
  const char* text = reinterpret_cast<const char*>(p.ascii);
  return std::string(text, strnlen(text, 64));
}

}  // namespace

std::string sm_arch_name(uint32_t sm_version) {
  if (sm_version == 0xa04) return "sm_120";  // tinygrad's special case for GB20x
  uint32_t minor = sm_version & 0xff;
  return "sm_" + std::to_string((sm_version >> 8) & 0xff) +
         std::to_string(minor > 0xf ? minor >> 4 : minor);
}

std::string_view memory_kind_name(RmMemoryKind k) {
  switch (k) {
    case RmMemoryKind::kVideo:
      return "video";
    case RmMemoryKind::kSystem:
      return "system";
    case RmMemoryKind::kHost:
      return "host";
  }
  UNREACHABLE() << "memory kind " << static_cast<int>(k);
}

RmGpu::RmGpu(RmIface& iface, int index, hcq::Fd dev) : iface_(iface), dev_(std::move(dev)) {
  info_.index = index;
  info_.card = iface.cards()[index];
}

std::string RmGpu::where() const {
  return "GPU " + std::to_string(info_.index) + " (" + nv_device_path(info_.card.minor_number) +
         ")";
}

Result<hcq::Fd> RmGpu::open_device_fd() {
  std::string path = nv_device_path(info_.card.minor_number);
  Result<hcq::Fd> fd = hcq::open_fd(iface_.os(), path, O_RDWR);
  if (!fd.ok()) return device_open_error(fd.status(), path);
  NvIoctlRegisterFd reg{iface_.ctl_fd()};
  RETURN_IF_ERROR(iface_.escape(fd->get(), kNvEscRegisterFd, &reg, sizeof(reg),
                                "NV_ESC_REGISTER_FD of " + path));
  return fd;
}

Result<std::unique_ptr<RmGpu>> RmGpu::open(RmIface& iface, int index) {
  int count = static_cast<int>(iface.cards().size());
  if (index < 0 || index >= count) {
    return not_found("no NVIDIA GPU " + std::to_string(index) + ": the driver lists " +
                     std::to_string(count));
  }
  std::unique_ptr<RmGpu> gpu(new RmGpu(iface, index, hcq::Fd()));
  ASSIGN_OR_RETURN(gpu->dev_, gpu->open_device_fd());
  Nv0000CtrlGpuGetIdInfoV2Params id{};
  id.gpu_id = gpu->info_.card.gpu_id;
  RETURN_IF_ERROR(iface.control(iface.root(), kNv0000CtrlCmdGpuGetIdInfoV2, id));
  gpu->info_.device_instance = id.device_instance;
  return gpu;
}

RmGpu::~RmGpu() {
  auto log = [this](const Status& s) {
    if (!s.ok()) BG_LOG(1) << "nv: " << where() << " teardown: " << s;
  };
  usermode_map_.reset();
  notifier_maps_.clear();
  for (auto it = owned_.rbegin(); it != owned_.rend(); ++it) log(free_memory(*it));
  if (uvm_vaspace_) {
    UvmUnregisterGpuVaspaceParams p{};
    p.gpu_uuid = info_.uuid;
    log(iface_.uvm(kUvmUnregisterGpuVaspace, &p, sizeof(p), "UVM_UNREGISTER_GPU_VASPACE"));
  }
  if (info_.device != 0) log(iface_.free(iface_.root(), info_.device));
  for (const auto& [va, bytes] : channel_va_) iface_.high_va().free(va, bytes);
  if (uvm_gpu_) {
    UvmUnregisterGpuParams p{};
    p.gpu_uuid = info_.uuid;
    log(iface_.uvm(kUvmUnregisterGpu, &p, sizeof(p), "UVM_UNREGISTER_GPU"));
  }
}

Status RmGpu::alloc_device() {
  Nv0080AllocParameters p{};
  p.device_id = info_.device_instance;
  p.h_client_share = iface_.root();
  p.va_mode = kNvDeviceAllocationVamodeOptionalMultipleVaspaces;
  ASSIGN_OR_RETURN(info_.device, iface_.alloc(iface_.root(), kNv01Device0, p));
  return Status();
}

Status RmGpu::alloc_subdevice() {
  Nv2080AllocParameters p{};
  ASSIGN_OR_RETURN(info_.subdevice, iface_.alloc(info_.device, kNv20Subdevice0, p));
  return Status();
}

Status RmGpu::query_classes() {
  Nv2080CtrlMcGetArchInfoParams arch{};
  RETURN_IF_ERROR(iface_.control(info_.subdevice, kNv2080CtrlCmdMcGetArchInfo, arch));
  Result<GpuClasses> classes = nv::select_classes(arch.architecture, arch.implementation);
  if (!classes.ok()) {
    return Status(classes.status().code(), where() + ": " + classes.status().message());
  }
  info_.classes = *classes;

  auto read_list = [this](auto& p) -> Status {
    RETURN_IF_ERROR(iface_.control(info_.device, kNv0080CtrlCmdGpuGetClasslistV2, p));
    uint32_t n = std::min<uint32_t>(p.num_classes, std::size(p.class_list));
    info_.class_list.assign(p.class_list, p.class_list + n);
    return Status();
  };
  if (iface_.branch() == RmBranch::k570) {
    auto p = std::make_unique<Nv0080CtrlGpuGetClasslistV2Params570>();
    RETURN_IF_ERROR(read_list(*p));
  } else {
    auto p = std::make_unique<Nv0080CtrlGpuGetClasslistV2Params580>();
    RETURN_IF_ERROR(read_list(*p));
  }
  for (uint32_t cls :
       {info_.classes.gpfifo, info_.classes.compute, info_.classes.copy, info_.classes.usermode}) {
    if (std::find(info_.class_list.begin(), info_.class_list.end(), cls) ==
        info_.class_list.end()) {
      return failed_precondition(where() + ": the GPU's class list (" +
                                 std::to_string(info_.class_list.size()) + " classes) lacks " +
                                 class_name(cls) + ", which baregrad picks for " +
                                 std::string(generation_name(info_.classes.generation)) +
                                 " (architecture " + hex(info_.classes.architecture) + ")");
    }
  }
  return Status();
}

Status RmGpu::alloc_virtmem() {
  NvMemoryVirtualAllocationParams p{};
  p.limit = kVirtmemLimit;
  ASSIGN_OR_RETURN(info_.virtmem, iface_.alloc(info_.device, kNv01MemoryVirtual, p));
  return Status();
}

Status RmGpu::setup_usermode() {
  ASSIGN_OR_RETURN(info_.usermode,
                   iface_.alloc(info_.subdevice, info_.classes.usermode, nullptr, 0));
  ASSIGN_OR_RETURN(void* page, map_to_cpu(info_.usermode, kUsermodeBytes, nullptr, false));
  usermode_map_ = hcq::Mapping(iface_.os(), page, kUsermodeBytes);
  info_.usermode_page = page;
  return Status();
}

Status RmGpu::perf_boost() {
  Nv2080CtrlPerfBoostParams p{kPerfBoostFlags, 0xffffffff};
  return iface_.control(info_.subdevice, kNv2080CtrlCmdPerfBoost, p);
}

Status RmGpu::alloc_vaspace() {
  Result<uint32_t> h = iface_.branch() == RmBranch::k570
                           ? iface_.alloc(info_.device, kFermiVaspaceA,
                                          vaspace_params<NvVaspaceAllocationParameters570>())
                           : iface_.alloc(info_.device, kFermiVaspaceA,
                                          vaspace_params<NvVaspaceAllocationParameters580>());
  ASSIGN_OR_RETURN(info_.vaspace, std::move(h));
  return Status();
}

Status RmGpu::register_uvm() {
  Nv2080CtrlGpuGetGidInfoParams gid{};
  gid.flags = kNv2080GpuCmdGpuGetGidFlagsFormatBinary;
  RETURN_IF_ERROR(iface_.control(info_.subdevice, kNv2080CtrlCmdGpuGetGidInfo, gid));
  if (gid.length != sizeof(info_.uuid.uuid)) {
    return internal(where() + ": NV2080_CTRL_CMD_GPU_GET_GID_INFO returned a " +
                    std::to_string(gid.length) + "-byte GID, not a 16-byte UUID");
  }
  std::memcpy(info_.uuid.uuid, gid.data, sizeof(info_.uuid.uuid));

  UvmRegisterGpuParams gpu{};
  gpu.gpu_uuid = info_.uuid;
  gpu.rm_ctrl_fd = -1;
  RETURN_IF_ERROR(iface_.uvm(kUvmRegisterGpu, &gpu, sizeof(gpu), "UVM_REGISTER_GPU of " + where()));
  uvm_gpu_ = true;

  UvmRegisterGpuVaspaceParams vs{};
  vs.gpu_uuid = info_.uuid;
  vs.rm_ctrl_fd = iface_.ctl_fd();
  vs.h_client = iface_.root();
  vs.h_va_space = info_.vaspace;
  RETURN_IF_ERROR(iface_.uvm(kUvmRegisterGpuVaspace, &vs, sizeof(vs),
                             "UVM_REGISTER_GPU_VASPACE of handle " + hex(info_.vaspace)));
  uvm_vaspace_ = true;
  return Status();
}

Status RmGpu::query_info() {
  Nv2080CtrlGrInfo list[] = {
      {kGrInfoIndexLitterNumGpcs, 0},     {kGrInfoIndexLitterNumTpcPerGpc, 0},
      {kGrInfoIndexLitterNumSmPerTpc, 0}, {kGrInfoIndexShaderPipeSubCount, 0},
      {kGrInfoIndexMaxWarpsPerSm, 0},     {kGrInfoIndexSmVersion, 0},
  };
  Nv2080CtrlGrGetInfoParams gr{};
  gr.gr_info_list_size = std::size(list);
  gr.gr_info_list = reinterpret_cast<uint64_t>(list);
  RETURN_IF_ERROR(iface_.control(info_.subdevice, kNv2080CtrlCmdGrGetInfo, gr));
  RmGrInfo& g = info_.gr;
  g = {list[0].data, list[1].data, list[2].data, list[3].data, 0, list[4].data, list[5].data};
  g.sms = g.tpcs * g.sm_per_tpc;
  if (g.sms == 0 || g.sm_version == 0) {
    return internal(where() + ": NV2080_CTRL_CMD_GR_GET_INFO reports " + std::to_string(g.tpcs) +
                    " TPCs x " + std::to_string(g.sm_per_tpc) + " SMs, sm_version " +
                    hex(g.sm_version));
  }
  info_.arch = sm_arch_name(g.sm_version);

  auto sizes = iface_.branch() == RmBranch::k570
                   ? fb_sizes<Nv2080CtrlFbGetInfoV2Params570>(iface_, info_.subdevice)
                   : fb_sizes<Nv2080CtrlFbGetInfoV2Params580>(iface_, info_.subdevice);
  ASSIGN_OR_RETURN(std::tie(info_.vram_bytes, info_.heap_bytes), std::move(sizes));

  auto name = iface_.branch() >= RmBranch::k595
                  ? gpu_name<Nv2080CtrlGpuGetNameStringParams595>(iface_, info_.subdevice)
                  : gpu_name<Nv2080CtrlGpuGetNameStringParams570>(iface_, info_.subdevice);
  ASSIGN_OR_RETURN(info_.name, std::move(name));
  return Status();
}

Status RmGpu::alloc_channel_group(const BringUpOptions& opts) {
  uint32_t n = opts.gpfifo_entries;
  if (n < 512 || (n & (n - 1)) != 0) {
    return invalid_argument("GPFIFO entries " + std::to_string(n) +
                            ": must be a power of two >= 512");
  }
  NvChannelGroupAllocationParameters tsg{};
  tsg.engine_type = kNv2080EngineTypeGraphics;
  ASSIGN_OR_RETURN(info_.channel_group, iface_.alloc(info_.device, kKeplerChannelGroupA, tsg));

  gpfifo_stride_ = round_up(uint64_t{n} * kGpEntryBytes + kUserdBytes, kGpfifoSlotAlign);
  RmMemoryRequest area{2 * gpfifo_stride_, RmMemoryKind::kVideo, true, true};
  ASSIGN_OR_RETURN(info_.gpfifo_area, alloc_memory(area));
  owned_.push_back(info_.gpfifo_area);

  NvCtxshareAllocationParameters ctx{};
  ctx.h_va_space = info_.vaspace;
  ctx.flags = kNvCtxshareAllocationFlagsSubcontextAsync;
  ASSIGN_OR_RETURN(info_.ctxshare, iface_.alloc(info_.channel_group, kFermiContextShareA, ctx));
  return Status();
}

Result<RmChannel> RmGpu::alloc_channel(bool compute, int slot, const BringUpOptions& opts) {
  RmChannel ch;
  ch.gpfifo_class = info_.classes.gpfifo;
  ch.entries = opts.gpfifo_entries;
  uint64_t offset = uint64_t(slot) * gpfifo_stride_;
  CHECK(gpfifo_stride_ != 0 && offset + gpfifo_stride_ <= info_.gpfifo_area.size)
      << "channel slot " << slot << " outside the GPFIFO area";
  ch.ring_va = info_.gpfifo_area.va + offset;
  ch.userd_va = ch.ring_va + uint64_t{ch.entries} * kGpEntryBytes;

  ASSIGN_OR_RETURN(ch.error_notifier,
                   alloc_memory({opts.error_notifier_bytes, RmMemoryKind::kSystem, false, false}));
  owned_.push_back(ch.error_notifier);
  ASSIGN_OR_RETURN(void* notifier,
                   map_to_cpu(ch.error_notifier.handle, kErrorNotifierMapBytes, nullptr, true));
  notifier_maps_.emplace_back(iface_.os(), notifier, kErrorNotifierMapBytes);
  ch.error_notifier_cpu = static_cast<uint8_t*>(notifier);
  uint32_t area = info_.gpfifo_area.handle;
  uint64_t userd_offset = ch.userd_va - info_.gpfifo_area.va;
  if (iface_.branch() == RmBranch::k610) {
    NvChannelAllocParams610 p{};
    fill_channel(p, ch.error_notifier.handle, area, ch.ring_va, ch.entries, info_.ctxshare,
                 userd_offset);
    ASSIGN_OR_RETURN(ch.handle, iface_.alloc(info_.channel_group, ch.gpfifo_class, p));
  } else {
    NvChannelAllocParams570 p{};
    fill_channel(p, ch.error_notifier.handle, area, ch.ring_va, ch.entries, info_.ctxshare,
                 userd_offset);
    ASSIGN_OR_RETURN(ch.handle, iface_.alloc(info_.channel_group, ch.gpfifo_class, p));
  }

  ch.engine_class = compute ? info_.classes.compute : info_.classes.copy;
  ASSIGN_OR_RETURN(ch.engine_object, iface_.alloc(ch.handle, ch.engine_class, nullptr, 0));
  if (compute) {
    Nv83deAllocParameters dbg{0, iface_.root(), ch.engine_object};
    ASSIGN_OR_RETURN(info_.debugger, iface_.alloc(info_.device, kGt200Debugger, dbg));
    // NOTE: a debugger taking FATAL events (the default: ALL) makes RM defer RC recovery, and
    // the channel would stop with its error notifier unwritten (ctrl83dedebug.h).
    Nv83deCtrlDebugSetExceptionMaskParams mask{kNv83deCtrlDebugSetExceptionMaskNone};
    Status s = iface_.control(info_.debugger, kNv83deCtrlCmdDebugSetExceptionMask, mask);
    if (!s.ok()) BG_LOG(0) << "nv: " << s.message() << " (ignored: faults may look like hangs)";
  }

  Nvc36fCtrlGpfifoGetWorkSubmitTokenParams token{0xffffffff};
  RETURN_IF_ERROR(iface_.control(ch.handle, kNvc36fCtrlCmdGpfifoGetWorkSubmitToken, token));
  ch.work_submit_token = token.work_submit_token;

  ASSIGN_OR_RETURN(uint64_t base, iface_.high_va().alloc(kChannelUvmBytes, kGpfifoSlotAlign));
  channel_va_.emplace_back(base, kChannelUvmBytes);
  UvmRegisterChannelParams reg{};
  reg.gpu_uuid = info_.uuid;
  reg.rm_ctrl_fd = iface_.ctl_fd();
  reg.h_client = iface_.root();
  reg.h_channel = ch.handle;
  reg.base = base;
  reg.length = kChannelUvmBytes;
  RETURN_IF_ERROR(iface_.uvm(kUvmRegisterChannel, &reg, sizeof(reg),
                             "UVM_REGISTER_CHANNEL of handle " + hex(ch.handle)));
  return ch;
}

Status RmGpu::schedule() {
  if (iface_.branch() == RmBranch::k570) {
    Nva06cCtrlGpfifoScheduleParams570 p{1, 0};
    return iface_.control(info_.channel_group, kNva06cCtrlCmdGpfifoSchedule, p);
  }
  Nva06cCtrlGpfifoScheduleParams580 p{1, 0, 0};
  return iface_.control(info_.channel_group, kNva06cCtrlCmdGpfifoSchedule, p);
}

Result<std::unique_ptr<RmGpu>> bring_up(RmIface& iface, int index, const BringUpOptions& opts) {
  ASSIGN_OR_RETURN(std::unique_ptr<RmGpu> gpu, RmGpu::open(iface, index));
  RETURN_IF_ERROR(gpu->alloc_device());
  RETURN_IF_ERROR(gpu->alloc_subdevice());
  RETURN_IF_ERROR(gpu->query_classes());
  RETURN_IF_ERROR(gpu->alloc_virtmem());
  RETURN_IF_ERROR(gpu->setup_usermode());
  if (opts.perf_boost) {
    // NOTE: may be refused (in a VM, say); clocks then stay where the driver puts them.
    Status s = gpu->perf_boost();
    if (!s.ok()) BG_LOG(1) << "nv: " << s.message() << " (ignored)";
  }
  RETURN_IF_ERROR(gpu->alloc_vaspace());
  RETURN_IF_ERROR(gpu->register_uvm());
  RETURN_IF_ERROR(gpu->query_info());
  RETURN_IF_ERROR(gpu->alloc_channel_group(opts));
  ASSIGN_OR_RETURN(gpu->info_.compute, gpu->alloc_channel(true, 0, opts));
  ASSIGN_OR_RETURN(gpu->info_.copy, gpu->alloc_channel(false, 1, opts));
  RETURN_IF_ERROR(gpu->schedule());
  return gpu;
}

}  // namespace baregrad::nv
