#include "drivers/nv/queue.h"

#include <algorithm>

#include "drivers/nv/methods.h"

namespace baregrad::nv {
namespace {
constexpr size_t kQueueWords = 1 << 14;
// Upper bounds of each command's words (checked before emitting, so that a full stream is a
// refusal, not a CHECK failure).
constexpr size_t kSemaphoreWords = 8;
constexpr size_t kCopyWords = 12;

hcq::BufferSpec host_memory() { return {.host = true, .cpu_access = true, .nolru = true}; }
}  // namespace

Queue::Queue(Device& dev, hcq::Engine engine)
    : hcq::HwQueue(dev, engine),
      dev_(dev),
      cs_(std::string(engine == hcq::Engine::kCompute ? "compute" : "copy") + " queue of " +
              dev.name(),
          kQueueWords),
      pb_(cs_) {}

Queue::~Queue() {
  drain();
  if (scratch_.size) dev_.allocator().free(scratch_);
  if (bound_.size) dev_.allocator().free(bound_);
}

void Queue::drain() {
  if (drained_) return;
  drained_ = true;
  if (submitted_ || bound_.size) (void)dev_.synchronize();       // the GPU may still read it
  if (last_seq_) (void)dev_.wait_sequence(engine(), last_seq_);  // also outside the timeline
}

bool Queue::fits(size_t words) {
  if (cs_.size() + words <= cs_.capacity()) return true;
  refuse(resource_exhausted(cs_.name() + ": the command buffer of " +
                            std::to_string(cs_.capacity()) + " words is full"));
  return false;
}

bool Queue::ok(Status s) {
  if (s.ok()) return true;
  refuse(std::move(s));
  return false;
}

hcq::HwQueue& Queue::wait(const hcq::Signal& s, hcq::Value v) {
  if (check_signal(s, "wait") && fits(kSemaphoreWords))
    ok(emit_semaphore_acquire(pb_, dev_.classes(), static_cast<int64_t>(s.va()), v));
  return *this;
}

hcq::HwQueue& Queue::signal(const hcq::Signal& s, hcq::Value v) {
  if (check_signal(s, "signal") && fits(kSemaphoreWords))
    ok(emit_semaphore_release(pb_, dev_.classes(), static_cast<int64_t>(s.va()), v));
  return *this;
}

hcq::HwQueue& Queue::timestamp(const hcq::Signal& s) {
  if (!check_signal(s, "timestamp") || !fits(kSemaphoreWords + kCopyWords)) return *this;
  if (!scratch_.size) {
    auto b = dev_.allocator().alloc(16, host_memory());
    if (!ok(b.status())) return *this;
    scratch_ = *b;
  }
  auto scratch = static_cast<int64_t>(scratch_.va);
  if (!ok(emit_semaphore_release(pb_, dev_.classes(), scratch, 0, {.timestamp = true})))
    return *this;
  ok(emit_copy(pb_, dev_.classes(), static_cast<int64_t>(s.va() + 8), scratch + 8, 8));
  return *this;
}

hcq::HwQueue& Queue::exec(const hcq::Program& prg,
                          const hcq::ArgsState& args,
                          hcq::Dim3,
                          hcq::Dim3) {
  check_exec(prg, args, cs_.name());  // refuses: this is the copy queue
  return *this;
}

hcq::HwQueue& Queue::copy(hcq::Value dst, hcq::Value src, hcq::Value bytes) {
  // Constant ranges are checked now; symbolic ones fault on the GPU.
  if (!check_copy(dst, src, bytes, cs_.name())) return *this;
  size_t words = bytes.symbolic()
                     ? kCopyWords
                     : kCopyWords * (static_cast<uint64_t>(bytes.imm) / kCopyChunkBytes + 1);
  if (fits(words)) ok(emit_copy(pb_, dev_.classes(), dst, src, bytes));
  return *this;
}

Status Queue::bind() {
  if (bound_.size) return failed_precondition(cs_.name() + " is already bound");
  ASSIGN_OR_RETURN(bound_,
                   dev_.allocator().alloc(std::max<size_t>(cs_.size(), 1) * 4, host_memory()));
  cs_.rebind({static_cast<uint32_t*>(bound_.cpu), bound_.size / 4});
  return Status();
}

Status Queue::submit(std::span<const int64_t> vars) {
  RETURN_IF_ERROR(refusal());
  RETURN_IF_ERROR(dev_.error());
  // A bound queue's words and argument blocks are patched in place: the GPU must be done with
  // the last submission of them first, even one made outside the timeline.
  if (bound_.size && last_seq_) RETURN_IF_ERROR(dev_.wait_sequence(engine(), last_seq_));
  cs_.apply(vars);
  for (const hcq::ArgsState* a : args_) a->apply(vars);
  if (cs_.size() == 0) return Status();
  submitted_ = true;
  drained_ = false;
  if (!bound_.size) return dev_.submit_words(engine(), cs_.words(), &last_seq_);
  RETURN_IF_ERROR(dev_.publish(engine(), bound_.va, static_cast<uint32_t>(cs_.size())));
  // An empty ring submission behind the bound words: its completion release (after a WFI)
  // tells when the GPU finished them.
  return dev_.submit_words(engine(), {}, &last_seq_);
}

void Queue::reset() {
  CHECK(!bound_.size) << cs_.name() << ": reset of a bound queue";
  cs_.clear();
  args_.clear();
  clear_refusal();
}

}  // namespace baregrad::nv
