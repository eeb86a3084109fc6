#pragma once

// The CPU device's copy queue: Queue's commands (copies, waits, signals, timestamps) on the
// copy engine's thread; it runs no kernels.

#include "drivers/cpu/queue.h"

namespace baregrad::cpu {

class CopyQueue final : public Queue {
 public:
  explicit CopyQueue(Device& dev) : Queue(dev, hcq::Engine::kCopy) {}
};

}  // namespace baregrad::cpu
