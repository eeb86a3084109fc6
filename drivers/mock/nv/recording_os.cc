#include "drivers/mock/nv/recording_os.h"

#include <cctype>
#include <charconv>
#include <cstring>
#include <utility>

#include "base/format.h"
#include "drivers/nv/classes.h"
#include "drivers/nv/uvm_abi.h"

namespace baregrad::mock {
namespace {

using Kind = TranscriptEntry::Kind;
constexpr std::string_view kHeader = "# baregrad NV transcript v1";
constexpr Kind kKinds[] = {Kind::kOpen, Kind::kClose,  Kind::kIoctl,
                           Kind::kMmap, Kind::kMunmap, Kind::kReadFile};

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

std::vector<uint8_t> bytes_of(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  return std::vector<uint8_t>(b, b + n);
}

uint32_t u32_at(const std::vector<uint8_t>& b, size_t off) {
  uint32_t v = 0;
  if (off + 4 <= b.size()) std::memcpy(&v, b.data() + off, 4);
  return v;
}

uint64_t u64_at(const std::vector<uint8_t>& b, size_t off) {
  uint64_t v = 0;
  if (off + 8 <= b.size()) std::memcpy(&v, b.data() + off, 8);
  return v;
}

// The offset of the status field of an NV escape's argument (by its size), if it has one.
std::optional<size_t> escape_status_offset(uint32_t escape, size_t size) {
  switch (escape) {
    case nv::kNvEscRmAlloc:
      return size == sizeof(nv::Nvos21Parameters) ? offsetof(nv::Nvos21Parameters, status) : 44;
    case nv::kNvEscRmControl:
      return offsetof(nv::Nvos54Parameters, status);
    case nv::kNvEscRmFree:
      return offsetof(nv::Nvos00Parameters, status);
    case nv::kNvEscRmAllocMemory:
    case nv::kNvEscRmMapMemory:
      return offsetof(nv::Nvos02Parameters, status);  // also NVOS33's, inside the wrappers
    case nv::kNvEscRmMapMemoryDma:
      return size == sizeof(nv::Nvos46Parameters570) ? offsetof(nv::Nvos46Parameters570, status)
                                                     : offsetof(nv::Nvos46Parameters580, status);
    default:
      return std::nullopt;
  }
}

// ---- text format ----

std::string quote(std::string_view s) {
  std::string out = "\"";
  static constexpr char kHex[] = "0123456789abcdef";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c >= 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// The bytes as hex digits, "-" for none.
std::string bytes_text(const std::vector<uint8_t>& b) { return b.empty() ? "-" : hex_bytes(b); }

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Splits "kind key=value key="quoted value" ..." into its kind and fields.
Result<std::pair<std::string, std::map<std::string, std::string>>> split_line(
    std::string_view line) {
  std::map<std::string, std::string> fields;
  size_t i = line.find(' ');
  std::string kind(line.substr(0, i));
  while (i != std::string_view::npos && i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    if (i >= line.size()) break;
    size_t eq = line.find('=', i);
    if (eq == std::string_view::npos) return invalid_argument("a field without '='");
    std::string key(line.substr(i, eq - i));
    std::string value;
    i = eq + 1;
    if (i < line.size() && line[i] == '"') {
      for (++i; i < line.size() && line[i] != '"'; ++i) {
        if (line[i] != '\\') {
          value += line[i];
          continue;
        }
        if (++i >= line.size()) return invalid_argument("a dangling escape");
        if (line[i] == 'n') {
          value += '\n';
        } else if (line[i] == 'x' && i + 2 < line.size()) {
          int hi = hex_digit(line[i + 1]), lo = hex_digit(line[i + 2]);
          if (hi < 0 || lo < 0) return invalid_argument("a bad \\x escape");
          value += static_cast<char>(hi * 16 + lo);
          i += 2;
        } else {
          value += line[i];
        }
      }
      if (i >= line.size()) return invalid_argument("an unterminated string");
      ++i;
    } else {
      size_t end = line.find(' ', i);
      value = std::string(line.substr(i, end == std::string_view::npos ? end : end - i));
      i = end;
    }
    fields[key] = value;
  }
  return std::pair{kind, fields};
}

Result<uint64_t> parse_hex(const std::string& s) {
  uint64_t v = 0;
  std::string_view t = s;
  if (t.starts_with("0x")) t.remove_prefix(2);
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v, 16);
  if (ec != std::errc() || end != t.data() + t.size()) return invalid_argument("bad number " + s);
  return v;
}

Result<std::vector<uint8_t>> parse_bytes(const std::string& s) {
  std::vector<uint8_t> out;
  if (s == "-") return out;
  if (s.size() % 2 != 0) return invalid_argument("odd hex byte string");
  for (size_t i = 0; i < s.size(); i += 2) {
    int hi = hex_digit(s[i]), lo = hex_digit(s[i + 1]);
    if (hi < 0 || lo < 0) return invalid_argument("bad hex bytes");
    out.push_back(static_cast<uint8_t>(hi * 16 + lo));
  }
  return out;
}

}  // namespace

std::string_view transcript_kind_name(Kind k) {
  switch (k) {
    case Kind::kOpen:
      return "open";
    case Kind::kClose:
      return "close";
    case Kind::kIoctl:
      return "ioctl";
    case Kind::kMmap:
      return "mmap";
    case Kind::kMunmap:
      return "munmap";
    case Kind::kReadFile:
      return "read_file";
  }
  UNREACHABLE() << "transcript kind " << static_cast<int>(k);
}

std::string Transcript::serialize() const {
  std::string out = std::string(kHeader) + "\n";
  for (const TranscriptEntry& e : entries) {
    out += std::string(transcript_kind_name(e.kind)) + " path=" + quote(e.path) +
           " fd=" + std::to_string(e.fd) + " request=" + hex(e.request) + " what=" + quote(e.what) +
           " error=" + quote(e.error) + " rm_status=" + hex(e.rm_status) +
           " in=" + bytes_text(e.in) + " out=" + bytes_text(e.out) +
           " params_in=" + bytes_text(e.params_in) + " params_out=" + bytes_text(e.params_out) +
           " addr=" + hex(e.addr) + " length=" + hex(e.length) + " offset=" + hex(e.offset) +
           " prot=" + hex(static_cast<uint32_t>(e.prot)) +
           " flags=" + hex(static_cast<uint32_t>(e.flags)) + " text=" + quote(e.text) + "\n";
  }
  return out;
}

Result<Transcript> Transcript::parse(std::string_view text) {
  Transcript t;
  int line_no = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++line_no;
    if (line.empty() || line.starts_with('#')) continue;
    auto fail = [&](const Status& s) {
      return invalid_argument("transcript line " + std::to_string(line_no) + ": " + s.message());
    };
    auto split = split_line(line);
    if (!split.ok()) return fail(split.status());
    auto& [kind, f] = *split;
    TranscriptEntry e;
    bool known = false;
    for (Kind k : kKinds) {
      if (transcript_kind_name(k) == kind) e.kind = k, known = true;
    }
    if (!known) return fail(invalid_argument("unknown kind " + kind));
    for (const char* key :
         {"path", "fd", "request", "what", "error", "rm_status", "in", "out", "params_in",
          "params_out", "addr", "length", "offset", "prot", "flags", "text"}) {
      if (!f.contains(key)) return fail(invalid_argument(std::string("no field ") + key));
    }
    e.path = f["path"];
    e.what = f["what"];
    e.error = f["error"];
    e.text = f["text"];
    e.fd = std::atoi(f["fd"].c_str());
    Status s;
    auto num = [&](const char* key, auto& out) {
      Result<uint64_t> v = parse_hex(f[key]);
      if (v.ok()) {
        out = static_cast<std::remove_reference_t<decltype(out)>>(*v);
      } else if (s.ok()) {
        s = v.status();
      }
    };
    auto bytes = [&](const char* key, std::vector<uint8_t>& out) {
      Result<std::vector<uint8_t>> v = parse_bytes(f[key]);
      if (v.ok()) {
        out = std::move(*v);
      } else if (s.ok()) {
        s = v.status();
      }
    };
    num("request", e.request);
    num("rm_status", e.rm_status);
    num("addr", e.addr);
    num("length", e.length);
    num("offset", e.offset);
    num("prot", e.prot);
    num("flags", e.flags);
    bytes("in", e.in);
    bytes("out", e.out);
    bytes("params_in", e.params_in);
    bytes("params_out", e.params_out);
    if (!s.ok()) return fail(s);
    t.entries.push_back(std::move(e));
  }
  return t;
}

std::vector<TranscriptEntry> Transcript::ioctls() const {
  std::vector<TranscriptEntry> out;
  for (const TranscriptEntry& e : entries) {
    if (e.kind == Kind::kIoctl) out.push_back(e);
  }
  return out;
}

void RecordingOs::record(TranscriptEntry e) {
  std::lock_guard lock(mu_);
  transcript_.entries.push_back(std::move(e));
}

Transcript RecordingOs::transcript() const {
  std::lock_guard lock(mu_);
  return transcript_;
}

void RecordingOs::clear() {
  std::lock_guard lock(mu_);
  transcript_.entries.clear();
}

size_t RecordingOs::arg_size(const std::string& path, unsigned long request) const {
  if (path == "/dev/nvidia-uvm") {
    if (branch_) return nv::uvm_params_size(*branch_, request);
    return request == nv::kUvmFree ? sizeof(nv::UvmFreeParams590)
                                   : nv::uvm_params_size(nv::RmBranch::k580, request);
  }
  return nv::is_nv_escape_request(request) ? nv::ioctl_size(request) : 0;
}

Result<int> RecordingOs::open(const std::string& path, int flags) {
  Result<int> fd = inner_.open(path, flags);
  TranscriptEntry e{.kind = Kind::kOpen, .path = path, .fd = fd.ok() ? *fd : -1};
  if (!fd.ok()) e.error = fd.status().message();
  {
    std::lock_guard lock(mu_);
    if (fd.ok()) paths_[*fd] = path;
  }
  record(std::move(e));
  return fd;
}

Status RecordingOs::close(int fd) {
  Status s = inner_.close(fd);
  TranscriptEntry e{.kind = Kind::kClose, .fd = fd};
  {
    std::lock_guard lock(mu_);
    auto it = paths_.find(fd);
    if (it != paths_.end()) e.path = it->second, paths_.erase(it);
  }
  if (!s.ok()) e.error = s.message();
  record(std::move(e));
  return s;
}

Status RecordingOs::ioctl(int fd, unsigned long request, void* arg, std::string_view what) {
  TranscriptEntry e{.kind = Kind::kIoctl, .fd = fd, .request = request, .what = std::string(what)};
  size_t size;
  std::optional<nv::RmBranch> branch;
  {
    std::lock_guard lock(mu_);
    auto it = paths_.find(fd);
    if (it != paths_.end()) e.path = it->second;
    size = arg_size(e.path, request);
    branch = branch_;
  }
  bool uvm = e.path == "/dev/nvidia-uvm";
  uint32_t escape = nv::ioctl_nr(request);
  e.in = bytes_of(arg, size);
  // The RM parameters behind NVOS21.pAllocParms / NVOS54.params (pointer at 16, size at 24).
  void* params = nullptr;
  size_t params_size = 0;
  if (!uvm && nv::is_nv_escape_request(request) &&
      (escape == nv::kNvEscRmAlloc || escape == nv::kNvEscRmControl) && size >= 32) {
    params = reinterpret_cast<void*>(u64_at(e.in, 16));
    params_size = u32_at(e.in, 24);
    if (params != nullptr) e.params_in = bytes_of(params, params_size);
  }
  Status s = inner_.ioctl(fd, request, arg, what);
  e.out = bytes_of(arg, size);
  if (params != nullptr) e.params_out = bytes_of(params, params_size);
  if (!s.ok()) e.error = s.message();
  if (uvm) {
    e.rm_status =
        u32_at(e.out, nv::uvm_status_offset(branch.value_or(nv::RmBranch::k590), request));
  } else if (nv::is_nv_escape_request(request)) {
    if (auto off = escape_status_offset(escape, size)) e.rm_status = u32_at(e.out, *off);
    if (escape == nv::kNvEscCheckVersionStr && s.ok() && size == sizeof(nv::NvIoctlRmApiVersion)) {
      const auto* v = static_cast<const nv::NvIoctlRmApiVersion*>(arg);
      std::string version(v->version_string, strnlen(v->version_string, sizeof(v->version_string)));
      Result<nv::RmBranch> b = nv::rm_branch_for_version(version);
      std::lock_guard lock(mu_);
      if (b.ok()) branch_ = *b;
    }
  }
  record(std::move(e));
  return s;
}

Result<void*> RecordingOs::mmap(void* addr, size_t len, int prot, int flags, int fd, off_t offset) {
  Result<void*> p = inner_.mmap(addr, len, prot, flags, fd, offset);
  TranscriptEntry e{.kind = Kind::kMmap, .fd = fd};
  {
    std::lock_guard lock(mu_);
    auto it = paths_.find(fd);
    if (it != paths_.end()) e.path = it->second;
  }
  e.addr = p.ok() ? reinterpret_cast<uint64_t>(*p) : reinterpret_cast<uint64_t>(addr);
  e.length = len;
  e.offset = static_cast<uint64_t>(offset);
  e.prot = prot;
  e.flags = flags;
  if (!p.ok()) e.error = p.status().message();
  record(std::move(e));
  return p;
}

Status RecordingOs::munmap(void* addr, size_t len) {
  Status s = inner_.munmap(addr, len);
  TranscriptEntry e{.kind = Kind::kMunmap};
  e.addr = reinterpret_cast<uint64_t>(addr);
  e.length = len;
  if (!s.ok()) e.error = s.message();
  record(std::move(e));
  return s;
}

Result<std::string> RecordingOs::read_file(const std::string& path) {
  Result<std::string> text = inner_.read_file(path);
  TranscriptEntry e{.kind = Kind::kReadFile, .path = path};
  if (text.ok()) {
    e.text = *text;
    if (path == "/sys/module/nvidia/version") {
      Result<nv::RmBranch> b = nv::rm_branch_for_version(trim(*text));
      std::lock_guard lock(mu_);
      if (b.ok()) branch_ = *b;
    }
  } else {
    e.error = text.status().message();
  }
  record(std::move(e));
  return text;
}

Result<std::vector<std::string>> RecordingOs::list_dir(const std::string& path) {
  return inner_.list_dir(path);
}

Result<int> RecordingOs::eventfd(unsigned initval, int flags) {
  return inner_.eventfd(initval, flags);
}

Result<int> RecordingOs::poll(int fd, short events, int timeout_ms) {
  return inner_.poll(fd, events, timeout_ms);
}

}  // namespace baregrad::mock
