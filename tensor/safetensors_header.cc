#include "tensor/safetensors_header.h"

#include <algorithm>
#include <limits>
#include <tuple>
#include <utility>

#include "base/error.h"
#include "base/format.h"
#include "nlohmann/json.hpp"

namespace baregrad::tensor {
namespace {

using compiler::DType;
namespace dtypes = compiler::dtypes;

constexpr std::pair<const char*, DType> kCodes[] = {
    {"F64", dtypes::kFloat64},   {"F32", dtypes::kFloat32},     {"F16", dtypes::kFloat16},
    {"BF16", dtypes::kBFloat16}, {"I64", dtypes::kInt64},       {"I32", dtypes::kInt32},
    {"I16", dtypes::kInt16},     {"I8", dtypes::kInt8},         {"U64", dtypes::kUint64},
    {"U32", dtypes::kUint32},    {"U16", dtypes::kUint16},      {"U8", dtypes::kUint8},
    {"BOOL", dtypes::kBool},     {"F8_E4M3", dtypes::kFp8e4m3}, {"F8_E5M2", dtypes::kFp8e5m2},
};
constexpr size_t kMaxDepth = 64;  // JSON nesting; the header needs 3
constexpr char kHex[] = "0123456789abcdef";

using json = nlohmann::json;

std::string offsets_str(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

std::string quote(const std::string& s) { return json_quote(s); }

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// ---- JSON: the header through nlohmann's SAX parser ----------------------------------------

// nlohmann's syntax errors, in its grammar's words ("syntax error while parsing object key -
// unexpected '}'; expected string literal"), as safe_load words them; unlisted ones keep
// nlohmann's text. Lexer errors come first: one message can name a lexer error and a token.
constexpr std::pair<std::string_view, std::string_view> kSyntax[] = {
    {"missing closing quote", "unterminated string"},
    {"forbidden character after backslash", "invalid escape"},
    {"must be followed by 4 hex digits", "expected 4 hex digits in \\u escape"},
    {"must be followed by U+DC00..U+DFFF", "unpaired high surrogate in \\u escape"},
    {"must follow U+D800..U+DBFF", "unpaired low surrogate in \\u escape"},
    {"ill-formed UTF-8 byte", "string is not valid UTF-8"},
    {"must be escaped", "control character in a string"},
    {"; expected string literal", "expected a string key"},
    {"; expected ':'", "expected ':'"},
    {"; expected '}'", "expected ',' or '}' in an object"},
    {"; expected ']'", "expected ',' or ']' in an array"},
    {"expected digit after '-'", "negative numbers are not allowed"},
    {"invalid number", "only integers are allowed"},
    {"invalid literal", "expected a value"},
    {"; expected '[', '{', or a literal", "expected a value"},
};

// Builds the header as a json value through nlohmann's SAX interface, allowing only what the
// format uses: objects, arrays, strings and non-negative 64-bit integers, nested at most
// kMaxDepth deep, no duplicate keys and no byte order mark. NOTE: nlohmann's own parse keeps
// the last of duplicate keys silently and accepts true, null, floats and negative numbers, so
// these checks are ours; returning false stops the parse with the reason in error().
class HeaderReader final : public json::json_sax_t {
 public:
  explicit HeaderReader(std::string_view text) : text_(text) {}

  // Parses the whole text; false (with error() set) when it is not a header-shaped JSON value.
  bool read() {
    // NOTE: nlohmann skips a leading UTF-8 byte order mark, which serde_json (the reference)
    // rejects, and ends the input at a NUL byte (for C strings), ignoring the bytes after it.
    if (text_.starts_with('\xEF')) return syntax_error(0, "expected a value, got byte 0xef");
    if (size_t nul = text_.find('\0'); nul != text_.npos)
      return syntax_error(nul, "unexpected byte 0x00");
    return json::sax_parse(text_, this);
  }
  json& root() { return root_; }
  const std::string& error() const { return error_; }

  bool null() override { return reject("expected a value, got character 'n' (null)"); }
  bool boolean(bool b) override {
    return reject(std::string("expected a value, got character '") +
                  (b ? "t' (true)" : "f' (false)"));
  }
  // nlohmann reports a number with a minus sign here, -0 included.
  bool number_integer(number_integer_t) override {
    return reject("negative numbers are not allowed");
  }
  bool number_unsigned(number_unsigned_t v) override { return add(v); }
  // Fractions, exponents, and integers past 64 bits, which nlohmann reads as doubles.
  bool number_float(number_float_t, const string_t& text) override {
    if (text.starts_with('-')) return reject("negative numbers are not allowed");
    if (text.find_first_not_of("0123456789") == std::string::npos)
      return reject("integer " + text + " does not fit in 64 bits");
    return reject("only integers are allowed, got " + text);
  }
  bool string(string_t& s) override { return add(std::move(s)); }
  bool binary(binary_t&) override { return reject("binary values are not JSON"); }
  bool start_object(std::size_t) override { return add(json::object()); }
  bool key(string_t& k) override {
    if (stack_.back().value->contains(k)) {
      error_ = where(false) + ": duplicate key " + quote(k);
      return false;
    }
    stack_.back().key = std::move(k);
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return add(json::array()); }
  bool end_array() override { return close(); }

  // `pos` counts the bytes nlohmann read, the end of input as one; `token` is the text of the
  // token it stopped in, but only a string or number token restarts it.
  bool parse_error(std::size_t pos, const std::string& token, const json::exception& e) override {
    std::string_view what = e.what();
    size_t end = std::min(pos, text_.size());
    size_t at = pos == 0 ? 0 : std::min(pos - 1, text_.size());
    if (contains(what, "missing closing quote") || contains(what, "unexpected number literal") ||
        contains(what, "unexpected string literal"))
      at = end - std::min(token.size(), end);  // where that string or number begins
    else if (contains(what, "unexpected true literal") || contains(what, "unexpected null literal"))
      at = end - 4;
    else if (contains(what, "unexpected false literal"))
      at = end - 5;
    if (done_) return syntax_error(at, "unexpected " + describe(at) + " after the top-level value");
    // A number can only end right before a digit when it is a lone 0: "01" reads as 0, 1.
    if (contains(what, "unexpected number literal") && at > 0 && text_[at - 1] == '0')
      return syntax_error(at - 1, "leading zero in an integer");
    for (const auto& [theirs, ours] : kSyntax)
      if (contains(what, theirs))
        return syntax_error(
            at, std::string(ours) + (ours.starts_with("expected") ? ", got " + describe(at) : ""));
    // Anything else in nlohmann's words, without its position and the bytes it read.
    size_t from = what.find(" - ");
    what = what.substr(from == what.npos ? 0 : from + 3);
    return syntax_error(at, std::string(what.substr(0, what.find("; last read:"))));
  }

 private:
  struct Level {
    json* value;      // the object or array being read
    std::string key;  // an object's key of the value being read
  };

  bool syntax_error(size_t at, const std::string& what) {
    error_ = "header is not valid JSON at header byte " + std::to_string(at) + " (file offset " +
             std::to_string(at + 8) + "): " + what;
    return false;
  }
  bool reject(const std::string& what) {
    error_ = where(true) + ": " + what;
    return false;
  }
  // "header at /a/shape/0": the JSON pointer of the value being read (`next`), or else of the
  // object or array holding it.
  std::string where(bool next) const {
    json::json_pointer p;
    for (size_t i = 0; i < stack_.size(); i++) {
      bool last = i + 1 == stack_.size();
      if (last && !next) break;
      const Level& l = stack_[i];
      if (l.value->is_object())
        p /= l.key;
      else
        p /= l.value->size() - (last ? 0 : 1);  // a nested value is already its last item
    }
    return p.empty() ? "header" : "header at " + p.to_string();
  }
  std::string describe(size_t at) const {
    if (at >= text_.size()) return "end of header";
    auto c = static_cast<uint8_t>(text_[at]);
    if (c >= 0x20 && c < 0x7F) return std::string("character '") + text_[at] + "'";
    return "byte 0x" + std::string{kHex[c >> 4], kHex[c & 15]};
  }

  // Places `v` as the root or the next value of the innermost object or array; an object or
  // array becomes the innermost one. Values nested deeper than kMaxDepth are refused.
  bool add(json v) {
    if (stack_.size() > kMaxDepth)
      return reject("nesting deeper than " + std::to_string(kMaxDepth));
    bool structured = v.is_structured();
    json* at = &root_;
    if (stack_.empty()) {
      root_ = std::move(v);
    } else if (Level& l = stack_.back(); l.value->is_object()) {
      at = &((*l.value)[l.key] = std::move(v));
    } else {
      l.value->push_back(std::move(v));
      at = &l.value->back();
    }
    if (structured) stack_.push_back({at, {}});
    done_ = stack_.empty();
    return true;
  }
  bool close() {
    stack_.pop_back();
    done_ = stack_.empty();
    return true;
  }

  std::string_view text_;
  json root_;
  std::vector<Level> stack_;  // NOTE: pointers stay valid: only the innermost level grows
  bool done_ = false;         // the top-level value is complete
  std::string error_;
};

// ---- header validation ---------------------------------------------------------------------

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  fail("safe_load", path + ": " + what);
}

// What a value of a header that HeaderReader accepted is; no other kind gets through it.
std::string kind_name(const json& v) {
  return v.is_object()   ? "an object"
         : v.is_array()  ? "an array"
         : v.is_string() ? "a string"
                         : "an integer";
}

// Checks `v` is an array of integers, each at most `max`; returns them.
std::vector<uint64_t> ints(const std::string& path,
                           const std::string& where,
                           const json& v,
                           uint64_t max) {
  if (!v.is_array()) bad(path, where + " must be an array, got " + kind_name(v));
  std::vector<uint64_t> out;
  for (const json& item : v) {
    if (!item.is_number_unsigned())
      bad(path, where + " must hold integers, got " + kind_name(item));
    auto n = item.get<uint64_t>();
    if (n > max) bad(path, where + " value " + std::to_string(n) + " is out of range");
    out.push_back(n);
  }
  return out;
}

SafetensorsEntry parse_entry(const std::string& path,
                             const std::string& name,
                             const json& v,
                             uint64_t size) {
  std::string where = "tensor " + quote(name);
  if (!v.is_object()) bad(path, where + " must be an object, got " + kind_name(v));
  const json *dtype = nullptr, *shape = nullptr, *offsets = nullptr;
  for (const auto& [key, field] : v.items()) {
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
  SafetensorsEntry e{name, compiler::dtypes::kVoid, {}, 0, 0};
  if (!dtype->is_string()) bad(path, where + ": dtype must be a string, got " + kind_name(*dtype));
  const auto& code_text = dtype->get_ref<const std::string&>();
  for (const auto& [code, t] : kCodes)
    if (code_text == code) e.dtype = t;
  if (e.dtype == compiler::dtypes::kVoid) bad(path, where + ": unknown dtype " + quote(code_text));
  int64_t numel = 1;
  for (uint64_t d : ints(path, where + " shape", *shape, std::numeric_limits<int64_t>::max())) {
    e.shape.push_back(static_cast<int64_t>(d));
    if (__builtin_mul_overflow(numel, static_cast<int64_t>(d), &numel))
      bad(path, where + ": shape " + tuple_str(e.shape) + " has too many elements");
  }
  auto off = ints(path, where + " data_offsets", *offsets, std::numeric_limits<uint64_t>::max());
  if (off.size() != 2)
    bad(path, where + ": data_offsets must hold 2 integers, got " + std::to_string(off.size()));
  e.begin = off[0];
  e.end = off[1];
  std::string span = "data_offsets " + offsets_str(e.begin, e.end);
  if (e.begin > e.end) bad(path, where + ": " + span + " begin after end");
  if (e.end > size)
    bad(path,
        where + ": " + span + " exceed the data section (" + std::to_string(size) + " bytes)");
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(numel), e.dtype.itemsize(), &bytes) ||
      bytes != e.end - e.begin)
    bad(path, where + ": shape " + tuple_str(e.shape) + " of " + code_text + " needs " +
                  std::to_string(bytes) + " bytes but " + span + " span " +
                  std::to_string(e.end - e.begin));
  return e;
}

}  // namespace

SafetensorsHeader parse_safetensors_header(const std::string& path,
                                           const uint8_t* file,
                                           size_t file_size) {
  if (file_size < 8)
    bad(path,
        "file is " + std::to_string(file_size) + " bytes, shorter than the 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = n << 8 | file[i];
  if (n > file_size - 8)
    bad(path, "header length " + std::to_string(n) + " exceeds the " +
                  std::to_string(file_size - 8) + " bytes after the length field");
  std::string_view text(reinterpret_cast<const char*>(file) + 8, n);
  HeaderReader reader(text);
  if (!reader.read()) bad(path, reader.error());
  const json& root = reader.root();
  if (!root.is_object()) bad(path, "header must be an object, got " + kind_name(root));
  SafetensorsHeader h;
  h.data = file + 8 + n;
  uint64_t size = file_size - 8 - n;
  for (const auto& [name, v] : root.items()) {
    if (name != "__metadata__") {
      h.entries.push_back(parse_entry(path, name, v, size));
      continue;
    }
    if (!v.is_object()) bad(path, "__metadata__ must be an object, got " + kind_name(v));
    for (const auto& [key, value] : v.items()) {
      if (!value.is_string())
        bad(path,
            "__metadata__ value of " + quote(key) + " must be a string, got " + kind_name(value));
      h.metadata[key] = value.get<std::string>();
    }
  }
  // The spec: offsets cover the data section in order, without gaps or overlaps.
  std::vector<const SafetensorsEntry*> order;
  for (const SafetensorsEntry& e : h.entries) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const SafetensorsEntry* a, const SafetensorsEntry* b) {
    return std::tie(a->begin, a->end) < std::tie(b->begin, b->end);
  });
  uint64_t at = 0;
  const SafetensorsEntry* prev = nullptr;
  for (const SafetensorsEntry* e : order) {
    std::string span =
        "tensor " + quote(e->name) + " data_offsets " + offsets_str(e->begin, e->end);
    if (e->begin < at)
      bad(path, span + " overlap tensor " + quote(prev->name) + " data_offsets " +
                    offsets_str(prev->begin, prev->end));
    if (e->begin > at)
      bad(path, span + " leave a gap: data bytes [" + std::to_string(at) + ", " +
                    std::to_string(e->begin) + ") belong to no tensor");
    at = e->end;
    prev = e;
  }
  if (at != size)
    bad(path, "tensors cover " + std::to_string(at) + " bytes but the data section has " +
                  std::to_string(size) + " (trailing bytes after the last tensor)");
  return h;
}

std::string json_quote(const std::string& s) {
  return json(s).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string safetensors_code(DType t) {
  for (const auto& [code, dt] : kCodes)
    if (dt == t) return code;
  return "";
}

}  // namespace baregrad::tensor
