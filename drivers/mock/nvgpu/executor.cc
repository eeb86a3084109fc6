#include "drivers/mock/nvgpu/executor.h"

#include <utility>

#include "base/format.h"
#include "drivers/nv/classes.h"

namespace baregrad::mock {

void TwinRegistry::add(uint64_t program_va, Twin twin) {
  std::lock_guard lock(mu_);
  twins_[program_va] = std::move(twin);
}

void TwinRegistry::remove(uint64_t program_va) {
  std::lock_guard lock(mu_);
  twins_.erase(program_va);
}

size_t TwinRegistry::size() {
  std::lock_guard lock(mu_);
  return twins_.size();
}

Status TwinRegistry::launch(const LaunchInfo& li) {
  Twin twin;
  {
    std::lock_guard lock(mu_);
    auto it = twins_.find(li.program_va);
    if (it == twins_.end()) {
      return not_found("launch of unknown program at " + hex(li.program_va));
    }
    twin = it->second;  // a copy: the twin may replace itself while it runs
  }
  twin(li.cbank0, li.grid, li.block);
  return {};
}

}  // namespace baregrad::mock
