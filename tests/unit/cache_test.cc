#include "compiler/cache.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>

#include "base/options.h"

namespace baregrad::compiler {
namespace {

namespace fs = std::filesystem;

// Each test gets a private CACHE_DIR with the disk layer enabled.
class KernelCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "bg_cache_test_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    set_option_for_test("CACHE_DIR", dir_);
    set_option_for_test("DISABLE_COMPILER_CACHE", "0");
  }
  void TearDown() override {
    set_option_for_test("CACHE_DIR", "");
    set_option_for_test("DISABLE_COMPILER_CACHE", "");
    fs::remove_all(dir_);
  }
  static std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  }
  static void dump(const std::string& path, const std::string& data) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
  }

  std::string dir_;
};

TEST(HashHex, Is32LowercaseHexDigitsAndSeparatesNearInputs) {
  std::string h = hash_hex("kernel");
  EXPECT_EQ(h.size(), 32u);
  EXPECT_EQ(h.find_first_not_of("0123456789abcdef"), std::string::npos) << h;
  EXPECT_EQ(h, hash_hex(std::string("kernel")));
  std::set<std::string> seen;
  for (const std::string& s : {std::string(), std::string(1, '\0'), std::string(2, '\0'),
                               std::string("a"), std::string("b"), std::string("ab"),
                               std::string("ba"), std::string(1000, 'x'), std::string(1001, 'x')})
    EXPECT_TRUE(seen.insert(hash_hex(s)).second) << "collision for a " << s.size() << "-byte input";
}

TEST_F(KernelCacheTest, MemoryHitReturnsTheValueAndCounts) {
  KernelCache cache;
  EXPECT_EQ(cache.get("k"), std::nullopt);
  cache.put("k", std::string("obj\0bytes", 9));
  EXPECT_EQ(cache.get("k"), std::string("obj\0bytes", 9));
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_EQ(cache.misses(), 1u);
  EXPECT_GE(cache.memory_bytes(), 10u);
}

TEST_F(KernelCacheTest, DiskHitAfterClearMemoryAndInAnotherInstance) {
  KernelCache cache;
  std::string key(5000, 'k');  // long keys are fine: the file name is their hash
  cache.put(key, "value");
  EXPECT_TRUE(fs::exists(KernelCache::disk_path(key)));
  EXPECT_EQ(KernelCache::disk_path(key), dir_ + "/kernels/" + hash_hex(key));
  cache.clear_memory();
  EXPECT_EQ(cache.memory_bytes(), 0u);
  EXPECT_EQ(cache.get(key), "value");
  EXPECT_EQ(cache.hits(), 1u);
  KernelCache other;
  EXPECT_EQ(other.get(key), "value");
}

TEST_F(KernelCacheTest, DisabledDiskLayerWritesNothing) {
  set_option_for_test("DISABLE_COMPILER_CACHE", "1");
  KernelCache cache;
  cache.put("k", "v");
  EXPECT_EQ(cache.get("k"), "v");
  EXPECT_FALSE(fs::exists(KernelCache::disk_path("k")));
  cache.clear_memory();
  EXPECT_EQ(cache.get("k"), std::nullopt);
}

TEST_F(KernelCacheTest, FileHoldingAnotherKeyIsAMiss) {
  KernelCache cache;
  cache.put("other key", "other value");
  fs::rename(KernelCache::disk_path("other key"), KernelCache::disk_path("key"));
  KernelCache fresh;
  EXPECT_EQ(fresh.get("key"), std::nullopt);
  EXPECT_EQ(fresh.misses(), 1u);
  fresh.put("key", "value");
  KernelCache again;
  EXPECT_EQ(again.get("key"), "value");
}

TEST_F(KernelCacheTest, TruncatedOrCorruptFilesAreMissesAndGetOverwritten) {
  KernelCache cache;
  std::string value(4096, 'v');
  cache.put("key", value);
  std::string path = KernelCache::disk_path("key"), good = slurp(path);
  std::string flipped = good;
  flipped[good.size() / 2] ^= 1;
  for (const std::string& bad : {good.substr(0, good.size() / 2), good.substr(0, 3), std::string(),
                                 flipped, good + "x", std::string(64, '\xff')}) {
    dump(path, bad);
    KernelCache fresh;
    EXPECT_EQ(fresh.get("key"), std::nullopt) << bad.size() << " bytes";
  }
  KernelCache fresh;
  fresh.put("key", value);
  EXPECT_EQ(slurp(path), good);
  fresh.clear_memory();
  EXPECT_EQ(fresh.get("key"), value);
}

TEST_F(KernelCacheTest, MemoryLayerEvictsTheLeastRecentlyUsed) {
  set_option_for_test("DISABLE_COMPILER_CACHE", "1");
  KernelCache cache(100);
  cache.put("k1", std::string(38, 'a'));
  cache.put("k2", std::string(38, 'b'));
  EXPECT_TRUE(cache.get("k1"));  // k2 is now the least recently used
  cache.put("k3", std::string(38, 'c'));
  EXPECT_LE(cache.memory_bytes(), 100u);
  EXPECT_EQ(cache.get("k2"), std::nullopt);
  EXPECT_EQ(cache.get("k1"), std::string(38, 'a'));
  EXPECT_EQ(cache.get("k3"), std::string(38, 'c'));
  cache.put("huge", std::string(200, 'h'));  // larger than the budget: not kept in memory
  EXPECT_EQ(cache.get("huge"), std::nullopt);
  EXPECT_TRUE(cache.get("k1"));
}

TEST_F(KernelCacheTest, ConcurrentPutsAndGetsSeeOnlyWholeValues) {
  KernelCache cache(4096);  // small, so eviction and disk reads interleave too
  auto value_of = [](int k) { return std::string(200 + k, static_cast<char>('a' + k % 26)); };
  auto work = [&](int seed) {
    for (int i = 0; i < 400; i++) {
      int k = (i * 7 + seed * 13) % 50;
      std::string key = "key" + std::to_string(k);
      if ((i + seed) % 3 == 0) cache.put(key, value_of(k));
      std::optional<std::string> got = cache.get(key);
      if (got) {
        ASSERT_EQ(*got, value_of(k)) << key;
      }
      if (i % 50 == 0) cache.clear_memory();
    }
  };
  std::thread a(work, 1), b(work, 2);
  a.join();
  b.join();
  EXPECT_EQ(cache.hits() + cache.misses(), 800u);
  for (const auto& entry : fs::directory_iterator(dir_ + "/kernels"))
    EXPECT_EQ(entry.path().filename().string().size(), 32u) << "leftover " << entry.path();
}

TEST(KernelCacheGlobal, IsOneInstance) {
  EXPECT_EQ(&KernelCache::global(), &KernelCache::global());
}

}  // namespace
}  // namespace baregrad::compiler
