// The NVIDIA kernel-interface tests' rig: a fake RM/UVM kernel recorded through RecordingOs,
// bring-up helpers and a decoder of the transcript (used by nv_rm_*test.cc).
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/format.h"
#include "drivers/mock/nv/fake_nv_kernel.h"
#include "drivers/mock/nv/recording_os.h"
#include "drivers/nv/gpfifo.h"
#include "drivers/nv/iface_rm.h"
#include "drivers/nv/rm_abi.h"
#include "drivers/nv/rm_status.h"
#include "drivers/nv/uvm_abi.h"
#include "hcq/mmio.h"

namespace baregrad::nv::rm_test {

using mock::FakeNvConfig;
using mock::FakeNvGpuConfig;
using mock::FakeNvKernel;
using mock::RecordingOs;
using mock::Transcript;
using mock::TranscriptEntry;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

constexpr uint32_t kNvOk = rm_status::NV_OK;

// ---- decoding the transcript ----

struct Call {
  std::string name;  // "NV_ESC_RM_ALLOC", "UVM_FREE", ...
  uint32_t id = 0;   // the class (RM_ALLOC) or command (RM_CONTROL)
  uint32_t parent = 0, handle = 0;
  size_t arg_bytes = 0, params_bytes = 0;
  std::string brief() const {
    if (name == "NV_ESC_RM_ALLOC" || name == "NV_ESC_RM_CONTROL") {
      return name + " " + hex(id);
    }
    return name;
  }
};

inline std::vector<Call> calls(const Transcript& t) {
  std::vector<Call> out;
  for (const TranscriptEntry& e : t.ioctls()) {
    Call c;
    c.arg_bytes = e.out.size();
    c.params_bytes = e.params_in.size();
    if (e.path == kNvUvmPath) {
      c.name = uvm_ioctl_name(e.request);
    } else {
      c.name = nv_escape_name(ioctl_nr(e.request));
      if (ioctl_nr(e.request) == kNvEscRmAlloc) {
        Nvos21Parameters p;
        std::memcpy(&p, e.out.data(), sizeof(p));
        c.id = p.h_class, c.parent = p.h_object_parent, c.handle = p.h_object_new;
      } else if (ioctl_nr(e.request) == kNvEscRmControl) {
        Nvos54Parameters p;
        std::memcpy(&p, e.out.data(), sizeof(p));
        c.id = p.cmd, c.handle = p.h_object;
      }
    }
    out.push_back(c);
  }
  return out;
}

// A fake kernel, a recorder over it, and the process connection.
struct Rig {
  explicit Rig(FakeNvConfig config = {}) : fake(std::move(config)), os(fake) {}
  Result<std::unique_ptr<RmIface>> open() { return RmIface::open(os); }
  FakeNvKernel fake;
  RecordingOs os;
};

struct Up {
  std::unique_ptr<RmIface> iface;
  std::unique_ptr<RmGpu> gpu;
};
inline Up bring_up_or_die(Rig& rig, int index = 0) {
  Up up;
  auto iface = rig.open();
  EXPECT_TRUE(iface.ok()) << iface.status();
  if (!iface.ok()) return up;
  up.iface = std::move(*iface);
  auto gpu = bring_up(*up.iface, index);
  EXPECT_TRUE(gpu.ok()) << gpu.status();
  if (gpu.ok()) up.gpu = std::move(*gpu);
  return up;
}

inline FakeNvConfig with_gpu(FakeNvGpuConfig g, std::string version = "580.159.03") {
  FakeNvConfig c;
  c.driver_version = std::move(version);
  c.gpus = {std::move(g)};
  return c;
}

}  // namespace baregrad::nv::rm_test
