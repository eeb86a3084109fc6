#include "tensor/state.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <random>
#include <utility>

#include "base/error.h"
#include "nlohmann/json.hpp"
#include "tensor/safetensors_header.h"

namespace baregrad::tensor {
namespace {

using json = nlohmann::json;

// ---- files ---------------------------------------------------------------------------------

class UniqueFd {
 public:
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }
  int get() const { return fd_; }
  // Closes the held descriptor and holds `fd`; returns close()'s result (0 when none was held).
  int reset(int fd = -1) {
    int old = std::exchange(fd_, fd);
    return old < 0 ? 0 : ::close(old);
  }

 private:
  int fd_;
};

// A read-only mapping of a whole regular file; unmapped on destruction.
class FileMap {
 public:
  explicit FileMap(const std::string& path) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) fail("safe_load", path + ": cannot open: " + std::strerror(errno));
    struct stat st{};
    if (::fstat(fd.get(), &st) != 0) fail("safe_load", path + ": fstat: " + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) fail("safe_load", path + ": not a regular file");
    size_ = static_cast<size_t>(st.st_size);
    if (size_ == 0) return;
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd.get(), 0);
    if (p == MAP_FAILED) fail("safe_load", path + ": mmap: " + std::strerror(errno));
    data_ = static_cast<const uint8_t*>(p);
  }
  FileMap(const FileMap&) = delete;
  FileMap& operator=(const FileMap&) = delete;
  ~FileMap() {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// A new file next to `path`, removed on destruction unless commit() renamed it over `path`.
class TempFile {
 public:
  explicit TempFile(const std::string& path) : path_(path) {
    std::random_device rd;
    for (int attempt = 0; attempt < 16 && fd_.get() < 0; attempt++) {
      tmp_ = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rd());
      fd_.reset(::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666));
      if (fd_.get() < 0 && errno != EEXIST) break;
    }
    if (fd_.get() < 0) fail("safe_save", tmp_ + ": cannot create: " + std::strerror(errno));
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    fd_.reset();
    if (!committed_) ::unlink(tmp_.c_str());
  }
  // Appends all `n` bytes.
  void write(const void* data, size_t n) {
    const auto* p = static_cast<const char*>(data);
    while (n > 0) {
      ssize_t w = ::write(fd_.get(), p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) fail("safe_save", tmp_ + ": write: " + std::strerror(errno));
      p += w;
      n -= static_cast<size_t>(w);
    }
  }
  // Flushes to disk and renames the file over `path`.
  void commit() {
    if (::fsync(fd_.get()) != 0) fail("safe_save", tmp_ + ": fsync: " + std::strerror(errno));
    if (fd_.reset() != 0) fail("safe_save", tmp_ + ": close: " + std::strerror(errno));
    if (::rename(tmp_.c_str(), path_.c_str()) != 0)
      fail("safe_save", tmp_ + ": rename to " + path_ + ": " + std::strerror(errno));
    committed_ = true;
  }

 private:
  std::string path_, tmp_;
  UniqueFd fd_{-1};
  bool committed_ = false;
};

}  // namespace

// ---- public --------------------------------------------------------------------------------

Tensor tensor_from_bytes(
    const void* data, size_t bytes, Shape shape, DType dtype, std::string_view device) {
  return Tensor::from_bytes(data, bytes, std::move(shape), dtype, device);
}

std::vector<uint8_t> tensor_to_bytes(const Tensor& t) { return t.to_bytes(); }

std::string safetensors_dtype(DType t) {
  if (std::string code = safetensors_code(t); !code.empty()) return code;
  fail("safe_save", "dtype " + t.name() + " has no safetensors code", ErrorKind::kType);
}

void safe_save(const std::map<std::string, Tensor>& tensors,
               const std::string& path,
               const std::map<std::string, std::string>& metadata) {
  // NOTE: nlohmann refuses to write a string that is not UTF-8; this names which one it is.
  auto check_utf8 = [&](const std::string& s, const char* what) {
    try {
      (void)json(s).dump();
    } catch (const json::type_error&) {
      fail("safe_save", path + ": " + what + " " + json_quote(s) + " is not UTF-8",
           ErrorKind::kValue);
    }
  };
  // ordered_json keeps insertion order: metadata first, then the tensors sorted by name, and
  // each entry's fields as the reference writer orders them.
  auto header = nlohmann::ordered_json::object();
  for (const auto& [key, value] : metadata) {
    check_utf8(key, "metadata key");
    check_utf8(value, "metadata value");
    header["__metadata__"][key] = value;
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__")
      fail("safe_save", path + ": \"__metadata__\" cannot name a tensor", ErrorKind::kValue);
    check_utf8(name, "tensor name");
    uint64_t end = offset + static_cast<uint64_t>(t.numel()) * t.dtype().itemsize();
    header[name] = {{"dtype", safetensors_dtype(t.dtype())},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text = header.dump();  // compact and escaped as serde_json (the reference) writes
  text.append((8 - text.size() % 8) % 8, ' ');  // as the reference writer pads
  uint8_t len[8];
  for (int i = 0; i < 8; i++) len[i] = static_cast<uint8_t>(text.size() >> (8 * i));
  TempFile out(path);
  out.write(len, sizeof(len));
  out.write(text.data(), text.size());
  for (const auto& [name, t] : tensors) {
    std::vector<uint8_t> bytes = tensor_to_bytes(t);
    out.write(bytes.data(), bytes.size());
  }
  out.commit();
}

std::map<std::string, Tensor> safe_load(const std::string& path, std::string_view device) {
  FileMap file(path);
  return safe_load_bytes(path, file.data(), file.size(), device);
}

std::map<std::string, Tensor> safe_load_bytes(const std::string& name,
                                              const uint8_t* data,
                                              size_t size,
                                              std::string_view device) {
  SafetensorsHeader h = parse_safetensors_header(name, data, size);
  std::map<std::string, Tensor> out;
  for (const SafetensorsEntry& e : h.entries)
    out.emplace(e.name,
                tensor_from_bytes(h.data + e.begin, e.end - e.begin, e.shape, e.dtype, device));
  return out;
}

std::map<std::string, std::string> safe_load_metadata(const std::string& path) {
  FileMap file(path);
  return parse_safetensors_header(path, file.data(), file.size()).metadata;
}

}  // namespace baregrad::tensor
