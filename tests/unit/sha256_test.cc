// base/sha256.h against FIPS 180-4's examples (one block, two blocks) and digests Python's hashlib
// gives for the empty message and a long one.
#include "base/sha256.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <string_view>

namespace baregrad {
namespace {

std::string hex_sha256(std::string_view s) {
  auto d = sha256({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
  std::string out;
  char buf[3];
  for (uint8_t b : d) {
    std::snprintf(buf, sizeof buf, "%02x", b);
    out += buf;
  }
  return out;
}

TEST(Sha256, MatchesTheStandardsExamplesAndHashlib) {
  EXPECT_EQ(hex_sha256(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex_sha256("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex_sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(hex_sha256(std::string(1000, 'a')),
            "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}

}  // namespace
}  // namespace baregrad
