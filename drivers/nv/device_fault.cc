// nv::Device fault reports: the channels' error notifiers, read after every submit and in every
// wait loop, and, once RM wrote one, the report built from the debugger object's MMU fault info
// and SM error states, mapped back to the buffer and the kernel that own the addresses.

#include <algorithm>
#include <cstring>

#include "base/format.h"
#include "drivers/nv/device.h"
#include "drivers/nv/methods.h"
#include "drivers/nv/pushbuf.h"

namespace baregrad::nv {
namespace {

// What a pushbuffer segment asks of the GPU, from its method headers (as pushbuf.h writes
// them; anything else ends the walk): the QMDs SEND_PCAS_A on the compute subchannel launches,
// and the semaphore acquires of host methods (SEM_ADDR_LO/HI, SEM_PAYLOAD_LO/HI, SEM_EXECUTE).
struct Acquire {
  uint64_t address = 0, value = 0;
  bool b64 = false;
};
struct Segment {
  std::vector<uint64_t> qmds;
  std::vector<Acquire> acquires;
};
Segment walk_segment(const uint32_t* w, size_t words) {
  constexpr uint32_t kSemPayloadHi = kSemAddrLo + 12;
  Segment seg;
  uint32_t sem[4] = {};  // ADDR_LO, ADDR_HI, PAYLOAD_LO, PAYLOAD_HI
  for (size_t i = 0; i < words;) {
    uint32_t h = w[i++];
    auto op = static_cast<SecOp>(h >> 29);
    uint32_t count = (h >> 16) & kMaxMethodCount;
    uint32_t sc = (h >> 13) & 7, method = (h & 0xfff) << 2;
    if (h == 0 || op == SecOp::kImmdDataMethod) continue;  // NOP, or data in the header
    if (op != SecOp::kIncMethod && op != SecOp::kNonIncMethod && op != SecOp::kOneInc) break;
    for (uint32_t k = 0; k < count && i < words; ++k, ++i) {
      uint32_t m = op == SecOp::kIncMethod      ? method + 4 * k
                   : op == SecOp::kNonIncMethod ? method
                                                : method + (k == 0 ? 0 : 4);
      if (sc == static_cast<uint32_t>(Subchannel::kCompute) && m == kSendPcasA) {
        seg.qmds.push_back(uint64_t{w[i]} << 8);
      } else if (m >= kSemAddrLo && m <= kSemPayloadHi) {
        sem[(m - kSemAddrLo) / 4] = w[i];
      } else if (m == kSemExecute && (w[i] & 7) == kSemOperationAcqCircGeq) {
        seg.acquires.push_back({(uint64_t{sem[1]} << 32) | sem[0],
                                (uint64_t{sem[3]} << 32) | sem[2],
                                (w[i] & kSemPayloadSize64Bit) != 0});
      }
    }
  }
  return seg;
}

// The segment of the last GP entry channel `entries` (of `n`) began, given USERD GPGet `get`:
// the entry before GPGet. NOTE: GPGet counts an entry once the channel begins it (the fake
// GPU's rule; on hardware GP entries may be prefetched further). nullopt when its words are not
// in CPU-visible memory of `mem`.
std::optional<Segment> begun_segment(const hcq::Mmio& entries,
                                     uint32_t get,
                                     uint32_t n,
                                     const hcq::Allocator& mem) {
  uint64_t entry = entries.read<uint64_t>(size_t{(get + n - 1) % n} * kGpEntryBytes);
  uint64_t va = (entry & 0xfffffffc) | ((entry >> 32) & 0xff) << 32;
  auto words = static_cast<size_t>((entry >> 42) & kGpEntryMaxWords);
  std::optional<hcq::Buffer> seg = mem.find(va);
  if (words == 0 || !seg || seg->cpu == nullptr || va + words * 4 > seg->va + seg->size)
    return std::nullopt;
  return walk_segment(static_cast<const uint32_t*>(seg->cpu) + (va - seg->va) / 4, words);
}

}  // namespace

void Device::progress() {
  os_->progress();
  // The cheap path, after every submit and in every wait: one load per channel.
  if (RmGpu::error_status(compute_.rm) == 0 && RmGpu::error_status(copy_.rm) == 0) return;
  std::lock_guard lock(fault_mu_);
  if (fault_reported_) return;
  fault_reported_ = true;
  set_error(internal(report()));
}

std::string Device::report() {
  // The channels whose notifiers RM wrote (an MMU fault notifies the whole channel group).
  std::vector<Channel*> hit;
  RmErrorNotifier n;
  for (Channel* ch : {&compute_, &copy_}) {
    if (RmGpu::error_status(ch->rm) == 0) continue;
    if (hit.empty()) n = RmGpu::read_error_notifier(ch->rm);
    hit.push_back(ch);
  }
  if (hit.empty()) return "GPU fault on " + name() + ": no error notifier is set any more";
  std::string where = hit[0]->name;
  // Only the compute channel has a GR engine; copies of both channels use a copy engine.
  bool compute = (hit.size() == 1 && hit[0] == &compute_) || n.info16 == kNv2080EngineTypeGraphics;
  if (hit.size() > 1) where = compute ? compute_.name : compute_.name + " or the " + copy_.name;
  std::string msg = "GPU fault on the " + where + ": " + rc_error_text(n.info32) + ", engine " +
                    nv2080_engine_name(n.info16);

  // The debugger: SM error states of the compute channel's GR context, then its MMU faults.
  std::string kernel;
  Result<RmSmErrors> sm = gpu_->read_sm_errors(compute_.rm);
  if (!sm.ok()) {
    msg += "; " + sm.status().message();
  } else if (sm->mmu_fault) {
    Result<std::vector<RmMmuFault>> mmu = gpu_->read_mmu_faults();
    if (!mmu.ok()) {
      msg += "; " + mmu.status().message();
    } else if (!mmu->empty()) {
      const RmMmuFault& f = mmu->back();  // the newest
      msg += "; MMU fault at " + hex(f.address) + " (" + mmu_fault_type_name(f.fault_type) + ", " +
             mmu_access_type_name(f.access_type) + ")";
      std::optional<hcq::Buffer> owner = allocator_->find(f.address);
      msg += owner ? " in the buffer at " + hex(owner->va) + " (" + std::to_string(owner->size) +
                         " bytes)"
                   : ", which is in no allocation";
    }
  }
  if (sm.ok() && !sm->errors.empty()) {
    const RmSmError& e = sm->errors.front();
    msg += "; SM " + std::to_string(e.sm) + ": global ESR " + hex(e.global_esr) + ", warp ESR " +
           hex(e.warp_esr) + ", PC " + hex(e.warp_pc);
    if (std::string k = program_at(e.warp_pc); !k.empty()) {
      kernel = "kernel '" + k + "' (its code holds the PC)";
    }
  }
  if (kernel.empty() && compute) {
    std::vector<std::string> ks = kernels_of_current_submission(compute_);
    for (size_t i = 0; i < ks.size(); ++i) kernel += (i ? " or '" : "kernel '") + ks[i] + "'";
    if (!kernel.empty()) kernel += " (launched by the submission the channel was executing)";
  }
  if (!kernel.empty()) msg += "; " + kernel;
  return msg;
}

std::vector<std::string> Device::kernels_of_current_submission(Channel& ch) {
  uint32_t n = ch.rm.entries;
  if (n == 0) return {};
  std::optional<Segment> seg =
      begun_segment(ch.entries, ch.userd.read<uint32_t>(kUserdGpGet) % n, n, *allocator_);
  if (!seg) return {};
  std::vector<std::string> out;
  std::lock_guard lock(qmd_mu_);
  for (uint64_t qmd : seg->qmds) {
    auto it = qmd_kernels_.find(qmd);
    if (it != qmd_kernels_.end() && std::find(out.begin(), out.end(), it->second) == out.end()) {
      out.push_back(it->second);
    }
  }
  return out;
}

std::string Device::describe_hang() {
  std::string out;
  for (Channel* ch : {&compute_, &copy_}) {
    uint32_t n = ch->rm.entries, get, put;
    {
      std::lock_guard lock(ch->mu);
      if (n == 0 || !ch->ring) continue;
      get = ch->userd.read<uint32_t>(kUserdGpGet) % n;
      put = ch->ring->put() % n;
    }
    uint64_t done = ch->done ? ch->done->value() : 0, last = ch->seq.load();
    if (get == put && done >= last) continue;  // idle
    std::string line = ch->name + ": GP entry " + std::to_string(get) + " of " +
                       std::to_string(put) + " reached, ring submissions " + std::to_string(done) +
                       " of " + std::to_string(last) + " done";
    if (std::optional<Segment> seg = begun_segment(ch->entries, get, n, *allocator_)) {
      for (const Acquire& a : seg->acquires) {
        std::optional<hcq::Buffer> m = allocator_->find(a.address);
        if (!m || !m->cpu || a.address + (a.b64 ? 8 : 4) > m->va + m->size) continue;
        const auto* p = static_cast<const uint8_t*>(m->cpu) + (a.address - m->va);
        uint64_t now = 0;
        std::memcpy(&now, p, a.b64 ? 8 : 4);
        if (now >= a.value) continue;  // satisfied
        line += "; its last begun submission waits for the semaphore at " + hex(a.address) +
                " to reach " + std::to_string(a.value) + " (it holds " + std::to_string(now) + ")";
        break;
      }
    }
    std::string ks;
    for (const std::string& k : kernels_of_current_submission(*ch))
      ks += (ks.empty() ? "'" : ", '") + k + "'";
    if (!ks.empty()) line += "; that submission launches " + ks;
    out += (out.empty() ? "" : "; ") + line;
  }
  return out;
}

}  // namespace baregrad::nv
