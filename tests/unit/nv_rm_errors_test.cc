// Errors of the NVIDIA kernel interface against the fake RM/UVM kernel: each refusal and
// failure with its exact message (same oracles as nv_rm_test.cc).
#include "base/format.h"
#include "tests/unit/nv_rm_rig.h"

namespace baregrad::nv {
namespace {

using namespace rm_test;

// ---- errors --------------------------------------------------------------------------------

TEST(NvRmErrors, NoNvidiactl) {
  Rig rig;
  rig.fake.set_missing("/dev/nvidiactl");
  auto iface = rig.open();
  ASSERT_FALSE(iface.ok());
  EXPECT_EQ(iface.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(iface.status().message(),
            "no NVIDIA GPU: /dev/nvidiactl does not exist (is the nvidia kernel module loaded?)");
}

TEST(NvRmErrors, NoNvidiaUvm) {
  Rig rig;
  rig.fake.set_missing("/dev/nvidia-uvm");
  auto iface = rig.open();
  ASSERT_FALSE(iface.ok());
  EXPECT_EQ(iface.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(iface.status().message(),
            "no /dev/nvidia-uvm: the nvidia-uvm kernel module is not loaded (modprobe "
            "nvidia-uvm; `nvidia-modprobe -u -c 0` creates the device node)");
}

TEST(NvRmErrors, PermissionDeniedOnTheGpuNode) {
  Rig rig;
  rig.fake.set_open_errno("/dev/nvidia0", EACCES);
  auto iface = rig.open();
  ASSERT_TRUE(iface.ok()) << iface.status();
  auto gpu = bring_up(**iface, 0);
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(gpu.status().message(),
            "cannot open /dev/nvidia0: permission denied (add the user to the video group, or "
            "make the device node readable and writable): open(\"/dev/nvidia0\") failed: errno "
            "13 (Permission denied)");
}

TEST(NvRmErrors, MissingGpuNode) {
  Rig rig;
  rig.fake.set_missing("/dev/nvidia0");
  auto iface = rig.open();
  ASSERT_TRUE(iface.ok()) << iface.status();
  auto gpu = bring_up(**iface, 0);
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.status().message(),
            "/dev/nvidia0 does not exist although the driver lists this GPU (`nvidia-modprobe "
            "-c <minor>` creates the device node)");
}

TEST(NvRmErrors, UnsupportedDriverVersion) {
  Rig rig(with_gpu(FakeNvGpuConfig{}, "535.104.05"));
  auto iface = rig.open();
  ASSERT_FALSE(iface.ok());
  EXPECT_EQ(iface.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(iface.status().message(),
            "NVIDIA driver 535.104.05 has no baregrad layout (supported: 570, 580, 590, 595, "
            "610)");
  // Nothing layout-dependent was sent: only the version query.
  ASSERT_EQ(rig.os.transcript().ioctls().size(), 1u);
  EXPECT_EQ(nv_escape_name(ioctl_nr(rig.os.transcript().ioctls()[0].request)),
            "NV_ESC_CHECK_VERSION_STR");
}

TEST(NvRmErrors, VersionFromSysfsWhenTheQueryFails) {
  Rig rig(with_gpu(FakeNvGpuConfig{}, "595.45.04"));
  rig.fake.fail_ioctl_errno(kNvEscCheckVersionStr, EINVAL);
  auto iface = rig.open();
  ASSERT_TRUE(iface.ok()) << iface.status();
  EXPECT_EQ((*iface)->driver_version(), "595.45.04");
  EXPECT_EQ((*iface)->branch(), RmBranch::k595);
}

TEST(NvRmErrors, UnknownArchitecture) {
  FakeNvGpuConfig g;
  g.architecture = 0x1c0;
  Rig rig(with_gpu(g));
  auto iface = rig.open();
  ASSERT_TRUE(iface.ok()) << iface.status();
  auto gpu = bring_up(**iface, 0);
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(gpu.status().message(),
            "GPU 0 (/dev/nvidia0): unknown NVIDIA architecture 0x1c0: baregrad knows Ampere "
            "(0x170), Ada (0x190), Hopper (0x180), Blackwell (0x1a0/0x1b0)");
}

TEST(NvRmErrors, ChannelAllocOutOfMemoryNamesCallClassAndStatus) {
  Rig rig;
  rig.fake.fail_alloc(kHopperChannelGpfifoA, rm_status::NV_ERR_NO_MEMORY);
  auto iface = rig.open();
  ASSERT_TRUE(iface.ok()) << iface.status();
  auto gpu = bring_up(**iface, 0);
  ASSERT_FALSE(gpu.ok());
  uint32_t tsg = 0;
  for (const Call& c : calls(rig.os.transcript())) {
    if (c.name == "NV_ESC_RM_ALLOC" && c.id == kKeplerChannelGroupA) tsg = c.handle;
  }
  ASSERT_NE(tsg, 0u);
  EXPECT_EQ(gpu.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(gpu.status().message(),
            "NV_ESC_RM_ALLOC of HOPPER_CHANNEL_GPFIFO_A (0xc86f) under "
            "handle " +
                hex(tsg) + ": NV_ERR_NO_MEMORY (0x51): out of memory");
  // The failed bring-up released everything it had allocated.
  EXPECT_TRUE(rig.fake.allocations().empty());
  EXPECT_TRUE(rig.fake.channels().empty());
}

TEST(NvRmErrors, ControlFailureNamesTheCommandAndHandle) {
  Rig rig;
  rig.fake.fail_control(kNv2080CtrlCmdGrGetInfo, rm_status::NV_ERR_NOT_SUPPORTED);
  auto iface = rig.open();
  ASSERT_TRUE(iface.ok()) << iface.status();
  auto gpu = bring_up(**iface, 0);
  ASSERT_FALSE(gpu.ok());
  uint32_t subdevice = 0;
  for (const Call& c : calls(rig.os.transcript())) {
    if (c.name == "NV_ESC_RM_ALLOC" && c.id == kNv20Subdevice0) subdevice = c.handle;
  }
  EXPECT_EQ(gpu.status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(gpu.status().message(),
            "NV_ESC_RM_CONTROL NV2080_CTRL_CMD_GR_GET_INFO (0x20801201) "
            "on handle " +
                hex(subdevice) + ": NV_ERR_NOT_SUPPORTED (0x56): not supported");
}

TEST(NvRmErrors, UvmFailureNamesTheIoctl) {
  Rig rig;
  rig.fake.fail_uvm(kUvmRegisterGpu, rm_status::NV_ERR_INSUFFICIENT_PERMISSIONS);
  auto iface = rig.open();
  ASSERT_TRUE(iface.ok()) << iface.status();
  auto gpu = bring_up(**iface, 0);
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(gpu.status().message(),
            "UVM_REGISTER_GPU of GPU 0 (/dev/nvidia0): NV_ERR_INSUFFICIENT_PERMISSIONS (0x1b): "
            "insufficient permissions");
}

TEST(NvRmErrors, AnEscapeErrnoNamesTheRequest) {
  Rig rig;
  rig.fake.fail_ioctl_errno(kNvEscCardInfo, EIO);
  auto iface = rig.open();
  ASSERT_FALSE(iface.ok());
  EXPECT_THAT(iface.status().message(),
              HasSubstr("ioctl NV_ESC_CARD_INFO (request 0xd20046c8) on fd "));
  EXPECT_THAT(iface.status().message(), HasSubstr("failed: errno 5 (Input/output error)"));
}

TEST(NvRmErrors, PerfBoostAndMmInitializeRefusalsAreTolerated) {
  FakeNvConfig config;
  config.perf_boost_status = rm_status::NV_ERR_INSUFFICIENT_PERMISSIONS;
  config.mm_initialize_status = rm_status::NV_ERR_INVALID_ARGUMENT;
  Rig rig(config);
  Up up = bring_up_or_die(rig);
  EXPECT_NE(up.gpu, nullptr);
}

TEST(NvRmErrors, TheFakeRefusesAWrongLayout) {
  Rig rig;  // driver 580: NVOS46 is 64 bytes
  Up up = bring_up_or_die(rig);
  ASSERT_NE(up.gpu, nullptr);
  Nvos46Parameters570 old{};
  Status s = up.iface->escape(up.iface->ctl_fd(), kNvEscRmMapMemoryDma, &old, sizeof(old),
                              "NV_ESC_RM_MAP_MEMORY_DMA (570 layout)");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("(request 0xc0384657)"));
  EXPECT_THAT(s.message(), HasSubstr("errno 22 (Invalid argument)"));
  ASSERT_FALSE(rig.fake.log().empty());
  EXPECT_EQ(rig.fake.log().back(),
            "NV_ESC_RM_MAP_MEMORY_DMA on /dev/nvidiactl: the request carries 56 bytes; branch "
            "580 expects 64");
}

}  // namespace
}  // namespace baregrad::nv
