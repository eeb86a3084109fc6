// The AMD KFD kernel interface (drivers/amd/kfd_abi, topology, iface_kfd*) against the uapi
// header's numbers and the fake KFD (drivers/mock/amd/fake_kfd).
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/format.h"
#include "drivers/amd/iface_kfd.h"
#include "drivers/amd/kfd_abi.h"
#include "drivers/amd/topology.h"
#include "drivers/mock/amd/fake_kfd.h"

namespace baregrad::amd {
namespace {

using mock::FakeAmdGpuConfig;
using mock::FakeKfd;
using mock::FakeKfdConfig;
using mock::FakeKfdCounts;
using ::testing::HasSubstr;

// ---- ABI: literals written by hand from include/uapi/linux/kfd_ioctl.h ---------------------

TEST(KfdAbi, RequestNumbersMatchTheUapiHeader) {
  // _IOC: dir 31:30 (_IOR 2, _IOW 1, _IOWR 3), size 29:16, 'K' = 0x4b in 15:8, nr 7:0.
  EXPECT_EQ(kAmdkfdIocGetVersion, 0x80084B01u);              // _IOR(0x01, 8-byte struct)
  EXPECT_EQ(kAmdkfdIocCreateQueue, 0xC0584B02u);             // _IOWR(0x02, 88) (pre-1.17 size)
  EXPECT_EQ(kAmdkfdIocDestroyQueue, 0xC0084B03u);            // _IOWR(0x03, 8)
  EXPECT_EQ(kAmdkfdIocCreateEvent, 0xC0204B08u);             // _IOWR(0x08, 32)
  EXPECT_EQ(kAmdkfdIocDestroyEvent, 0x40084B09u);            // _IOW(0x09, 8)
  EXPECT_EQ(kAmdkfdIocSetEvent, 0x40084B0Au);                // _IOW(0x0A, 8)
  EXPECT_EQ(kAmdkfdIocWaitEvents, 0xC0184B0Cu);              // _IOWR(0x0C, 24)
  EXPECT_EQ(kAmdkfdIocGetProcessAperturesNew, 0xC0104B14u);  // _IOWR(0x14, 16)
  EXPECT_EQ(kAmdkfdIocAcquireVm, 0x40084B15u);               // _IOW(0x15, 8)
  EXPECT_EQ(kAmdkfdIocAllocMemoryOfGpu, 0xC0284B16u);        // _IOWR(0x16, 40)
  EXPECT_EQ(kAmdkfdIocFreeMemoryOfGpu, 0x40084B17u);         // _IOW(0x17, 8)
  EXPECT_EQ(kAmdkfdIocMapMemoryToGpu, 0xC0184B18u);          // _IOWR(0x18, 24)
  EXPECT_EQ(kAmdkfdIocUnmapMemoryFromGpu, 0xC0184B19u);      // _IOWR(0x19, 24)
  EXPECT_EQ(kAmdkfdIocRuntimeEnable, 0xC0104B25u);           // _IOWR(0x25, 16)
  EXPECT_EQ(kfd_ioctl_name(0x16), "AMDKFD_IOC_ALLOC_MEMORY_OF_GPU");
  EXPECT_EQ(kfd_ioctl_name(0x1f), "AMDKFD ioctl 0x1f");
}

TEST(KfdAbi, StructSizesAndFlagsMatchTheUapiHeader) {
  // kfd_event_data: a 32-byte union (memory exception data), the ext pointer, id, pad.
  EXPECT_EQ(sizeof(KfdEventData), 48u);
  EXPECT_EQ(sizeof(KfdHsaMemoryExceptionData), 32u);
  EXPECT_EQ(sizeof(KfdIoctlCreateQueueArgs), 4 * 8 + 6 * 4 + 3 * 8 + 2 * 4u);
  EXPECT_EQ(kKfdIocAllocMemFlagsUncached, 0x02000000u);  // (1 << 25)
  EXPECT_EQ(kKfdIocAllocMemFlagsMmioRemap, 0x10u);       // (1 << 4)
  // tinygrad's flags: WRITABLE|EXECUTABLE|NO_SUBSTITUTE, + COHERENT|UNCACHED|GTT when uncached,
  // + PUBLIC when the CPU maps it.
  EXPECT_EQ(kfd_alloc_flags(KfdMemKind::kGtt, true), 0xF6000002u);
  EXPECT_EQ(kfd_alloc_flags(KfdMemKind::kVram, false), 0xD0000001u);
  EXPECT_EQ(kfd_alloc_flags(KfdMemKind::kVram, true), 0xF0000001u);
  EXPECT_EQ(kfd_alloc_flags(KfdMemKind::kUserptr, false), 0xF0000004u);
}

// ---- topology --------------------------------------------------------------------------------

// A gfx1100 (RX 7900 XTX) node as kfd_topology.c prints it.
constexpr const char* kGfx1100Properties =
    "cpu_cores_count 0\nsimd_count 192\nmem_banks_count 1\ncaches_count 206\nio_links_count 1\n"
    "p2p_links_count 0\ncpu_core_id_base 0\nsimd_id_base 2147487744\nmax_waves_per_simd 16\n"
    "lds_size_in_kb 64\ngds_size_in_kb 0\nnum_gws 64\nwave_front_size 32\narray_count 12\n"
    "simd_arrays_per_engine 2\ncu_per_simd_array 8\nsimd_per_cu 2\nmax_slots_scratch_cu 32\n"
    "gfx_target_version 110000\nvendor_id 4098\ndevice_id 29772\nlocation_id 768\ndomain 0\n"
    "drm_render_minor 128\nhive_id 0\nnum_sdma_engines 2\nnum_sdma_xgmi_engines 0\n"
    "num_sdma_queues_per_engine 6\nnum_cp_queues 8\nmax_engine_clk_fcompute 2482\n"
    "local_mem_size 0\nfw_version 2232\ncapability 671588992\ndebug_prop 1495\n"
    "sdma_fw_version 21\nunique_id 16329479380519076066\nnum_xcc 1\n"
    "max_engine_clk_ccompute 5084\n";

TEST(KfdTopology, ParsesANodePropertiesFile) {
  auto p = parse_kfd_node_properties(kGfx1100Properties, "nodes/1/properties");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->gfx_target_version, 110000u);
  EXPECT_EQ(p->drm_render_minor, 128u);
  EXPECT_EQ(p->simd_count, 192u);
  EXPECT_EQ(p->array_count, 12u);
  EXPECT_EQ(p->simd_arrays_per_engine, 2u);
  EXPECT_EQ(p->cu_per_simd_array, 8u);
  EXPECT_EQ(p->simd_per_cu, 2u);
  EXPECT_EQ(p->max_waves_per_simd, 16u);
  EXPECT_EQ(p->lds_size_in_kb, 64u);
  EXPECT_EQ(p->wave_front_size, 32u);
  EXPECT_EQ(p->num_xcc, 1u);
  EXPECT_EQ(p->max_slots_scratch_cu, 32u);
  EXPECT_EQ(p->vendor_id, 0x1002u);
  EXPECT_EQ(p->device_id, 0x744cu);
  EXPECT_EQ(gfx_arch_name(p->gfx_target_version), "gfx1100");
  EXPECT_EQ(gfx_arch_name(90010), "gfx90a");
  EXPECT_EQ(gfx_arch_name(90402), "gfx942");
  EXPECT_EQ(gfx_arch_name(120001), "gfx1201");
  EXPECT_EQ(*parse_kfd_gpu_id("48312\n", "gpu_id"), 48312u);
  EXPECT_EQ(*parse_kfd_mem_bank_bytes("heap_type 1\nsize_in_bytes 25753026560\nflags 0\n", "b"),
            25753026560u);
  EXPECT_EQ(*parse_kfd_mem_bank_bytes("heap_type 0\nsize_in_bytes 4096\n", "b"), 0u);
}

TEST(KfdTopology, ErrorsNameThePathAndTheProblem) {
  auto bad = parse_kfd_properties("simd_count 4\nwave_front_size thirty-two\n", "P");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "P: line 2 'wave_front_size thirty-two' is not '<name> <decimal>'");
  auto missing = parse_kfd_node_properties("simd_count 4\n", "P");
  EXPECT_EQ(missing.status().message(), "P: no 'gfx_target_version' property");
  EXPECT_EQ(parse_kfd_gpu_id("gpu\n", "G").status().message(), "G: 'gpu' is not a decimal gpu_id");
}

TEST(KfdTopology, ReadsTheFakesNodesSkippingTheCpu) {
  FakeKfd fake(FakeKfdConfig{1, 17, {FakeAmdGpuConfig::preset("gfx942"), FakeAmdGpuConfig{}}});
  auto nodes = read_kfd_topology(fake);
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].node, 1u);
  EXPECT_EQ((*nodes)[0].gpu_id, fake.gpu_id(0));
  EXPECT_EQ((*nodes)[0].props.num_xcc, 8u);
  EXPECT_EQ((*nodes)[0].props.local_mem_size, 192ull << 30);
  EXPECT_EQ((*nodes)[1].props.drm_render_minor, 129u);
}

// ---- bring-up and its errors -------------------------------------------------------------------

struct KfdRig {
  explicit KfdRig(FakeKfdConfig c = {}) : fake(std::make_shared<FakeKfd>(std::move(c))) {}
  Result<std::unique_ptr<KfdIface>> open(int index = 0) { return KfdIface::open(fake, index); }
  std::shared_ptr<FakeKfd> fake;
};

FakeKfdConfig with(std::vector<FakeAmdGpuConfig> gpus, uint32_t minor = 17) {
  return FakeKfdConfig{1, minor, std::move(gpus)};
}

class KfdPresets : public ::testing::TestWithParam<const char*> {};

TEST_P(KfdPresets, BringsUpTheGpu) {
  FakeAmdGpuConfig cfg = FakeAmdGpuConfig::preset(GetParam());
  KfdRig rig(with({cfg}));
  auto kfd = rig.open();
  ASSERT_TRUE(kfd.ok()) << kfd.status();
  EXPECT_EQ((*kfd)->gpu_id(), rig.fake->gpu_id(0));
  EXPECT_EQ((*kfd)->version(), (KfdVersion{1, 17}));
  EXPECT_EQ(gfx_arch_name((*kfd)->node().props.gfx_target_version), GetParam());
  EXPECT_EQ((*kfd)->node().props.simd_count, cfg.simd_count);
  EXPECT_EQ((*kfd)->node().props.wave_front_size, cfg.wave_front_size);
  EXPECT_EQ(rig.fake->runtime_enable_mode(), 0u);  // RUNTIME_ENABLE with mode_mask 0
  EXPECT_EQ(rig.fake->live().fds, 2);              // /dev/kfd and the render node
  EXPECT_TRUE(rig.fake->log().empty()) << rig.fake->log()[0];
  kfd->reset();
  EXPECT_EQ(rig.fake->live(), FakeKfdCounts{.fds = 1}) << "the render node, pinned at ACQUIRE_VM";
}

INSTANTIATE_TEST_SUITE_P(Targets,
                         KfdPresets,
                         ::testing::Values("gfx90a", "gfx942", "gfx1100", "gfx1201"));

TEST(KfdOpen, NoDevKfd) {
  KfdRig rig;
  rig.fake->set_missing("/dev/kfd");
  auto kfd = rig.open();
  EXPECT_EQ(kfd.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(kfd.status().message(),
            "no AMD GPU: /dev/kfd does not exist (load the amdgpu kernel module: modprobe amdgpu)");
}

TEST(KfdOpen, PermissionDeniedNamesTheGroups) {
  for (const char* path : {"/dev/kfd", "/dev/dri/renderD128"}) {
    KfdRig rig;
    rig.fake->set_open_errno(path, EACCES);
    auto kfd = rig.open();
    EXPECT_EQ(kfd.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(kfd.status().message(),
              std::string("cannot open ") + path +
                  ": permission denied (add the user to the render and video groups): open(\"" +
                  path + "\") failed: errno 13 (Permission denied)");
    EXPECT_EQ(rig.fake->live().fds, 0);
  }
}

TEST(KfdOpen, OldKfdNamesBothVersions) {
  KfdRig rig(with({FakeAmdGpuConfig{}}, 13));
  auto kfd = rig.open();
  EXPECT_EQ(kfd.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(kfd.status().message(),
            "KFD 1.13 is not supported: baregrad needs KFD 1.14 or a later 1.x "
            "(AMDKFD_IOC_RUNTIME_ENABLE; update the kernel or the amdgpu-dkms driver)");
}

TEST(KfdOpen, IndexPastTheGpusNamesHowManyThereAre) {
  KfdRig rig(with({FakeAmdGpuConfig{}, FakeAmdGpuConfig::preset("gfx942")}));
  auto second = rig.open(1);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ((*second)->where(), "AMD GPU 1 (gpu_id " + hex(rig.fake->gpu_id(1)) + ", gfx942)");
  auto kfd = rig.open(2);
  EXPECT_EQ(kfd.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(kfd.status().message(), "no AMD GPU 2: KFD lists 2 GPUs (indices 0..1)");
  KfdRig none(with({}));
  EXPECT_EQ(none.open().status().message(),
            "no AMD GPU: KFD lists no GPU node under /sys/devices/virtual/kfd/kfd/topology/nodes");
}

class KfdOpenIoctls : public ::testing::TestWithParam<const char*> {};

TEST_P(KfdOpenIoctls, AFailedIoctlIsNamedAndNothingLeaks) {
  KfdRig rig;
  rig.fake->fail_next(GetParam(), EINVAL);
  auto kfd = rig.open();
  ASSERT_FALSE(kfd.ok());
  EXPECT_THAT(kfd.status().message(), HasSubstr(std::string("ioctl ") + GetParam()));
  EXPECT_THAT(kfd.status().message(), HasSubstr("errno 22 (Invalid argument)"));
  // Only the render node stays, once opened (after GET_VERSION): KFD pins it at ACQUIRE_VM.
  bool before_render = std::string(GetParam()) == "AMDKFD_IOC_GET_VERSION";
  EXPECT_EQ(rig.fake->live(), FakeKfdCounts{.fds = before_render ? 0 : 1});
}

INSTANTIATE_TEST_SUITE_P(Bringup,
                         KfdOpenIoctls,
                         ::testing::Values("AMDKFD_IOC_GET_VERSION",
                                           "AMDKFD_IOC_ACQUIRE_VM",
                                           "AMDKFD_IOC_RUNTIME_ENABLE"));

// ---- memory ------------------------------------------------------------------------------------

struct KfdMemoryCase {
  KfdMemKind kind;
  bool cpu;
};

class KfdMemoryKinds : public ::testing::TestWithParam<KfdMemoryCase> {};

TEST_P(KfdMemoryKinds, CpuWritesAreWhatTheGpuSees) {
  KfdRig rig;
  auto kfd = rig.open();
  ASSERT_TRUE(kfd.ok()) << kfd.status();
  uint64_t bytes = GetParam().kind == KfdMemKind::kMmioRemap ? 4096 : 3 * 4096 + 100;
  auto m = (*kfd)->alloc(bytes, GetParam().kind, GetParam().cpu);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->size() % 4096, 0u);
  ASSERT_EQ(rig.fake->allocations().size(), 1u);
  EXPECT_EQ(rig.fake->allocations()[0].va, m->va());
  EXPECT_EQ(rig.fake->allocations()[0].flags, kfd_alloc_flags(GetParam().kind, GetParam().cpu));
  auto host = rig.fake->resolve(m->va() + 8, 8);
  ASSERT_TRUE(host.has_value());
  if (m->cpu() != nullptr) {
    EXPECT_EQ(m->cpu(), reinterpret_cast<void*>(m->va()));
    uint64_t v = 0x1234'5678'9abc'def0;
    std::memcpy(static_cast<uint8_t*>(m->cpu()) + 8, &v, 8);
    uint64_t seen = 0;
    std::memcpy(&seen, *host, 8);
    EXPECT_EQ(seen, v);
  }
  EXPECT_TRUE(m->free().ok());
  EXPECT_EQ(rig.fake->live().allocations, 0);
  EXPECT_FALSE(rig.fake->resolve(m->va(), 8).has_value());
}

INSTANTIATE_TEST_SUITE_P(Kinds,
                         KfdMemoryKinds,
                         ::testing::Values(KfdMemoryCase{KfdMemKind::kVram, true},
                                           KfdMemoryCase{KfdMemKind::kVram, false},
                                           KfdMemoryCase{KfdMemKind::kGtt, true},
                                           KfdMemoryCase{KfdMemKind::kUserptr, true},
                                           KfdMemoryCase{KfdMemKind::kMmioRemap, true}));

TEST(KfdMemory, DoorbellPageIsGpuMappedOnly) {
  KfdRig rig;
  auto kfd = rig.open();
  ASSERT_TRUE(kfd.ok()) << kfd.status();
  auto db = (*kfd)->alloc(kKfdDoorbellPageBytes, KfdMemKind::kDoorbell, false);
  ASSERT_TRUE(db.ok()) << db.status();
  EXPECT_EQ(db->cpu(), nullptr);
  EXPECT_TRUE(rig.fake->resolve(db->va(), 8).has_value());
  auto cpu = (*kfd)->alloc(kKfdDoorbellPageBytes, KfdMemKind::kDoorbell, true);
  EXPECT_EQ(cpu.status().code(), StatusCode::kInvalidArgument);
}

TEST(KfdMemory, ErrorsNameSizeKindAndIoctl) {
  KfdRig rig(with({FakeAmdGpuConfig::preset("gfx1201")}));  // 16 GiB of VRAM
  auto kfd = rig.open();
  ASSERT_TRUE(kfd.ok()) << kfd.status();
  std::string where = (*kfd)->where();
  auto big = (*kfd)->alloc(32ull << 30, KfdMemKind::kVram, false);
  EXPECT_EQ(big.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(big.status().message(),
              HasSubstr("KFD alloc of 0x800000000 bytes of VRAM on " + where +
                        ": ioctl AMDKFD_IOC_ALLOC_MEMORY_OF_GPU (request 0xc0284b16)"));
  rig.fake->fail_next("AMDKFD_IOC_ALLOC_MEMORY_OF_GPU", EINVAL);
  auto bar = (*kfd)->alloc(4096, KfdMemKind::kVram, true);
  EXPECT_THAT(bar.status().message(), HasSubstr("(CPU-visible)"));
  EXPECT_THAT(bar.status().message(), HasSubstr("host-visible VRAM needs resizable BAR"));
  rig.fake->fail_next("AMDKFD_IOC_MAP_MEMORY_TO_GPU", ENOMEM);
  auto map = (*kfd)->alloc(4096, KfdMemKind::kGtt, true);
  EXPECT_THAT(map.status().message(), HasSubstr("ioctl AMDKFD_IOC_MAP_MEMORY_TO_GPU"));
  EXPECT_EQ(rig.fake->live().allocations, 0);  // the failed allocation was freed
  EXPECT_EQ(rig.fake->live().cpu_mappings, 0);
}

// ---- queues ------------------------------------------------------------------------------------

struct QueueBuffers {
  KfdMemory ring, gart, eop;
  KfdQueueRequest request(KfdQueueType type) const {
    KfdQueueRequest r;
    r.type = type;
    r.ring = &ring;
    r.read_pointer_address = gart.va();
    r.write_pointer_address = gart.va() + 8;
    if (type != KfdQueueType::kSdma) r.eop = &eop;
    return r;
  }
};

QueueBuffers queue_buffers(KfdIface& kfd) {
  QueueBuffers b;
  b.ring = std::move(kfd.alloc(0x10000, KfdMemKind::kGtt, true).value());
  b.gart = std::move(kfd.alloc(0x1000, KfdMemKind::kGtt, true).value());
  b.eop = std::move(kfd.alloc(0x1000, KfdMemKind::kVram, false).value());
  return b;
}

TEST(KfdQueue, CreateRingDoorbellDestroy) {
  KfdRig rig;
  auto kfd = rig.open();
  ASSERT_TRUE(kfd.ok()) << kfd.status();
  QueueBuffers b = queue_buffers(**kfd);
  auto compute = (*kfd)->create_queue(b.request(KfdQueueType::kCompute));
  ASSERT_TRUE(compute.ok()) << compute.status();
  auto sdma = (*kfd)->create_queue(b.request(KfdQueueType::kSdma));
  ASSERT_TRUE(sdma.ok()) << sdma.status();
  auto queues = rig.fake->queues();
  ASSERT_EQ(queues.size(), 2u);
  EXPECT_EQ(queues[0].type, kKfdIocQueueTypeCompute);
  EXPECT_EQ(queues[0].ring_va, b.ring.va());
  EXPECT_EQ(queues[0].ring_size, 0x10000u);
  EXPECT_EQ(queues[0].write_pointer_address, b.gart.va() + 8);
  EXPECT_EQ(queues[0].eop_buffer_address, b.eop.va());
  EXPECT_EQ(queues[0].queue_percentage, 100u);
  EXPECT_EQ(queues[1].type, kKfdIocQueueTypeSdma);
  // One doorbell page (the base of both offsets), one 8-byte slot each.
  EXPECT_EQ(compute->doorbell_offset() & ~0x1fffull, sdma->doorbell_offset() & ~0x1fffull);
  EXPECT_NE(compute->doorbell_address(), sdma->doorbell_address());
  std::vector<std::pair<uint32_t, uint64_t>> rung;
  rig.fake->on_doorbell(
      [&](const mock::FakeKfdQueue& q, uint64_t v) { rung.emplace_back(q.id, v); });
  compute->doorbell().ring(5);
  sdma->doorbell().ring(0x40);
  rig.fake->progress();
  EXPECT_EQ(rung,
            (std::vector<std::pair<uint32_t, uint64_t>>{{compute->id(), 5}, {sdma->id(), 0x40}}));
  EXPECT_EQ(rig.fake->doorbell_writes(compute->id()), std::vector<uint64_t>{5});
  EXPECT_TRUE(compute->destroy().ok());
  EXPECT_EQ(rig.fake->live().queues, 1);
}

TEST(KfdQueue, RefusalsNameTheQueueAndTheIoctl) {
  KfdRig rig;
  auto kfd = rig.open();
  ASSERT_TRUE(kfd.ok()) << kfd.status();
  QueueBuffers b = queue_buffers(**kfd);
  auto odd_ring = (*kfd)->alloc(3 * 4096, KfdMemKind::kGtt, true);
  KfdQueueRequest r = b.request(KfdQueueType::kCompute);
  r.ring = &*odd_ring;
  EXPECT_EQ((*kfd)->create_queue(r).status().code(), StatusCode::kInvalidArgument);
  r = b.request(KfdQueueType::kComputeAql);
  r.read_pointer_address = 0x1000;  // not GPU-mapped: KFD refuses the queue
  auto q = (*kfd)->create_queue(r);
  EXPECT_THAT(q.status().message(),
              HasSubstr("KFD compute (AQL) queue on " + (*kfd)->where() +
                        ": ioctl AMDKFD_IOC_CREATE_QUEUE (request 0xc0584b02)"));
  EXPECT_THAT(rig.fake->log().back(), HasSubstr("is not GPU-mapped"));
  rig.fake->fail_next("AMDKFD_IOC_CREATE_QUEUE", ENOSPC);
  EXPECT_EQ((*kfd)->create_queue(b.request(KfdQueueType::kCompute)).status().code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(rig.fake->live().queues, 0);
}

// ---- events ------------------------------------------------------------------------------------

// KFD keeps a process's render-node file (EBUSY to ACQUIRE_VM from another) and its event page
// (EINVAL to a second, EPERM to freeing it): a GPU reopened in the same process, and a second
// GPU, reuse both; the second GPU maps the page into its VM.
TEST(KfdEvents, AReopenedGpuAndASecondGpuReuseTheProcesssRenderNodeAndEventPage) {
  KfdRig rig(with({FakeAmdGpuConfig{}, FakeAmdGpuConfig::preset("gfx942")}));
  uint64_t page = 0;
  int render = -1;
  for (int round = 0; round < 2; round++) {
    SCOPED_TRACE(round);
    auto kfd = rig.open(0);
    ASSERT_TRUE(kfd.ok()) << kfd.status();
    auto e = (*kfd)->create_event(KfdEventType::kSignal, true);
    ASSERT_TRUE(e.ok()) << e.status();
    if (round == 0) {
      page = (*kfd)->event_page_va();
      render = (*kfd)->render_fd();
    }
    EXPECT_EQ((*kfd)->event_page_va(), page);
    EXPECT_EQ((*kfd)->render_fd(), render);
    EXPECT_EQ(e->mailbox_va(), page + e->slot_index() * 8ull);
  }
  auto second = rig.open(1);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_NE((*second)->render_fd(), render) << "its own render node";
  auto e = (*second)->create_event(KfdEventType::kSignal, true);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ((*second)->event_page_va(), page);
  EXPECT_TRUE(rig.fake->log().empty()) << rig.fake->log()[0];
}

TEST(KfdEvents, SetWaitAndTimeoutWithinItsBound) {
  KfdRig rig;
  auto kfd = rig.open();
  ASSERT_TRUE(kfd.ok()) << kfd.status();
  auto first = (*kfd)->create_event(KfdEventType::kSignal, false);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_NE((*kfd)->event_page_va(), 0u);
  auto e = (*kfd)->create_event(KfdEventType::kSignal, true);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->mailbox_va(), (*kfd)->event_page_va() + e->slot_index() * 8ull);
  const KfdEvent* events[] = {&*e};
  ASSERT_TRUE((*kfd)->set_event(*e).ok());
  auto fired = (*kfd)->wait(events, 1000);
  ASSERT_TRUE(fired.ok()) << fired.status();
  EXPECT_FALSE(fired->timed_out);
  EXPECT_FALSE(fired->fault());
  auto start = std::chrono::steady_clock::now();
  auto quiet = (*kfd)->wait(events, 30);  // auto-reset: the set was consumed
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                  start)
                .count();
  ASSERT_TRUE(quiet.ok()) << quiet.status();
  EXPECT_TRUE(quiet->timed_out);
  EXPECT_GE(ms, 30);
  EXPECT_LT(ms, 1000);
  EXPECT_EQ((*kfd)->wait(events, kKfdEventTimeoutInfinite).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(KfdEvents, AFakeGpuSignalsDuringTheWait) {
  KfdRig rig;
  auto kfd = rig.open();
  ASSERT_TRUE(kfd.ok()) << kfd.status();
  auto e = (*kfd)->create_event(KfdEventType::kSignal, true);
  ASSERT_TRUE(e.ok()) << e.status();
  int polls = 0;
  rig.fake->on_progress([&] {
    if (++polls == 3) {
      ASSERT_TRUE(rig.fake->signal_event(e->id()).ok());
    }
  });
  const KfdEvent* events[] = {&*e};
  auto r = (*kfd)->wait(events, 5000);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(polls, 3);
}

TEST(KfdEvents, ExceptionDataBecomesAFaultReport) {
  KfdRig rig;
  auto kfd = rig.open();
  ASSERT_TRUE(kfd.ok()) << kfd.status();
  auto sig = (*kfd)->create_event(KfdEventType::kSignal, true);
  auto mem = (*kfd)->create_event(KfdEventType::kMemory, false);
  auto hw = (*kfd)->create_event(KfdEventType::kHwException, false);
  ASSERT_TRUE(sig.ok() && mem.ok() && hw.ok());
  const KfdEvent* events[] = {&*sig, &*mem, &*hw};
  rig.fake->raise_memory_exception(0, 0x7f0000001000, KfdMemoryExceptionFailure{1, 0, 0, 1});
  auto r = (*kfd)->wait(events, 1000);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->memory.has_value());
  EXPECT_FALSE(r->hw.has_value());
  EXPECT_EQ(r->memory->to_string(), "GPU memory fault at 0x7f0000001000 (gpu_id " +
                                        hex(rig.fake->gpu_id(0)) + "): not present, imprecise");
  rig.fake->raise_hw_exception(0, kKfdHwExceptionWholeGpuReset, kKfdHwExceptionGpuHang, true);
  r = (*kfd)->wait(events, 1000);
  ASSERT_TRUE(r.ok() && r->hw.has_value());
  EXPECT_EQ(r->hw->to_string(), "GPU reset (gpu_id " + hex(rig.fake->gpu_id(0)) +
                                    "): whole GPU, cause GPU hang, memory lost");
  rig.fake->fail_next("AMDKFD_IOC_WAIT_EVENTS", EINTR);
  EXPECT_THAT((*kfd)->wait(events, 10).status().message(), HasSubstr("AMDKFD_IOC_WAIT_EVENTS"));
}

// ---- teardown and the fake's own refusals ------------------------------------------------------

TEST(KfdTeardown, DestructionReleasesEverything) {
  KfdRig rig;
  {
    auto kfd = rig.open();
    ASSERT_TRUE(kfd.ok()) << kfd.status();
    QueueBuffers b = queue_buffers(**kfd);
    auto q = (*kfd)->create_queue(b.request(KfdQueueType::kCompute));
    auto e = (*kfd)->create_event(KfdEventType::kSignal, true);
    auto host = (*kfd)->alloc(1 << 20, KfdMemKind::kUserptr, true);
    ASSERT_TRUE(q.ok() && e.ok() && host.ok());
    FakeKfdCounts c = rig.fake->live();
    EXPECT_EQ(c, (FakeKfdCounts{2, 5, 5, 3, 1, 1}));  // + the event page
  }
  EXPECT_EQ(rig.fake->live(), mock::kProcessKept);
  EXPECT_TRUE(rig.fake->log().empty()) << rig.fake->log()[0];
}

TEST(FakeKfd, RefusesWhatKfdRefuses) {
  FakeKfd fake;
  int kfd = *fake.open("/dev/kfd", O_RDWR);
  int render = *fake.open("/dev/dri/renderD128", O_RDWR);
  KfdIoctlAllocMemoryOfGpuArgs a{};
  a.va_addr = 0x100000, a.size = 4096, a.gpu_id = fake.gpu_id(0), a.flags = kKfdIocAllocMemFlagsGtt;
  EXPECT_FALSE(fake.ioctl(kfd, kAmdkfdIocAllocMemoryOfGpu, &a, "ALLOC").ok());  // no ACQUIRE_VM
  KfdIoctlAcquireVmArgs vm{static_cast<uint32_t>(render), 0x1};
  EXPECT_FALSE(fake.ioctl(kfd, kAmdkfdIocAcquireVm, &vm, "ACQUIRE_VM").ok());  // bad gpu_id
  vm.gpu_id = fake.gpu_id(0);
  ASSERT_TRUE(fake.ioctl(kfd, kAmdkfdIocAcquireVm, &vm, "ACQUIRE_VM").ok());
  // The 1.17 (96-byte) CREATE_QUEUE is a different request: the fake wants kfd_abi.h's.
  uint8_t big[96] = {};
  Status s = fake.ioctl(kfd, amdkfd_iowr(0x02, 96), big, "CREATE_QUEUE");
  EXPECT_EQ(s.message(), "ioctl CREATE_QUEUE (request 0xc0604b02) on fd " + std::to_string(kfd) +
                             " failed: errno 22 (Invalid argument)");
  a.size = 100;  // unaligned
  EXPECT_FALSE(fake.ioctl(kfd, kAmdkfdIocAllocMemoryOfGpu, &a, "ALLOC").ok());
  a.size = 4096;
  ASSERT_TRUE(fake.ioctl(kfd, kAmdkfdIocAllocMemoryOfGpu, &a, "ALLOC").ok());
  uint32_t ids[1] = {fake.gpu_id(0)};
  KfdIoctlMapMemoryToGpuArgs m{a.handle, reinterpret_cast<uint64_t>(ids), 1, 0};
  EXPECT_FALSE(fake.ioctl(kfd, kAmdkfdIocUnmapMemoryFromGpu, &m, "UNMAP").ok());  // not mapped
  m.n_success = 0;
  ASSERT_TRUE(fake.ioctl(kfd, kAmdkfdIocMapMemoryToGpu, &m, "MAP").ok());
  KfdIoctlFreeMemoryOfGpuArgs f{a.handle};
  EXPECT_EQ(fake.ioctl(kfd, kAmdkfdIocFreeMemoryOfGpu, &f, "FREE").code(),
            StatusCode::kUnavailable);  // EBUSY: still mapped
  m.n_success = 0;
  ASSERT_TRUE(fake.ioctl(kfd, kAmdkfdIocUnmapMemoryFromGpu, &m, "UNMAP").ok());
  ASSERT_TRUE(fake.ioctl(kfd, kAmdkfdIocFreeMemoryOfGpu, &f, "FREE").ok());
  EXPECT_FALSE(fake.ioctl(kfd, kAmdkfdIocFreeMemoryOfGpu, &f, "FREE").ok());  // double free
  EXPECT_EQ(fake.log().size(), 7u);  // one line per refusal above
  ASSERT_TRUE(fake.close(render).ok() && fake.close(kfd).ok());
}

}  // namespace
}  // namespace baregrad::amd
