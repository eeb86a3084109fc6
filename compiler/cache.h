// The compiled-kernel cache: an in-memory LRU in front of a directory of files, one per key,
// under options().cache_dir + "/kernels/". Keys are arbitrary strings (the caller builds them
// from the kernel AST text, the options and Compiler::cache_key()); values are object bytes.
#pragma once

#include <atomic>
#include <cstddef>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace baregrad::compiler {

// A 128-bit hash of `data` as 32 lowercase hex digits (not cryptographic).
std::string hash_hex(std::string_view data);

// Thread-safe. A disk file stores the full key before the value, so a file whose name collides
// with another key's hash, or a truncated or corrupt file, reads as a miss and is replaced by
// the next put(). Disk writes are atomic (temporary file, then rename).
class KernelCache {
 public:
  static constexpr size_t kDefaultMemoryBytes = size_t{256} << 20;

  // A cache keeping at most `memory_bytes` of keys and values in memory.
  explicit KernelCache(size_t memory_bytes = kDefaultMemoryBytes);
  KernelCache(const KernelCache&) = delete;
  KernelCache& operator=(const KernelCache&) = delete;

  // The process-wide cache.
  static KernelCache& global();

  // The value stored under `key`, from memory or else from disk; nullopt on a miss.
  std::optional<std::string> get(const std::string& key);
  // Stores `value` under `key` in memory and, unless options().disable_cache, on disk. A disk
  // error is logged at DEBUG>=1 and otherwise ignored.
  void put(const std::string& key, const std::string& value);
  // Drops the in-memory layer (the disk layer stays).
  void clear_memory();

  size_t hits() const { return hits_.load(); }
  size_t misses() const { return misses_.load(); }
  // Bytes of keys and values now held in memory.
  size_t memory_bytes() const;
  // The file that holds `key` under the current options().cache_dir.
  static std::string disk_path(const std::string& key);

 private:
  using Entry = std::pair<std::string, std::string>;  // key, value
  void remember(const std::string& key, const std::string& value);

  const size_t limit_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<std::string_view, std::list<Entry>::iterator> index_;  // views of lru_ keys
  size_t bytes_ = 0;
  std::atomic<size_t> hits_{0};
  std::atomic<size_t> misses_{0};
};

}  // namespace baregrad::compiler
