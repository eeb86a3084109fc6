#include "drivers/cpu/queue.h"

#include <algorithm>

#include "drivers/cpu/device.h"
#include "drivers/cpu/engine.h"
#include "drivers/cpu/packets.h"

namespace baregrad::cpu {
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
  if (!bound_.size) return;
  (void)dev_.synchronize();  // a submitted indirect packet may still read the bound words
  dev_.allocator().free(bound_);
}

bool Queue::fits(size_t words) {
  if (cs_.size() + words <= cs_.capacity()) return true;
  refuse(resource_exhausted(cs_.name() + ": the command buffer of " +
                            std::to_string(cs_.capacity()) + " words is full"));
  return false;
}

hcq::HwQueue& Queue::wait(const hcq::Signal& s, hcq::Value v) {
  if (check_signal(s, "wait") && fits(5)) emit_wait(cs_, static_cast<int64_t>(s.va()), v);
  return *this;
}

hcq::HwQueue& Queue::signal(const hcq::Signal& s, hcq::Value v) {
  if (check_signal(s, "signal") && fits(5)) emit_signal(cs_, static_cast<int64_t>(s.va()), v);
  return *this;
}

hcq::HwQueue& Queue::timestamp(const hcq::Signal& s) {
  if (check_signal(s, "timestamp") && fits(3)) emit_timestamp(cs_, static_cast<int64_t>(s.va()));
  return *this;
}

hcq::HwQueue& Queue::memory_barrier() {
  if (fits(1)) emit_barrier(cs_);
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
  if (check_copy(dst, src, bytes, cs_.name()) && fits(7)) emit_copy(cs_, dst, src, bytes);
  return *this;
}

Status Queue::bind() {
  if (bound_.size) return failed_precondition(cs_.name() + " is already bound");
  hcq::BufferSpec spec{.host = true, .cpu_access = true, .nolru = true};
  ASSIGN_OR_RETURN(bound_, dev_.allocator().alloc(std::max<size_t>(cs_.size(), 1) * 4, spec));
  cs_.rebind({static_cast<uint32_t*>(bound_.cpu), bound_.size / 4});
  return Status();
}

Status Queue::submit(std::span<const int64_t> vars) {
  RETURN_IF_ERROR(refusal());
  RETURN_IF_ERROR(dev_.error());
  cs_.apply(vars);
  for (const hcq::ArgsState* a : args_) a->apply(vars);
  Engine& e = dev_.engine(engine());
  if (!bound_.size) return e.publish(cs_.words());
  hcq::CmdStream ref("indirect", 5);
  emit_indirect(ref, bound_.va, cs_.size());
  return e.publish(ref.words());
}

void Queue::reset() {
  CHECK(!bound_.size) << cs_.name() << ": reset of a bound queue";
  cs_.clear();
  args_.clear();
  clear_refusal();
}

}  // namespace baregrad::cpu
