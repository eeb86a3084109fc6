// One KFD user-mode queue as the device drives it: its ring (CPU-mapped GTT), the write pointer
// the engine reads, the doorbell, and a completion counter released at the end of every
// submission, which tells when ring words (and the submissions' argument blocks and bound
// command buffers) may be reused and what the engine was doing when it stopped.
//
// Submission order (submit()): wait until the words the submission overwrites belong to
// completed submissions; copy the words into the ring at wptr (PM4: wrapping at the end; SDMA:
// zero-word NOPs up to the end first when they would straddle it); append the completion
// release; write the new write pointer (64-bit, PM4 in dwords, SDMA in bytes) to the write
// pointer address; ring the doorbell with the same value (hcq::Doorbell fences first).
//
// An AQL ring (submit_aql()) holds 64-byte packets: each kernel dispatch of the recording is one
// packet, each run of PM4 words between them a PM4-IB packet calling those words, which a bound
// recording already has in GPU memory and an unbound one gets copied into the ring's IB area (a
// second GTT ring, reused as submissions complete). Each packet's body is written before its
// header (aql_publish), free slots hold an INVALID header, the write pointer is
// amd_queue_t.write_dispatch_id (packets) and the doorbell gets the last packet's index.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "drivers/amd/iface_kfd.h"
#include "hcq/hcq.h"

namespace baregrad::amd {

class Device;

class Ring {
 public:
  enum class Kind : uint8_t { kPm4, kSdma, kAql };
  // What a submission launched, kept while it is in flight (fault and hang reports).
  struct Pending {
    uint64_t begin, end;  // ring dwords [begin, end), monotonic counts
    uint64_t seq;
    std::vector<std::string> kernels;
    uint64_t ib_begin = 0, ib_end = 0;  // AQL: IB-area dwords [ib_begin, ib_end), monotonic
  };

  Ring(Device& dev, Kind kind, std::string name) : dev_(dev), kind_(kind), name_(std::move(name)) {}
  ~Ring();

  // Allocates the ring (`bytes`, a power of two, of CPU-mapped GTT; AQL: and its IB area of
  // the same size), takes the 64-bit read and write pointer slots at CPU-mapped GTT
  // `pointers_cpu` / `pointers_va` + `rptr_offset` / `wptr_offset`, creates the KFD queue from
  // `req` (its ring and pointer fields filled in here) and the completion counter.
  Status init(KfdIface& kfd,
              size_t bytes,
              uint8_t* pointers_cpu,
              uint64_t pointers_va,
              uint64_t rptr_offset,
              uint64_t wptr_offset,
              KfdQueueRequest req);
  // Publishes `words` (see the file comment); `kernels` names what they launch. Returns the
  // submission's sequence number in *seq. ResourceExhausted when they cannot fit the ring;
  // DeadlineExceeded naming the ring when the engine frees no space within the device timeout.
  Status submit(std::span<const uint32_t> words,
                std::vector<std::string> kernels,
                uint64_t* seq = nullptr);
  // AQL: publishes `words`, a compute recording whose 16-word kernel dispatch packets start at
  // the word offsets `dispatch_at` (ascending; dword 0 of each is its header word), as packets
  // (see the file comment). `words_va` is the GPU address of `words` when they are in GPU memory
  // (a bound recording), else 0 (its PM4 runs are copied into the IB area). Errors as submit().
  Status submit_aql(std::span<const uint32_t> words,
                    std::span<const uint32_t> dispatch_at,
                    uint64_t words_va,
                    std::vector<std::string> kernels,
                    uint64_t* seq = nullptr);
  // Waits (progress(), the device timeout without progress) until submission `seq` completed.
  Status wait(uint64_t seq, const std::string& what);
  uint64_t completed() const { return done_ ? done_->value() : 0; }
  uint64_t last_seq() const { return seq_.load(); }
  const std::string& name() const { return name_; }
  Kind kind() const { return kind_; }
  uint32_t queue_id() const { return queue_.id(); }
  const KfdQueue& queue() const { return queue_; }
  // The oldest submission not completed, if any (a copy; try-locks: nullopt when busy).
  std::optional<Pending> oldest_pending(bool* busy = nullptr);
  // The ring words of `p` (a copy, unwrapped), for reports; on an AQL ring the PM4 words its
  // PM4-IB packets call (those in the IB area or in a live CPU-visible buffer of the device).
  std::vector<uint32_t> words_of(const Pending& p);
  // Frees the ring and its queue (after the device is idle).
  void release();

 private:
  // Waits until `n` more ring dwords (and `ib` more IB-area dwords) are free.
  Status wait_space(uint64_t n, uint64_t ib = 0);
  // The write pointer of `dwords` ring dwords: PM4 dwords, SDMA bytes, AQL packets.
  uint64_t units(uint64_t dwords) const {
    return kind_ == Kind::kPm4 ? dwords : kind_ == Kind::kSdma ? dwords * 4 : dwords / 16;
  }
  // Publishes the ring words from put_ to `at`, records the submission and rings the doorbell.
  void publish(uint64_t at, uint64_t ib_at, std::vector<std::string> kernels, uint64_t seq);

  Device& dev_;
  Kind kind_;
  std::string name_;
  KfdMemory ring_;
  uint32_t* ring_words_ = nullptr;
  uint64_t ring_dwords_ = 0;
  hcq::Mmio wptr_;  // the 64-bit write pointer slot
  KfdMemory ib_;    // AQL: the IB area unbound PM4 runs are copied into
  uint32_t* ib_words_ = nullptr;
  uint64_t ib_put_ = 0;  // AQL: IB-area dwords written, monotonic
  uint64_t rptr_va_ = 0;
  KfdQueue queue_;
  std::mutex mu_;
  uint64_t put_ = 0;  // dwords written, monotonic
  std::deque<Pending> in_flight_;
  std::atomic<uint64_t> seq_{0};
  std::unique_ptr<hcq::Signal> done_;        // the completion counter
  std::unique_ptr<hcq::CmdStream> release_;  // its release, the payload symbolic (var 0)
};

}  // namespace baregrad::amd
