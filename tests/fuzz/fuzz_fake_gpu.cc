// libFuzzer target: the fake GPU's GPFIFO, pushbuffer and QMD decoding (drivers/mock/nvgpu),
// which executes whatever the NVIDIA driver writes. Any input ends as work done or a recorded
// Fault; never a host crash, a hang or a busy wait.
//
// Input: byte 0 picks the generation (bits 0..1) and the channel's engine (bit 2); byte 1 how
// many raw GP entries (0..3) follow, 8 bytes each, after the one the harness writes; then 384
// bytes of QMD memory; the rest is the pushbuffer the first GP entry points at.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "drivers/mock/nvgpu/fake_gpu.h"
#include "drivers/nv/classes.h"
#include "drivers/nv/gpfifo.h"

namespace mock = baregrad::mock;
namespace nv = baregrad::nv;

namespace {

constexpr uint64_t kRingVa = 0x11'0100'0000, kUserdVa = 0x11'0101'0000;
constexpr uint64_t kPushbufVa = 0xb1'1000'0000, kQmdVa = 0x63'3000'0000, kDataVa = 0x85'5000'0000;
constexpr uint32_t kRingEntries = 8, kToken = 7;
constexpr size_t kQmdBytes = 384, kPushbufMax = 1 << 16, kDataBytes = 1 << 16;

struct Region {
  Region(mock::RangeMemory& mem, uint64_t va, size_t bytes) : words((bytes + 7) / 8) {
    if (!mem.add(va, words.data(), bytes).ok()) __builtin_trap();
  }
  uint8_t* host() { return reinterpret_cast<uint8_t*>(words.data()); }
  std::vector<uint64_t> words;  // 8-byte aligned, zeroed
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  constexpr nv::Generation kGenerations[] = {nv::Generation::kAmpere, nv::Generation::kHopper,
                                             nv::Generation::kBlackwell, nv::Generation::kAda};
  nv::Generation g = kGenerations[data[0] & 3];
  bool copy = (data[0] & 4) != 0;
  size_t raw_entries = std::min<size_t>(data[1] & 3, (size - 2) / 8);
  const uint8_t* at = data + 2;
  const uint8_t* end = data + size;

  mock::RangeMemory mem;
  Region ring(mem, kRingVa, kRingEntries * 8), userd(mem, kUserdVa, nv::kUserdBytes);
  Region pushbuf(mem, kPushbufVa, kPushbufMax), qmd(mem, kQmdVa, kQmdBytes),
      buf(mem, kDataVa, kDataBytes);
  std::vector<uint64_t> raw(raw_entries);
  for (uint64_t& e : raw) {
    std::memcpy(&e, at, 8);
    at += 8;
  }
  size_t q = std::min<size_t>(kQmdBytes, static_cast<size_t>(end - at));
  std::memcpy(qmd.host(), at, q);
  at += q;
  size_t words = std::min<size_t>(static_cast<size_t>(end - at), kPushbufMax) / 4;
  std::memcpy(pushbuf.host(), at, words * 4);

  mock::FakeNvGpu gpu(mem, g);
  if (!gpu.add_channel({.ring_va = kRingVa,
                        .ring_entries = kRingEntries,
                        .userd_va = kUserdVa,
                        .engine = copy ? mock::ChannelEngine::kCopy : mock::ChannelEngine::kCompute,
                        .token = kToken})
           .ok())
    __builtin_trap();
  uint32_t put = 0;
  if (words > 0) {
    auto entry = nv::gp_entry(kPushbufVa, static_cast<uint32_t>(words));
    if (!entry.ok()) __builtin_trap();
    std::memcpy(ring.host() + 8 * put++, &*entry, 8);
  }
  for (uint64_t e : raw) std::memcpy(ring.host() + 8 * put++, &e, 8);
  std::memcpy(userd.host() + nv::kUserdGpPut, &put, 4);
  gpu.ring(kToken);
  // A blocked acquire stays blocked: the pump returns instead of spinning.
  gpu.run_until_idle();
  (void)gpu.faults();
  return 0;
}
