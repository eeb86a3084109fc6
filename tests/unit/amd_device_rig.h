// What the AMD device tests share (amd_device_test.cc against the fake KFD alone,
// amd_device_fake_gpu_test.cc end to end with the fake GPU): fake KFDs, small device options,
// the compiled test kernels. A namespace of its own: the other fake rigs define like names.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "base/check.h"
#include "compiler/target/amd_target.h"
#include "compiler/target/lld.h"
#include "drivers/amd/device.h"
#include "drivers/mock/amd/fake_kfd.h"
#include "tests/unit/gpu_cases.h"

namespace baregrad::amd::device_test {

using compiler::gpu_cases::Case;
using mock::FakeAmdGpuConfig;
using mock::FakeKfd;
using mock::FakeKfdConfig;

inline constexpr const char* kTargets[] = {"gfx90a", "gfx942", "gfx1100", "gfx1201"};

inline std::shared_ptr<FakeKfd> fake_kfd(const std::string& gfx = "gfx1100") {
  return std::make_shared<FakeKfd>(FakeKfdConfig{.gpus = {FakeAmdGpuConfig::preset(gfx)}});
}

inline DeviceOptions small(std::chrono::milliseconds timeout = std::chrono::milliseconds(2000)) {
  DeviceOptions o;
  o.compute_ring_bytes = o.copy_ring_bytes = 64 << 10;
  o.timeout = timeout;
  return o;
}

inline std::unique_ptr<Device> open(std::shared_ptr<FakeKfd> kfd, DeviceOptions o = small()) {
  Result<std::unique_ptr<Device>> d = Device::create(kfd, 0, std::move(o));
  CHECK(d.ok()) << d.status().to_string();
  return std::move(*d);
}

#define REQUIRE_LLD()                                                                       \
  do {                                                                                      \
    Result<compiler::LdLld> l = compiler::LdLld::find();                                    \
    if (!l.ok()) GTEST_SKIP() << "AMD compile tests need ld.lld: " << l.status().message(); \
  } while (0)

inline compiler::AmdTarget& target(const std::string& gfx) {
  static auto* targets = new std::map<std::string, std::unique_ptr<compiler::AmdTarget>>();
  auto it = targets->find(gfx);
  if (it == targets->end()) {
    Result<std::unique_ptr<compiler::AmdTarget>> t = compiler::AmdTarget::create(gfx);
    CHECK(t.ok()) << t.status().to_string();
    it = targets->emplace(gfx, std::move(*t)).first;
  }
  return *it->second;
}

inline const Case& scale_case() {
  static const Case* c = [] {
    for (const Case& k : compiler::gpu_cases::cases())
      if (k.what == "vars") return new Case(k);
    CHECK(false) << "no 'vars' case";
    return static_cast<Case*>(nullptr);
  }();
  return *c;
}

inline compiler::CompiledKernel compile(const std::string& gfx, const Case& c = scale_case()) {
  Result<compiler::CompiledKernel> k = target(gfx).compile(c.ast);
  CHECK(k.ok()) << k.status().to_string();
  return std::move(*k);
}

}  // namespace baregrad::amd::device_test
