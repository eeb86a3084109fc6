// The fake RM's controls (NV_ESC_RM_CONTROL): what each command answers for the configured GPU.

#include <algorithm>
#include <cstring>
#include <iterator>
#include <vector>

#include "base/format.h"
#include "drivers/mock/nv/fake_nv_state.h"
#include "drivers/nv/rm_status.h"

namespace baregrad::mock {

using namespace nv;
using namespace nv::rm_status;

uint32_t FakeNvKernel::State::rm_control(int fd, Nvos54Parameters& p) {
  std::string what = "NV_ESC_RM_CONTROL " + rm_control_name(p.cmd);
  auto refuse = [&](uint32_t status, const std::string& why) {
    note(what + ": " + why + ": " + rm_status_text(status));
    return status;
  };
  if (auto r = take_rule(FailRule::Kind::kControl, p.cmd)) return r->status;
  auto cit = clients.find(p.h_client);
  if (cit == clients.end() || cit->second.ctl_fd != fd) {
    return refuse(NV_ERR_INVALID_CLIENT, "client " + hex(p.h_client));
  }
  FakeObject* o = find(p.h_client, p.h_object);
  if (o == nullptr) return refuse(NV_ERR_INVALID_OBJECT_HANDLE, "no " + hex(p.h_object));
  uint32_t want = rm_control_params_size(*branch, p.cmd);
  if (want == 0) return refuse(NV_ERR_NOT_SUPPORTED, "not modelled");
  if (p.params == 0 || p.params_size != want) {
    return refuse(NV_ERR_INVALID_ARGUMENT, "paramsSize " + std::to_string(p.params_size) +
                                               "; branch " +
                                               std::to_string(rm_branch_number(*branch)) +
                                               " expects " + std::to_string(want));
  }
  void* params = reinterpret_cast<void*>(p.params);
  static constexpr std::pair<uint32_t, ObjKind> kOwners[] = {
      {0x0000, ObjKind::kClient},  {0x0080, ObjKind::kDevice},       {0x2080, ObjKind::kSubdevice},
      {0xc36f, ObjKind::kChannel}, {0xa06c, ObjKind::kChannelGroup}, {0x83de, ObjKind::kDebugger},
  };
  for (const auto& [prefix, kind] : kOwners) {
    if (p.cmd >> 16 == prefix && o->kind != kind) {
      return refuse(NV_ERR_NOT_SUPPORTED,
                    "on handle " + hex(p.h_object) + " of " + rm_class_name(o->cls));
    }
  }
  switch (p.cmd) {
    case kNv0000CtrlCmdGpuGetIdInfoV2: {
      auto* q = static_cast<Nv0000CtrlGpuGetIdInfoV2Params*>(params);
      for (size_t i = 0; i < gpus.size(); ++i) {
        if (gpus[i].gpu_id != q->gpu_id) continue;
        uint32_t id = q->gpu_id;
        *q = {};
        q->gpu_id = id;
        q->device_instance = q->gpu_instance = q->board_id = static_cast<uint32_t>(i);
        q->numa_id = -1;
        return NV_OK;
      }
      return refuse(NV_ERR_INVALID_ARGUMENT, "no GPU id " + hex(q->gpu_id));
    }
    case kNvc36fCtrlCmdGpfifoGetWorkSubmitToken:
      static_cast<Nvc36fCtrlGpfifoGetWorkSubmitTokenParams*>(params)->work_submit_token =
          o->channel.token;
      return NV_OK;
    case kNva06cCtrlCmdGpfifoSchedule: {
      FakeClient& c = cit->second;
      for (uint32_t h : o->children) {
        const FakeObject& ch = c.objects[h];
        if (ch.kind == ObjKind::kChannel && !ch.has_engine) {
          return refuse(NV_ERR_INVALID_STATE, "channel " + hex(h) + " has no engine object");
        }
      }
      for (uint32_t h : o->children) c.objects[h].channel.scheduled = true;
      return NV_OK;
    }
    default:
      break;
  }
  if (o->kind == ObjKind::kDebugger) return control_debugger(cit->second, *o, p.cmd, params);
  return o->kind == ObjKind::kDevice ? control_device(*o, p.cmd, params)
                                     : control_subdevice(*o, p.cmd, params);
}

uint32_t FakeNvKernel::State::control_device(FakeObject& o, uint32_t cmd, void* params) {
  CHECK_EQ(cmd, kNv0080CtrlCmdGpuGetClasslistV2);
  std::vector<uint32_t> l = fake_class_list(gpus[o.gpu].cfg);
  auto fill = [&](auto* q) {
    std::memset(q, 0, sizeof(*q));
    q->num_classes = static_cast<uint32_t>(l.size());
    std::copy(l.begin(), l.end(), q->class_list);
  };
  if (*branch == RmBranch::k570) {
    fill(static_cast<Nv0080CtrlGpuGetClasslistV2Params570*>(params));
  } else {
    fill(static_cast<Nv0080CtrlGpuGetClasslistV2Params580*>(params));
  }
  return NV_OK;
}

uint32_t FakeNvKernel::State::control_subdevice(FakeObject& o, uint32_t cmd, void* params) {
  const FakeNvGpuConfig& g = gpus[o.gpu].cfg;
  switch (cmd) {
    case kNv2080CtrlCmdGrGetInfo: {
      auto* q = static_cast<Nv2080CtrlGrGetInfoParams*>(params);
      if (q->gr_info_list == 0 || q->gr_info_list_size == 0 || q->gr_info_list_size > 0x40) {
        return NV_ERR_INVALID_ARGUMENT;
      }
      auto* list = reinterpret_cast<Nv2080CtrlGrInfo*>(q->gr_info_list);
      for (uint32_t i = 0; i < q->gr_info_list_size; ++i) {
        uint32_t& d = list[i].data;
        switch (list[i].index) {
          case kGrInfoIndexLitterNumGpcs:
            d = g.gpcs;
            break;
          case kGrInfoIndexLitterNumTpcPerGpc:
            d = g.tpc_per_gpc;
            break;
          case kGrInfoIndexLitterNumSmPerTpc:
            d = g.sm_per_tpc;
            break;
          case kGrInfoIndexShaderPipeSubCount:
            d = g.tpcs;
            break;
          case kGrInfoIndexMaxWarpsPerSm:
            d = g.max_warps_per_sm;
            break;
          case kGrInfoIndexSmVersion:
            d = g.sm_version;
            break;
          default:
            if (list[i].index >= 0x40) return NV_ERR_INVALID_ARGUMENT;
            d = 0;
        }
      }
      return NV_OK;
    }
    case kNv2080CtrlCmdMcGetArchInfo: {
      auto* q = static_cast<Nv2080CtrlMcGetArchInfoParams*>(params);
      *q = {g.architecture, g.implementation, 0xa1, 0};
      return NV_OK;
    }
    case kNv2080CtrlCmdGpuGetGidInfo: {
      auto* q = static_cast<Nv2080CtrlGpuGetGidInfoParams*>(params);
      if ((q->flags & 3) != kNv2080GpuCmdGpuGetGidFlagsFormatBinary) {
        note("NV2080_CTRL_CMD_GPU_GET_GID_INFO: the fake answers the binary format only");
        return NV_ERR_NOT_SUPPORTED;
      }
      q->length = 16;
      std::memcpy(q->data, gpus[o.gpu].uuid.uuid, 16);
      return NV_OK;
    }
    case kNv2080CtrlCmdGpuGetNameString: {
      char* ascii = *branch >= RmBranch::k595
                        ? reinterpret_cast<char*>(
                              static_cast<Nv2080CtrlGpuGetNameStringParams595*>(params)->ascii)
                        : reinterpret_cast<char*>(
                              static_cast<Nv2080CtrlGpuGetNameStringParams570*>(params)->ascii);
      std::memset(ascii, 0, 64);
      std::strncpy(ascii, g.name.c_str(), 63);
      return NV_OK;
    }
    case kNv2080CtrlCmdFbGetInfoV2: {
      auto answer = [&](auto* q) -> uint32_t {
        if (q->fb_info_list_size > std::size(q->fb_info_list)) return NV_ERR_INVALID_ARGUMENT;
        for (uint32_t i = 0; i < q->fb_info_list_size; ++i) {
          uint32_t index = q->fb_info_list[i].index;
          q->fb_info_list[i].data =
              index == kFbInfoIndexRamSize    ? static_cast<uint32_t>(g.vram_bytes >> 10)
              : index == kFbInfoIndexHeapSize ? static_cast<uint32_t>(g.heap_bytes >> 10)
                                              : 0;
        }
        return NV_OK;
      };
      return *branch == RmBranch::k570
                 ? answer(static_cast<Nv2080CtrlFbGetInfoV2Params570*>(params))
                 : answer(static_cast<Nv2080CtrlFbGetInfoV2Params580*>(params));
    }
    case kNv2080CtrlCmdPerfBoost:
      return cfg.perf_boost_status;
    default:
      note("NV_ESC_RM_CONTROL " + rm_control_name(cmd) + ": not modelled");
      return NV_ERR_NOT_SUPPORTED;
  }
}

}  // namespace baregrad::mock
