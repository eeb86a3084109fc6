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
#include <set>
#include <utility>

#include "base/error.h"

namespace baregrad::tensor {
namespace {

constexpr std::pair<const char*, DType> kCodes[] = {
    {"F64", dtypes::kFloat64},   {"F32", dtypes::kFloat32}, {"F16", dtypes::kFloat16},
    {"BF16", dtypes::kBFloat16}, {"I64", dtypes::kInt64},   {"I32", dtypes::kInt32},
    {"I16", dtypes::kInt16},     {"I8", dtypes::kInt8},     {"U64", dtypes::kUint64},
    {"U32", dtypes::kUint32},    {"U16", dtypes::kUint16},  {"U8", dtypes::kUint8},
    {"BOOL", dtypes::kBool},
};
constexpr int kMaxDepth = 64;  // JSON nesting; the header needs 3
constexpr char kHex[] = "0123456789abcdef";

std::string str(uint64_t v) { return std::to_string(v); }

std::string offsets_str(uint64_t begin, uint64_t end) {
  return "[" + str(begin) + ", " + str(end) + "]";
}

// True when `s` is well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF).
bool utf8_valid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<uint8_t>(s[i]);
    size_t n = c < 0x80                 ? 0
               : c >= 0xC2 && c <= 0xDF ? 1
               : c >= 0xE0 && c <= 0xEF ? 2
               : c >= 0xF0 && c <= 0xF4 ? 3
                                        : 4;
    if (n == 4 || i + n >= s.size()) return false;
    uint32_t cp = n == 0 ? c : c & (0x3F >> n);
    for (size_t k = 1; k <= n; k++) {
      auto b = static_cast<uint8_t>(s[i + k]);
      if ((b & 0xC0) != 0x80) return false;
      cp = cp << 6 | (b & 0x3F);
    }
    if ((n == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
        (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
      return false;
    i += n + 1;
  }
  return true;
}

// `s` as a JSON string literal, escaped as serde_json (the reference writer) does.
std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    auto c = static_cast<uint8_t>(ch);
    const char* esc = c == '"'    ? "\\\""
                      : c == '\\' ? "\\\\"
                      : c == '\b' ? "\\b"
                      : c == '\f' ? "\\f"
                      : c == '\n' ? "\\n"
                      : c == '\r' ? "\\r"
                      : c == '\t' ? "\\t"
                                  : nullptr;
    if (esc) {
      out += esc;
    } else if (c < 0x20) {
      out += std::string("\\u00") + kHex[c >> 4] + kHex[c & 15];
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

// ---- JSON: objects, arrays, strings and non-negative integers ------------------------------

struct Json {
  enum Kind { kObject, kArray, kString, kInt };
  Json(Kind k, size_t offset) : kind(k), at(offset) {}
  Kind kind;
  size_t at;  // byte offset in the header
  std::string text;
  uint64_t num = 0;
  std::vector<std::pair<std::string, Json>> members;
  std::vector<Json> items;
};

std::string kind_name(Json::Kind k) {
  static constexpr const char* kNames[] = {"an object", "an array", "a string", "an integer"};
  return kNames[k];
}

// A strict recursive-descent parser; every error throws naming the header byte offset.
class JsonParser {
 public:
  JsonParser(std::string_view text, const std::string& path) : text_(text), path_(path) {}

  // The single value of the whole text (whitespace around it allowed).
  Json parse() {
    skip_ws();
    Json v = value(0);
    skip_ws();
    if (pos_ != text_.size()) error("unexpected " + describe() + " after the top-level value");
    return v;
  }

 private:
  [[noreturn]] void error(const std::string& what) const { error_at(pos_, what); }
  [[noreturn]] void error_at(size_t at, const std::string& what) const {
    fail("safe_load", path_ + ": header is not valid JSON at header byte " + str(at) +
                          " (file offset " + str(at + 8) + "): " + what);
  }
  std::string describe() const {
    if (pos_ >= text_.size()) return "end of header";
    auto c = static_cast<uint8_t>(text_[pos_]);
    if (c >= 0x20 && c < 0x7F) return std::string("character '") + text_[pos_] + "'";
    return "byte 0x" + std::string{kHex[c >> 4], kHex[c & 15]};
  }
  int peek() const { return pos_ < text_.size() ? static_cast<uint8_t>(text_[pos_]) : -1; }
  void skip_ws() {
    while (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r') pos_++;
  }
  void expect(char c) {
    if (peek() != c) error(std::string("expected '") + c + "', got " + describe());
    pos_++;
  }

  Json value(int depth) {
    if (depth > kMaxDepth) error("nesting deeper than " + str(kMaxDepth));
    int c = peek();
    if (c == '{') return object(depth);
    if (c == '[') return array(depth);
    if (c == '"') {
      Json v{Json::kString, pos_};
      v.text = string();
      return v;
    }
    if (c >= '0' && c <= '9') return number();
    if (c == '-') error("negative numbers are not allowed");
    error("expected a value, got " + describe());
  }

  Json object(int depth) {
    Json v{Json::kObject, pos_++};
    std::set<std::string> keys;
    skip_ws();
    if (peek() == '}') return pos_++, v;
    while (true) {
      skip_ws();
      size_t key_at = pos_;
      if (peek() != '"') error("expected a string key, got " + describe());
      std::string key = string();
      if (!keys.insert(key).second) error_at(key_at, "duplicate key " + quote(key));
      skip_ws();
      expect(':');
      skip_ws();
      v.members.emplace_back(std::move(key), value(depth + 1));
      skip_ws();
      if (peek() == '}') return pos_++, v;
      if (peek() != ',') error("expected ',' or '}' in an object, got " + describe());
      pos_++;
    }
  }

  Json array(int depth) {
    Json v{Json::kArray, pos_++};
    skip_ws();
    if (peek() == ']') return pos_++, v;
    while (true) {
      skip_ws();
      v.items.push_back(value(depth + 1));
      skip_ws();
      if (peek() == ']') return pos_++, v;
      if (peek() != ',') error("expected ',' or ']' in an array, got " + describe());
      pos_++;
    }
  }

  Json number() {
    Json v{Json::kInt, pos_};
    if (peek() == '0' && pos_ + 1 < text_.size() && text_[pos_ + 1] >= '0' &&
        text_[pos_ + 1] <= '9')
      error("leading zero in an integer");
    while (peek() >= '0' && peek() <= '9') {
      auto d = static_cast<uint64_t>(peek() - '0');
      if (v.num > (std::numeric_limits<uint64_t>::max() - d) / 10)
        error_at(v.at, "integer does not fit in 64 bits");
      v.num = v.num * 10 + d;
      pos_++;
    }
    if (peek() == '.' || peek() == 'e' || peek() == 'E') error("only integers are allowed");
    return v;
  }

  uint32_t hex4() {
    uint32_t u = 0;
    for (int i = 0; i < 4; i++, pos_++) {
      int c = peek();
      int d = c >= '0' && c <= '9'   ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                     : -1;
      if (d < 0) error("expected a hex digit in \\u escape, got " + describe());
      u = u << 4 | static_cast<uint32_t>(d);
    }
    return u;
  }

  void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | cp >> 6);
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | cp >> 12);
      out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | cp >> 18);
      out += static_cast<char>(0x80 | (cp >> 12 & 0x3F));
      out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  // The decoded contents of the string literal at pos_.
  std::string string() {
    size_t start = pos_++;
    std::string out;
    while (true) {
      int c = peek();
      if (c < 0) error_at(start, "unterminated string");
      if (c == '"') break;
      if (c < 0x20) error("control character " + describe() + " in a string");
      pos_++;
      if (c != '\\') {
        out += static_cast<char>(c);
        continue;
      }
      static constexpr std::string_view kFrom = "\"\\/bfnrt", kTo = "\"\\/\b\f\n\r\t";
      size_t k = peek() < 0 ? kFrom.npos : kFrom.find(static_cast<char>(peek()));
      if (k != kFrom.npos) {
        out += kTo[k];
        pos_++;
        continue;
      }
      if (peek() != 'u') error("invalid escape \\" + describe());
      pos_++;
      uint32_t cp = hex4();
      if (cp >= 0xDC00 && cp <= 0xDFFF) error("unpaired low surrogate in \\u escape");
      if (cp >= 0xD800 && cp <= 0xDBFF) {
        if (peek() != '\\' || pos_ + 1 >= text_.size() || text_[pos_ + 1] != 'u')
          error("unpaired high surrogate in \\u escape");
        pos_ += 2;
        uint32_t lo = hex4();
        if (lo < 0xDC00 || lo > 0xDFFF) error("unpaired high surrogate in \\u escape");
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
      }
      append_utf8(out, cp);
    }
    pos_++;
    if (!utf8_valid(out)) error_at(start, "string is not valid UTF-8");
    return out;
  }

  std::string_view text_;
  const std::string& path_;
  size_t pos_ = 0;
};

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

// ---- header validation ---------------------------------------------------------------------

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin = 0, end = 0;  // relative to the data section
};

// A header that passed every check: data offsets tile the data section exactly.
struct Header {
  std::vector<Entry> entries;
  std::map<std::string, std::string> metadata;
  const uint8_t* data = nullptr;  // the data section
};

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  fail("safe_load", path + ": " + what);
}

// Checks `v` is an array of integers, each at most `max`; returns them.
std::vector<uint64_t> ints(const std::string& path,
                           const std::string& where,
                           const Json& v,
                           uint64_t max) {
  if (v.kind != Json::kArray) bad(path, where + " must be an array, got " + kind_name(v.kind));
  std::vector<uint64_t> out;
  for (const Json& item : v.items) {
    if (item.kind != Json::kInt)
      bad(path, where + " must hold integers, got " + kind_name(item.kind));
    if (item.num > max) bad(path, where + " value " + str(item.num) + " is out of range");
    out.push_back(item.num);
  }
  return out;
}

Entry parse_entry(const std::string& path, const std::string& name, const Json& v, uint64_t size) {
  std::string where = "tensor " + quote(name);
  if (v.kind != Json::kObject) bad(path, where + " must be an object, got " + kind_name(v.kind));
  const Json *dtype = nullptr, *shape = nullptr, *offsets = nullptr;
  for (const auto& [key, field] : v.members) {
    if (key == "dtype")
      dtype = &field;
    else if (key == "shape")
      shape = &field;
    else if (key == "data_offsets")
      offsets = &field;
    else
      bad(path, where + ": unknown field " + quote(key));
  }
  if (!dtype || !shape || !offsets)
    bad(path, where + ": missing field \"" +
                  (!dtype   ? "dtype"
                   : !shape ? "shape"
                            : "data_offsets") +
                  "\"");
  Entry e{name, dtypes::kVoid, {}, 0, 0};
  if (dtype->kind != Json::kString)
    bad(path, where + ": dtype must be a string, got " + kind_name(dtype->kind));
  for (const auto& [code, t] : kCodes)
    if (dtype->text == code) e.dtype = t;
  if (e.dtype == dtypes::kVoid) bad(path, where + ": unknown dtype " + quote(dtype->text));
  int64_t numel = 1;
  for (uint64_t d : ints(path, where + " shape", *shape, std::numeric_limits<int64_t>::max())) {
    e.shape.push_back(static_cast<int64_t>(d));
    if (__builtin_mul_overflow(numel, static_cast<int64_t>(d), &numel))
      bad(path, where + ": shape " + shape_str(e.shape) + " has too many elements");
  }
  auto off = ints(path, where + " data_offsets", *offsets, std::numeric_limits<uint64_t>::max());
  if (off.size() != 2)
    bad(path, where + ": data_offsets must hold 2 integers, got " + str(off.size()));
  e.begin = off[0];
  e.end = off[1];
  std::string span = "data_offsets " + offsets_str(e.begin, e.end);
  if (e.begin > e.end) bad(path, where + ": " + span + " begin after end");
  if (e.end > size)
    bad(path, where + ": " + span + " exceed the data section (" + str(size) + " bytes)");
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(numel), e.dtype.itemsize(), &bytes) ||
      bytes != e.end - e.begin)
    bad(path, where + ": shape " + shape_str(e.shape) + " of " + dtype->text + " needs " +
                  str(bytes) + " bytes but " + span + " span " + str(e.end - e.begin));
  return e;
}

// Validates everything in `file` (safe_load's errors) without reading tensor data.
Header parse_header(const std::string& path, const uint8_t* file, size_t file_size) {
  if (file_size < 8)
    bad(path, "file is " + str(file_size) + " bytes, shorter than the 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = n << 8 | file[i];
  if (n > file_size - 8)
    bad(path, "header length " + str(n) + " exceeds the " + str(file_size - 8) +
                  " bytes after the length field");
  std::string_view text(reinterpret_cast<const char*>(file) + 8, n);
  Json root = JsonParser(text, path).parse();
  if (root.kind != Json::kObject)
    bad(path, "header must be an object, got " + kind_name(root.kind));
  Header h;
  h.data = file + 8 + n;
  uint64_t size = file_size - 8 - n;
  for (const auto& [name, v] : root.members) {
    if (name != "__metadata__") {
      h.entries.push_back(parse_entry(path, name, v, size));
      continue;
    }
    if (v.kind != Json::kObject)
      bad(path, "__metadata__ must be an object, got " + kind_name(v.kind));
    for (const auto& [key, value] : v.members) {
      if (value.kind != Json::kString)
        bad(path, "__metadata__ value of " + quote(key) + " must be a string, got " +
                      kind_name(value.kind));
      h.metadata[key] = value.text;
    }
  }
  // The spec: offsets cover the data section in order, without gaps or overlaps.
  std::vector<const Entry*> order;
  for (const Entry& e : h.entries) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return std::tie(a->begin, a->end) < std::tie(b->begin, b->end);
  });
  uint64_t at = 0;
  const Entry* prev = nullptr;
  for (const Entry* e : order) {
    std::string span =
        "tensor " + quote(e->name) + " data_offsets " + offsets_str(e->begin, e->end);
    if (e->begin < at)
      bad(path, span + " overlap tensor " + quote(prev->name) + " data_offsets " +
                    offsets_str(prev->begin, prev->end));
    if (e->begin > at)
      bad(path, span + " leave a gap: data bytes [" + str(at) + ", " + str(e->begin) +
                    ") belong to no tensor");
    at = e->end;
    prev = e;
  }
  if (at != size)
    bad(path, "tensors cover " + str(at) + " bytes but the data section has " + str(size) +
                  " (trailing bytes after the last tensor)");
  return h;
}

}  // namespace

// ---- public --------------------------------------------------------------------------------

Tensor tensor_from_bytes(
    const void* data, size_t bytes, Shape shape, DType dtype, std::string_view device) {
  return Tensor::from_bytes(data, bytes, std::move(shape), dtype, device);
}

std::vector<uint8_t> tensor_to_bytes(const Tensor& t) { return t.to_bytes(); }

std::string safetensors_dtype(DType t) {
  for (const auto& [code, dt] : kCodes)
    if (dt == t) return code;
  fail("safe_save", "dtype " + t.name() + " has no safetensors code", ErrorKind::kType);
}

void safe_save(const std::map<std::string, Tensor>& tensors,
               const std::string& path,
               const std::map<std::string, std::string>& metadata) {
  auto check_utf8 = [&](const std::string& s, const char* what) {
    if (!utf8_valid(s))
      fail("safe_save", path + ": " + what + " " + quote(s) + " is not UTF-8", ErrorKind::kValue);
  };
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    for (const auto& [key, value] : metadata) {
      check_utf8(key, "metadata key");
      check_utf8(value, "metadata value");
      header += quote(key) + ":" + quote(value) + ",";
    }
    header.back() = '}';
    header += ",";
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__")
      fail("safe_save", path + ": \"__metadata__\" cannot name a tensor", ErrorKind::kValue);
    check_utf8(name, "tensor name");
    std::string dims;
    for (int64_t d : t.shape()) dims += (dims.empty() ? "" : ",") + std::to_string(d);
    uint64_t end = offset + static_cast<uint64_t>(t.numel()) * t.dtype().itemsize();
    header += quote(name) + ":{\"dtype\":\"" + safetensors_dtype(t.dtype()) + "\",\"shape\":[" +
              dims + "],\"data_offsets\":[" + str(offset) + "," + str(end) + "]},";
    offset = end;
  }
  if (header.back() == ',') header.pop_back();
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');  // as the reference writer pads
  uint8_t len[8];
  for (int i = 0; i < 8; i++) len[i] = static_cast<uint8_t>(header.size() >> (8 * i));
  TempFile out(path);
  out.write(len, sizeof(len));
  out.write(header.data(), header.size());
  for (const auto& [name, t] : tensors) {
    std::vector<uint8_t> bytes = tensor_to_bytes(t);
    out.write(bytes.data(), bytes.size());
  }
  out.commit();
}

std::map<std::string, Tensor> safe_load(const std::string& path, std::string_view device) {
  FileMap file(path);
  Header h = parse_header(path, file.data(), file.size());
  std::map<std::string, Tensor> out;
  for (const Entry& e : h.entries)
    out.emplace(e.name,
                tensor_from_bytes(h.data + e.begin, e.end - e.begin, e.shape, e.dtype, device));
  return out;
}

std::map<std::string, std::string> safe_load_metadata(const std::string& path) {
  FileMap file(path);
  return parse_header(path, file.data(), file.size()).metadata;
}

}  // namespace baregrad::tensor
