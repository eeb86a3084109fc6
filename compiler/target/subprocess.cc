#include "compiler/target/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/timer.h"

extern char** environ;

namespace baregrad::compiler {
namespace {

namespace fs = std::filesystem;

// An fd closed on destruction.
struct Fd {
  int fd = -1;
  explicit Fd(int f = -1) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

}  // namespace

Result<TempDir> TempDir::create(std::string_view prefix) {
  std::error_code ec;
  fs::path tmp = fs::temp_directory_path(ec);
  if (ec) tmp = "/tmp";
  std::string pattern = (tmp / (std::string(prefix) + "-XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) return errno_error("mkdtemp " + pattern, errno);
  return TempDir(pattern);
}

TempDir::TempDir(TempDir&& o) noexcept : path_(std::move(o.path_)) { o.path_.clear(); }

TempDir::~TempDir() {
  std::error_code ec;
  if (!path_.empty()) fs::remove_all(path_, ec);
}

std::string TempDir::file(std::string_view name) const { return path_ + "/" + std::string(name); }

Status write_file(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
  if (!f || !f.flush()) return internal("cannot write " + path);
  return Status();
}

Result<std::string> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return not_found("cannot read " + path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Result<int> run_subprocess(const std::vector<std::string>& argv, std::string* out, int timeout_ms) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return errno_error("pipe2", errno);
  Fd rd(p[0]), wr(p[1]);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, wr.fd, 1);
  posix_spawn_file_actions_adddup2(&fa, wr.fd, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int err = ::posix_spawnp(&pid, argv[0].c_str(), &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (err != 0) return errno_error("cannot run '" + argv[0] + "'", err);
  wr.reset();
  uint64_t deadline = now_ns() + static_cast<uint64_t>(timeout_ms) * 1000000;
  char buf[4096];
  bool eof = false;
  int status = 0;
  for (;;) {
    if (!eof) {
      pollfd pfd{rd.fd, POLLIN, 0};
      if (::poll(&pfd, 1, 10) > 0) {
        ssize_t n = ::read(rd.fd, buf, sizeof(buf));
        if (n > 0) out->append(buf, static_cast<size_t>(n));
        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) eof = true;
      }
    } else {
      ::usleep(1000);
    }
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid && eof) break;
    if (r == pid) {  // exited: drain what is left in the pipe
      ssize_t n;
      while ((n = ::read(rd.fd, buf, sizeof(buf))) > 0) out->append(buf, static_cast<size_t>(n));
      break;
    }
    if (r < 0 && errno != EINTR) return errno_error("waitpid " + argv[0], errno);
    if (now_ns() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return deadline_exceeded(argv[0] + " ran longer than " + std::to_string(timeout_ms) +
                               " ms and was killed; output so far:\n" + *out);
    }
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

}  // namespace baregrad::compiler
