// Helpers shared by the iface_rm*.cc files; not part of the interface.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "base/align.h"
#include "base/status.h"

namespace baregrad::nv {

// The message for a failed open of an NVIDIA device node: a missing /dev/nvidiactl (no driver),
// /dev/nvidia-uvm (no nvidia-uvm module) or /dev/nvidiaN, or missing permissions.
Status device_open_error(const Status& s, const std::string& path);

// Undo steps run in reverse order on destruction unless dismiss()ed: the partial work of a
// multi-step allocation is released when a later step fails.
class Undo {
 public:
  Undo() = default;
  Undo(const Undo&) = delete;
  Undo& operator=(const Undo&) = delete;
  ~Undo() {
    for (auto it = steps_.rbegin(); it != steps_.rend(); ++it) (*it)();
  }
  void add(std::function<void()> step) { steps_.push_back(std::move(step)); }
  void dismiss() { steps_.clear(); }

 private:
  std::vector<std::function<void()>> steps_;
};

}  // namespace baregrad::nv
