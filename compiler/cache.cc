#include "compiler/cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>

#include "base/log.h"
#include "base/options.h"
#include "base/status.h"

namespace baregrad::compiler {
namespace {

// File layout: magic, key length, key, value length, value, hash of key and value; integers
// are 8-byte little-endian.
constexpr char kMagic[8] = {'B', 'G', 'K', 'C', 'A', 'C', 'H', '1'};
constexpr size_t kMaxFileBytes = size_t{1} << 30;

uint64_t avalanche(uint64_t x) {
  x ^= x >> 31;
  x *= 0x7fb5d329728ea185ull;
  x ^= x >> 27;
  x *= 0x81dadef4bc2dd44dull;
  return x ^ (x >> 33);
}

// Two 64-bit lanes over 8-byte words with different multipliers and rotations.
std::pair<uint64_t, uint64_t> hash128(std::string_view data) {
  uint64_t a = 0x243f6a8885a308d3ull ^ (data.size() * 0x9e3779b97f4a7c15ull);
  uint64_t b = 0x13198a2e03707344ull + data.size();
  for (size_t i = 0; i < data.size(); i += 8) {
    uint64_t w = 0;
    std::memcpy(&w, data.data() + i, std::min<size_t>(8, data.size() - i));
    a = std::rotl((a ^ w) * 0xa4093822299f31d1ull, 29);
    b = std::rotl(b + w * 0x82efa98ec4e6c89bull, 37) * 0xc0ac29b7c97c50ddull;
  }
  a = avalanche(a ^ std::rotl(b, 17));
  b = avalanche(b + a);
  return {a, b};
}

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; i++) out.push_back(static_cast<char>(v >> (8 * i)));
}

bool get_u64(std::string_view& in, uint64_t* v) {
  if (in.size() < 8) return false;
  *v = 0;
  for (int i = 0; i < 8; i++) *v |= uint64_t{static_cast<unsigned char>(in[i])} << (8 * i);
  in.remove_prefix(8);
  return true;
}

uint64_t checksum(std::string_view key, std::string_view value) {
  return hash128(key).first ^ hash128(value).second;
}

std::string encode(const std::string& key, const std::string& value) {
  std::string out(kMagic, sizeof(kMagic));
  put_u64(out, key.size());
  out += key;
  put_u64(out, value.size());
  out += value;
  put_u64(out, checksum(key, value));
  return out;
}

// The value of a well-formed file holding exactly `key`, else nullopt.
std::optional<std::string> decode(std::string_view in, const std::string& key) {
  uint64_t key_len = 0, value_len = 0, sum = 0;
  if (in.substr(0, sizeof(kMagic)) != std::string_view(kMagic, sizeof(kMagic))) return std::nullopt;
  in.remove_prefix(sizeof(kMagic));
  if (!get_u64(in, &key_len) || key_len != key.size() || in.substr(0, key_len) != key)
    return std::nullopt;
  in.remove_prefix(key_len);
  if (!get_u64(in, &value_len) || in.size() != value_len + 8) return std::nullopt;
  std::string_view value = in.substr(0, value_len);
  in.remove_prefix(value_len);
  if (!get_u64(in, &sum) || sum != checksum(key, value)) return std::nullopt;
  return std::string(value);
}

// Closes its descriptor on destruction.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

std::optional<std::string> read_disk(const std::string& path, const std::string& key) {
  Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st;
  if (fd.get() < 0 || fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<size_t>(st.st_size) > kMaxFileBytes)
    return std::nullopt;
  std::string data(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = read(fd.get(), data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    done += static_cast<size_t>(n);
  }
  return decode(data, key);
}

Status write_disk(const std::string& path, const std::string& bytes) {
  static std::atomic<uint64_t> serial{0};
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec) return internal("create_directories for " + path + ": " + ec.message());
  std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(serial++);
  {
    Fd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (fd.get() < 0) return errno_error("open " + tmp, errno);
    for (size_t done = 0; done < bytes.size();) {
      ssize_t n = write(fd.get(), bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        int err = errno;
        unlink(tmp.c_str());
        return errno_error("write " + tmp, err);
      }
      done += static_cast<size_t>(n);
    }
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    return errno_error("rename " + tmp, err);
  }
  return Status();
}

}  // namespace

std::string hash_hex(std::string_view data) {
  auto [a, b] = hash128(data);
  static const char kDigits[] = "0123456789abcdef";
  std::string out(32, '0');
  for (int i = 0; i < 16; i++) {
    out[15 - i] = kDigits[(a >> (4 * i)) & 15];
    out[31 - i] = kDigits[(b >> (4 * i)) & 15];
  }
  return out;
}

KernelCache::KernelCache(size_t memory_bytes) : limit_(memory_bytes) {}

KernelCache& KernelCache::global() {
  // NOTE: leaked; used until process exit. Sized once, from KERNEL_CACHE_MB.
  static KernelCache* cache = new KernelCache(size_t(options().kernel_cache_mb) << 20);
  return *cache;
}

std::string KernelCache::disk_path(const std::string& key) {
  return options().cache_dir + "/kernels/" + hash_hex(key);
}

std::optional<std::string> KernelCache::get(const std::string& key) {
  {
    std::lock_guard lock(mu_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      hits_++;
      return it->second->second;
    }
  }
  if (!options().disable_cache) {
    if (std::optional<std::string> value = read_disk(disk_path(key), key)) {
      remember(key, *value);
      hits_++;
      return value;
    }
  }
  misses_++;
  return std::nullopt;
}

void KernelCache::put(const std::string& key, const std::string& value) {
  remember(key, value);
  if (options().disable_cache) return;
  if (Status s = write_disk(disk_path(key), encode(key, value)); !s.ok())
    BG_LOG(1) << "kernel cache: " << s.to_string();
}

void KernelCache::remember(const std::string& key, const std::string& value) {
  std::lock_guard lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) {
    auto node = it->second;
    bytes_ -= node->first.size() + node->second.size();
    index_.erase(it);
    lru_.erase(node);
  }
  size_t size = key.size() + value.size();
  if (size > limit_) return;
  while (bytes_ + size > limit_) {
    const Entry& last = lru_.back();
    bytes_ -= last.first.size() + last.second.size();
    index_.erase(last.first);
    lru_.pop_back();
  }
  lru_.emplace_front(key, value);
  index_.emplace(lru_.front().first, lru_.begin());
  bytes_ += size;
}

void KernelCache::clear_memory() {
  std::lock_guard lock(mu_);
  index_.clear();
  lru_.clear();
  bytes_ = 0;
}

size_t KernelCache::memory_bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

}  // namespace baregrad::compiler
