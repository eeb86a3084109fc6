// BEAM through realize(): the searched kernel computes the float64 reference, and the tuning
// database (under CACHE_DIR) makes the next run of the same kernel search nothing, while another
// width is another key. The search's own logic is tested with a cost model in tests/unit.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "base/options.h"
#include "compiler/cache.h"
#include "tensor/tensor.h"
#include "tests/tensor/test_util.h"

namespace baregrad::tensor {
namespace {
using namespace test_util;
namespace fs = std::filesystem;

class BeamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "bg_beam_test_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    set_option_for_test("CACHE_DIR", dir_);
    set_option_for_test("DISABLE_COMPILER_CACHE", "0");
    set_option_for_test("BEAM_BUDGET_S", "2");
  }
  void TearDown() override {
    for (const char* o : {"BEAM", "BEAM_BUDGET_S", "CACHE_DIR", "DISABLE_COMPILER_CACHE"})
      set_option_for_test(o, "");
    compiler::KernelCache::global().clear_memory();
    fs::remove_all(dir_);
  }
  // Realizes a 24x20 @ 20x28 matmul under BEAM=width; returns what the search printed.
  std::string matmul_under_beam(const std::string& width) {
    set_option_for_test("BEAM", width);
    Vec a = rnd(24 * 20, 1), b = rnd(20 * 28, 2), want(24 * 28, 0);
    for (int i = 0; i < 24; i++)
      for (int j = 0; j < 28; j++)
        for (int k = 0; k < 20; k++) want[i * 28 + j] += a[i * 20 + k] * b[k * 28 + j];
    testing::internal::CaptureStderr();
    Tensor c = Tensor::from_data(a, {24, 20}, dtypes::kFloat32)
                   .matmul(Tensor::from_data(b, {20, 28}, dtypes::kFloat32));
    Vec got = c.to_vector();
    std::string printed = testing::internal::GetCapturedStderr();
    expect_near(got, want, 1e-4, 1e-4);
    set_option_for_test("BEAM", "");
    return printed;
  }
  std::string dir_;
};

TEST_F(BeamTest, SearchesOnceThenReadsTheDatabase) {
  EXPECT_NE(matmul_under_beam("2").find("[beam] r_"), std::string::npos);
  compiler::KernelCache::global().clear_memory();  // the next lookup reads the disk
  EXPECT_EQ(matmul_under_beam("2").find("[beam]"), std::string::npos);
  EXPECT_NE(matmul_under_beam("3").find("[beam] r_"), std::string::npos);  // width is in the key
}

TEST_F(BeamTest, KernelsWithLaunchScalarsSearchWithTheirValues) {
  // A scalar that changes between calls becomes a launch scalar of one program (const_args.h):
  // the search launches every candidate with the values of this call.
  set_option_for_test("BEAM", "2");
  Vec x = rnd(64 * 48, 3);
  Tensor t = Tensor::from_data(x, {64, 48}, dtypes::kFloat32);
  for (double s : {2.0, 3.0, -0.5}) {
    testing::internal::CaptureStderr();
    Vec got = (t * s + 1.0).sum({1}).to_vector();
    testing::internal::GetCapturedStderr();
    Vec want(64, 0);
    for (int i = 0; i < 64; i++)
      for (int j = 0; j < 48; j++) want[i] += x[i * 48 + j] * s + 1.0;
    expect_near(got, want, 1e-4, 1e-4);
  }
}

}  // namespace
}  // namespace baregrad::tensor
