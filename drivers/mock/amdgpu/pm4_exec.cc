// PM4 type-3 packets as the MEC executes them, on compute (PM4) queues and in indirect buffers.
// Decoded from Linux drivers/gpu/drm/amd/amdgpu/soc15d.h and nvd.h (PACKET3 header, opcodes,
// WAIT_REG_MEM, INDIRECT_BUFFER, PRED_EXEC, COPY_DATA, DMA_DATA fields) and
// amdkfd/kfd_pm4_headers_ai.h
// (pm4_mec_release_mem: ordinals and the DST_SEL / INT_SEL / DATA_SEL enums); register
// addresses are drivers/amd's per-arch table (ArchInfo::regs).
#include <algorithm>
#include <cstring>
#include <vector>

#include "base/format.h"
#include "drivers/mock/amdgpu/decode.h"
#include "drivers/mock/amdgpu/fake_gpu.h"

namespace baregrad::mock {
namespace {

using amdgpu_decode::addr64;
using amdgpu_decode::compare;

// soc15d.h / nvd.h: PACKET3 opcodes (the same in both files; WAIT_REG_MEM64 in nvd.h only).
constexpr uint32_t kNop = 0x10;
constexpr uint32_t kDispatchDirect = 0x15;
constexpr uint32_t kPredExec = 0x23;
constexpr uint32_t kWaitRegMem = 0x3c;
constexpr uint32_t kIndirectBuffer = 0x3f;
constexpr uint32_t kCopyData = 0x40;
constexpr uint32_t kEventWrite = 0x46;
constexpr uint32_t kReleaseMem = 0x49;
constexpr uint32_t kDmaData = 0x50;
constexpr uint32_t kAcquireMem = 0x58;
constexpr uint32_t kSetShReg = 0x76;
constexpr uint32_t kSetUconfigReg = 0x79;
constexpr uint32_t kWaitRegMem64 = 0x93;
constexpr uint32_t kSetShRegStart = 0x2c00, kSetShRegEnd = 0x3000;  // PACKET3_SET_SH_REG_*
constexpr uint32_t kSetUconfigRegStart = 0xc000;                    // PACKET3_SET_UCONFIG_REG_START
constexpr uint32_t kNopOneDword = 0x3fff;  // PACKET3(NOP, 0x3fff): the ring funcs' one-dword NOP
constexpr uint32_t kIbValid = 1u << 23;    // INDIRECT_BUFFER_VALID
constexpr uint32_t kIbSizeMask = 0xfffff;  // IB_SIZE 19:0
constexpr size_t kMaxIbDepth = 4;          // the CP has IB1 and IB2; the fake allows a little more
constexpr uint32_t kComputeShaderEn = 1u << 0;  // COMPUTE_DISPATCH_INITIATOR
constexpr uint32_t kLdsGranuleBytes = 512;      // COMPUTE_PGM_RSRC2.LDS_SIZE 23:15, 128 dwords
constexpr uint64_t kPm4KernargBytes = 256;      // what a PM4 launch resolves (no size is given)

const char* opcode_name(uint32_t op) {
  switch (op) {
    case kNop:
      return "NOP";
    case kDispatchDirect:
      return "DISPATCH_DIRECT";
    case kPredExec:
      return "PRED_EXEC";
    case kWaitRegMem:
      return "WAIT_REG_MEM";
    case kIndirectBuffer:
      return "INDIRECT_BUFFER";
    case kCopyData:
      return "COPY_DATA";
    case kDmaData:
      return "DMA_DATA";
    case kEventWrite:
      return "EVENT_WRITE";
    case kReleaseMem:
      return "RELEASE_MEM";
    case kAcquireMem:
      return "ACQUIRE_MEM";
    case kSetShReg:
      return "SET_SH_REG";
    case kSetUconfigReg:
      return "SET_UCONFIG_REG";
    case kWaitRegMem64:
      return "WAIT_REG_MEM64";
  }
  return "unknown";
}

// Dwords of the packet `h` heads (header included); 0 when it is not a type-3 header.
uint32_t packet_dwords(uint32_t h) {
  if (h >> 30 != 3) return 0;
  uint32_t count = h >> 16 & 0x3fff, op = h >> 8 & 0xff;
  if (op == kNop && count == kNopOneDword) return 1;
  return count + 2;
}

}  // namespace

bool FakeAmdGpu::run_pm4_queue(Queue& q) {
  bool progressed = false;
  const uint64_t ring_dwords = q.info.ring_size / 4;
  for (;;) {
    if (!q.ibs.empty()) {
      if (run_ibs(q, &progressed) != Step::kNext) return progressed;
      continue;
    }
    std::optional<uint64_t> wptr = read_wptr(q);
    if (!wptr || *wptr == q.rptr) return progressed;
    uint64_t va = q.info.ring_va + (q.rptr % ring_dwords) * 4;
    if (*wptr < q.rptr || *wptr - q.rptr > ring_dwords) {
      bad_packet(q, va,
                 "write pointer " + std::to_string(*wptr) + " is not within one ring (" +
                     std::to_string(ring_dwords) + " dwords) after the read pointer " +
                     std::to_string(q.rptr));
      return progressed;
    }
    uint8_t* ring = access(q, q.info.ring_va, q.info.ring_size, va, "PM4 ring");
    if (ring == nullptr) return progressed;
    auto word = [&](uint64_t i) {  // a packet may wrap around the ring end
      uint32_t w;
      std::memcpy(&w, ring + (i % ring_dwords) * 4, 4);
      return w;
    };
    uint32_t h = word(q.rptr), size = packet_dwords(h);
    uint64_t avail = *wptr - q.rptr;
    if (size == 0) {
      bad_packet(q, va,
                 "malformed PM4 header " + hex(h) + " (packet type " + std::to_string(h >> 30) +
                     ", only type 3 is modelled)");
      return progressed;
    }
    if (size > avail) {
      bad_packet(q, va,
                 std::string(opcode_name(h >> 8 & 0xff)) + " header " + hex(h) + " announces " +
                     std::to_string(size) + " dwords; the write pointer is " +
                     std::to_string(avail) + " dwords ahead");
      return progressed;
    }
    std::vector<uint32_t> pkt(size);
    for (uint32_t i = 0; i < size; i++) pkt[i] = word(q.rptr + i);
    uint32_t skip = 0;
    if (exec_pm4(q, pkt, va, &skip) != Step::kNext) return progressed;
    if (skip > avail - size) {
      bad_packet(q, va,
                 "PRED_EXEC skips " + std::to_string(skip) + " dwords past the write pointer");
      return progressed;
    }
    q.rptr += size + skip;
    q.blocked = false;
    progressed = true;
    count(&AmdGpuCounters::packets);
    if (!write_rptr(q)) return progressed;
  }
}

FakeAmdGpu::Step FakeAmdGpu::run_ibs(Queue& q, bool* progressed) {
  while (!q.ibs.empty()) {
    const size_t idx = q.ibs.size() - 1;
    const IbFrame f = q.ibs[idx];
    if (f.pos >= f.dwords) {
      q.ibs.pop_back();
      continue;
    }
    uint64_t va = f.va + uint64_t{f.pos} * 4;
    uint8_t* mem = access(q, f.va, size_t{f.dwords} * 4, va, "indirect buffer");
    if (mem == nullptr) return Step::kStop;
    uint32_t h;
    std::memcpy(&h, mem + size_t{f.pos} * 4, 4);
    uint32_t size = packet_dwords(h), left = f.dwords - f.pos;
    if (size == 0) {
      return bad_packet(q, va,
                        "malformed PM4 header " + hex(h) + " in the IB at " + hex(f.va) +
                            " (packet type " + std::to_string(h >> 30) + ")");
    }
    if (size > left) {
      return bad_packet(q, va,
                        std::string(opcode_name(h >> 8 & 0xff)) + " header " + hex(h) +
                            " announces " + std::to_string(size) + " dwords; the IB at " +
                            hex(f.va) + " ends after " + std::to_string(left));
    }
    std::vector<uint32_t> pkt(size);
    std::memcpy(pkt.data(), mem + size_t{f.pos} * 4, size_t{size} * 4);
    uint32_t skip = 0;
    Step s = exec_pm4(q, pkt, va, &skip);  // may push a nested IB: use idx, not a reference
    if (s != Step::kNext) return s;
    if (skip > left - size) {
      return bad_packet(q, va,
                        "PRED_EXEC skips " + std::to_string(skip) +
                            " dwords past the end of the IB at " + hex(f.va));
    }
    q.ibs[idx].pos += size + skip;
    q.blocked = false;
    *progressed = true;
    count(&AmdGpuCounters::packets);
  }
  return Step::kNext;
}

FakeAmdGpu::Step FakeAmdGpu::exec_pm4(Queue& q,
                                      std::span<const uint32_t> pkt,
                                      uint64_t va,
                                      uint32_t* skip) {
  *skip = 0;
  const uint32_t h = pkt[0], op = h >> 8 & 0xff;
  const std::span<const uint32_t> body = pkt.subspan(1);
  auto wrong_size = [&](const std::string& want) {
    return bad_packet(q, va,
                      std::string(opcode_name(op)) + " with " + std::to_string(body.size()) +
                          " body dwords (header " + hex(h) + "); it takes " + want);
  };
  switch (op) {
    case kNop:
    case kEventWrite:  // caches and pipeline events: everything before it is already done
      return Step::kNext;
    case kDmaData: {
      // CONTROL, SRC_ADDR lo/hi, DST_ADDR lo/hi, COMMAND. Memory to memory only: SRC_SEL 30:29
      // and DST_SEL 21:20 0 (through DAS/SAS) or 3 (through L2), ENGINE 0 (the MEC has only the
      // ME); COMMAND SAS 26 / DAS 27 (registers) and SAIC 28 / DAIC 29 (no increment) clear.
      if (body.size() != 6) return wrong_size("6");
      const uint32_t c = body[0], cmd = body[5];
      const uint32_t src_sel = c >> 29 & 3, dst_sel = c >> 20 & 3;
      if ((src_sel != 0 && src_sel != 3) || (dst_sel != 0 && dst_sel != 3) || (c & 1) != 0 ||
          (cmd >> 26 & 0xf) != 0) {
        return bad_packet(q, va,
                          "DMA_DATA CONTROL " + hex(c) + " COMMAND " + hex(cmd) +
                              ": only memory-to-memory copies by the ME are modelled");
      }
      const uint64_t bytes = cmd & 0x3ffffff;
      if (bytes == 0) return Step::kNext;
      uint8_t* src = access(q, addr64(body[1], body[2]), bytes, va, "DMA_DATA source");
      if (src == nullptr) return Step::kStop;
      uint8_t* dst = access(q, addr64(body[3], body[4]), bytes, va, "DMA_DATA destination");
      if (dst == nullptr) return Step::kStop;
      std::memmove(dst, src, bytes);
      count(&AmdGpuCounters::copies);
      count(&AmdGpuCounters::bytes_copied, bytes);
      return Step::kNext;
    }
    case kAcquireMem: {
      size_t want = arch_->pm4 == amd::Pm4Family::kSoc15 ? 6 : 7;  // soc15d.h 5 / nvd.h 6
      return body.size() == want ? Step::kNext : wrong_size(std::to_string(want));
    }
    case kSetShReg:
    case kSetUconfigReg: {
      if (body.size() < 2) return wrong_size("at least 2");
      uint32_t start =
          (op == kSetShReg ? kSetShRegStart : kSetUconfigRegStart) + (body[0] & 0xffff);
      uint32_t n = static_cast<uint32_t>(body.size() - 1);
      if (op == kSetShReg && start + n > kSetShRegEnd) {
        return bad_packet(q, va,
                          "SET_SH_REG of " + std::to_string(n) + " registers from " + hex(start) +
                              " runs past the SH range (ends " + hex(kSetShRegEnd) + ")");
      }
      for (uint32_t i = 0; i < n; i++) q.regs[start + i] = body[1 + i];
      return Step::kNext;
    }
    case kDispatchDirect:
      return body.size() == 4 ? pm4_dispatch(q, body, va) : wrong_size("4");
    case kReleaseMem:
      return body.size() == 7 ? pm4_release_mem(q, body, va) : wrong_size("7");
    case kWaitRegMem:
      return body.size() == 6 ? pm4_wait_reg_mem(q, body, va, false) : wrong_size("6");
    case kWaitRegMem64:
      if (!arch_->has_wait_reg_mem64) break;
      return body.size() == 8 ? pm4_wait_reg_mem(q, body, va, true) : wrong_size("8");
    case kCopyData:
      return body.size() == 5 ? pm4_copy_data(q, body, va) : wrong_size("5");
    case kPredExec: {
      if (body.size() != 1) return wrong_size("1");
      // EXEC_COUNT 13:0, DEVICE_SELECT (XCC mask) 31:24; the fake is XCC 0 only.
      if ((body[0] >> 24 & 1) == 0) *skip = body[0] & 0x3fff;
      return Step::kNext;
    }
    case kIndirectBuffer: {
      if (body.size() != 3) return wrong_size("3");
      uint64_t ib = addr64(body[0], body[1]);
      uint32_t dwords = body[2] & kIbSizeMask;
      if ((body[2] & kIbValid) == 0) {
        return bad_packet(
            q, va,
            "INDIRECT_BUFFER control " + hex(body[2]) + " lacks INDIRECT_BUFFER_VALID (bit 23)");
      }
      if (ib % 4 != 0) return bad_packet(q, va, "INDIRECT_BUFFER at " + hex(ib) + " not 4-aligned");
      if (q.ibs.size() >= kMaxIbDepth) {
        return bad_packet(q, va,
                          "INDIRECT_BUFFER nested " + std::to_string(q.ibs.size() + 1) +
                              " deep (the fake allows " + std::to_string(kMaxIbDepth) + ")");
      }
      if (dwords != 0) q.ibs.push_back(IbFrame{ib, dwords, 0});
      return Step::kNext;
    }
  }
  return bad_packet(
      q, va,
      "unknown PM4 opcode " + hex(op) + " (header " + hex(h) + ") on " + std::string(arch_->name));
}

FakeAmdGpu::Step FakeAmdGpu::pm4_release_mem(Queue& q,
                                             std::span<const uint32_t> body,
                                             uint64_t va) {
  // ordinal3: DST_SEL 17:16, INT_SEL 26:24, DATA_SEL 31:29.
  const uint32_t dst_sel = body[1] >> 16 & 3, int_sel = body[1] >> 24 & 7;
  const uint32_t data_sel = body[1] >> 29 & 7;
  const uint64_t addr = addr64(body[2], body[3]);
  if (dst_sel > 1) {  // 0 memory controller, 1 TC L2; 2-3 queue write pointer registers
    return bad_packet(q, va, "RELEASE_MEM DST_SEL " + std::to_string(dst_sel) + " not modelled");
  }
  if (int_sel > 4) {  // 5-6: conditional interrupts
    return bad_packet(q, va, "RELEASE_MEM INT_SEL " + std::to_string(int_sel) + " not modelled");
  }
  bool wrote = true;
  switch (data_sel) {
    case 0:  // none
      break;
    case 1:  // send_32_bit_low
      wrote = store(q, addr, 4, body[4], va, "RELEASE_MEM data");
      break;
    case 2:  // send_64_bit_data
      wrote = store(q, addr, 8, addr64(body[4], body[5]), va, "RELEASE_MEM data");
      break;
    case 3:  // send_gpu_clock_counter
      wrote = store(q, addr, 8, timestamp_ns(), va, "RELEASE_MEM GPU clock");
      break;
    default:
      return bad_packet(q, va,
                        "RELEASE_MEM DATA_SEL " + std::to_string(data_sel) +
                            " not modelled (perf counters, GDS)");
  }
  if (!wrote) return Step::kStop;
  if (data_sel != 0) count(&AmdGpuCounters::signals);
  // 1 send_interrupt_only, 2 after write confirm, 4 unconditionally send int_ctxid; 3 sends data.
  if (int_sel == 1 || int_sel == 2 || int_sel == 4) interrupt(body[6]);
  return Step::kNext;
}

FakeAmdGpu::Step FakeAmdGpu::pm4_wait_reg_mem(Queue& q,
                                              std::span<const uint32_t> body,
                                              uint64_t va,
                                              bool is64) {
  // FUNCTION 2:0, MEM_SPACE 5:4 (0 register, 1 memory), OPERATION 7:6 (1 write, then wait).
  const uint32_t info = body[0], func = info & 7, space = info >> 4 & 3, op = info >> 6 & 3;
  const char* name = is64 ? "WAIT_REG_MEM64" : "WAIT_REG_MEM";
  if (op == 1 && !is64) return Step::kNext;  // the HDP flush request/done pair: done at once
  if (op != 0 || space != 1 || func == 7) {
    return bad_packet(q, va,
                      std::string(name) + " info " + hex(info) +
                          ": only memory waits (and the write-then-wait form) with a "
                          "defined function are modelled");
  }
  const uint64_t addr = addr64(body[1], body[2]);
  const uint64_t ref = is64 ? addr64(body[3], body[4]) : body[3];
  const uint64_t mask = is64 ? addr64(body[5], body[6]) : body[4];
  std::optional<uint64_t> v = load(q, addr, is64 ? 8 : 4, va, std::string(name) + " poll");
  if (!v) return Step::kStop;
  return compare(func, *v & mask, ref) ? Step::kNext : block(q);
}

FakeAmdGpu::Step FakeAmdGpu::pm4_copy_data(Queue& q, std::span<const uint32_t> body, uint64_t va) {
  // SRC_SEL 3:0 (0 register, 2 TC L2 memory, 5 immediate, 9 GPU clock), DST_SEL 11:8 (0 register,
  // 2 TC L2, 5 memory), COUNT_SEL 16 (64 bits).
  const uint32_t c = body[0], src_sel = c & 0xf, dst_sel = c >> 8 & 0xf;
  const bool b64 = (c >> 16 & 1) != 0;
  const int bytes = b64 ? 8 : 4;
  auto reg = [&](uint32_t a) {
    auto it = q.regs.find(a);
    return uint64_t{it == q.regs.end() ? 0u : it->second};
  };
  uint64_t v = 0;
  switch (src_sel) {
    case 0:
      v = reg(body[1]) | (b64 ? reg(body[1] + 1) << 32 : 0);
      break;
    case 2: {
      auto m = load(q, addr64(body[1], body[2]), bytes, va, "COPY_DATA source");
      if (!m) return Step::kStop;
      v = *m;
      break;
    }
    case 5:
      v = b64 ? addr64(body[1], body[2]) : body[1];
      break;
    case 9:
      v = timestamp_ns();
      break;
    default:
      return bad_packet(q, va, "COPY_DATA SRC_SEL " + std::to_string(src_sel) + " not modelled");
  }
  if (!b64) v &= 0xffffffff;
  switch (dst_sel) {
    case 0:
      q.regs[body[3]] = static_cast<uint32_t>(v);
      if (b64) q.regs[body[3] + 1] = static_cast<uint32_t>(v >> 32);
      return Step::kNext;
    case 2:
    case 5:
      return store(q, addr64(body[3], body[4]), bytes, v, va, "COPY_DATA destination")
                 ? Step::kNext
                 : Step::kStop;
  }
  return bad_packet(q, va, "COPY_DATA DST_SEL " + std::to_string(dst_sel) + " not modelled");
}

FakeAmdGpu::Step FakeAmdGpu::pm4_dispatch(Queue& q, std::span<const uint32_t> body, uint64_t va) {
  const amd::ComputeRegs& r = arch_->regs;
  auto reg = [&](uint32_t a) {
    auto it = q.regs.find(a);
    return it == q.regs.end() ? 0u : it->second;
  };
  if ((body[3] & kComputeShaderEn) == 0) {
    return bad_packet(q, va, "DISPATCH_INITIATOR " + hex(body[3]) + " lacks COMPUTE_SHADER_EN");
  }
  for (uint32_t i = 0; i < 3; i++) {
    if (reg(r.compute_start_x + i) != 0) {
      return bad_packet(q, va, "COMPUTE_START_X/Y/Z is not 0 (a partial grid is not modelled)");
    }
  }
  AmdLaunch l;
  l.code_va = addr64(reg(r.compute_pgm_lo), reg(r.compute_pgm_hi)) << 8;
  uint32_t k = executor().kernarg_user_sgpr(l.code_va);
  if (k > 14) return bad_packet(q, va, "kernarg pointer in user SGPR " + std::to_string(k));
  l.kernarg_va = addr64(reg(r.compute_user_data_0 + k), reg(r.compute_user_data_0 + k + 1));
  l.grid = {body[0], body[1], body[2]};
  // NUM_THREAD_FULL 9:0 (NUM_THREAD_PARTIAL 25:16 is ignored: no partial work-groups).
  l.block = {reg(r.compute_num_thread_x) & 0x3ff, reg(r.compute_num_thread_x + 1) & 0x3ff,
             reg(r.compute_num_thread_x + 2) & 0x3ff};
  if (l.block.x == 0 || l.block.y == 0 || l.block.z == 0) {
    return bad_packet(q, va,
                      "COMPUTE_NUM_THREAD_X/Y/Z is 0 (" + std::to_string(l.block.x) + ", " +
                          std::to_string(l.block.y) + ", " + std::to_string(l.block.z) + ")");
  }
  l.lds_bytes = (reg(r.compute_pgm_rsrc2) >> 15 & 0x1ff) * kLdsGranuleBytes;
  // COMPUTE_PGM_RSRC2.SCRATCH_EN (bit 0): the waves need scratch; the CP hands each a slice of
  // COMPUTE_TMPRING_SIZE.WAVESIZE units of the base it has (COMPUTE_DISPATCH_SCRATCH_BASE on
  // architected flat scratch targets, else the private segment buffer V# in user SGPRs 0..3).
  if (reg(r.compute_pgm_rsrc2) & 1) {
    uint32_t wave_units = reg(r.compute_tmpring_size) >> 12;
    if (wave_units == 0)
      return bad_packet(q, va,
                        "COMPUTE_PGM_RSRC2 enables scratch but COMPUTE_TMPRING_SIZE (" +
                            hex(reg(r.compute_tmpring_size)) + ") has no WAVESIZE");
    uint64_t base =
        arch_->architected_flat_scratch
            ? addr64(reg(r.compute_dispatch_scratch_base_lo),
                     reg(r.compute_dispatch_scratch_base_hi))
                  << 8
            : addr64(reg(r.compute_user_data_0), reg(r.compute_user_data_0 + 1) & 0xffff);
    uint64_t bytes = uint64_t{wave_units} * arch_->scratch_align_bytes;
    if (access(q, base, bytes, va, "scratch of a wave (" + std::to_string(bytes) + " bytes)") ==
        nullptr)
      return Step::kStop;
  }
  l.queue_id = q.info.id;
  l.packet_va = va;
  if (l.kernarg_va != 0) {
    uint64_t len = kPm4KernargBytes;
    for (const FakeKfdAllocation& a : kfd_.allocations()) {
      if (a.gpu_mapped && l.kernarg_va >= a.va && l.kernarg_va - a.va < a.size) {
        len = std::min(len, a.va + a.size - l.kernarg_va);
      }
    }
    uint8_t* p = access(q, l.kernarg_va, len, va,
                        "kernarg segment (COMPUTE_USER_DATA_" + std::to_string(k) + "/" +
                            std::to_string(k + 1) + ")");
    if (p == nullptr) return Step::kStop;
    l.kernargs = {p, len};
  }
  return launch(q, l);
}

}  // namespace baregrad::mock
