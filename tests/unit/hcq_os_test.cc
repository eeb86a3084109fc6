// hcq::Os against the real kernel (temp files, pipes, eventfd, /proc), the owning Fd/Mapping
// wrappers, and the Mmio/Doorbell accessors on host memory.

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "hcq/mmio.h"
#include "hcq/os.h"

namespace baregrad::hcq {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

// A fresh directory under $TMPDIR, removed with everything in it at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "hcq_os_test.XXXXXX").string();
    CHECK(mkdtemp(pattern.data()) != nullptr) << "mkdtemp: " << std::strerror(errno);
    path_ = pattern;
  }
  ~TempDir() { fs::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Creates `name` holding `contents`; returns its path.
  std::string write(const std::string& name, const std::string& contents) const {
    std::string path = (path_ / name).string();
    std::ofstream(path, std::ios::binary) << contents;
    return path;
  }
  std::string path() const { return path_.string(); }

 private:
  fs::path path_;
};

bool fd_is_open(int fd) { return fcntl(fd, F_GETFD) != -1 || errno != EBADF; }

TEST(HcqOs, OpenMissingPathIsNotFoundNamingPath) {
  TempDir dir;
  std::string path = dir.path() + "/no_such_device";
  Result<int> fd = linux_os().open(path, O_RDWR);
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(fd.status().message(), HasSubstr("\"" + path + "\""));
  EXPECT_THAT(fd.status().message(), HasSubstr(std::strerror(ENOENT)));
}

TEST(HcqOs, OpenWithoutPermissionIsFailedPrecondition) {
  TempDir dir;
  std::string path = dir.write("locked", "x");
  ASSERT_EQ(chmod(path.c_str(), 0), 0);
  Result<int> fd = linux_os().open(path, O_RDONLY);
  if (geteuid() != 0) {  // root bypasses file modes, so there is nothing to check there
    ASSERT_FALSE(fd.ok());
    EXPECT_EQ(fd.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_THAT(fd.status().message(), HasSubstr(path));
    EXPECT_THAT(fd.status().message(), HasSubstr(std::strerror(EACCES)));
  } else if (fd.ok()) {
    EXPECT_TRUE(linux_os().close(*fd).ok());
  }
}

TEST(HcqOs, OpenAddsCloseOnExec) {
  Result<Fd> fd = open_fd(linux_os(), "/proc/self/status", O_RDONLY);
  ASSERT_TRUE(fd.ok()) << fd.status();
  EXPECT_NE(fcntl(fd->get(), F_GETFD) & FD_CLOEXEC, 0);
}

TEST(HcqOs, IoctlFionreadOnPipeReportsPendingBytes) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  Fd read_end(linux_os(), fds[0]);
  Fd write_end(linux_os(), fds[1]);
  ASSERT_EQ(write(write_end.get(), "hello", 5), 5);
  int pending = -1;
  Status status = linux_os().ioctl(read_end.get(), FIONREAD, &pending, "FIONREAD");
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(pending, 5);
}

TEST(HcqOs, IoctlErrorNamesCallRequestAndErrno) {
  TempDir dir;
  Result<Fd> fd = open_fd(linux_os(), dir.write("regular", "data"), O_RDONLY);
  ASSERT_TRUE(fd.ok()) << fd.status();
  constexpr unsigned long kBogusRequest = 0xc020462b;  // an RM-style request a file does not know
  Status status = linux_os().ioctl(fd->get(), kBogusRequest, nullptr, "NV_ESC_RM_ALLOC");
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kUnimplemented);  // ENOTTY
  EXPECT_THAT(status.message(), HasSubstr("NV_ESC_RM_ALLOC"));
  EXPECT_THAT(status.message(), HasSubstr("0xc020462b"));
  EXPECT_THAT(status.message(), HasSubstr("fd " + std::to_string(fd->get())));
  EXPECT_THAT(status.message(), HasSubstr(std::strerror(ENOTTY)));
  EXPECT_THAT(status.message(), Not(HasSubstr("retries")));  // ENOTTY is not retried
}

TEST(HcqOs, CloseOfBadFdNamesTheFd) {
  Status status = linux_os().close(-7);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("close(fd -7)"));
  EXPECT_THAT(status.message(), HasSubstr(std::strerror(EBADF)));
}

TEST(HcqOs, ReadFileReturnsProcContents) {
  Result<std::string> text = linux_os().read_file("/proc/self/status");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("Name:"));
}

TEST(HcqOs, ReadFileReturnsEveryByteOfAMultiChunkFile) {
  TempDir dir;
  std::string contents(10000, '\0');
  for (size_t i = 0; i < contents.size(); ++i) contents[i] = static_cast<char>(i * 7);
  Result<std::string> text = linux_os().read_file(dir.write("big", contents));
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, contents);
}

TEST(HcqOs, ReadFileOfMissingPathIsNotFound) {
  Result<std::string> text = linux_os().read_file("/sys/module/no_such_module/version");
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(text.status().message(), HasSubstr("/sys/module/no_such_module/version"));
}

TEST(HcqOs, ListDirListsCreatedFilesSorted) {
  TempDir dir;
  dir.write("renderD129", "");
  dir.write("card0", "");
  fs::create_directory(dir.path() + "/by-path");
  Result<std::vector<std::string>> names = linux_os().list_dir(dir.path());
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_EQ(*names, (std::vector<std::string>{"by-path", "card0", "renderD129"}));
}

TEST(HcqOs, ListDirOfMissingPathIsNotFound) {
  TempDir dir;
  Result<std::vector<std::string>> names = linux_os().list_dir(dir.path() + "/gone");
  ASSERT_FALSE(names.ok());
  EXPECT_EQ(names.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(names.status().message(), HasSubstr(dir.path() + "/gone"));
}

TEST(HcqOs, EventfdWriteMakesPollReturnPollin) {
  Result<int> raw = linux_os().eventfd(0, 0);
  ASSERT_TRUE(raw.ok()) << raw.status();
  Fd fd(linux_os(), *raw);
  EXPECT_NE(fcntl(fd.get(), F_GETFD) & FD_CLOEXEC, 0);
  uint64_t one = 1;
  ASSERT_EQ(write(fd.get(), &one, sizeof(one)), static_cast<ssize_t>(sizeof(one)));
  Result<int> revents = linux_os().poll(fd.get(), POLLIN, 1000);
  ASSERT_TRUE(revents.ok()) << revents.status();
  EXPECT_EQ(*revents & POLLIN, POLLIN);
}

TEST(HcqOs, PollTimeoutReturnsZero) {
  Result<int> raw = linux_os().eventfd(0, 0);
  ASSERT_TRUE(raw.ok()) << raw.status();
  Fd fd(linux_os(), *raw);
  Result<int> revents = linux_os().poll(fd.get(), POLLIN, 10);
  ASSERT_TRUE(revents.ok()) << revents.status();
  EXPECT_EQ(*revents, 0);
}

TEST(HcqOs, PollRejectsAnUnboundedWait) {
  Result<int> revents = linux_os().poll(0, POLLIN, -1);
  ASSERT_FALSE(revents.ok());
  EXPECT_EQ(revents.status().code(), StatusCode::kInvalidArgument);
}

TEST(HcqOs, MmapErrorNamesTheArguments) {
  Result<void*> ptr = linux_os().mmap(nullptr, 0, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_FALSE(ptr.ok());
  EXPECT_EQ(ptr.status().code(), StatusCode::kInvalidArgument);  // EINVAL: zero length
  EXPECT_THAT(ptr.status().message(), HasSubstr("mmap(len 0x0"));
  EXPECT_THAT(ptr.status().message(), HasSubstr("fd -1"));
}

TEST(HcqOs, MappingUnmapsOnDestruction) {
  const size_t len = 4 * static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* addr = nullptr;
  {
    Result<Mapping> mapping =
        map(linux_os(), nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_TRUE(mapping.ok()) << mapping.status();
    addr = mapping->get();
    EXPECT_EQ(mapping->size(), len);
    static_cast<volatile uint8_t*>(addr)[len - 1] = 1;
    EXPECT_EQ(msync(addr, len, MS_ASYNC), 0);
  }
  // msync on an address range with no mapping fails with ENOMEM.
  EXPECT_EQ(msync(addr, len, MS_ASYNC), -1);
  EXPECT_EQ(errno, ENOMEM);
}

TEST(HcqOs, FdClosesOnDestruction) {
  int raw = -1;
  {
    Result<Fd> fd = open_fd(linux_os(), "/proc/self/status", O_RDONLY);
    ASSERT_TRUE(fd.ok()) << fd.status();
    raw = fd->get();
    EXPECT_TRUE(fd_is_open(raw));
  }
  EXPECT_EQ(fcntl(raw, F_GETFD), -1);
  EXPECT_EQ(errno, EBADF);
}

TEST(HcqOs, FdMoveTransfersOwnership) {
  Result<Fd> opened = open_fd(linux_os(), "/proc/self/status", O_RDONLY);
  ASSERT_TRUE(opened.ok()) << opened.status();
  Fd a = std::move(opened).value();
  int raw = a.get();
  Fd b = std::move(a);
  EXPECT_FALSE(a.valid());  // a moved-from Fd is specified to be empty
  EXPECT_EQ(b.get(), raw);
  Fd c;
  c = std::move(b);
  EXPECT_EQ(c.get(), raw);
  EXPECT_TRUE(fd_is_open(raw));
  c.reset();
  EXPECT_FALSE(fd_is_open(raw));
}

// Forwards to the real Os and counts the calls the owning wrappers make through it.
class CountingOs final : public Os {
 public:
  Result<int> open(const std::string& path, int flags) override {
    return linux_os().open(path, flags);
  }
  Status close(int fd) override {
    ++closes;
    return linux_os().close(fd);
  }
  Status ioctl(int fd, unsigned long request, void* arg, std::string_view what) override {
    return linux_os().ioctl(fd, request, arg, what);
  }
  Result<void*> mmap(void* addr, size_t len, int prot, int flags, int fd, off_t offset) override {
    return linux_os().mmap(addr, len, prot, flags, fd, offset);
  }
  Status munmap(void* addr, size_t len) override {
    ++munmaps;
    return linux_os().munmap(addr, len);
  }
  Result<std::string> read_file(const std::string& path) override {
    return linux_os().read_file(path);
  }
  Result<std::vector<std::string>> list_dir(const std::string& path) override {
    return linux_os().list_dir(path);
  }
  Result<int> eventfd(unsigned initval, int flags) override {
    return linux_os().eventfd(initval, flags);
  }
  Result<int> poll(int fd, short events, int timeout_ms) override {
    return linux_os().poll(fd, events, timeout_ms);
  }

  int closes = 0;
  int munmaps = 0;
};

TEST(HcqOs, OwningWrappersReleaseThroughTheirOsExactlyOnce) {
  CountingOs os;
  {
    Result<Fd> fd = open_fd(os, "/proc/self/status", O_RDONLY);
    ASSERT_TRUE(fd.ok()) << fd.status();
    Fd moved = std::move(fd).value();
    Result<Mapping> mapping = map(os, nullptr, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_TRUE(mapping.ok()) << mapping.status();
    Mapping a = std::move(mapping).value();
    Mapping b;
    b = std::move(a);
    EXPECT_EQ(b.size(), 4096u);
    EXPECT_EQ(a.get(), nullptr);  // a moved-from Mapping is empty
    EXPECT_EQ(os.closes, 0);
    EXPECT_EQ(os.munmaps, 0);
  }
  EXPECT_EQ(os.closes, 1);
  EXPECT_EQ(os.munmaps, 1);
}

// Host memory stands in for a BAR: 8-byte aligned storage inspected byte by byte.
struct Window {
  uint64_t words[4] = {};
  Mmio mmio() { return Mmio(words, sizeof(words)); }
  uint8_t byte(size_t i) const {
    uint8_t b;
    std::memcpy(&b, reinterpret_cast<const uint8_t*>(words) + i, 1);
    return b;
  }
};

TEST(HcqOsMmio, WritesAndReadsTouchExactlyTheirWidth) {
  Window w;
  std::memset(w.words, 0xee, sizeof(w.words));
  Mmio mmio = w.mmio();
  mmio.write<uint8_t>(1, 0x11);
  mmio.write<uint16_t>(2, 0x2233);
  mmio.write<uint32_t>(4, 0x44556677);
  mmio.write<uint64_t>(16, 0x8899aabbccddeeffULL);
  EXPECT_EQ(w.byte(0), 0xee);
  EXPECT_EQ(w.byte(1), 0x11);
  EXPECT_EQ(mmio.read<uint16_t>(2), 0x2233);
  EXPECT_EQ(mmio.read<uint32_t>(4), 0x44556677u);
  EXPECT_EQ(mmio.read<uint64_t>(8), 0xeeeeeeeeeeeeeeeeULL);  // untouched between the writes
  EXPECT_EQ(mmio.read<uint64_t>(16), 0x8899aabbccddeeffULL);
  EXPECT_EQ(mmio.read<uint32_t>(24), 0xeeeeeeeeu);
  EXPECT_EQ(mmio.read<uint32_t>(28), 0xeeeeeeeeu);  // the last aligned word is in bounds
}

TEST(HcqOsMmio, SubWindowIsOffsetAndSized) {
  Window w;
  Mmio sub = w.mmio().sub(8, 16);
  EXPECT_EQ(sub.base(), reinterpret_cast<uint8_t*>(w.words) + 8);
  EXPECT_EQ(sub.size(), 16u);
  sub.write<uint32_t>(12, 0xcafef00d);
  EXPECT_EQ(w.mmio().read<uint32_t>(20), 0xcafef00du);
  EXPECT_EQ(w.mmio().sub(32, 0).size(), 0u);  // an empty window at the end is allowed
}

TEST(HcqOsMmioDeathTest, OutOfBoundsAndMisalignedAccessesCheckFail) {
  Window w;
  Mmio mmio = w.mmio();
  EXPECT_DEATH((void)mmio.read<uint64_t>(32), "outside a window of 32 bytes");
  EXPECT_DEATH((void)mmio.read<uint32_t>(30), "outside a window of 32 bytes");
  EXPECT_DEATH(mmio.write<uint16_t>(size_t{1} << 62, 0), "outside a window");
  EXPECT_DEATH((void)mmio.sub(8, 25), "MMIO range \\[8, \\+25\\) outside a window of 32 bytes");
  EXPECT_DEATH((void)mmio.sub(8, 8).read<uint64_t>(8), "outside a window of 8 bytes");
  EXPECT_DEATH(mmio.write<uint32_t>(2, 0), "misaligned 4-byte MMIO access at offset 2");
  EXPECT_DEATH((void)Mmio().read<uint8_t>(0), "outside a window of 0 bytes");
}

TEST(HcqOsDoorbell, RingWritesTheValueWithTheRegisterWidth) {
  Window w;
  std::memset(w.words, 0xee, sizeof(w.words));
  Doorbell db32(w.mmio(), 8, 32);
  Doorbell db64(w.mmio(), 16, 64);
  EXPECT_TRUE(db32.valid());
  db32.ring(0x12345678);
  EXPECT_EQ(w.mmio().read<uint32_t>(8), 0x12345678u);
  EXPECT_EQ(w.mmio().read<uint32_t>(12), 0xeeeeeeeeu);  // a 32-bit doorbell stores 4 bytes only
  db64.ring(0x0123456789abcdefULL);
  EXPECT_EQ(w.mmio().read<uint64_t>(16), 0x0123456789abcdefULL);
  EXPECT_EQ(w.mmio().read<uint64_t>(24), 0xeeeeeeeeeeeeeeeeULL);
}

TEST(HcqOsDoorbellDeathTest, MisuseCheckFails) {
  Window w;
  EXPECT_FALSE(Doorbell().valid());
  EXPECT_DEATH(Doorbell().ring(1), "ring\\(\\) on an empty Doorbell");
  EXPECT_DEATH(Doorbell(w.mmio(), 0, 16), "doorbell width 16 bits");
  EXPECT_DEATH(Doorbell(w.mmio(), 28, 64), "outside a window of 32 bytes");
  EXPECT_DEATH(Doorbell(w.mmio(), 4, 64), "misaligned doorbell at offset 4");
  Doorbell db32(w.mmio(), 0, 32);
  EXPECT_DEATH(db32.ring(uint64_t{1} << 32), "too wide for a 32-bit doorbell");
}

}  // namespace
}  // namespace baregrad::hcq
