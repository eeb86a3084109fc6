#pragma once

// The OS seam: every interaction a driver has with the kernel (open, ioctl, mmap, sysfs reads,
// eventfd, poll) goes through an hcq::Os. linux_os() makes the real syscalls; a fake kernel
// driver is another Os passed in its place, never a global interception.

#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace baregrad::hcq {

class Os {
 public:
  virtual ~Os() = default;

  // A number no other Os of this process has had: process-wide state kept per Os (e.g. a file
  // the kernel pins for the process's life, kept open across devices) tells instances apart
  // with it, where an address could be reused.
  uint64_t instance() const { return instance_; }

  // A new fd for `path` (open(2) flags; the real Os adds O_CLOEXEC). Errors name the path and the
  // errno text: ENOENT -> NotFound, EACCES/EPERM -> FailedPrecondition.
  virtual Result<int> open(const std::string& path, int flags) = 0;
  // Releases `fd`; it is released even when an error is returned (Linux close(2) semantics).
  virtual Status close(int fd) = 0;
  // ioctl(fd, request, arg). The real Os retries EINTR/EAGAIN up to kIoctlRetries times. Errors
  // name `what` (e.g. "NV_ESC_RM_ALLOC"), the request number in hex, the fd and the errno text.
  virtual Status ioctl(int fd, unsigned long request, void* arg, std::string_view what) = 0;
  // mmap(2); never returns MAP_FAILED. Errors name the length, protection, flags, fd and offset.
  virtual Result<void*> mmap(void* addr, size_t len, int prot, int flags, int fd, off_t offset) = 0;
  virtual Status munmap(void* addr, size_t len) = 0;
  // The whole contents of a small file (sysfs/procfs), e.g. "/sys/module/nvidia/version".
  virtual Result<std::string> read_file(const std::string& path) = 0;
  // The entry names in `path`, sorted, without "." and "..".
  virtual Result<std::vector<std::string>> list_dir(const std::string& path) = 0;
  // A new eventfd (eventfd(2) flags; the real Os adds EFD_CLOEXEC).
  virtual Result<int> eventfd(unsigned initval, int flags) = 0;
  // poll(2) on one fd for `events`, up to timeout_ms (>= 0; no unbounded waits); returns revents,
  // 0 on timeout.
  virtual Result<int> poll(int fd, short events, int timeout_ms) = 0;
  // Called by a device's waits between polls (hcq::Device::progress): an Os whose devices need
  // the CPU to advance (a kernel driver and GPU simulated in this process) advances them here.
  // The real kernel needs nothing.
  virtual void progress() {}

  // How often the real ioctl is reissued after EINTR/EAGAIN before the error is returned.
  static constexpr int kIoctlRetries = 1000;

 private:
  static uint64_t next_instance();
  const uint64_t instance_ = next_instance();
};

// The real syscalls. One process-wide instance (a stateless object).
Os& linux_os();
// `os` for an API that shares ownership of its Os, without owning it: the caller keeps `os`
// alive while any device made with it lives (linux_os() lives forever).
inline std::shared_ptr<Os> unowned(Os& os) {
  return std::shared_ptr<Os>(std::shared_ptr<Os>(), &os);
}

// Owns an fd and closes it through its Os on destruction. Move-only; a default Fd holds nothing.
class Fd {
 public:
  Fd() = default;
  Fd(Os& os, int fd) : os_(&os), fd_(fd) {}
  Fd(Fd&& other) noexcept : os_(other.os_), fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      reset();
      os_ = other.os_;
      fd_ = other.release();
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  // The fd, or -1 when empty.
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Gives up ownership: returns the fd and leaves this Fd empty.
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  // Closes the fd now (a close error is dropped: the fd is gone either way) and leaves this empty.
  void reset() {
    if (fd_ >= 0) (void)os_->close(release());
  }

 private:
  Os* os_ = nullptr;
  int fd_ = -1;
};

// Owns a mapping and munmaps it through its Os on destruction. Move-only.
class Mapping {
 public:
  Mapping() = default;
  Mapping(Os& os, void* addr, size_t len) : os_(&os), addr_(addr), len_(len) {}
  Mapping(Mapping&& other) noexcept : os_(other.os_), addr_(other.addr_), len_(other.len_) {
    other.addr_ = nullptr;
    other.len_ = 0;
  }
  Mapping& operator=(Mapping&& other) noexcept {
    if (this != &other) {
      reset();
      os_ = other.os_;
      addr_ = std::exchange(other.addr_, nullptr);
      len_ = std::exchange(other.len_, 0);
    }
    return *this;
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() { reset(); }

  // The start address, or nullptr when empty.
  void* get() const { return addr_; }
  // The mapped length in bytes (0 when empty).
  size_t size() const { return len_; }
  bool valid() const { return addr_ != nullptr; }
  // Leaves this empty without unmapping: the mapping stays for the process's life.
  void release() {
    addr_ = nullptr;
    len_ = 0;
  }
  // Unmaps now (a munmap error is dropped) and leaves this empty.
  void reset() {
    if (addr_ == nullptr) return;
    (void)os_->munmap(std::exchange(addr_, nullptr), std::exchange(len_, 0));
  }

 private:
  Os* os_ = nullptr;
  void* addr_ = nullptr;
  size_t len_ = 0;
};

// os.open() wrapped in an owning Fd.
inline Result<Fd> open_fd(Os& os, const std::string& path, int flags) {
  ASSIGN_OR_RETURN(int fd, os.open(path, flags));
  return Fd(os, fd);
}

// os.mmap() wrapped in an owning Mapping of `len` bytes.
inline Result<Mapping> map(
    Os& os, void* addr, size_t len, int prot, int flags, int fd, off_t offset) {
  ASSIGN_OR_RETURN(void* ptr, os.mmap(addr, len, prot, flags, fd, offset));
  return Mapping(os, ptr, len);
}

}  // namespace baregrad::hcq
