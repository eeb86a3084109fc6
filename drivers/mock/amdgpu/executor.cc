#include "drivers/mock/amdgpu/executor.h"

#include <utility>

#include "base/format.h"

namespace baregrad::mock {

void AmdTwinRegistry::add(uint64_t code_va, Twin twin, uint32_t kernarg_sgpr) {
  std::lock_guard lock(mu_);
  twins_[code_va] = {std::move(twin), kernarg_sgpr};
}

uint32_t AmdTwinRegistry::kernarg_user_sgpr(uint64_t code_va) {
  std::lock_guard lock(mu_);
  auto it = twins_.find(code_va);
  return it == twins_.end() ? 0 : it->second.kernarg_sgpr;
}

void AmdTwinRegistry::remove(uint64_t code_va) {
  std::lock_guard lock(mu_);
  twins_.erase(code_va);
}

size_t AmdTwinRegistry::size() {
  std::lock_guard lock(mu_);
  return twins_.size();
}

Status AmdTwinRegistry::launch(const AmdLaunch& l) {
  Twin twin;
  {
    std::lock_guard lock(mu_);
    auto it = twins_.find(l.code_va);
    if (it == twins_.end()) return not_found("launch of unknown kernel code at " + hex(l.code_va));
    twin = it->second.twin;  // a copy: the twin may replace itself while it runs
  }
  twin(l.kernargs, l.grid, l.block);
  return {};
}

}  // namespace baregrad::mock
