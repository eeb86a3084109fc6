// The real hcq::Os: thin syscall wrappers that convert errno into a Status naming the call.

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <memory>

#include "base/format.h"
#include "hcq/os.h"

namespace baregrad::hcq {
namespace {

// sysfs/procfs files are a page or two; anything this large is not what read_file() is for.
constexpr size_t kMaxReadFileBytes = size_t{16} << 20;

std::string quoted(const std::string& path) { return "\"" + path + "\""; }

struct DirCloser {
  void operator()(DIR* dir) const { closedir(dir); }
};

class LinuxOs final : public Os {
 public:
  Result<int> open(const std::string& path, int flags) override {
    int fd;
    do {
      fd = ::open(path.c_str(), flags | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) return errno_error("open(" + quoted(path) + ")", errno);
    return fd;
  }

  Status close(int fd) override {
    // NOTE: no retry on EINTR: Linux has already released the fd, and it may be reused.
    if (::close(fd) != 0) return errno_error("close(fd " + std::to_string(fd) + ")", errno);
    return Status();
  }

  Status ioctl(int fd, unsigned long request, void* arg, std::string_view what) override {
    int retries = 0;
    for (;;) {
      if (::ioctl(fd, request, arg) != -1) return Status();
      int err = errno;
      if ((err != EINTR && err != EAGAIN) || retries == kIoctlRetries) {
        std::string call = "ioctl " + std::string(what) + " (request " + hex(request) + ") on fd " +
                           std::to_string(fd);
        if (retries > 0) call += " after " + std::to_string(retries) + " retries";
        return errno_error(call, err);
      }
      ++retries;
    }
  }

  Result<void*> mmap(void* addr, size_t len, int prot, int flags, int fd, off_t offset) override {
    void* ptr = ::mmap(addr, len, prot, flags, fd, offset);
    if (ptr == MAP_FAILED) {
      return errno_error("mmap(len " + hex(len) + ", prot " + hex(static_cast<unsigned>(prot)) +
                             ", flags " + hex(static_cast<unsigned>(flags)) + ", fd " +
                             std::to_string(fd) + ", offset " + hex(static_cast<uint64_t>(offset)) +
                             ")",
                         errno);
    }
    return ptr;
  }

  Status munmap(void* addr, size_t len) override {
    if (::munmap(addr, len) != 0) {
      return errno_error(
          "munmap(" + hex(reinterpret_cast<uintptr_t>(addr)) + ", len " + hex(len) + ")", errno);
    }
    return Status();
  }

  Result<std::string> read_file(const std::string& path) override {
    ASSIGN_OR_RETURN(Fd fd, open_fd(*this, path, O_RDONLY));
    std::string contents;
    char chunk[4096];
    for (;;) {
      ssize_t n = ::read(fd.get(), chunk, sizeof(chunk));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return errno_error("read(" + quoted(path) + ")", errno);
      if (n == 0) return contents;
      contents.append(chunk, static_cast<size_t>(n));
      if (contents.size() > kMaxReadFileBytes) {
        return resource_exhausted("read_file(" + quoted(path) + "): larger than " +
                                  std::to_string(kMaxReadFileBytes) + " bytes");
      }
    }
  }

  Result<std::vector<std::string>> list_dir(const std::string& path) override {
    std::unique_ptr<DIR, DirCloser> dir(::opendir(path.c_str()));
    if (dir == nullptr) return errno_error("opendir(" + quoted(path) + ")", errno);
    std::vector<std::string> names;
    for (;;) {
      errno = 0;
      const dirent* entry = ::readdir(dir.get());
      if (entry == nullptr) break;
      std::string_view name = entry->d_name;
      if (name != "." && name != "..") names.emplace_back(name);
    }
    if (errno != 0) return errno_error("readdir(" + quoted(path) + ")", errno);
    std::sort(names.begin(), names.end());
    return names;
  }

  Result<int> eventfd(unsigned initval, int flags) override {
    int fd = ::eventfd(initval, flags | EFD_CLOEXEC);
    if (fd < 0) {
      return errno_error("eventfd(initval " + std::to_string(initval) + ", flags " +
                             hex(static_cast<unsigned>(flags)) + ")",
                         errno);
    }
    return fd;
  }

  Result<int> poll(int fd, short events, int timeout_ms) override {
    std::string call = "poll(fd " + std::to_string(fd) + ", events " +
                       hex(static_cast<uint16_t>(events)) + ", timeout " +
                       std::to_string(timeout_ms) + " ms)";
    if (timeout_ms < 0) return invalid_argument(call + ": the timeout must be >= 0");
    // EINTR restarts the wait with what is left of the original timeout.
    using Clock = std::chrono::steady_clock;
    const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    int left_ms = timeout_ms;
    for (;;) {
      pollfd pfd{.fd = fd, .events = events, .revents = 0};
      int n = ::poll(&pfd, 1, left_ms);
      if (n >= 0) return n == 0 ? 0 : static_cast<int>(pfd.revents);
      if (errno != EINTR) return errno_error(call, errno);
      auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      left_ms = static_cast<int>(std::max<int64_t>(left.count(), 0));
    }
  }
};

}  // namespace

uint64_t Os::next_instance() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

Os& linux_os() {
  static LinuxOs os;
  return os;
}

}  // namespace baregrad::hcq
