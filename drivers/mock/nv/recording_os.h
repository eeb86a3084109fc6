// RecordingOs: an hcq::Os decorator that records every call to the Os it wraps (the fake
// kernel, or linux_os() on a real machine) as a transcript: the files opened, each ioctl with
// its argument struct before and after, the RM parameters NV_ESC_RM_ALLOC and NV_ESC_RM_CONTROL
// point at, and the RM status; mmaps, munmaps and sysfs reads. A transcript serializes to a line
// per call, so a bring-up recorded on hardware can be kept and compared or replayed later.
//
// Argument sizes: NV escapes carry theirs in the request (_IOC_SIZE); UVM requests do not, so
// the recorder takes the size of the driver branch it saw (from /sys/module/nvidia/version or an
// NV_ESC_CHECK_VERSION_STR reply); before that it copies the smallest layout. Parameters behind
// pointers nested deeper (e.g. GR_GET_INFO's list) are not followed.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "drivers/nv/rm_abi.h"
#include "hcq/os.h"

namespace baregrad::mock {

struct TranscriptEntry {
  enum class Kind : uint8_t { kOpen, kClose, kIoctl, kMmap, kMunmap, kReadFile };
  Kind kind = Kind::kIoctl;
  std::string path{};  // the file: opened, read, or that the fd was opened from ("" if unknown)
  int fd = -1;         // as the wrapped Os numbered it
  unsigned long request = 0;
  std::string what{};      // the caller's name for the ioctl
  std::string error{};     // "" on success, else the Status message
  uint32_t rm_status = 0;  // NV escapes with a status field and UVM ioctls: after the call
  std::vector<uint8_t> in{}, out{};                // the ioctl argument before and after
  std::vector<uint8_t> params_in{}, params_out{};  // NV_ESC_RM_ALLOC/CONTROL parameters
  uint64_t addr = 0, length = 0, offset = 0;       // mmap (addr: the result), munmap
  int prot = 0, flags = 0;
  std::string text{};  // read_file contents

  bool operator==(const TranscriptEntry&) const = default;
};
std::string_view transcript_kind_name(TranscriptEntry::Kind k);

struct Transcript {
  std::vector<TranscriptEntry> entries;

  // A header line, then one line per entry: the kind, then key=value fields (strings quoted
  // with C escapes, bytes as hex, numbers as hex).
  std::string serialize() const;
  // The inverse of serialize(); InvalidArgument naming the line for anything else.
  static Result<Transcript> parse(std::string_view text);
  // The ioctl entries only.
  std::vector<TranscriptEntry> ioctls() const;
};

class RecordingOs final : public hcq::Os {
 public:
  explicit RecordingOs(hcq::Os& inner) : inner_(inner) {}

  Result<int> open(const std::string& path, int flags) override;
  Status close(int fd) override;
  Status ioctl(int fd, unsigned long request, void* arg, std::string_view what) override;
  Result<void*> mmap(void* addr, size_t len, int prot, int flags, int fd, off_t offset) override;
  Status munmap(void* addr, size_t len) override;
  Result<std::string> read_file(const std::string& path) override;
  Result<std::vector<std::string>> list_dir(const std::string& path) override;
  Result<int> eventfd(unsigned initval, int flags) override;
  Result<int> poll(int fd, short events, int timeout_ms) override;

  // What has been recorded so far (a copy; thread-safe).
  Transcript transcript() const;
  void clear();

 private:
  void record(TranscriptEntry e);
  size_t arg_size(const std::string& path, unsigned long request) const;

  hcq::Os& inner_;
  mutable std::mutex mu_;
  std::map<int, std::string> paths_;  // open fds
  std::optional<nv::RmBranch> branch_;
  Transcript transcript_;
};

}  // namespace baregrad::mock
