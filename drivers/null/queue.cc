#include "drivers/null/queue.h"

namespace baregrad::null {

hcq::HwQueue& Queue::wait(const hcq::Signal& s, hcq::Value) {
  check_signal(s, "wait");
  return *this;
}

hcq::HwQueue& Queue::signal(const hcq::Signal& s, hcq::Value v) {
  if (check_signal(s, "signal")) ops_.push_back({&s, v, false});
  return *this;
}

hcq::HwQueue& Queue::timestamp(const hcq::Signal& s) {
  if (check_signal(s, "timestamp")) ops_.push_back({&s, 0, true});
  return *this;
}

std::string Queue::name() const {
  return std::string(engine() == hcq::Engine::kCompute ? "compute" : "copy") + " queue of " +
         device().name();
}

hcq::HwQueue& Queue::exec(const hcq::Program& prg,
                          const hcq::ArgsState& args,
                          hcq::Dim3,
                          hcq::Dim3) {
  check_exec(prg, args, name());  // refuses: this is the copy queue
  return *this;
}

Status Queue::submit(std::span<const int64_t> vars) {
  RETURN_IF_ERROR(refusal());
  RETURN_IF_ERROR(device().error());
  for (const Op& op : ops_) {
    auto* slot = reinterpret_cast<hcq::SignalSlot*>(op.sig->va());
    if (op.timestamp) {
      slot->timestamp.store(0, std::memory_order_release);
      continue;
    }
    if (op.value.symbolic() && static_cast<size_t>(op.value.var) >= vars.size())
      return invalid_argument("submit on NULL: variable " + std::to_string(op.value.var) + " of " +
                              std::to_string(vars.size()));
    int64_t v = op.value.symbolic() ? vars[op.value.var] : op.value.imm;
    slot->value.store(static_cast<uint64_t>(v), std::memory_order_release);
  }
  return Status();
}

void Queue::reset() {
  ops_.clear();
  clear_refusal();
}

}  // namespace baregrad::null
