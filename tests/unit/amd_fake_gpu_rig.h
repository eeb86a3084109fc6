// The fake AMD GPU tests' rig (amd_fake_gpu_test.cc, amd_fake_gpu_pm4_test.cc): a fake KFD
// with one GPU, the fake GPU on it, the real KFD interface for memory and queues, and a queue
// that speaks the driver's side of the ring protocol.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "drivers/amd/iface_kfd.h"
#include "drivers/amd/pm4.h"
#include "drivers/mock/amd/fake_kfd.h"
#include "drivers/mock/amdgpu/fake_gpu.h"

// NOTE: a namespace of its own (not nv_fake_gpu_rig.h's fake_gpu_test): both rigs define Rig,
// and one name for two inline classes in one program is an ODR violation.
namespace baregrad::mock::amd_fake_gpu_test {

using amd::KfdEvent;
using amd::KfdEventType;
using amd::KfdIface;
using amd::KfdMemKind;
using amd::KfdMemory;
using amd::KfdQueue;
using amd::KfdQueueType;
using Kind = AmdGpuFault::Kind;

// ---- the rig: a fake KFD with one GPU, the fake GPU on it, KfdIface for memory and queues ---

struct Rig {
  explicit Rig(const char* target = "gfx1100")
      : kfd(std::make_shared<FakeKfd>(FakeKfdConfig{1, 17, {FakeAmdGpuConfig::preset(target)}})),
        gpu(std::make_unique<FakeAmdGpu>(*kfd, 0)),
        iface(std::move(KfdIface::open(kfd, 0).value())) {}
  KfdMemory alloc(uint64_t bytes, KfdMemKind kind = KfdMemKind::kGtt) {
    return std::move(iface->alloc(bytes, kind, true).value());
  }
  const amd::ArchInfo& arch() const { return gpu->arch(); }

  std::shared_ptr<FakeKfd> kfd;
  std::unique_ptr<FakeAmdGpu> gpu;
  std::unique_ptr<KfdIface> iface;
};

template <class T>
std::atomic_ref<T> at(const KfdMemory& m, size_t offset = 0) {
  return std::atomic_ref<T>(*reinterpret_cast<T*>(static_cast<uint8_t*>(m.cpu()) + offset));
}
inline hcq::Value val(uint64_t va) { return hcq::Value(static_cast<int64_t>(va)); }

// A KFD queue and the driver's side of its protocol: words into the ring, the write pointer, then
// the doorbell (PM4 dwords, SDMA bytes, AQL packets with the doorbell at the last index).
class Queue {
 public:
  Queue(Rig& rig, KfdQueueType type, uint64_t ring_bytes = 0x10000) : rig_(rig), type_(type) {
    ring = rig.alloc(ring_bytes);
    gart = rig.alloc(4096);
    amd::KfdQueueRequest r;
    r.type = type;
    r.ring = &ring;
    r.read_pointer_address = gart.va();
    r.write_pointer_address = gart.va() + 8;
    if (type != KfdQueueType::kSdma) {
      eop = rig.alloc(4096, KfdMemKind::kVram);
      r.eop = &eop;
    }
    q = std::move(rig.iface->create_queue(r).value());
    if (type == KfdQueueType::kComputeAql) {  // every slot starts INVALID, as ROCR sets them
      for (uint64_t i = 0; i < ring_bytes / 64; i++) at<uint32_t>(ring, i * 64).store(1);
    }
  }
  uint32_t id() const { return q.id(); }
  uint64_t rptr() const { return at<uint64_t>(gart).load(); }
  uint64_t slot_va(uint64_t index) const { return ring.va() + (index % (ring.size() / 64)) * 64; }

  void push(std::span<const uint32_t> words) {
    auto* r = static_cast<uint32_t*>(ring.cpu());
    const uint64_t n = ring.size() / 4;
    if (type_ == KfdQueueType::kComputeAql) {
      ASSERT_EQ(words.size() % 16, 0u);
      for (size_t p = 0; p < words.size(); p += 16) {
        uint32_t* slot = r + (put % (n / 16)) * 16;
        std::memcpy(slot + 1, words.data() + p + 1, 15 * 4);
        std::atomic_ref<uint32_t>(slot[0]).store(words[p], std::memory_order_release);
        put++;
      }
      return;
    }
    for (uint32_t w : words) {
      if (type_ == KfdQueueType::kSdma) {
        r[(put / 4) % n] = w;
        put += 4;
      } else {
        r[put % n] = w;
        put++;
      }
    }
  }
  void commit() {
    at<uint64_t>(gart, 8).store(put, std::memory_order_release);
    q.doorbell().ring(type_ == KfdQueueType::kComputeAql ? put - 1 : put);
  }
  // push + commit + the pump a driver's wait would run.
  void submit(std::span<const uint32_t> words) {
    push(words);
    commit();
    rig_.kfd->progress();
  }
  void submit(const hcq::CmdStream& cs) { submit(cs.words()); }

  KfdMemory ring, gart, eop;
  KfdQueue q;
  uint64_t put = 0;

 private:
  Rig& rig_;
  KfdQueueType type_;
};

// Records each launch (an executor the test installs instead of the twins).
struct Recorder final : AmdKernelExecutor {
  Status launch(const AmdLaunch& l) override {
    launches.push_back(l);
    kernargs.emplace_back(l.kernargs.begin(), l.kernargs.end());
    return {};
  }
  std::vector<AmdLaunch> launches;
  std::vector<std::vector<uint8_t>> kernargs;
};

inline hcq::CmdStream stream() { return hcq::CmdStream("test", 1 << 16); }

inline void release32(hcq::CmdStream& cs, const amd::ArchInfo& a, uint64_t addr, uint32_t v) {
  amd::emit_release_mem(cs, a, {.addr = val(addr), .data = v, .data_sel = amd::DataSel::k32BitLow});
}

}  // namespace baregrad::mock::amd_fake_gpu_test
