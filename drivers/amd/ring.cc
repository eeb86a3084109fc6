#include "drivers/amd/ring.h"

#include <array>
#include <cstring>
#include <thread>

#include "base/format.h"
#include "drivers/amd/aql.h"
#include "drivers/amd/device.h"
#include "drivers/amd/pm4.h"
#include "drivers/amd/sdma.h"

namespace baregrad::amd {

Ring::~Ring() { release(); }

void Ring::release() {
  done_.reset();
  (void)queue_.destroy();  // before its ring memory goes
  (void)ring_.free();
  (void)ib_.free();
}

Status Ring::init(KfdIface& kfd,
                  size_t bytes,
                  uint8_t* pointers_cpu,
                  uint64_t pointers_va,
                  uint64_t rptr_offset,
                  uint64_t wptr_offset,
                  KfdQueueRequest req) {
  ASSIGN_OR_RETURN(ring_, kfd.alloc(bytes, KfdMemKind::kGtt, true));
  ring_words_ = static_cast<uint32_t*>(ring_.cpu());
  ring_dwords_ = bytes / 4;
  std::memset(ring_words_, 0, bytes);
  if (kind_ == Kind::kAql) {
    // Every free slot holds an INVALID header: the CP never takes a half-written packet.
    for (uint64_t i = 0; i < ring_dwords_; i += 16)
      ring_words_[i] = static_cast<uint32_t>(AqlPacketType::kInvalid);
    ASSIGN_OR_RETURN(ib_, kfd.alloc(bytes, KfdMemKind::kGtt, true));
    ib_words_ = static_cast<uint32_t*>(ib_.cpu());
  }
  std::memset(pointers_cpu + rptr_offset, 0, 8);
  std::memset(pointers_cpu + wptr_offset, 0, 8);
  rptr_va_ = pointers_va + rptr_offset;
  wptr_ = hcq::Mmio(pointers_cpu + wptr_offset, 8);
  req.ring = &ring_;
  req.read_pointer_address = pointers_va + rptr_offset;
  req.write_pointer_address = pointers_va + wptr_offset;
  ASSIGN_OR_RETURN(queue_, kfd.create_queue(req));
  ASSIGN_OR_RETURN(done_, dev_.new_signal("ring completions of the " + name_));
  // The completion counter's release: after everything before it, with the caches written back.
  release_ = std::make_unique<hcq::CmdStream>("completion release of the " + name_, 16);
  if (kind_ != Kind::kSdma) {  // AQL: in a PM4-IB packet
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
  publish(at, ib_put_, std::move(kernels), seq);
  if (seq_out) *seq_out = seq;
  return Status();
}

Status Ring::submit_aql(std::span<const uint32_t> words,
                        std::span<const uint32_t> dispatch_at,
                        uint64_t words_va,
                        std::vector<std::string> kernels,
                        uint64_t* seq_out) {
  CHECK(kind_ == Kind::kAql) << name_ << ": submit_aql on a "
                             << (kind_ == Kind::kPm4 ? "PM4" : "SDMA") << " ring";
  // The packets: PM4 runs (split at the INDIRECT_BUFFER size limit) and dispatches, in order.
  struct Segment {
    bool dispatch;
    uint64_t begin, len;
  };
  std::vector<Segment> segs;
  uint64_t staged = 0;  // PM4 words copied into the IB area
  auto pm4_run = [&](uint64_t begin, uint64_t end) {
    for (uint64_t b = begin; b < end; b += kMaxIndirectBufferDwords) {
      uint64_t len = std::min<uint64_t>(end - b, kMaxIndirectBufferDwords);
      segs.push_back({false, b, len});
      if (words_va == 0) staged += len;
    }
  };
  uint64_t pos = 0;
  for (uint32_t d : dispatch_at) {
    CHECK(d >= pos && d + 16 <= words.size()) << name_ << ": dispatch packet at word " << d;
    pm4_run(pos, d);
    segs.push_back({true, d, 16});
    pos = d + 16;
  }
  pm4_run(pos, words.size());
  const uint64_t n = (segs.size() + 1) * 16, ib = staged + release_->size();
  if (n > ring_dwords_ / 2 || ib > ring_dwords_ / 2)
    return resource_exhausted(name_ + ": a submission of " + std::to_string(segs.size() + 1) +
                              " AQL packets calling " + std::to_string(ib) +
                              " copied PM4 words does not fit half the ring of " +
                              std::to_string(ring_dwords_ / 16) + " packets and " +
                              std::to_string(ring_dwords_) + " IB words");
  std::lock_guard lock(mu_);
  // Each submission's IB words are contiguous: none straddles the end of the IB area.
  uint64_t ib_off = ib_put_ % ring_dwords_;
  uint64_t ib_pad = ib_off + ib > ring_dwords_ ? ring_dwords_ - ib_off : 0;
  RETURN_IF_ERROR(wait_space(n, ib_pad + ib));
  uint64_t seq = seq_.load() + 1;
  release_->apply(std::array<int64_t, 1>{static_cast<int64_t>(seq)});
  uint64_t ib_at = ib_put_ + ib_pad;
  auto stage = [&](std::span<const uint32_t> w) {
    uint64_t off = ib_at % ring_dwords_;
    std::memcpy(ib_words_ + off, w.data(), w.size() * 4);
    ib_at += w.size();
    return ib_.va() + off * 4;
  };
  uint64_t at = put_;
  auto slot = [&] {
    AqlSlot s(ring_words_ + at % ring_dwords_, 16);
    at += 16;
    return s;
  };
  for (const Segment& g : segs) {
    AqlSlot s = slot();
    if (g.dispatch) {
      std::memcpy(&s[1], &words[g.begin + 1], 15 * 4);
      aql_publish(s, words[g.begin]);
    } else {
      uint64_t va = words_va != 0 ? words_va + g.begin * 4 : stage(words.subspan(g.begin, g.len));
      aql_publish(s, encode_pm4_ib(s, va, static_cast<uint32_t>(g.len), 0));
    }
  }
  AqlSlot s = slot();
  aql_publish(
      s, encode_pm4_ib(s, stage(release_->words()), static_cast<uint32_t>(release_->size()), 0));
  publish(at, ib_at, std::move(kernels), seq);
  if (seq_out) *seq_out = seq;
  return Status();
}

void Ring::publish(uint64_t at, uint64_t ib_at, std::vector<std::string> kernels, uint64_t seq) {
  in_flight_.push_back({put_, at, seq, std::move(kernels), ib_put_, ib_at});
  put_ = at;
  ib_put_ = ib_at;
  seq_.store(seq);
  // The documented order: ring words, write pointer, doorbell (which fences first). An AQL
  // doorbell takes the index of the last packet, not the count.
  std::atomic_thread_fence(std::memory_order_release);
  wptr_.write<uint64_t>(0, units(put_));
  queue_.doorbell().ring(kind_ == Kind::kAql ? units(put_) - 1 : units(put_));
}

Status Ring::wait_space(uint64_t n, uint64_t ib) {
  uint64_t completed_seq = completed();
  while (!in_flight_.empty() && in_flight_.front().seq <= completed_seq) in_flight_.pop_front();
  while (!in_flight_.empty() && (put_ + n - in_flight_.front().begin > ring_dwords_ ||
                                 ib_put_ + ib - in_flight_.front().ib_begin > ring_dwords_)) {
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
  if (kind_ != Kind::kAql) {
    for (uint64_t i = p.begin; i < p.end && out.size() < ring_dwords_; i++)
      out.push_back(ring_words_[i % ring_dwords_]);
    return out;
  }
  for (uint64_t i = p.begin; i < p.end; i += 16) {
    const uint32_t* pk = ring_words_ + i % ring_dwords_;
    if ((pk[0] & 0xff) != static_cast<uint32_t>(AqlPacketType::kVendorSpecific)) continue;
    uint64_t va = uint64_t{pk[2]} | uint64_t{pk[3]} << 32;
    uint64_t len = pk[4] & kMaxIndirectBufferDwords;
    const uint32_t* src = nullptr;
    if (va >= ib_.va() && va + len * 4 <= ib_.va() + ring_dwords_ * 4) {
      src = ib_words_ + (va - ib_.va()) / 4;
    } else if (std::optional<hcq::Buffer> b = dev_.allocator().find(va);
               b && b->cpu && va + len * 4 <= b->va + b->size) {
      src = reinterpret_cast<const uint32_t*>(static_cast<const uint8_t*>(b->cpu) + (va - b->va));
    }
    if (src != nullptr) out.insert(out.end(), src, src + len);
  }
  return out;
}

}  // namespace baregrad::amd
