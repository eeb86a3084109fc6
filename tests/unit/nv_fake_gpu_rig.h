// The fake NVIDIA GPU tests' rig: host memory regions, channels built with the drivers/nv encoders
// and a FakeNvGpu to run them on (used by nv_fake_gpu*_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "drivers/mock/nvgpu/fake_gpu.h"
#include "drivers/nv/classes.h"
#include "drivers/nv/gpfifo.h"
#include "drivers/nv/methods.h"
#include "drivers/nv/pushbuf.h"
#include "drivers/nv/qmd.h"
#include "hcq/cmdstream.h"

namespace baregrad::mock::fake_gpu_test {

using hcq::CmdStream;
using hcq::Dim3;
using nv::PayloadSize;
using nv::PushBuffer;
using nv::Release;
using nv::Subchannel;

constexpr uint32_t kComputeToken = 7, kCopyToken = 9;
constexpr uint32_t kUserdGpGetOffset = 0x88;  // Nvc56fControl.GPGet (clc56f.h)

inline nv::GpuClasses classes(uint32_t arch, uint32_t impl = 0) {
  auto r = nv::select_classes(arch, impl);
  EXPECT_TRUE(r.ok()) << r.status();
  return *r;
}
inline nv::GpuClasses hopper() { return classes(nv::kArchGh100); }

// Host memory mapped at a fixed GPU VA below 2^40 (what GP entries and QMD pointers hold).
class Region {
 public:
  Region(RangeMemory& mem, uint64_t va, size_t bytes) : va_(va), words_((bytes + 7) / 8) {
    EXPECT_TRUE(mem.add(va, words_.data(), bytes).ok());
  }
  uint64_t va(size_t off = 0) const { return va_ + off; }
  size_t size() const { return words_.size() * 8; }
  uint8_t* host(size_t off = 0) { return reinterpret_cast<uint8_t*>(words_.data()) + off; }
  template <class T>
  T get(size_t off) {
    T v;
    std::memcpy(&v, host(off), sizeof v);
    return v;
  }
  template <class T>
  void put(size_t off, T v) {
    std::memcpy(host(off), &v, sizeof v);
  }
  uint64_t load64(size_t off) {
    return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(host(off))).load();
  }
  void store64(size_t off, uint64_t v) {
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(host(off))).store(v);
  }

 private:
  uint64_t va_;
  std::vector<uint64_t> words_;  // 8-byte aligned host memory, zeroed
};

// A channel as the driver sees it: ring, USERD and the ring bookkeeping.
struct TestChannel {
  Region ring, userd;
  nv::GpFifoRing fifo;
};

// A fake GPU with a compute and a copy channel, and regions for pushbuffers, semaphores, QMDs,
// constant banks and data. Nothing is mapped between or after the regions.
class Rig {
 public:
  explicit Rig(nv::GpuClasses c, uint32_t ring_entries = 16)
      : gpu_classes(c),
        gpu(mem, c.generation),
        compute{Region(mem, 0x11'0100'0000, ring_entries * 8), Region(mem, 0x11'0101'0000, 0x200),
                nv::GpFifoRing(ring_entries, kComputeToken)},
        copy{Region(mem, 0x11'0102'0000, ring_entries * 8), Region(mem, 0x11'0103'0000, 0x200),
             nv::GpFifoRing(ring_entries, kCopyToken)} {
    EXPECT_TRUE(gpu.add_channel({.ring_va = compute.ring.va(),
                                 .ring_entries = ring_entries,
                                 .userd_va = compute.userd.va(),
                                 .engine = ChannelEngine::kCompute,
                                 .token = kComputeToken})
                    .ok());
    EXPECT_TRUE(gpu.add_channel({.ring_va = copy.ring.va(),
                                 .ring_entries = ring_entries,
                                 .userd_va = copy.userd.va(),
                                 .engine = ChannelEngine::kCopy,
                                 .token = kCopyToken})
                    .ok());
  }

  // SET_OBJECT of the compute class on subchannel 1 and the copy class on 4.
  void bind() {
    CmdStream a("bind", 8), b("bind", 8);
    PushBuffer pa(a), pb(b);
    nv::emit_set_object(pa, Subchannel::kCompute, gpu_classes.compute);
    nv::emit_set_object(pb, Subchannel::kCopy, gpu_classes.copy);
    submit(compute, a);
    submit(copy, b);
  }

  // What submit() does: the segment into pushbuffer memory, then publish(). Returns its VA.
  uint64_t submit(TestChannel& ch, const CmdStream& cs, bool ring = true) {
    auto w = cs.words();
    uint64_t va = pb.va(pb_used_);
    std::memcpy(pb.host(pb_used_), w.data(), w.size() * 4);
    pb_used_ += (w.size() * 4 + 15) / 16 * 16;
    publish(ch, va, static_cast<uint32_t>(w.size()), ring);
    return va;
  }

  // ring[slot] = entry, USERD GPPut, then the doorbell (unless `ring` is false).
  void publish(TestChannel& ch, uint64_t va, uint32_t words, bool ring = true) {
    auto s = ch.fifo.push(va, words, gp_get(ch));
    ASSERT_TRUE(s.ok()) << s.status();
    ch.ring.put<uint64_t>(s->slot * 8, s->entry);
    userd_word(ch, nv::kUserdGpPut).store(s->gp_put, std::memory_order_release);
    if (ring) gpu.ring(s->doorbell);
  }

  static std::atomic_ref<uint32_t> userd_word(TestChannel& ch, uint32_t off) {
    return std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(ch.userd.host(off)));
  }
  // USERD GPGet as the GPU last wrote it.
  static uint32_t gp_get(TestChannel& ch) {
    return userd_word(ch, nv::kUserdGpGet).load(std::memory_order_acquire);
  }

  ChannelStatus status(uint32_t token) {
    auto s = gpu.channel_status(token);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : ChannelStatus{};
  }

  Fault only_fault() {
    auto f = gpu.faults();
    EXPECT_EQ(f.size(), 1u);
    return f.empty() ? Fault{} : f[0];
  }

  RangeMemory mem;
  nv::GpuClasses gpu_classes;
  FakeNvGpu gpu;
  TestChannel compute, copy;
  Region pb{mem, 0xb1'1000'0000, 1 << 20};
  Region sig{mem, 0x52'2000'0000, 0x1000};
  Region qmd{mem, 0x63'3000'0000, 0x10000};
  Region cb{mem, 0x74'4000'0000, 0x10000};
  Region data{mem, 0x85'5000'0000, 1 << 19};

 private:
  size_t pb_used_ = 0;
};

}  // namespace baregrad::mock::fake_gpu_test
