// amd::Device progress, fault and hang reports: the KFD events polled (or slept on) in every
// wait, the memory and hardware exceptions KFD raises turned into the sticky error with the
// faulting address mapped back to its buffer or kernel, and, when a wait times out, what each
// queue's oldest unfinished submission launches and waits for.

#include <cstring>

#include "base/format.h"
#include "base/log.h"
#include "drivers/amd/device.h"
#include "drivers/amd/pm4.h"
#include "drivers/amd/sdma.h"

namespace baregrad::amd {
namespace {

// A memory wait found in a submission's packets.
struct MemWait {
  uint64_t addr = 0;
  uint32_t ref = 0, mask = 0;
};

// The memory waits of PM4 words (type-3 headers as pm4.h writes them; anything else ends the
// walk): WAIT_REG_MEM with MEM_SPACE memory and FUNCTION GEQ.
std::vector<MemWait> pm4_waits(const std::vector<uint32_t>& w) {
  std::vector<MemWait> out;
  for (size_t i = 0; i < w.size();) {
    uint32_t h = w[i];
    if (h >> 30 != 3) break;
    uint32_t op = (h >> 8) & 0xff, count = (h >> 16) & 0x3fff;
    size_t body = op == kPacket3Nop && count == 0x3fff ? 0 : count + 1;  // the one-dword NOP
    if (op == kPacket3WaitRegMem && i + 6 <= w.size() && body == 6 && (w[i + 1] & 0x10) &&
        (w[i + 1] & 7) == static_cast<uint32_t>(CompareFunc::kGreaterEqual))
      out.push_back({w[i + 2] | uint64_t{w[i + 3]} << 32, w[i + 4], w[i + 5]});
    i += 1 + body;
  }
  return out;
}

// The memory waits of SDMA words (POLL_REGMEM), walking the packets sdma.h writes.
std::vector<MemWait> sdma_waits(const std::vector<uint32_t>& w) {
  std::vector<MemWait> out;
  for (size_t i = 0; i < w.size();) {
    uint32_t op = w[i] & 0xff;
    size_t n = 0;
    switch (op) {
      case kSdmaOpNop:
        n = 1;
        break;
      case kSdmaOpCopy:
        n = kSdmaCopyLinearDwords;
        break;
      case kSdmaOpFence:
        n = 4;
        break;
      case kSdmaOpTrap:
        n = 2;
        break;
      case kSdmaOpTimestamp:
        n = 3;
        break;
      case kSdmaOpPollRegmem:
        n = 6;
        break;
      case kSdmaOpWrite:
        n = i + 3 < w.size() ? 5 + (w[i + 3] & 0xfffff) : 0;
        break;
      default:
        n = 0;
    }
    if (n == 0 || i + n > w.size()) break;
    if (op == kSdmaOpPollRegmem && (w[i] >> 31) &&
        ((w[i] >> 28) & 7) == static_cast<uint32_t>(CompareFunc::kGreaterEqual))
      out.push_back({w[i + 1] | uint64_t{w[i + 2]} << 32, w[i + 3], w[i + 4]});
    i += n;
  }
  return out;
}

std::string kernel_list(const std::vector<std::string>& ks) {
  std::string out;
  for (const std::string& k : ks)
    if (out.find("'" + k + "'") == std::string::npos) out += (out.empty() ? "'" : ", '") + k + "'";
  return out;
}

}  // namespace

void Device::progress() {
  os_->progress();
  check_events(failed() ? 0 : kEventWaitMs);
}

void Device::poll() {
  os_->progress();
  check_events(0);
}

void Device::check_events(uint32_t ms) {
  if (failed() || !kfd_ || !signal_event_.valid()) return;
  const KfdEvent* events[] = {&signal_event_, &memory_event_, &hw_event_};
  Result<KfdWaitResult> r = kfd_->wait(events, ms);
  if (!r.ok()) {
    std::lock_guard lock(fault_mu_);
    if (!event_error_logged_) BG_LOG(0) << name() << ": " << r.status() << " (faults go unseen)";
    event_error_logged_ = true;
    return;
  }
  if (r->memory) set_error(internal(memory_fault_report(*r->memory)));
  if (r->hw) set_error(internal(r->hw->to_string() + " on " + name() + busy_queues()));
}

std::string Device::memory_fault_report(const KfdMemoryException& m) {
  // "MMU fault": the HCQ contract's words for a GPU page fault, on every backend (CtsFault).
  std::string msg = "MMU fault: " + m.to_string() + " on " + name();
  if (std::string k = program_at(m.va); !k.empty()) {
    msg += ", in the code of kernel '" + k + "'";
  } else if (std::optional<hcq::Buffer> b = allocator_->find(m.va)) {
    msg += ", in the buffer at " + hex(b->va) + " (" + std::to_string(b->size) +
           " bytes) at offset " + std::to_string(m.va - b->va);
  } else {
    msg += ", which is in no allocation of " + name();
  }
  return msg + busy_queues();
}

std::string Device::busy_queues() {
  std::string out;
  for (Ring* r : {compute_ring_.get(), copy_ring_.get()}) {
    if (!r) continue;
    std::optional<Ring::Pending> p = r->oldest_pending();
    if (!p) continue;
    out += "; the " + r->name() + " was executing submission " + std::to_string(p->seq) + " of " +
           std::to_string(r->last_seq());
    if (!p->kernels.empty()) out += ", which launches kernel " + kernel_list(p->kernels);
  }
  return out;
}

std::string Device::describe_hang() {
  std::string out;
  for (Ring* r : {compute_ring_.get(), copy_ring_.get()}) {
    if (!r) continue;
    bool busy = false;
    std::optional<Ring::Pending> p = r->oldest_pending(&busy);
    if (busy) {
      out += (out.empty() ? "" : "; ") + r->name() + ": busy submitting";
      continue;
    }
    if (!p) continue;
    std::string line = r->name() + ": submissions " + std::to_string(r->completed()) + " of " +
                       std::to_string(r->last_seq()) + " done";
    if (!p->kernels.empty())
      line += "; submission " + std::to_string(p->seq) + " launches " + kernel_list(p->kernels);
    std::vector<uint32_t> words = r->words_of(*p);
    for (const MemWait& w : r->kind() == Ring::Kind::kSdma ? sdma_waits(words) : pm4_waits(words)) {
      std::optional<hcq::Buffer> b = allocator_->find(w.addr);
      if (!b || !b->cpu || w.addr + 4 > b->va + b->size) continue;
      uint32_t now = 0;
      std::memcpy(&now, static_cast<const uint8_t*>(b->cpu) + (w.addr - b->va), 4);
      if ((now & w.mask) >= w.ref) continue;  // satisfied
      line += "; it waits for signal '" + signal_name(w.addr) + "' at " + hex(w.addr) +
              " to reach " + std::to_string(w.ref) + " (it holds " + std::to_string(now) + ")";
      break;
    }
    out += (out.empty() ? "" : "; ") + line;
  }
  return out;
}

}  // namespace baregrad::amd
