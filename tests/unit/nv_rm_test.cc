// The NVIDIA kernel interface (drivers/nv/iface_rm) against the fake RM/UVM kernel driver
// (drivers/mock/nv), recorded through RecordingOs.
//
// Oracles: request numbers are computed by hand from _IOWR (dir 3 << 30 | size << 16 | 'F' << 8 |
// nr); struct and parameter sizes are the numbers read in NVIDIA/open-gpu-kernel-modules at
// 570.86.16 (81fe4fb4), 580.105.08 (2af9f1f0), 580.142 (1a5075f8), 590.48.01 (2ccbad25) and
// 595.45.04 (df1c9a3d), and for 610 in tinygrad's nv_610 autogen (from tag 610.43.03), never
// read back from rm_abi.h. The call sequence is the bring-up order written out by hand.
#include "base/format.h"
#include "tests/unit/nv_rm_rig.h"

namespace baregrad::nv {
namespace {

using namespace rm_test;

// ---- ABI facts -----------------------------------------------------------------------------

TEST(NvRmAbi, EscapeRequestNumbersAreIowrF) {
  EXPECT_EQ(nv_ioctl_request(kNvEscRmAlloc, 32), 0xc020462bul);
  EXPECT_EQ(nv_ioctl_request(kNvEscRmControl, 32), 0xc020462aul);
  EXPECT_EQ(nv_ioctl_request(kNvEscRmFree, 16), 0xc0104629ul);
  EXPECT_EQ(nv_ioctl_request(kNvEscRmAllocMemory, 56), 0xc0384627ul);
  EXPECT_EQ(nv_ioctl_request(kNvEscRmMapMemory, 56), 0xc038464eul);
  EXPECT_EQ(nv_ioctl_request(kNvEscRmMapMemoryDma, 56), 0xc0384657ul);  // 570
  EXPECT_EQ(nv_ioctl_request(kNvEscRmMapMemoryDma, 64), 0xc0404657ul);  // 580+
  EXPECT_EQ(nv_ioctl_request(kNvEscCardInfo, 64 * 72), 0xd20046c8ul);
  EXPECT_EQ(nv_ioctl_request(kNvEscRegisterFd, 4), 0xc00446c9ul);
  EXPECT_EQ(nv_ioctl_request(kNvEscCheckVersionStr, 72), 0xc04846d2ul);
  EXPECT_EQ(ioctl_nr(0xc04846d2ul), 210u);
  EXPECT_EQ(ioctl_size(0xd20046c8ul), 4608u);
  EXPECT_TRUE(is_nv_escape_request(0xc020462bul));
  EXPECT_FALSE(is_nv_escape_request(kUvmRegisterGpu));
}

TEST(NvRmAbi, UvmRequestsAreRawNumbers) {
  EXPECT_EQ(kUvmInitialize, 0x30000001ul);
  EXPECT_EQ(kUvmRegisterGpuVaspace, 25ul);
  EXPECT_EQ(kUvmRegisterChannel, 27ul);
  EXPECT_EQ(kUvmMapExternalAllocation, 33ul);
  EXPECT_EQ(kUvmFree, 34ul);
  EXPECT_EQ(kUvmRegisterGpu, 37ul);
  EXPECT_EQ(kUvmCreateExternalRange, 73ul);
  EXPECT_EQ(kUvmMmInitialize, 75ul);
}

struct BranchSizes {
  RmBranch branch;
  uint32_t nvos46, vaspace, channel, classlist, fb_info, name, schedule;
  size_t uvm_free;
};
// Read in the headers: NVOS46_PARAMETERS, NV_VASPACE_ALLOCATION_PARAMETERS,
// NV_CHANNEL_ALLOC_PARAMS, NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS,
// NV2080_CTRL_FB_GET_INFO_V2_PARAMS, NV2080_CTRL_GPU_GET_NAME_STRING_PARAMS,
// NVA06F_CTRL_GPFIFO_SCHEDULE_PARAMS, UVM_FREE_PARAMS.
constexpr BranchSizes kBranchSizes[] = {
    {RmBranch::k570, 56, 48, 368, 404, 460, 132, 2, 24},
    {RmBranch::k580, 64, 56, 368, 804, 1028, 132, 3, 24},
    {RmBranch::k590, 64, 56, 368, 804, 1028, 132, 3, 16},
    {RmBranch::k595, 64, 56, 368, 804, 1028, 68, 3, 16},
    {RmBranch::k610, 64, 56, 376, 804, 1028, 68, 3, 16},
};

TEST(NvRmAbi, LayoutsDifferPerBranchAsTheHeadersSay) {
  for (const BranchSizes& b : kBranchSizes) {
    SCOPED_TRACE(rm_branch_number(b.branch));
    EXPECT_EQ(nv_escape_size(b.branch, kNvEscRmMapMemoryDma), b.nvos46);
    EXPECT_EQ(rm_alloc_params_size(b.branch, kFermiVaspaceA), b.vaspace);
    EXPECT_EQ(rm_alloc_params_size(b.branch, kHopperChannelGpfifoA), b.channel);
    EXPECT_EQ(rm_control_params_size(b.branch, kNv0080CtrlCmdGpuGetClasslistV2), b.classlist);
    EXPECT_EQ(rm_control_params_size(b.branch, kNv2080CtrlCmdFbGetInfoV2), b.fb_info);
    EXPECT_EQ(rm_control_params_size(b.branch, kNv2080CtrlCmdGpuGetNameString), b.name);
    EXPECT_EQ(rm_control_params_size(b.branch, kNva06cCtrlCmdGpfifoSchedule), b.schedule);
    EXPECT_EQ(uvm_params_size(b.branch, kUvmFree), b.uvm_free);
    // The same in every branch.
    EXPECT_EQ(nv_escape_size(b.branch, kNvEscRmAlloc), 32u);        // NVOS21_PARAMETERS
    EXPECT_EQ(nv_escape_size(b.branch, kNvEscRmControl), 32u);      // NVOS54_PARAMETERS
    EXPECT_EQ(nv_escape_size(b.branch, kNvEscRmFree), 16u);         // NVOS00_PARAMETERS
    EXPECT_EQ(nv_escape_size(b.branch, kNvEscRmMapMemory), 56u);    // nvos33 with fd
    EXPECT_EQ(nv_escape_size(b.branch, kNvEscRmAllocMemory), 56u);  // nvos02 with fd
    EXPECT_EQ(rm_alloc_params_size(b.branch, kNv01Device0), 56u);
    EXPECT_EQ(rm_alloc_params_size(b.branch, kNv01MemoryLocalUser), 128u);
    EXPECT_EQ(rm_alloc_params_size(b.branch, kKeplerChannelGroupA), 20u);
    EXPECT_EQ(rm_alloc_params_size(b.branch, kFermiContextShareA), 12u);
    EXPECT_EQ(rm_control_params_size(b.branch, kNv2080CtrlCmdGpuGetGidInfo), 268u);
    EXPECT_EQ(rm_control_params_size(b.branch, kNv2080CtrlCmdGrGetInfo), 32u);
    EXPECT_EQ(uvm_params_size(b.branch, kUvmMapExternalAllocation), 9264u);
    EXPECT_EQ(uvm_params_size(b.branch, kUvmRegisterGpu), 40u);
  }
}

TEST(NvRmAbi, BranchFromVersionString) {
  EXPECT_EQ(*rm_branch_for_version("570.86.16"), RmBranch::k570);
  EXPECT_EQ(*rm_branch_for_version("580.159.03"), RmBranch::k580);
  EXPECT_EQ(*rm_branch_for_version("590.48.01"), RmBranch::k590);
  EXPECT_EQ(*rm_branch_for_version("595.45.04"), RmBranch::k595);
  EXPECT_EQ(*rm_branch_for_version("610.43.03"), RmBranch::k610);
  for (const char* v : {"535.104.05", "575.64.05", "580x", ""}) {
    Result<RmBranch> b = rm_branch_for_version(v);
    ASSERT_FALSE(b.ok()) << v;
    EXPECT_EQ(b.status().message(), "NVIDIA driver " + std::string(v) +
                                        " has no baregrad layout (supported: 570, 580, 590, "
                                        "595, 610)");
  }
}

TEST(NvRmAbi, StatusNamesMeaningsAndCodes) {
  EXPECT_EQ(rm_status_text(0x1f), "NV_ERR_INVALID_ARGUMENT (0x1f): invalid argument");
  EXPECT_EQ(rm_status_text(0x51), "NV_ERR_NO_MEMORY (0x51): out of memory");
  EXPECT_EQ(rm_status_text(0x1234), "unknown RM status 0x1234");
  EXPECT_EQ(rm_status_name(0x33), "NV_ERR_INVALID_OBJECT_HANDLE");
  EXPECT_EQ(rm_status_name(0x22), "NV_ERR_INVALID_CLASS");
  EXPECT_EQ(rm_status_name(0x56), "NV_ERR_NOT_SUPPORTED");
  EXPECT_EQ(rm_status_name(0x1b), "NV_ERR_INSUFFICIENT_PERMISSIONS");
  EXPECT_EQ(rm_status_code(0x51), StatusCode::kResourceExhausted);
  EXPECT_EQ(rm_status_code(0x1b), StatusCode::kFailedPrecondition);
  EXPECT_EQ(rm_status_code(0x56), StatusCode::kUnimplemented);
  EXPECT_EQ(rm_status_code(0x33), StatusCode::kInvalidArgument);
  EXPECT_EQ(rm_status_code(0x0f), StatusCode::kUnavailable);
  EXPECT_EQ(rm_status_code(0xffff), StatusCode::kInternal);
}

TEST(NvRmAbi, SmArchNames) {
  EXPECT_EQ(sm_arch_name(0x806), "sm_86");
  EXPECT_EQ(sm_arch_name(0x809), "sm_89");
  EXPECT_EQ(sm_arch_name(0x900), "sm_90");
  EXPECT_EQ(sm_arch_name(0xa00), "sm_100");
  EXPECT_EQ(sm_arch_name(0xa04), "sm_120");
}

// ---- bring-up ------------------------------------------------------------------------------

TEST(NvRmBringUp, HopperH200ByDefault) {
  Rig rig;
  Up up = bring_up_or_die(rig);
  ASSERT_NE(up.gpu, nullptr);
  const BringUp& b = up.gpu->info();
  EXPECT_EQ(up.iface->driver_version(), "580.159.03");
  EXPECT_EQ(up.iface->branch(), RmBranch::k580);
  EXPECT_EQ(b.classes.generation, Generation::kHopper);
  EXPECT_EQ(b.classes.compute, 0xcbc0u);
  EXPECT_EQ(b.classes.copy, 0xc8b5u);
  EXPECT_EQ(b.classes.gpfifo, 0xc86fu);
  EXPECT_EQ(b.classes.usermode, 0xc661u);
  EXPECT_EQ(b.gr.gpcs, 8u);
  EXPECT_EQ(b.gr.tpc_per_gpc, 9u);
  EXPECT_EQ(b.gr.sm_per_tpc, 2u);
  EXPECT_EQ(b.gr.tpcs, 66u);
  EXPECT_EQ(b.gr.sms, 132u);
  EXPECT_EQ(b.gr.max_warps_per_sm, 64u);
  EXPECT_EQ(b.gr.sm_version, 0x900u);
  EXPECT_EQ(b.arch, "sm_90");
  EXPECT_EQ(b.vram_bytes, 143771ull << 20);
  EXPECT_EQ(b.heap_bytes, 143259ull << 20);
  EXPECT_EQ(b.name, "NVIDIA H200");
  EXPECT_EQ(b.card.minor_number, 0u);
  EXPECT_EQ(b.card.pci.vendor_id, 0x10de);
  EXPECT_EQ(b.uuid.uuid[0], 0xb0);
  EXPECT_EQ(b.uuid.uuid[15], 0xbf);
  EXPECT_NE(b.compute.work_submit_token, b.copy.work_submit_token);
  EXPECT_EQ(b.compute.engine_class, 0xcbc0u);
  EXPECT_EQ(b.copy.engine_class, 0xc8b5u);
  EXPECT_EQ(b.compute.entries, 0x10000u);
  EXPECT_EQ(b.compute.userd_va, b.compute.ring_va + 0x10000 * 8);
  EXPECT_EQ(b.copy.ring_va, b.compute.ring_va + (1 << 20));
  EXPECT_NE(b.debugger, 0u);
}

TEST(NvRmBringUp, EscapeSequenceIsTheDocumentedOrder) {
  Rig rig;
  Up up = bring_up_or_die(rig);
  ASSERT_NE(up.gpu, nullptr);
  std::vector<std::string> got;
  for (const Call& c : calls(rig.os.transcript())) got.push_back(c.brief());
  const std::vector<std::string> want = {
      // RmIface::open
      "NV_ESC_CHECK_VERSION_STR", "NV_ESC_RM_ALLOC 0x41", "UVM_INITIALIZE", "UVM_MM_INITIALIZE",
      "NV_ESC_CARD_INFO",
      // RmGpu::open
      "NV_ESC_REGISTER_FD", "NV_ESC_RM_CONTROL 0x205",
      // device, subdevice, classes, virtual memory
      "NV_ESC_RM_ALLOC 0x80", "NV_ESC_RM_ALLOC 0x2080", "NV_ESC_RM_CONTROL 0x20801701",
      "NV_ESC_RM_CONTROL 0x800292", "NV_ESC_RM_ALLOC 0x70",
      // usermode page
      "NV_ESC_RM_ALLOC 0xc661", "NV_ESC_REGISTER_FD", "NV_ESC_RM_MAP_MEMORY",
      // perf boost, VA space, UVM
      "NV_ESC_RM_CONTROL 0x2080200a", "NV_ESC_RM_ALLOC 0x90f1", "NV_ESC_RM_CONTROL 0x2080014a",
      "UVM_REGISTER_GPU", "UVM_REGISTER_GPU_VASPACE",
      // GR, FB, name
      "NV_ESC_RM_CONTROL 0x20801201", "NV_ESC_RM_CONTROL 0x20801303",
      "NV_ESC_RM_CONTROL 0x20800110",
      // channel group, GPFIFO area (video, CPU-mapped), ctxshare
      "NV_ESC_RM_ALLOC 0xa06c", "NV_ESC_RM_ALLOC 0x40", "NV_ESC_REGISTER_FD",
      "NV_ESC_RM_MAP_MEMORY", "UVM_CREATE_EXTERNAL_RANGE", "NV_ESC_RM_MAP_MEMORY_DMA",
      "UVM_MAP_EXTERNAL_ALLOCATION", "NV_ESC_RM_ALLOC 0x9067",
      // compute channel: error notifier (+ its CPU mapping), channel, compute object,
      // debugger (+ SET_EXCEPTION_MASK), token, UVM
      "NV_ESC_RM_ALLOC 0x3e", "UVM_CREATE_EXTERNAL_RANGE", "NV_ESC_RM_MAP_MEMORY_DMA",
      "UVM_MAP_EXTERNAL_ALLOCATION", "NV_ESC_RM_MAP_MEMORY", "NV_ESC_RM_ALLOC 0xc86f",
      "NV_ESC_RM_ALLOC 0xcbc0", "NV_ESC_RM_ALLOC 0x83de", "NV_ESC_RM_CONTROL 0x83de0309",
      "NV_ESC_RM_CONTROL 0xc36f0108", "UVM_REGISTER_CHANNEL",
      // copy channel
      "NV_ESC_RM_ALLOC 0x3e", "UVM_CREATE_EXTERNAL_RANGE", "NV_ESC_RM_MAP_MEMORY_DMA",
      "UVM_MAP_EXTERNAL_ALLOCATION", "NV_ESC_RM_MAP_MEMORY", "NV_ESC_RM_ALLOC 0xc86f",
      "NV_ESC_RM_ALLOC 0xc8b5", "NV_ESC_RM_CONTROL 0xc36f0108", "UVM_REGISTER_CHANNEL",
      // schedule
      "NV_ESC_RM_CONTROL 0xa06c0101"};
  EXPECT_THAT(got, ElementsAreArray(want));
  for (const TranscriptEntry& e : rig.os.transcript().ioctls()) {
    EXPECT_EQ(e.error, "") << e.what;
    EXPECT_EQ(e.rm_status, kNvOk) << e.what;
  }
}

TEST(NvRmBringUp, EveryObjectHangsUnderTheRightParent) {
  Rig rig;
  Up up = bring_up_or_die(rig);
  ASSERT_NE(up.gpu, nullptr);
  std::map<uint32_t, uint32_t> class_of;             // handle -> class
  std::vector<std::pair<uint32_t, uint32_t>> edges;  // (class, parent class)
  for (const Call& c : calls(rig.os.transcript())) {
    if (c.name != "NV_ESC_RM_ALLOC") continue;
    ASSERT_FALSE(class_of.contains(c.handle)) << "handle " << c.handle << " returned twice";
    if (c.id != kNv01RootClient) {
      ASSERT_TRUE(class_of.contains(c.parent)) << "parent " << c.parent << " unknown";
      edges.emplace_back(c.id, class_of[c.parent]);
    }
    class_of[c.handle] = c.id;
  }
  const std::vector<std::pair<uint32_t, uint32_t>> want = {
      {0x80, 0x41},     {0x2080, 0x80}, {0x70, 0x80},     {0xc661, 0x2080}, {0x90f1, 0x80},
      {0xa06c, 0x80},   {0x40, 0x80},   {0x9067, 0xa06c}, {0x3e, 0x80},     {0xc86f, 0xa06c},
      {0xcbc0, 0xc86f}, {0x83de, 0x80}, {0x3e, 0x80},     {0xc86f, 0xa06c}, {0xc8b5, 0xc86f}};
  EXPECT_THAT(edges, ElementsAreArray(want));
  const BringUp& b = up.gpu->info();
  EXPECT_EQ(class_of[b.device], 0x80u);
  EXPECT_EQ(class_of[b.subdevice], 0x2080u);
  EXPECT_EQ(class_of[b.vaspace], 0x90f1u);
  EXPECT_EQ(class_of[b.channel_group], 0xa06cu);
  EXPECT_EQ(class_of[b.compute.handle], 0xc86fu);
  EXPECT_EQ(class_of[b.copy.engine_object], 0xc8b5u);
  EXPECT_EQ(class_of[b.gpfifo_area.handle], 0x40u);
}

struct GenerationCase {
  const char* name;
  FakeNvGpuConfig gpu;
  uint32_t compute, copy, gpfifo, usermode;
  uint32_t sms;
  const char* arch;
};

FakeNvGpuConfig with_arch(Generation g, uint32_t arch, uint32_t impl) {
  FakeNvGpuConfig c = FakeNvGpuConfig::preset(g);
  c.architecture = arch;
  c.implementation = impl;
  return c;
}

void PrintTo(const GenerationCase& c, std::ostream* os) { *os << c.name; }

class NvRmGenerations : public ::testing::TestWithParam<GenerationCase> {};

TEST_P(NvRmGenerations, ClassesAndSmsFromTheGpu) {
  const GenerationCase& g = GetParam();
  Rig rig(with_gpu(g.gpu));
  Up up = bring_up_or_die(rig);
  ASSERT_NE(up.gpu, nullptr);
  const BringUp& b = up.gpu->info();
  EXPECT_EQ(b.classes.compute, g.compute);
  EXPECT_EQ(b.classes.copy, g.copy);
  EXPECT_EQ(b.classes.gpfifo, g.gpfifo);
  EXPECT_EQ(b.classes.usermode, g.usermode);
  EXPECT_EQ(b.compute.engine_class, g.compute);
  EXPECT_EQ(b.copy.engine_class, g.copy);
  EXPECT_EQ(b.gr.sms, g.sms);
  EXPECT_EQ(b.arch, g.arch);
  EXPECT_EQ(b.name, g.gpu.name);
}

INSTANTIATE_TEST_SUITE_P(
    ,
    NvRmGenerations,
    ::testing::Values(GenerationCase{"AmpereGA102", FakeNvGpuConfig::preset(Generation::kAmpere),
                                     0xc7c0, 0xc7b5, 0xc56f, 0xc461, 82, "sm_86"},
                      GenerationCase{"AmpereGA100", with_arch(Generation::kAmpere, 0x170, 0),
                                     0xc6c0, 0xc6b5, 0xc56f, 0xc461, 82, "sm_86"},
                      GenerationCase{"AdaAD102", FakeNvGpuConfig::preset(Generation::kAda), 0xc9c0,
                                     0xc7b5, 0xc56f, 0xc461, 128, "sm_89"},
                      GenerationCase{"HopperGH100", FakeNvGpuConfig::preset(Generation::kHopper),
                                     0xcbc0, 0xc8b5, 0xc86f, 0xc661, 132, "sm_90"},
                      GenerationCase{"BlackwellGB100",
                                     FakeNvGpuConfig::preset(Generation::kBlackwell), 0xcdc0,
                                     0xc9b5, 0xc96f, 0xc661, 148, "sm_100"},
                      GenerationCase{"BlackwellGB202", with_arch(Generation::kBlackwell, 0x1b0, 2),
                                     0xcec0, 0xcab5, 0xc96f, 0xc661, 148, "sm_100"}),
    [](const auto& info) { return std::string(info.param.name); });

void PrintTo(const BranchSizes& b, std::ostream* os) { *os << rm_branch_number(b.branch); }

class NvRmBranches : public ::testing::TestWithParam<BranchSizes> {};

// The fake refuses any request or parameter size that is not its branch's, so a bring-up that
// succeeds used the right layout for every struct; the transcript shows the sizes that differ.
TEST_P(NvRmBranches, BringUpUsesTheBranchLayouts) {
  const BranchSizes& s = GetParam();
  std::string version = std::to_string(rm_branch_number(s.branch)) + ".10.01";
  Rig rig(with_gpu(FakeNvGpuConfig{}, version));
  Up up = bring_up_or_die(rig);
  ASSERT_NE(up.gpu, nullptr);
  EXPECT_EQ(up.iface->branch(), s.branch);
  auto a = up.gpu->alloc_memory({4096, RmMemoryKind::kVideo, true, false});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(up.gpu->free_memory(*a).ok());
  std::map<std::string, size_t> arg, params;
  for (const Call& c : calls(rig.os.transcript())) {
    arg[c.brief()] = c.arg_bytes;
    params[c.brief()] = c.params_bytes;
  }
  EXPECT_EQ(arg["NV_ESC_RM_MAP_MEMORY_DMA"], s.nvos46);
  EXPECT_EQ(params["NV_ESC_RM_ALLOC 0x90f1"], s.vaspace);
  EXPECT_EQ(params["NV_ESC_RM_ALLOC 0xc86f"], s.channel);
  EXPECT_EQ(params["NV_ESC_RM_CONTROL 0x800292"], s.classlist);
  EXPECT_EQ(params["NV_ESC_RM_CONTROL 0x20801303"], s.fb_info);
  EXPECT_EQ(params["NV_ESC_RM_CONTROL 0x20800110"], s.name);
  EXPECT_EQ(params["NV_ESC_RM_CONTROL 0xa06c0101"], s.schedule);
  EXPECT_EQ(arg["UVM_FREE"], s.uvm_free);
  EXPECT_EQ(up.gpu->info().name, "NVIDIA H200");
  EXPECT_EQ(up.gpu->info().vram_bytes, 143771ull << 20);
  EXPECT_TRUE(rig.fake.log().empty()) << rig.fake.log().front();
}

INSTANTIATE_TEST_SUITE_P(, NvRmBranches, ::testing::ValuesIn(kBranchSizes), [](const auto& info) {
  return "Driver" + std::to_string(rm_branch_number(info.param.branch));
});

TEST(NvRmBringUp, TwoGpusShareTheConnection) {
  FakeNvConfig config;
  config.gpus = {FakeNvGpuConfig{}, FakeNvGpuConfig::preset(Generation::kAda)};
  Rig rig(config);
  auto iface = rig.open();
  ASSERT_TRUE(iface.ok()) << iface.status();
  ASSERT_EQ((*iface)->cards().size(), 2u);
  auto g0 = bring_up(**iface, 0);
  auto g1 = bring_up(**iface, 1);
  ASSERT_TRUE(g0.ok()) << g0.status();
  ASSERT_TRUE(g1.ok()) << g1.status();
  EXPECT_EQ((*g1)->info().card.minor_number, 1u);
  EXPECT_EQ((*g1)->info().classes.compute, kAdaComputeA);
  EXPECT_NE(std::memcmp((*g0)->info().uuid.uuid, (*g1)->info().uuid.uuid, 16), 0);
  EXPECT_NE((*g0)->info().gpfifo_area.va, (*g1)->info().gpfifo_area.va);
  EXPECT_EQ(rig.fake.channels().size(), 4u);
  auto missing = bring_up(**iface, 2);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "no NVIDIA GPU 2: the driver lists 2");
}

// ---- memory --------------------------------------------------------------------------------

TEST(NvRmMemory, CpuVisibleVideoMemoryHasGpuVaEqualCpuVa) {
  Rig rig;
  Up up = bring_up_or_die(rig);
  ASSERT_NE(up.gpu, nullptr);
  auto a = up.gpu->alloc_memory({3 << 20, RmMemoryKind::kVideo, true, false});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->cpu(), reinterpret_cast<void*>(a->va));
  EXPECT_EQ(a->size, 3u << 20);
  EXPECT_EQ(a->page_size, 4096u);
  EXPECT_TRUE(up.iface->low_va().contains(a->va, a->size));
  auto* cpu = static_cast<uint32_t*>(a->cpu());
  for (uint32_t i = 0; i < 1024; ++i) cpu[i * 768] = 0xc0de0000 + i;  // every 3 KiB
  for (uint32_t i = 0; i < 1024; ++i) {
    std::optional<uint8_t*> gpu = rig.fake.resolve(a->va + i * 3072, 4);
    ASSERT_TRUE(gpu.has_value()) << i;
    uint32_t seen;
    std::memcpy(&seen, *gpu, 4);
    ASSERT_EQ(seen, 0xc0de0000 + i) << i;
  }
  // And the other way: what the GPU writes at the VA, the CPU reads there.
  **rig.fake.resolve(a->va + 8, 1) = 0x5a;
  EXPECT_EQ(reinterpret_cast<uint8_t*>(a->cpu())[8], 0x5a);
  EXPECT_FALSE(rig.fake.resolve(a->va + a->size - 2, 4).has_value());  // runs off the end
  bool listed = false;
  for (const mock::FakeNvAllocation& f : rig.fake.allocations()) {
    if (f.handle != a->handle) continue;
    listed = true;
    EXPECT_EQ(f.cls, kNv01MemoryLocalUser);
    EXPECT_EQ(f.gpu_va, a->va);
    EXPECT_EQ(f.cpu_va, a->va);
  }
  EXPECT_TRUE(listed);
  EXPECT_TRUE(up.gpu->free_memory(*a).ok());
}

TEST(NvRmMemory, HostMemoryIsTheProcessPagesAtTheGpuVa) {
  Rig rig;
  Up up = bring_up_or_die(rig);
  ASSERT_NE(up.gpu, nullptr);
  auto a = up.gpu->alloc_memory({100, RmMemoryKind::kHost});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->size, 4096u);
  ASSERT_NE(a->cpu(), nullptr);
  std::strcpy(static_cast<char*>(a->cpu()), "signal");
  std::optional<uint8_t*> gpu = rig.fake.resolve(a->va, 7);
  ASSERT_TRUE(gpu.has_value());
  EXPECT_EQ(static_cast<void*>(*gpu), a->cpu());
  EXPECT_STREQ(reinterpret_cast<char*>(*gpu), "signal");
  EXPECT_GE(a->handle, 0x00b00001u);  // client-chosen (NV_ESC_RM_ALLOC_MEMORY)
  EXPECT_TRUE(up.gpu->free_memory(*a).ok());
}

TEST(NvRmMemory, GpuOnlyMemoryHasNoCpuMapping) {
  Rig rig;
  Up up = bring_up_or_die(rig);
  ASSERT_NE(up.gpu, nullptr);
  auto a = up.gpu->alloc_memory({16 << 20, RmMemoryKind::kVideo});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->cpu(), nullptr);
  EXPECT_EQ(a->page_size, 2u << 20);  // >= 8 MiB of video memory: 2 MiB pages
  EXPECT_EQ(a->va % (2 << 20), 0u);
  EXPECT_TRUE(up.iface->high_va().contains(a->va, a->size));
  std::optional<uint8_t*> gpu = rig.fake.resolve(a->va + (15 << 20), 1 << 20);
  ASSERT_TRUE(gpu.has_value());
  EXPECT_NE(static_cast<void*>(*gpu), reinterpret_cast<void*>(a->va + (15 << 20)));
  EXPECT_TRUE(up.gpu->free_memory(*a).ok());
}

TEST(NvRmMemory, FreeUnmapsFromGpuUvmAndCpu) {
  Rig rig;
  Up up = bring_up_or_die(rig);
  ASSERT_NE(up.gpu, nullptr);
  auto a = up.gpu->alloc_memory({8192, RmMemoryKind::kSystem, true, false});
  ASSERT_TRUE(a.ok()) << a.status();
  std::memset(a->cpu(), 0xab, 8192);
  ASSERT_TRUE(rig.fake.resolve(a->va, 8192).has_value());
  rig.os.clear();
  ASSERT_TRUE(up.gpu->free_memory(*a).ok());
  EXPECT_FALSE(rig.fake.resolve(a->va, 1).has_value());
  for (const mock::FakeNvAllocation& f : rig.fake.allocations()) EXPECT_NE(f.handle, a->handle);
  // UVM_FREE, then the VA reserved again (PROT_NONE over the mapping), then NV_ESC_RM_FREE.
  Transcript t = rig.os.transcript();
  ASSERT_EQ(t.entries.size(), 3u);
  EXPECT_EQ(t.entries[0].what, "UVM_FREE of [" + hex(a->va) + ", +0x2000)");
  EXPECT_EQ(t.entries[1].kind, TranscriptEntry::Kind::kMmap);
  EXPECT_EQ(t.entries[1].addr, a->va);
  EXPECT_EQ(t.entries[1].prot, PROT_NONE);
  EXPECT_NE(t.entries[1].flags & MAP_FIXED, 0);
  EXPECT_EQ(t.entries[2].what, "NV_ESC_RM_FREE of handle " + hex(a->handle) + " under handle " +
                                   hex(up.gpu->info().device));
  // The VA is handed out again, now backed by fresh memory.
  auto b = up.gpu->alloc_memory({8192, RmMemoryKind::kSystem, true, false});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->va, a->va);
  EXPECT_EQ(static_cast<uint8_t*>(b->cpu())[0], 0);
  EXPECT_TRUE(up.gpu->free_memory(*b).ok());
}

TEST(NvRmMemory, OutOfVideoMemoryNamesTheCallAndLeavesNothing) {
  FakeNvGpuConfig small;
  small.vram_bytes = 64 << 20;
  Rig rig(with_gpu(small));
  Up up = bring_up_or_die(rig);
  ASSERT_NE(up.gpu, nullptr);
  size_t before = rig.fake.allocations().size();
  auto a = up.gpu->alloc_memory({128 << 20, RmMemoryKind::kVideo, true, false});
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(a.status().message(), "NV_ESC_RM_ALLOC of NV01_MEMORY_LOCAL_USER (0x40) under handle " +
                                      hex(up.gpu->info().device) +
                                      ": NV_ERR_NO_MEMORY (0x51): out of memory");
  EXPECT_EQ(rig.fake.allocations().size(), before);
  // The VA went back: the next allocation that fits gets the same address as before.
  auto b = up.gpu->alloc_memory({1 << 20, RmMemoryKind::kVideo, true, false});
  auto c = up.gpu->alloc_memory({1 << 20, RmMemoryKind::kVideo, true, false});
  ASSERT_TRUE(b.ok() && c.ok());
  EXPECT_EQ(c->va, b->va + (1 << 20));
  EXPECT_TRUE(up.gpu->free_memory(*c).ok());
  EXPECT_TRUE(up.gpu->free_memory(*b).ok());
}

TEST(NvRmMemory, AGpuMappingFailureUndoesTheAllocation) {
  Rig rig;
  Up up = bring_up_or_die(rig);
  ASSERT_NE(up.gpu, nullptr);
  size_t before = rig.fake.allocations().size();
  rig.fake.fail_uvm(kUvmMapExternalAllocation, rm_status::NV_ERR_INVALID_DEVICE);
  auto a = up.gpu->alloc_memory({4096, RmMemoryKind::kVideo, true, false});
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(a.status().message(), HasSubstr("UVM_MAP_EXTERNAL_ALLOCATION of handle "));
  EXPECT_THAT(a.status().message(), HasSubstr(": NV_ERR_INVALID_DEVICE (0x26): invalid device"));
  EXPECT_EQ(rig.fake.allocations().size(), before);
  auto b = up.gpu->alloc_memory({4096, RmMemoryKind::kVideo, true, false});
  ASSERT_TRUE(b.ok()) << b.status();  // the UVM range was freed too, or this would overlap
  EXPECT_TRUE(up.gpu->free_memory(*b).ok());
}

}  // namespace
}  // namespace baregrad::nv
