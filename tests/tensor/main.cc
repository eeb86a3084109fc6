// The tensor suite runs on DEV (the CPU when unset). When that device cannot open because a
// build tool it needs is missing (tests/missing_tool.h: ptxas for DEV=MOCK+NV on a machine
// without the CUDA toolkit, an OpenCL platform for DEV=CL), the suite exits 77, which meson reports
// as a skip, with the reason on stdout. NOTE: GTEST_SKIP in a global environment would not do:
// GoogleTest 1.12 then reports every test as passed.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "base/options.h"
#include "runtime/device.h"
#include "tests/missing_tool.h"

namespace {

// With KERNEL_LOG set, "# Suite.Test" before the kernels each test lowers (tools/op_slice.py).
class KernelLogMarks : public ::testing::EmptyTestEventListener {
 public:
  explicit KernelLogMarks(std::string path) : path_(std::move(path)) {}
  void OnTestStart(const ::testing::TestInfo& t) override {
    if (FILE* f = std::fopen(path_.c_str(), "a")) {
      std::fprintf(f, "# %s.%s\n", t.test_suite_name(), t.name());
      std::fclose(f);
    }
  }

 private:
  std::string path_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (const std::string& log = baregrad::options().kernel_log; !log.empty())
    ::testing::UnitTest::GetInstance()->listeners().Append(new KernelLogMarks(log));
  auto dev = baregrad::runtime::get_device();
  if (!dev.ok() && !baregrad::tests::missing_tool(dev.status()).empty()) {
    std::printf("SKIP: the tensor suite on DEV=%s needs %s: %s\n", baregrad::options().dev.c_str(),
                baregrad::tests::missing_tool(dev.status()).c_str(),
                dev.status().message().c_str());
    return 77;
  }
  return RUN_ALL_TESTS();
}
