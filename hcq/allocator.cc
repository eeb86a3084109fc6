// LRU reuse of device memory and host copies through staging buffers on the copy queue.
#include <cstring>
#include <set>

#include "base/format.h"
#include "hcq/hcq.h"

namespace baregrad::hcq {

namespace {
// The allocators alive, so that unmapping a buffer from its peers skips closed ones.
struct LiveAllocators {
  std::mutex mu;
  std::set<const Allocator*> all;
};
// NOTE: never destroyed: devices held by static registries close during exit, after a
// function-local static constructed later would already be gone.
LiveAllocators& live_allocators() {
  static auto* live = new LiveAllocators;
  return *live;
}
}  // namespace

Allocator::Allocator(Device& dev) : dev_(dev) {
  std::lock_guard lock(live_allocators().mu);
  live_allocators().all.insert(this);
}

// NOTE: drivers call clear_cache() before destroying their allocator (raw_free is theirs).
Allocator::~Allocator() {
  std::vector<uint64_t> mapped_out;
  for (auto& [va, peers] : peers_) mapped_out.push_back(va);
  for (uint64_t va : mapped_out) unmap_from_peers(va);  // peers must not validate our memory
  std::lock_guard lock(live_allocators().mu);
  live_allocators().all.erase(this);
}

Result<Buffer> Allocator::alloc(size_t bytes, BufferSpec spec) {
  if (bytes == 0) return invalid_argument("alloc of 0 bytes on " + dev_.name());
  {
    std::lock_guard lock(mu_);
    auto it = spec.nolru ? cache_.end() : cache_.find({bytes, spec});
    if (it != cache_.end()) {
      Buffer b = it->second;
      cache_.erase(it);
      cached_bytes_ -= bytes;
      used_bytes_ += bytes;
      live_[b.va] = b;
      return b;
    }
  }
  Result<Buffer> b = raw_alloc(bytes, spec);
  if (!b.ok() && b.status().code() == StatusCode::kResourceExhausted) {
    // Give the cache back and try once more.
    RETURN_IF_ERROR(clear_cache());
    b = raw_alloc(bytes, spec);
  }
  if (!b.ok())
    return Status(b.status().code(), "alloc of " + std::to_string(bytes) + " bytes on " +
                                         dev_.name() + " (" + std::to_string(used_bytes()) +
                                         " bytes in use): " + b.status().message());
  b->spec = spec;
  std::lock_guard lock(mu_);
  used_bytes_ += bytes;
  live_[b->va] = *b;
  mapped_[b->va] = *b;
  return b;
}

Result<Buffer> Allocator::adopt(void* host, size_t bytes) {
  if (!host || bytes == 0)
    return invalid_argument("adopt of " + std::to_string(bytes) + " bytes at " +
                            hex(reinterpret_cast<uintptr_t>(host)) + " on " + dev_.name());
  auto va = reinterpret_cast<uint64_t>(host);
  if (va + bytes < va)
    return invalid_argument("adopt: " + std::to_string(bytes) + " bytes at " + hex(va) +
                            " wrap the address space");
  Buffer b{va, bytes, host, 0,
           BufferSpec{.host = true, .cpu_access = true, .nolru = true, .external = true}};
  std::lock_guard lock(mu_);
  auto next = mapped_.lower_bound(va);
  bool overlaps =
      (next != mapped_.end() && next->first < va + bytes) ||
      (next != mapped_.begin() && std::prev(next)->first + std::prev(next)->second.size > va);
  if (overlaps)
    return invalid_argument("adopt: host memory " + hex(va) + " + " + std::to_string(bytes) +
                            " overlaps a buffer of " + dev_.name());
  live_[va] = b;
  mapped_[va] = b;
  return b;
}

void Allocator::free(const Buffer& b) {
  if (b.size == 0) return;
  Buffer b_freed;
  {
    std::lock_guard lock(mu_);
    auto it = live_.find(b.va);
    CHECK(it != live_.end() && it->second.size == b.size)
        << "free of " << b.size << " bytes at 0x" << std::hex << b.va
        << " that are not an allocation of " << dev_.name();
    Buffer stored = it->second;  // the caller's copy may lack the CPU mapping or the spec
    live_.erase(it);
    if (!stored.spec.external) used_bytes_ -= stored.size;
    if (!stored.spec.nolru) {
      cache_.emplace(std::make_pair(stored.size, stored.spec), stored);
      cached_bytes_ += stored.size;
      return;
    }
    b_freed = stored;
  }
  {
    std::lock_guard lock(mu_);
    mapped_.erase(b_freed.va);
    unmap_generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  unmap_from_peers(b_freed.va);
  if (!b_freed.spec.external) raw_free(b_freed);
}

Status Allocator::clear_cache() {
  std::multimap<std::pair<size_t, BufferSpec>, Buffer> cache;
  {
    std::lock_guard lock(mu_);
    cache.swap(cache_);
    cached_bytes_ = 0;
  }
  if (!cache.empty()) {
    Status s = dev_.synchronize();
    if (!s.ok() && !dev_.failed()) return s;
  }
  for (auto& [key, b] : cache) {
    {
      std::lock_guard lock(mu_);
      mapped_.erase(b.va);
      unmap_generation_.fetch_add(1, std::memory_order_acq_rel);
    }
    unmap_from_peers(b.va);
    raw_free(b);
  }
  return Status();
}

void Allocator::release_staging() {
  std::lock_guard copy_lock(copy_mu_);
  for (Staging& st : staging_) free(st.buf);
  staging_.clear();
}

std::optional<Buffer> Allocator::find(uint64_t va) const {
  std::lock_guard lock(mu_);
  for (const auto* m : {&mapped_, &foreign_}) {
    auto it = m->upper_bound(va);
    if (it == m->begin()) continue;
    --it;
    if (va < it->second.va + it->second.size) return it->second;
  }
  return std::nullopt;
}

Status Allocator::map_into(const Buffer& b, Device& peer) {
  if (&peer == &dev_) return Status();
  if (peer.peer_group() != dev_.peer_group())
    return unimplemented("map of a buffer of " + dev_.name() + " (peer group " + dev_.peer_group() +
                         ") into " + peer.name() + " (peer group " + peer.peer_group() + ")");
  {
    std::lock_guard lock(mu_);
    auto it = live_.find(b.va);
    if (it == live_.end() || it->second.size != b.size)
      return invalid_argument("map into " + peer.name() + " of " + std::to_string(b.size) +
                              " bytes that are not an allocation of " + dev_.name());
    peers_[b.va].push_back(&peer.allocator());
  }
  Allocator& other = peer.allocator();
  std::lock_guard lock(other.mu_);
  other.foreign_[b.va] = b;
  return Status();
}

void Allocator::unmap_from_peers(uint64_t va) {
  std::vector<Allocator*> peers;
  {
    std::lock_guard lock(mu_);
    auto it = peers_.find(va);
    if (it == peers_.end()) return;
    peers.swap(it->second);
    peers_.erase(it);
  }
  std::lock_guard live(live_allocators().mu);  // a peer closes only after we are done here
  for (Allocator* p : peers) {
    if (!live_allocators().all.count(p)) continue;
    std::lock_guard lock(p->mu_);
    p->foreign_.erase(va);
    p->unmap_generation_.fetch_add(1, std::memory_order_acq_rel);
  }
}

size_t Allocator::used_bytes() const {
  std::lock_guard lock(mu_);
  return used_bytes_;
}

size_t Allocator::cached_bytes() const {
  std::lock_guard lock(mu_);
  return cached_bytes_;
}

Status Allocator::ensure_staging() {
  if (!staging_.empty()) return Status();
  for (int i = 0; i < kStagingCount; i++) {
    BufferSpec spec{.host = true, .cpu_access = true, .nolru = true};
    ASSIGN_OR_RETURN(Buffer b, alloc(kStagingBytes, spec));
    staging_.push_back({b, 0});
  }
  return Status();
}

namespace {
Status check_range(const char* op, const Device& dev, const Buffer& b, size_t bytes) {
  if (bytes > b.size)
    return invalid_argument(std::string(op) + " of " + std::to_string(bytes) +
                            " bytes into a buffer of " + std::to_string(b.size) + " on " +
                            dev.name());
  return Status();
}
}  // namespace

Status Allocator::wait_staging(const Staging& st) {
  if (st.epoch != dev_.timeline_epoch()) return Status();
  return dev_.timeline().wait(st.free_after);
}

Status Allocator::copy_in(const Buffer& dst, const void* src, size_t bytes) {
  RETURN_IF_ERROR(check_range("copy_in", dev_, dst, bytes));
  RETURN_IF_ERROR(dev_.error());
  if (bytes == 0) return Status();
  std::lock_guard copy_lock(copy_mu_);
  RETURN_IF_ERROR(ensure_staging());
  std::unique_ptr<HwQueue> q = dev_.copy_queue();
  if (!q) q = dev_.compute_queue();
  for (size_t off = 0; off < bytes; off += kStagingBytes) {
    size_t n = std::min(kStagingBytes, bytes - off);
    Staging& st = staging_[next_staging_++ % staging_.size()];
    // The chunk's previous copy must be done before the CPU overwrites it.
    RETURN_IF_ERROR(wait_staging(st));
    std::memcpy(st.buf.cpu, static_cast<const uint8_t*>(src) + off, n);
    st.epoch = dev_.timeline_epoch();
    ASSIGN_OR_RETURN(st.free_after, dev_.submit_on_timeline(
                                        *q,
                                        [&](HwQueue& hq) {
                                          hq.copy(static_cast<int64_t>(dst.va + off),
                                                  static_cast<int64_t>(st.buf.va),
                                                  static_cast<int64_t>(n));
                                        },
                                        {}, "copy_in"));
  }
  return Status();
}

Status Allocator::copy_out(void* dst, const Buffer& src, size_t bytes) {
  RETURN_IF_ERROR(check_range("copy_out", dev_, src, bytes));
  RETURN_IF_ERROR(dev_.synchronize());
  if (bytes == 0) return Status();
  std::lock_guard copy_lock(copy_mu_);
  RETURN_IF_ERROR(ensure_staging());
  std::unique_ptr<HwQueue> q = dev_.copy_queue();
  if (!q) q = dev_.compute_queue();
  // Keep every staging buffer busy: chunk i is copied out of staging while the device fills
  // chunks i+1 .. i+count-1.
  size_t chunks = (bytes + kStagingBytes - 1) / kStagingBytes, issued = 0;
  auto issue = [&]() -> Status {
    size_t off = issued * kStagingBytes, n = std::min(kStagingBytes, bytes - off);
    Staging& st = staging_[issued % staging_.size()];
    st.epoch = dev_.timeline_epoch();
    ASSIGN_OR_RETURN(st.free_after, dev_.submit_on_timeline(
                                        *q,
                                        [&](HwQueue& hq) {
                                          hq.copy(static_cast<int64_t>(st.buf.va),
                                                  static_cast<int64_t>(src.va + off),
                                                  static_cast<int64_t>(n));
                                        },
                                        {}, "copy_out"));
    issued++;
    return Status();
  };
  for (size_t i = 0; i < chunks; i++) {
    while (issued < chunks && issued < i + staging_.size()) RETURN_IF_ERROR(issue());
    const Staging& st = staging_[i % staging_.size()];
    RETURN_IF_ERROR(wait_staging(st));
    size_t off = i * kStagingBytes, n = std::min(kStagingBytes, bytes - off);
    std::memcpy(static_cast<uint8_t*>(dst) + off, st.buf.cpu, n);
  }
  return Status();
}

}  // namespace baregrad::hcq
