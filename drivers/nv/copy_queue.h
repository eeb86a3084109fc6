#pragma once

// The NVIDIA copy queue: Queue's commands (copies, semaphores, timestamps) on the copy
// channel, whose copy engine runs no kernels.

#include "drivers/nv/queue.h"

namespace baregrad::nv {

class CopyQueue final : public Queue {
 public:
  explicit CopyQueue(Device& dev) : Queue(dev, hcq::Engine::kCopy) {}
  ~CopyQueue() override { drain(); }
};

}  // namespace baregrad::nv
