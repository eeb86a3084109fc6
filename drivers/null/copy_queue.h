#pragma once

// DEV=NULL's copy queue: Queue's commands; it runs no kernels.

#include "drivers/null/queue.h"

namespace baregrad::null {

class CopyQueue final : public Queue {
 public:
  explicit CopyQueue(hcq::Device& dev) : Queue(dev, hcq::Engine::kCopy) {}
};

}  // namespace baregrad::null
