// The conformance suite on hcq::Device::load_program: every backend loads the binaries its
// compiler target makes and runs them, and refuses what it cannot run (another format or
// arch, a corrupt object, a missing entry) with an error naming it, staying usable.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "hcq/hcq.h"
#include "tests/cts/backends.h"

namespace baregrad::cts {
namespace {

using ::testing::HasSubstr;

class CtsBinary : public Cts {
 protected:
  // add_one as this backend's Binary; skips the test when the tool that makes it is missing.
  void SetUp() override {
    Cts::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    CTS_REQUIRE("binaries");
    Result<Binary> b = add_one_binary();
    if (b.status().code() == StatusCode::kNotFound) GTEST_SKIP() << b.status().message();
    ASSERT_TRUE(b.ok()) << b.status();
    binary_ = std::move(*b);
  }
  Binary binary_;
};

TEST_P(CtsBinary, LoadsAndRunsItsTargetsBinary) {
  CTS_ASSERT_OK_AND_ASSIGN(std::unique_ptr<hcq::Program> prg, dev().load_program(binary_));
  EXPECT_EQ(prg->name(), binary_.entry);
  EXPECT_EQ(prg->num_bufs(), 1);
  EXPECT_EQ(prg->num_vars(), 0);
  CTS_REQUIRE("execution");
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer b, alloc(16));
  CTS_ASSERT_OK_AND_ASSIGN(hcq::ArgsState * args, args_for(*prg));
  expect_works(dev(), *prg, *args, b);
  // The same binary loads again (a second program of the same code).
  CTS_ASSERT_OK_AND_ASSIGN(std::unique_ptr<hcq::Program> again, dev().load_program(binary_));
  CTS_ASSERT_OK_AND_ASSIGN(hcq::ArgsState * args2, args_for(*again));
  expect_works(dev(), *again, *args2, b);
}

TEST_P(CtsBinary, RefusesAnotherFormatOrArchNamingIt) {
  CTS_REQUIRE("binary checks");
  Binary other = binary_;
  other.format =
      binary_.format == BinaryFormat::kHostElf ? BinaryFormat::kCubin : BinaryFormat::kHostElf;
  Result<std::unique_ptr<hcq::Program>> r = dev().load_program(other);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr(binary_format_name(other.format)));
  EXPECT_THAT(r.status().message(), HasSubstr(other.entry));

  Binary arch = binary_;
  arch.arch = "pdp11";
  r = dev().load_program(arch);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("pdp11"));
  EXPECT_FALSE(dev().failed()) << "a refused binary leaves the device usable";
}

TEST_P(CtsBinary, RefusesACorruptObjectOrAMissingEntry) {
  CTS_REQUIRE("binary checks");
  for (size_t keep : {size_t{0}, size_t{3}, size_t{20}, binary_.code.size() / 2}) {
    Binary cut = binary_;
    cut.code.resize(keep);
    Result<std::unique_ptr<hcq::Program>> r = dev().load_program(cut);
    EXPECT_FALSE(r.ok()) << keep << " bytes of the object loaded";
    if (!r.ok()) {
      EXPECT_THAT(r.status().message(), HasSubstr(binary_.entry)) << keep << " bytes";
    }
  }
  Binary missing = binary_;
  missing.entry = "cts_no_such_kernel";
  Result<std::unique_ptr<hcq::Program>> r = dev().load_program(missing);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("cts_no_such_kernel"));
  EXPECT_FALSE(dev().failed());
  // The good binary still loads.
  EXPECT_TRUE(dev().load_program(binary_).ok());
}

CTS_INSTANTIATE(CtsBinary);

}  // namespace
}  // namespace baregrad::cts
