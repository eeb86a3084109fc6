// Fault reports at the kernel interface: the ABI of the error notifier and the GT200_DEBUGGER
// controls, the fake kernel's raise_fault() (notifiers, deferred RC, debugger state), and
// RmGpu's reads of both.
#include <chrono>

#include "tests/unit/nv_rm_rig.h"

namespace baregrad::nv {
namespace {

using namespace rm_test;
using mock::FakeNvFault;
using mock::FakeNvMmuFault;
using mock::FakeNvSmError;

constexpr uint16_t kRmErrorStatus = 0xffff;  // what krcErrorSetNotifier writes as status

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

// ---- ABI ------------------------------------------------------------------------------------

TEST(NvRmFaultAbi, LayoutsAreTheHeaders) {
  // nvgputypes.h NvNotification: timeStamp 0-7, info32 8-b, info16 c-d, status e-f.
  EXPECT_EQ(sizeof(NvNotification), 16u);
  EXPECT_EQ(offsetof(NvNotification, info32), 0x8u);
  EXPECT_EQ(offsetof(NvNotification, info16), 0xcu);
  EXPECT_EQ(offsetof(NvNotification, status), 0xeu);
  // ctrl83dedebug.h (and tinygrad's nv_580 / nv_610 autogen: 48, 4824, 16, 72 bytes).
  EXPECT_EQ(sizeof(Nv83deSmErrorStateRegisters), 48u);
  EXPECT_EQ(offsetof(Nv83deSmErrorStateRegisters, hww_warp_esr_pc64), 32u);
  EXPECT_EQ(sizeof(Nv83deCtrlDebugReadAllSmErrorStatesParams), 4824u);
  EXPECT_EQ(offsetof(Nv83deCtrlDebugReadAllSmErrorStatesParams, mmu_fault), 4812u);
  EXPECT_EQ(offsetof(Nv83deCtrlDebugReadAllSmErrorStatesParams, starting_sm), 4820u);
  EXPECT_EQ(sizeof(Nv83deCtrlDebugReadMmuFaultInfoEntry), 16u);
  EXPECT_EQ(sizeof(Nv83deCtrlDebugReadMmuFaultInfoParams), 72u);
  EXPECT_EQ(offsetof(Nv83deCtrlDebugReadMmuFaultInfoParams, count), 64u);
  // The sizes RM checks paramsSize against are the same in every branch.
  for (RmBranch b :
       {RmBranch::k570, RmBranch::k580, RmBranch::k590, RmBranch::k595, RmBranch::k610}) {
    EXPECT_EQ(rm_control_params_size(b, 0x83de0309), 4u);
    EXPECT_EQ(rm_control_params_size(b, 0x83de030c), 4824u);
    EXPECT_EQ(rm_control_params_size(b, 0x83de0328), 72u);
  }
  EXPECT_EQ(rm_control_name(0x83de0328), "NV83DE_CTRL_CMD_DEBUG_READ_MMU_FAULT_INFO (0x83de0328)");
}

TEST(NvRmFaultAbi, RcCodesEnginesAndFaultTypesHaveTheirHeaderNames) {
  EXPECT_EQ(rc_error_text(13), "ROBUST_CHANNEL_GR_EXCEPTION (13): graphics engine exception");
  EXPECT_EQ(rc_error_text(31), "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT (31): MMU fault");
  EXPECT_THAT(rc_error_text(32), HasSubstr("ROBUST_CHANNEL_PBDMA_ERROR (32)"));
  EXPECT_THAT(rc_error_text(69), HasSubstr("ROBUST_CHANNEL_GR_CLASS_ERROR (69)"));
  EXPECT_EQ(rc_error_text(200), "RC error 200");
  EXPECT_EQ(nv2080_engine_name(1), "GR0");
  EXPECT_EQ(nv2080_engine_name(9), "COPY0");
  EXPECT_EQ(nv2080_engine_name(0x12), "COPY9");
  EXPECT_EQ(nv2080_engine_name(0x27), "HOST");
  EXPECT_EQ(mmu_fault_type_name(2), "PTE");
  EXPECT_EQ(mmu_fault_type_name(0xf), "ATOMIC_VIOLATION");
  EXPECT_EQ(mmu_fault_type_name(0x10), "fault type 0x10");
  EXPECT_EQ(mmu_access_type_name(1), "VIRT_WRITE");
  EXPECT_EQ(mmu_access_type_name(0xb), "PHYS_PREFETCH");
}

// ---- error notifiers ------------------------------------------------------------------------

TEST(NvRmFault, NotifiersAreCpuMappedAndClearUntilRmWritesThem) {
  Rig rig;
  Up up = bring_up_or_die(rig);
  ASSERT_NE(up.gpu, nullptr);
  const BringUp& b = up.gpu->info();
  ASSERT_NE(b.compute.error_notifier_cpu, nullptr);
  ASSERT_NE(b.copy.error_notifier_cpu, nullptr);
  EXPECT_EQ(RmGpu::error_status(b.compute), 0);
  EXPECT_EQ(RmGpu::error_status(b.copy), 0);
  uint64_t before = now_ns();
  ASSERT_TRUE(
      rig.fake.raise_fault(b.copy.work_submit_token, {.rc = 39, .engine = 9, .whole_group = false})
          .ok());
  uint64_t after = now_ns();
  EXPECT_EQ(RmGpu::error_status(b.compute), 0) << "only the faulting channel";
  EXPECT_EQ(RmGpu::error_status(b.copy), kRmErrorStatus);
  RmErrorNotifier n = RmGpu::read_error_notifier(b.copy);
  EXPECT_EQ(n.info32, 39u);
  EXPECT_EQ(n.info16, 9u);
  EXPECT_GE(n.timestamp_ns, before);
  EXPECT_LE(n.timestamp_ns, after);
  // The mapping is the notifier memory: entry 0's status at byte 14.
  uint16_t raw;
  std::memcpy(&raw, b.copy.error_notifier_cpu + 14, 2);
  EXPECT_EQ(raw, kRmErrorStatus);
}

TEST(NvRmFault, AGroupWideErrorWritesEveryChannelsNotifier) {
  Rig rig;
  Up up = bring_up_or_die(rig);
  ASSERT_NE(up.gpu, nullptr);
  const BringUp& b = up.gpu->info();
  ASSERT_TRUE(
      rig.fake
          .raise_fault(b.compute.work_submit_token, {.rc = 31, .engine = 1, .whole_group = true})
          .ok());
  for (const RmChannel* ch : {&b.compute, &b.copy}) {
    EXPECT_EQ(RmGpu::error_status(*ch), kRmErrorStatus);
    EXPECT_EQ(RmGpu::read_error_notifier(*ch).info32, 31u);
  }
  EXPECT_EQ(rig.fake.raise_fault(12345, {}).code(), StatusCode::kNotFound);
}

TEST(NvRmFault, ADebuggerTakingFatalExceptionsDefersTheNotifier) {
  Rig rig;
  rig.fake.fail_control(kNv83deCtrlCmdDebugSetExceptionMask, rm_status::NV_ERR_NOT_SUPPORTED);
  Up up = bring_up_or_die(rig);  // the refusal is logged, not fatal
  ASSERT_NE(up.gpu, nullptr);
  const BringUp& b = up.gpu->info();
  ASSERT_TRUE(rig.fake
                  .raise_fault(b.compute.work_submit_token,
                               {.rc = 31, .engine = 1, .mmu = FakeNvMmuFault{0x1234000, 2, 0}})
                  .ok());
  EXPECT_EQ(RmGpu::error_status(b.compute), 0) << "RC deferred: the channel just stops";
  ASSERT_FALSE(rig.fake.log().empty());
  EXPECT_THAT(rig.fake.log().back(), HasSubstr("deferred"));
  // The debugger still saw it.
  auto sm = up.gpu->read_sm_errors(b.compute);
  ASSERT_TRUE(sm.ok()) << sm.status();
  EXPECT_TRUE(sm->mmu_fault);
}

// ---- the debugger -------------------------------------------------------------------------

TEST(NvRmFault, TheDebuggerReturnsTheMmuFaultsAndSmErrorStates) {
  Rig rig;
  Up up = bring_up_or_die(rig);
  ASSERT_NE(up.gpu, nullptr);
  const BringUp& b = up.gpu->info();
  ASSERT_EQ(b.gr.sms, 132u);  // the H200 preset: two pages of 100 SMs
  auto none = up.gpu->read_sm_errors(b.compute);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->mmu_fault);
  EXPECT_TRUE(none->errors.empty());

  // Five faults: RM's list keeps the last four, oldest first.
  for (uint64_t i = 0; i < 5; ++i) {
    FakeNvFault f{.rc = 31, .engine = 1, .whole_group = true};
    f.mmu = FakeNvMmuFault{0x7000'0000 + i * 0x1000, 2, static_cast<uint32_t>(i % 2)};
    ASSERT_TRUE(rig.fake.raise_fault(b.copy.work_submit_token, f).ok());
  }
  FakeNvFault f{.rc = 13, .engine = 1};
  f.sm = FakeNvSmError{.sm = 131, .global_esr = 0x4, .warp_esr = 0x10, .pc = 0x12'3456'7890};
  ASSERT_TRUE(rig.fake.raise_fault(b.compute.work_submit_token, f).ok());

  auto sm = up.gpu->read_sm_errors(b.compute);
  ASSERT_TRUE(sm.ok()) << sm.status();
  EXPECT_TRUE(sm->mmu_fault);
  ASSERT_EQ(sm->errors.size(), 1u);
  EXPECT_EQ(sm->errors[0].sm, 131u);
  EXPECT_EQ(sm->errors[0].global_esr, 0x4u);
  EXPECT_EQ(sm->errors[0].warp_esr, 0x10u);
  EXPECT_EQ(sm->errors[0].warp_pc, 0x12'3456'7890u);

  auto mmu = up.gpu->read_mmu_faults();
  ASSERT_TRUE(mmu.ok()) << mmu.status();
  ASSERT_EQ(mmu->size(), 4u);
  for (uint64_t i = 0; i < 4; ++i) {
    EXPECT_EQ((*mmu)[i].address, 0x7000'0000 + (i + 1) * 0x1000);
    EXPECT_EQ((*mmu)[i].fault_type, 2u);
    EXPECT_EQ((*mmu)[i].access_type, (i + 1) % 2);
  }
}

TEST(NvRmFault, SmErrorStatesAreReadInPagesOfAHundred) {
  Rig rig;
  Up up = bring_up_or_die(rig);
  ASSERT_NE(up.gpu, nullptr);
  size_t first = rig.os.transcript().ioctls().size();
  ASSERT_TRUE(up.gpu->read_sm_errors(up.gpu->info().compute).ok());
  std::vector<TranscriptEntry> all = rig.os.transcript().ioctls();
  std::vector<std::pair<uint32_t, uint32_t>> pages;  // (starting SM, SMs)
  for (size_t i = first; i < all.size(); ++i) {
    ASSERT_EQ(all[i].params_in.size(), sizeof(Nv83deCtrlDebugReadAllSmErrorStatesParams));
    Nv83deCtrlDebugReadAllSmErrorStatesParams p;
    std::memcpy(&p, all[i].params_in.data(), sizeof(p));
    EXPECT_EQ(p.h_target_channel, up.gpu->info().compute.handle);
    pages.emplace_back(p.starting_sm, p.num_sms_to_read);
  }
  EXPECT_THAT(pages, ElementsAreArray({std::pair<uint32_t, uint32_t>{0, 100}, {100, 32}}));
}

TEST(NvRmFault, DebuggerErrorsNameTheControlAndTheStatus) {
  Rig rig;
  Up up = bring_up_or_die(rig);
  ASSERT_NE(up.gpu, nullptr);
  rig.fake.fail_control(kNv83deCtrlCmdDebugReadMmuFaultInfo, rm_status::NV_ERR_INVALID_STATE);
  auto mmu = up.gpu->read_mmu_faults();
  ASSERT_FALSE(mmu.ok());
  EXPECT_THAT(mmu.status().message(),
              HasSubstr("NV83DE_CTRL_CMD_DEBUG_READ_MMU_FAULT_INFO (0x83de0328)"));
  EXPECT_THAT(mmu.status().message(), HasSubstr("NV_ERR_INVALID_STATE (0x40): invalid state"));
  // A target that is no channel: the fake refuses it as RM would.
  RmChannel bogus = up.gpu->info().compute;
  bogus.handle = up.gpu->info().subdevice;
  auto sm = up.gpu->read_sm_errors(bogus);
  ASSERT_FALSE(sm.ok());
  EXPECT_THAT(sm.status().message(),
              HasSubstr("NV83DE_CTRL_CMD_DEBUG_READ_ALL_SM_ERROR_STATES (0x83de030c)"));
  EXPECT_THAT(sm.status().message(), HasSubstr("NV_ERR_INVALID_OBJECT_HANDLE"));
}

}  // namespace
}  // namespace baregrad::nv
