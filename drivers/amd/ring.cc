#include "drivers/amd/ring.h"

#include <array>
#include <cstring>
#include <thread>

#include "base/format.h"
#include "drivers/amd/device.h"
#include "drivers/amd/pm4.h"
#include "drivers/amd/sdma.h"

namespace baregrad::amd {

Ring::~Ring() { release(); }

void Ring::release() {
  done_.reset();
  (void)queue_.destroy();  // before its ring memory goes
  (void)ring_.free();
}

Status Ring::init(
    KfdIface& kfd, size_t bytes, uint8_t* pointers_cpu, uint64_t pointers_va, KfdQueueRequest req) {
  ASSIGN_OR_RETURN(ring_, kfd.alloc(bytes, KfdMemKind::kGtt, true));
  ring_words_ = static_cast<uint32_t*>(ring_.cpu());
  ring_dwords_ = bytes / 4;
  std::memset(ring_words_, 0, bytes);
  std::memset(pointers_cpu, 0, 16);
  rptr_va_ = pointers_va;
  wptr_ = hcq::Mmio(pointers_cpu + 8, 8);
  req.ring = &ring_;
  req.read_pointer_address = pointers_va;
  req.write_pointer_address = pointers_va + 8;
  ASSIGN_OR_RETURN(queue_, kfd.create_queue(req));
  ASSIGN_OR_RETURN(done_, dev_.new_signal("ring completions of the " + name_));
  // The completion counter's release: after everything before it, with the caches written back.
  release_ = std::make_unique<hcq::CmdStream>("completion release of the " + name_, 16);
  if (kind_ == Kind::kPm4) {
    emit_release_mem(*release_, dev_.arch(),
                     {.addr = static_cast<int64_t>(done_->va()),
                      .data = hcq::Value::sym(0),
                      .data_sel = DataSel::k64BitData,
                      .cache_flush = true});
  } else {
    // NOTE: 32-bit: a queue's 2^32nd submission would wrap the counter.
    emit_sdma_fence(*release_, dev_.arch().sdma, static_cast<int64_t>(done_->va()),
                    Word::lo(hcq::Value::sym(0)));
  }
  return Status();
}

Status Ring::submit(std::span<const uint32_t> words,
                    std::vector<std::string> kernels,
                    uint64_t* seq_out) {
  uint64_t n = words.size() + release_->size();
  // Half the ring at most, so that a submission never waits for its own words.
  if (n > ring_dwords_ / 2)
    return resource_exhausted(name_ + ": a submission of " + std::to_string(words.size()) +
                              " words does not fit half the ring of " +
                              std::to_string(ring_dwords_) + " words");
  std::lock_guard lock(mu_);
  uint64_t off = put_ % ring_dwords_;
  // SDMA packets may not straddle the end of the ring: zero words (NOPs) up to it instead.
  uint64_t pad = kind_ == Kind::kSdma && off + n > ring_dwords_ ? ring_dwords_ - off : 0;
  RETURN_IF_ERROR(wait_space(pad + n));
  uint64_t seq = seq_.load() + 1;
  release_->apply(std::array<int64_t, 1>{static_cast<int64_t>(seq)});
  uint64_t at = put_;
  auto put_words = [&](std::span<const uint32_t> w) {
    for (uint32_t x : w) ring_words_[at++ % ring_dwords_] = x;
  };
  for (uint64_t i = 0; i < pad; i++) ring_words_[at++ % ring_dwords_] = 0;
  put_words(words);
  put_words(release_->words());
  in_flight_.push_back({put_, at, seq, std::move(kernels)});
  put_ = at;
  seq_.store(seq);
  // The documented order: ring words, write pointer, doorbell (which fences first).
  std::atomic_thread_fence(std::memory_order_release);
  wptr_.write<uint64_t>(0, units(put_));
  queue_.doorbell().ring(units(put_));
  if (seq_out) *seq_out = seq;
  return Status();
}

Status Ring::wait_space(uint64_t n) {
  uint64_t completed_seq = completed();
  while (!in_flight_.empty() && in_flight_.front().seq <= completed_seq) in_flight_.pop_front();
  while (!in_flight_.empty() && put_ + n - in_flight_.front().begin > ring_dwords_) {
    RETURN_IF_ERROR(wait(in_flight_.front().seq,
                         "the ring (" + std::to_string(ring_dwords_ * 4) + " bytes) is full"));
    in_flight_.pop_front();
  }
  return Status();
}

Status Ring::wait(uint64_t seq, const std::string& what) {
  uint64_t seen = completed();
  auto t0 = std::chrono::steady_clock::now();
  for (int spins = 0; seen < seq; spins++) {
    RETURN_IF_ERROR(dev_.error());
    if (spins < 64) {
      dev_.poll();
    } else {
      dev_.progress();  // sleeps in WAIT_EVENTS up to kEventWaitMs
    }
    uint64_t now_seen = completed();
    auto now = std::chrono::steady_clock::now();
    if (now_seen != seen) {  // the engine moves: the timeout restarts
      seen = now_seen;
      t0 = now;
    } else if (now - t0 > dev_.options().timeout) {
      return deadline_exceeded(name_ + ": " + what + ": submission " + std::to_string(seq) +
                               " not complete after " +
                               std::to_string(dev_.options().timeout.count()) +
                               " ms without progress (the engine completed up to submission " +
                               std::to_string(seen) + ")");
    }
  }
  return Status();
}

std::optional<Ring::Pending> Ring::oldest_pending(bool* busy) {
  std::unique_lock lock(mu_, std::try_to_lock);
  if (busy) *busy = !lock.owns_lock();
  if (!lock.owns_lock()) return std::nullopt;
  uint64_t c = completed();
  for (const Pending& p : in_flight_)
    if (p.seq > c) return p;
  return std::nullopt;
}

std::vector<uint32_t> Ring::words_of(const Pending& p) {
  std::vector<uint32_t> out;
  for (uint64_t i = p.begin; i < p.end && out.size() < ring_dwords_; i++)
    out.push_back(ring_words_[i % ring_dwords_]);
  return out;
}

}  // namespace baregrad::amd
