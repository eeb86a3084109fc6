#include "compiler/target/clang_target.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "base/options.h"
#include "base/timer.h"
#include "compiler/cache.h"

extern char** environ;

namespace baregrad::compiler {
namespace {

// A private directory under $TMPDIR (or /tmp), removed with its contents on destruction.
class TempDir {
 public:
  TempDir() = default;
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  Status create() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/baregrad-cc-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) return errno_error("mkdtemp " + pattern, errno);
    path_ = pattern;
    return Status();
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

Status write_file(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary);
  if (!f.write(data.data(), static_cast<std::streamsize>(data.size())) || !f.flush())
    return errno_error("write " + path, errno);
  return Status();
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

std::string join(const std::vector<std::string>& words) {
  std::string s;
  for (const std::string& w : words) s += (s.empty() ? "" : " ") + w;
  return s;
}

// Runs argv (PATH search for argv[0]) with stdin from /dev/null and stdout / stderr to files;
// returns the wait status. Kills the process after `timeout_ms`.
Result<int> run_process(const std::vector<std::string>& argv,
                        const std::string& out_path,
                        const std::string& err_path,
                        int timeout_ms) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int err = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) {
    Status e = errno_error("posix_spawnp", err);
    return Status(e.code(), "cannot run the C compiler '" + argv[0] +
                                "' (option CC): " + e.message() + "\ncommand: " + join(argv));
  }
  double deadline = now_ms() + timeout_ms;
  auto pause = std::chrono::microseconds(50);
  for (;;) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) return errno_error("waitpid", errno);
    if (now_ms() > deadline) {
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return deadline_exceeded("the C compiler ran longer than " + std::to_string(timeout_ms) +
                               " ms and was killed\ncommand: " + join(argv));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

// Model name and a hash of the ISA flags from /proc/cpuinfo (what -march=native resolves).
std::string host_cpu() {
  std::ifstream f("/proc/cpuinfo");
  std::string line, model, flags;
  while (std::getline(f, line) && (model.empty() || flags.empty())) {
    auto value = [&] { return line.substr(std::min(line.size(), line.find(':') + 2)); };
    if (model.empty() && line.rfind("model name", 0) == 0) model = value();
    if (flags.empty() && (line.rfind("flags", 0) == 0 || line.rfind("Features", 0) == 0))
      flags = value();
  }
  return model + " isa:" + hash_hex(flags);
}

std::string file_stem(const std::string& name) {
  std::string s = name.empty() ? "kernel" : name.substr(0, 64);
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
  return s;
}

}  // namespace

ClangCompiler::ClangCompiler(std::string cc, int timeout_ms) : timeout_ms_(timeout_ms) {
  std::istringstream words(cc.empty() ? options().cc : cc);
  for (std::string w; words >> w;) command_.push_back(w);
  if (command_.empty()) command_.push_back("clang-19");
}

const std::vector<std::string>& ClangCompiler::flags() {
  // NOTE: -fwrapv gives signed ops exec_alu_int's wrapping; -fno-stack-protector keeps the
  // object free of references the JIT would have to resolve.
  static const std::vector<std::string> kFlags = {"-x",
                                                  "c",
                                                  "-std=c11",
                                                  "-O2",
                                                  "-march=native",
                                                  "-mprefer-vector-width=512",
                                                  "-ffp-contract=fast",
                                                  "-fno-math-errno",
                                                  "-fwrapv",
                                                  "-fno-strict-aliasing",
                                                  "-fno-stack-protector",
                                                  "-fPIC"};
  return kFlags;
}

std::string ClangCompiler::cache_key() const {
  std::call_once(key_once_, [this] {
    std::string version = "unknown";
    TempDir dir;
    if (dir.create().ok()) {
      std::vector<std::string> argv = command_;
      argv.push_back("--version");
      Result<int> status = run_process(argv, dir.file("out"), dir.file("err"), timeout_ms_);
      std::string out = read_file(dir.file("out"));
      if (status.ok() && *status == 0 && !out.empty()) version = out.substr(0, out.find('\n'));
    }
    key_ = "clang:" + join(command_) + " " + version + " " + join(flags()) + " cpu:" + host_cpu();
  });
  return key_;
}

Result<std::string> ClangCompiler::compile(const std::string& src, const std::string& name) const {
  ScopedTimer timer("clang " + name);
  TempDir dir;
  RETURN_IF_ERROR(dir.create());
  std::string stem = file_stem(name);
  std::string c_path = dir.file(stem + ".c"), o_path = dir.file(stem + ".o");
  RETURN_IF_ERROR(write_file(c_path, src));
  std::vector<std::string> argv = command_;
  argv.insert(argv.end(), flags().begin(), flags().end());
  argv.insert(argv.end(), {"-c", c_path, "-o", o_path});
  Result<int> status = run_process(argv, dir.file("stdout"), dir.file("stderr"), timeout_ms_);
  if (!status.ok())
    return Status(status.status().code(),
                  status.status().message() + "\nsource:\n" + numbered_source(src));
  if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    std::string how = WIFEXITED(*status) ? "exit status " + std::to_string(WEXITSTATUS(*status))
                                         : "signal " + std::to_string(WTERMSIG(*status));
    return internal("the C compiler failed (" + how + ")\ncommand: " + join(argv) + "\n" +
                    read_file(dir.file("stderr")) + "source:\n" + numbered_source(src));
  }
  std::string object = read_file(o_path);
  if (object.empty())
    return internal("the C compiler wrote no object\ncommand: " + join(argv) + "\n" +
                    read_file(dir.file("stderr")));
  return object;
}

}  // namespace baregrad::compiler
