// GP entries and pushbuffer segments as Host (the PBDMA) decodes them: open-gpu-doc
// manuals/ampere/ga100/dev_pbdma.ref.txt (NV_PPBDMA_GP_ENTRY*, GP_GET) and dev_ram.ref.txt
// ("Host Pushbuffer Format (FIFO_DMA)"), with the field positions of clc56f.h NVC56F_GP_ENTRY*
// and NVC56F_DMA_* (the same in clc86f.h and clc96f.h).
#include <atomic>
#include <cstring>

#include "base/check.h"
#include "base/format.h"
#include "drivers/mock/nvgpu/channel.h"

namespace baregrad::mock {
namespace {

// NV_FIFO_DMA_SEC_OP (31:29).
constexpr uint32_t kSecOpIncMethod = 1;
constexpr uint32_t kSecOpNonIncMethod = 3;
constexpr uint32_t kSecOpImmdDataMethod = 4;
constexpr uint32_t kSecOpOneInc = 5;
constexpr uint32_t kSecOpEndPbSegment = 7;
constexpr uint32_t kHeaderReservedBit12 = 1u << 12;  // "reserved for the future expansion"
constexpr uint32_t kMaxMethod = 0xfff << 2;          // NV_FIFO_DMA_METHOD_ADDRESS 11:0, in dwords

// NV_PPBDMA_GP_ENTRY1: GET_HI 7:0, LENGTH 30:10 (0 = CONTROL), OPCODE 7:0 (control entries).
constexpr uint32_t kGpOpcodeNop = 0;
// A segment must end below the 40-bit VA limit (NV_PPBDMA_INTR_0_GPENTRY otherwise).
constexpr uint64_t kPushbufferLimit = 0xffffffffffull;

std::string sec_op_name(uint32_t op) {
  switch (op) {
    case 0:
      return "GRP0_USE_TERT (subdevice masks)";
    case 2:
      return "GRP2_USE_TERT";
    case 6:
      return "RESERVED6";
  }
  return std::to_string(op);
}

}  // namespace

bool ChannelRunner::run() {
  for (;;) {
    Step s = ch_.seg.active ? run_segment() : fetch();
    if (s != Step::kNext) break;
  }
  return progressed_;
}

Step ChannelRunner::fetch() {
  header_va_ = 0;
  method_ = Fault::kNoMethod;
  qmd_va_ = 0;
  const ChannelConfig& c = ch_.cfg;
  auto userd = access(c.userd_va + kUserdGpGet, 8, Access::kRead, "USERD GPGet/GPPut");
  if (!userd) return Step::kStop;
  CHECK(reinterpret_cast<uintptr_t>(*userd) % 4 == 0) << "USERD host memory is not 4-aligned";
  std::atomic_ref<uint32_t> gp_get_word(*reinterpret_cast<uint32_t*>(*userd));
  std::atomic_ref<uint32_t> gp_put_word(*reinterpret_cast<uint32_t*>(*userd + 4));
  uint32_t gp_put = gp_put_word.load(std::memory_order_acquire);
  if (gp_put >= c.ring_entries) {
    return fault(FaultKind::kGpEntry,
                 "USERD GPPut " + std::to_string(gp_put) + " is outside the ring of " +
                     std::to_string(c.ring_entries) + " entries",
                 c.userd_va + kUserdGpPut, Access::kRead);
  }
  if (ch_.gp_get == gp_put) return Step::kIdle;
  uint64_t slot_va = c.ring_va + uint64_t{ch_.gp_get} * 8;
  auto slot = access(slot_va, 8, Access::kRead, "GP entry " + std::to_string(ch_.gp_get));
  if (!slot) return Step::kStop;
  uint64_t entry;
  std::memcpy(&entry, *slot, 8);
  // NV_PPBDMA_GP_GET: once an entry begins processing it is committed and GP_GET moves past it.
  ch_.gp_get = (ch_.gp_get + 1) % c.ring_entries;
  gp_get_word.store(ch_.gp_get, std::memory_order_release);
  progressed_ = true;
  count(&GpuCounters::gp_entries);

  uint32_t e0 = static_cast<uint32_t>(entry), e1 = static_cast<uint32_t>(entry >> 32);
  uint32_t length = e1 >> 10 & 0x1fffff;
  if (length == 0) {
    uint32_t opcode = e1 & 0xff;
    if (opcode == kGpOpcodeNop) return Step::kNext;
    return fault(FaultKind::kGpEntry,
                 "control GP entry " + hex(entry) + " with OPCODE " + std::to_string(opcode) +
                     " (only NOP is modelled)",
                 slot_va, Access::kRead);
  }
  // GET 31:2 holds address bits 31:2; FETCH (0:0) is ignored: the segment is always fetched.
  uint64_t va = (e0 & ~3u) | uint64_t{e1 & 0xff} << 32;
  if (va + uint64_t{length} * 4 > kPushbufferLimit) {
    return fault(FaultKind::kGpEntry,
                 "GP entry " + hex(entry) + ": a segment of " + std::to_string(length) +
                     " words at " + hex(va) + " crosses the end of the 40-bit VA space",
                 slot_va, Access::kRead);
  }
  ch_.seg = {.active = true, .va = va, .words = length, .pos = 0, .data_index = 0};
  return Step::kNext;
}

Step ChannelRunner::run_segment() {
  auto& seg = ch_.seg;
  header_va_ = seg.va + uint64_t{seg.pos} * 4;
  method_ = Fault::kNoMethod;
  auto mem = access(seg.va, size_t{seg.words} * 4, Access::kRead, "pushbuffer segment");
  if (!mem) return Step::kStop;
  auto word = [&](uint32_t i) {
    uint32_t w;
    std::memcpy(&w, *mem + size_t{i} * 4, 4);
    return w;
  };
  while (seg.pos < seg.words) {
    uint32_t h = word(seg.pos);
    header_va_ = seg.va + uint64_t{seg.pos} * 4;
    method_ = Fault::kNoMethod;
    if (h == 0) {  // NV_FIFO_DMA_NOP
      seg.pos++;
      continue;
    }
    uint32_t op = h >> 29, sc = h >> 13 & 7, m = (h & 0xfff) << 2;
    if (op == kSecOpEndPbSegment) break;
    if (op != kSecOpIncMethod && op != kSecOpNonIncMethod && op != kSecOpImmdDataMethod &&
        op != kSecOpOneInc) {
      return fault(FaultKind::kPushbuffer, "pushbuffer entry " + hex(h) + " has SEC_OP " +
                                               sec_op_name(op) + ": not a method header");
    }
    if ((h & kHeaderReservedBit12) != 0) {
      return fault(FaultKind::kPushbuffer, "method header " + hex(h) + " sets reserved bit 12");
    }
    if (op == kSecOpImmdDataMethod) {
      Step s = method(sc, m, h >> 16 & 0x1fff);
      if (s != Step::kNext) return s;  // blocked: the header is executed again
      seg.pos++;
      continue;
    }
    uint32_t count = h >> 16 & 0x1fff;
    if (count > seg.words - seg.pos - 1) {
      return fault(FaultKind::kPushbuffer,
                   "method header " + hex(h) + " announces " + std::to_string(count) +
                       " data words; the segment of " + std::to_string(seg.words) +
                       " words ends after " + std::to_string(seg.words - seg.pos - 1) +
                       " (the fake GPU does not continue a burst in the next segment)");
    }
    for (uint32_t i = seg.data_index; i < count; i++) {
      uint32_t mi = op == kSecOpIncMethod      ? m + 4 * i
                    : op == kSecOpNonIncMethod ? m
                    : i == 0                   ? m
                                               : m + 4;
      if (mi > kMaxMethod) {
        return fault(FaultKind::kPushbuffer,
                     "method header " + hex(h) + " increments past method " + hex(kMaxMethod));
      }
      Step s = method(sc, mi, word(seg.pos + 1 + i));
      if (s == Step::kBlocked) seg.data_index = i;
      if (s != Step::kNext) return s;
    }
    seg.pos += 1 + count;
    seg.data_index = 0;
  }
  seg.active = false;
  return Step::kNext;
}

Step ChannelRunner::method(uint32_t subchannel, uint32_t m, uint32_t data) {
  subchannel_ = subchannel;
  method_ = m;
  Step s;
  if (m < 0x100) {  // Host methods lie below 0x100 (dev_pbdma.ref "HOST METHODS")
    cls_ = gpu_.host_class();
    s = host_method(subchannel, m, data);
  } else {
    cls_ = ch_.classes[subchannel];
    if (subchannel >= 5) {
      return fault(FaultKind::kIllegalMethod,
                   "subchannels 5-7 carry software methods (not modelled)");
    }
    if (cls_ == 0) {
      return fault(FaultKind::kIllegalMethod, "engine method on subchannel " +
                                                  std::to_string(subchannel) +
                                                  " before SET_OBJECT bound a class to it");
    }
    ch_.engine[subchannel << 16 | m] = data;
    s = is_compute_class(cls_) ? compute_method(m, data) : copy_method(m, data);
  }
  if (s == Step::kNext) {
    progressed_ = true;
    count(&GpuCounters::methods);
  }
  return s;
}

std::optional<uint8_t*> ChannelRunner::access(uint64_t va,
                                              size_t bytes,
                                              Access a,
                                              std::string_view what) {
  CHECK_GT(bytes, 0u);
  std::optional<uint64_t> injected;
  {
    std::lock_guard info(gpu_.info_mu_);
    auto it = gpu_.fault_vas_.lower_bound(va);
    if (it != gpu_.fault_vas_.end() && *it - va < bytes) injected = *it;
  }
  std::string range = std::string(what) + ": " + std::to_string(bytes) + " bytes at " + hex(va);
  if (injected) {
    fault(FaultKind::kMmuFault, range + " (" + hex(*injected) + " made unmapped)", *injected, a);
    return std::nullopt;
  }
  if (auto p = gpu_.memory_.resolve(va, bytes)) return p;
  // The first byte no allocation covers (resolve is monotonic in the length from one start).
  uint64_t bad = va;
  if (gpu_.memory_.resolve(va, 1)) {
    size_t ok = 1, fail = bytes;
    while (fail - ok > 1) {
      size_t mid = ok + (fail - ok) / 2;
      (gpu_.memory_.resolve(va, mid) ? ok : fail) = mid;
    }
    bad = va + ok;
  }
  fault(FaultKind::kMmuFault, range + " (no allocation covers " + hex(bad) + ")", bad, a);
  return std::nullopt;
}

Step ChannelRunner::fault(FaultKind kind,
                          std::string what,
                          std::optional<uint64_t> address,
                          Access a) {
  Fault f;
  f.kind = kind;
  f.token = ch_.cfg.token;
  f.address = address.value_or(qmd_va_ != 0 ? qmd_va_ : header_va_);
  f.access = a;
  if (method_ != Fault::kNoMethod) {
    f.subchannel = subchannel_;
    f.cls = cls_;
    f.method = method_;
    f.pushbuffer_va = header_va_;
  }
  f.qmd_va = qmd_va_;
  f.what = std::move(what);
  ch_.dead = true;
  ch_.blocked = false;
  std::function<void(const Fault&)> hook;
  {
    std::lock_guard info(gpu_.info_mu_);
    gpu_.faults_.push_back(f);
    hook = gpu_.fault_hook_;
  }
  if (hook) hook(f);
  return Step::kStop;
}

void ChannelRunner::count(uint64_t GpuCounters::* field, uint64_t n) {
  std::lock_guard info(gpu_.info_mu_);
  gpu_.counters_.*field += n;
}

}  // namespace baregrad::mock
