#include "drivers/amd/queue.h"

#include <algorithm>

#include "drivers/amd/pm4.h"

namespace baregrad::amd {
namespace {
constexpr size_t kQueueWords = 1 << 14;
}  // namespace

Queue::Queue(Device& dev, hcq::Engine engine)
    : hcq::HwQueue(dev, engine),
      dev_(dev),
      cs_(std::string(engine == hcq::Engine::kCompute ? "compute" : "copy") + " queue of " +
              dev.name(),
          kQueueWords) {}

Queue::~Queue() {
  drain();
  if (bound_.size) dev_.allocator().free(bound_);
}

void Queue::drain() {
  if (drained_) return;
  drained_ = true;
  if (submitted_ || bound_.size) (void)dev_.synchronize();          // the engine may still read it
  if (last_seq_) (void)ring().wait(last_seq_, "draining a queue");  // also outside the timeline
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

bool Queue::check_wait_value(const hcq::Signal& s, hcq::Value v) {
  if (v.symbolic() || (v.imm >= 0 && v.imm <= int64_t{UINT32_MAX})) return true;
  refuse(invalid_argument("wait on the " + cs_.name() + " for signal '" + s.name() +
                          "' >= " + std::to_string(v.imm) +
                          ": AMD queues compare 32-bit values (values below 2^32 only)"));
  return false;
}

void Queue::bound_copy_count(hcq::Value bytes, uint64_t max, const std::string& packet) {
  bounds_.push_back({bytes.var, 1, static_cast<int64_t>(max),
                     "copy on the " + cs_.name() + ": a symbolic byte count (one " + packet +
                         " holds 1 to " + std::to_string(max) + " bytes)"});
}

hcq::HwQueue& Queue::exec(const hcq::Program& prg,
                          const hcq::ArgsState& args,
                          hcq::Dim3,
                          hcq::Dim3) {
  check_exec(prg, args, cs_.name());  // refuses: this is the copy queue
  return *this;
}

Status Queue::bind() {
  if (bound_.size) return failed_precondition(cs_.name() + " is already bound");
  // PM4 calls the bound words with one INDIRECT_BUFFER (AQL splits its PM4-IB packets).
  if (ring().kind() == Ring::Kind::kPm4 && cs_.size() > kMaxIndirectBufferDwords)
    return resource_exhausted(cs_.name() + ": " + std::to_string(cs_.size()) +
                              " words exceed an INDIRECT_BUFFER's " +
                              std::to_string(kMaxIndirectBufferDwords));
  ASSIGN_OR_RETURN(bound_,
                   dev_.allocator().alloc(std::max<size_t>(cs_.size(), 1) * 4,
                                          {.host = true, .cpu_access = true, .nolru = true}));
  cs_.rebind({static_cast<uint32_t*>(bound_.cpu), bound_.size / 4});
  return Status();
}

Status Queue::submit(std::span<const int64_t> vars) {
  RETURN_IF_ERROR(refusal());
  RETURN_IF_ERROR(dev_.error());
  // A bound queue's words and argument blocks are patched in place: the engine must be done
  // with their last submission first, even one made outside the timeline.
  for (const VarBound& b : bounds_) {
    if (static_cast<size_t>(b.var) >= vars.size())
      return invalid_argument(b.what + ": variable " + std::to_string(b.var) + " of " +
                              std::to_string(vars.size()) + " submitted");
    int64_t v = vars[b.var];
    if (v < b.lo || v > b.hi)
      return invalid_argument(b.what + ": " + std::to_string(v) + " (variable " +
                              std::to_string(b.var) + ") is outside " + std::to_string(b.lo) +
                              ".." + std::to_string(b.hi));
  }
  if (bound_.size && last_seq_) RETURN_IF_ERROR(ring().wait(last_seq_, "replaying a bound queue"));
  cs_.apply(vars);
  for (const hcq::ArgsState* a : args_) a->apply(vars);
  if (cs_.size() == 0) return Status();
  submitted_ = true;
  drained_ = false;
  Status s;
  if (ring().kind() == Ring::Kind::kAql) {
    s = ring().submit_aql(cs_.words(), aql_at_, bound_.size ? bound_.va : 0, kernels_, &last_seq_);
  } else if (bound_.size && engine() == hcq::Engine::kCompute) {
    std::array<uint32_t, 4> ib =
        indirect_buffer_packet(bound_.va, static_cast<uint32_t>(cs_.size()));
    s = ring().submit(ib, kernels_, &last_seq_);
  } else {
    s = ring().submit(cs_.words(), kernels_, &last_seq_);
  }
  RETURN_IF_ERROR(s);
  dev_.poll();  // a fault found here fails the device; the submission itself was published
  return Status();
}

void Queue::reset() {
  CHECK(!bound_.size) << cs_.name() << ": reset of a bound queue";
  cs_.clear();
  args_.clear();
  kernels_.clear();
  aql_at_.clear();
  bounds_.clear();
  clear_refusal();
}

}  // namespace baregrad::amd
