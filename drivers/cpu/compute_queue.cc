#include "drivers/cpu/compute_queue.h"

#include "drivers/cpu/device.h"
#include "drivers/cpu/packets.h"
#include "drivers/cpu/program.h"

namespace baregrad::cpu {

ComputeQueue::ComputeQueue(Device& dev) : Queue(dev, hcq::Engine::kCompute) {}

hcq::HwQueue& ComputeQueue::exec(const hcq::Program& hprg,
                                 const hcq::ArgsState& args,
                                 hcq::Dim3 grid,
                                 hcq::Dim3 block) {
  const auto* prg = program_of<Program>(hprg, cs_.name(), "CPU");
  if (!prg || !check_exec(*prg, args, cs_.name())) return *this;
  if (Status s = prg->check_launch(grid, block); !s.ok()) {
    refuse(std::move(s));
    return *this;
  }
  if (!fits(11)) return *this;
  emit_exec(cs_, reinterpret_cast<uint64_t>(prg), static_cast<int64_t>(args.mem().va), grid, block);
  args_.push_back(&args);
  return *this;
}

}  // namespace baregrad::cpu
