// The tensor suite runs on DEV (the CPU when unset). When that device cannot open because a
// build tool it needs is missing (tests/missing_tool.h: ptxas for DEV=MOCK+NV on a machine
// without the CUDA toolkit, an OpenCL platform for DEV=CL), the suite exits 77, which meson reports
// as a skip, with the reason on stdout. NOTE: GTEST_SKIP in a global environment would not do:
// GoogleTest 1.12 then reports every test as passed.
#include <gtest/gtest.h>

#include <cstdio>

#include "base/options.h"
#include "runtime/device.h"
#include "tests/missing_tool.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto dev = baregrad::runtime::get_device();
  if (!dev.ok() && !baregrad::tests::missing_tool(dev.status()).empty()) {
    std::printf("SKIP: the tensor suite on DEV=%s needs %s: %s\n", baregrad::options().dev.c_str(),
                baregrad::tests::missing_tool(dev.status()).c_str(),
                dev.status().message().c_str());
    return 77;
  }
  return RUN_ALL_TESTS();
}
