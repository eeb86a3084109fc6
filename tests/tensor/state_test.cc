// safetensors load/save: byte-exact round trips, the exact bytes of the format, files written by
// hand from the spec, and a clean Error (never a crash) for every corrupt or truncated file.
#include "tensor/state.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "base/error.h"

namespace baregrad::tensor {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("state_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name = "t.safetensors") const { return dir_ / name; }
  // NOTE: removes first; ext4 flushes a file truncated and rewritten on close (auto_da_alloc).
  void write(const Bytes& b, const std::string& p) const {
    fs::remove(p);
    std::ofstream(p, std::ios::binary)
        .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  }
  Bytes read(const std::string& p) const {
    std::ifstream f(p, std::ios::binary);
    return Bytes(std::istreambuf_iterator<char>(f), {});
  }
  // The message of the Error safe_load throws on a file holding `b`; "" when it loads.
  std::string load_error(const Bytes& b) const {
    write(b, path("bad.safetensors"));
    try {
      safe_load(path("bad.safetensors"));
    } catch (const Error& e) {
      EXPECT_EQ(e.op(), "safe_load");
      EXPECT_NE(e.message().find(path("bad.safetensors") + ": "), std::string::npos);
      return e.message();
    }
    return "";
  }

  fs::path dir_;
};

// 8-byte little-endian header length, the header text, then the data.
Bytes file_of(const std::string& header, const Bytes& data = {}) {
  Bytes out;
  for (int i = 0; i < 8; i++) out.push_back(static_cast<uint8_t>(header.size() >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

template <typename T>
Bytes raw(std::initializer_list<T> values) {
  Bytes out(values.size() * sizeof(T));
  std::memcpy(out.data(), std::data(values), out.size());
  return out;
}

// One tensor of every dtype, with edge-case bit patterns where doubles would lose them.
std::map<std::string, std::pair<DType, Bytes>> every_dtype() {
  std::map<std::string, std::pair<DType, Bytes>> m;
  m["f16"] = {dtypes::kFloat16, raw<uint16_t>({0x0001, 0x7C00, 0x7E01, 0x8000, 0x3C00, 0xFBFF})};
  m["bf16"] = {dtypes::kBFloat16, raw<uint16_t>({0x7FC1, 0x0001, 0xFF80, 0x8000, 0x3F80, 0x7F7F})};
  m["i64"] = {dtypes::kInt64,
              raw<int64_t>({(1LL << 53) + 1, -(1LL << 62) - 3, INT64_MAX, INT64_MIN, -1, 0})};
  m["u64"] = {dtypes::kUint64, raw<uint64_t>({UINT64_MAX, (1ULL << 53) + 1, 1ULL << 63,
                                              (1ULL << 63) + 7, 0, 12345678901234567891ULL})};
  m["bool"] = {dtypes::kBool, Bytes{1, 0, 0, 1, 1, 0}};
  std::mt19937 rng(7);
  const std::pair<const char*, DType> rest[] = {
      {"f32", dtypes::kFloat32}, {"f64", dtypes::kFloat64}, {"i8", dtypes::kInt8},
      {"i16", dtypes::kInt16},   {"i32", dtypes::kInt32},   {"u8", dtypes::kUint8},
      {"u16", dtypes::kUint16},  {"u32", dtypes::kUint32}};
  for (const auto& [name, t] : rest) {
    Bytes b(6 * t.itemsize());
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    m[name] = {t, b};
  }
  return m;
}

TEST_F(SafetensorsTest, EveryDtypeRoundTripsByteExact) {
  std::map<std::string, Tensor> tensors;
  Bytes data;  // what the data section must hold: names sorted, contiguous
  for (const auto& [name, tb] : every_dtype()) {
    tensors.emplace(name, tensor_from_bytes(tb.second.data(), tb.second.size(), {2, 3}, tb.first));
    data.insert(data.end(), tb.second.begin(), tb.second.end());
  }
  safe_save(tensors, path());
  Bytes file = read(path());
  ASSERT_GE(file.size(), data.size());
  EXPECT_EQ(Bytes(file.end() - static_cast<ptrdiff_t>(data.size()), file.end()), data);
  EXPECT_EQ((file.size() - data.size()) % 8, 0u) << "header padded to a multiple of 8";
  auto loaded = safe_load(path());
  ASSERT_EQ(loaded.size(), tensors.size());
  for (const auto& [name, tb] : every_dtype()) {
    const Tensor& t = loaded.at(name);
    EXPECT_EQ(t.dtype(), tb.first) << name;
    EXPECT_EQ(t.shape(), (Shape{2, 3})) << name;
    EXPECT_EQ(tensor_to_bytes(t), tb.second) << name;
  }
}

TEST_F(SafetensorsTest, FromBytesHoldsTheValues) {
  Bytes b = raw<float>({1.5f, -2.0f, 0.25f});
  EXPECT_EQ(tensor_from_bytes(b.data(), b.size(), {3}, dtypes::kFloat32).to_vector(),
            (std::vector<double>{1.5, -2.0, 0.25}));
  EXPECT_THROW(tensor_from_bytes(b.data(), 8, {3}, dtypes::kFloat32), Error);
}

TEST_F(SafetensorsTest, WritesTheExactReferenceBytes) {
  Bytes a = raw<uint16_t>({0x3C00}), b = raw<int32_t>({1, -2});
  std::map<std::string, Tensor> tensors;
  tensors.emplace("b", tensor_from_bytes(b.data(), b.size(), {2}, dtypes::kInt32));
  tensors.emplace("a", tensor_from_bytes(a.data(), a.size(), {}, dtypes::kFloat16));
  safe_save(tensors, path(), {{"format", "pt"}});
  // 138 bytes of JSON padded with 6 spaces to 144 = 0x90.
  std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F16","shape":[],"data_offsets":[0,2]},)"
      R"("b":{"dtype":"I32","shape":[2],"data_offsets":[2,10]}}      )";
  Bytes want = {0x90, 0, 0, 0, 0, 0, 0, 0};
  want.insert(want.end(), header.begin(), header.end());
  Bytes data = {0x00, 0x3C, 0x01, 0, 0, 0, 0xFE, 0xFF, 0xFF, 0xFF};
  want.insert(want.end(), data.begin(), data.end());
  EXPECT_EQ(read(path()), want);
}

TEST_F(SafetensorsTest, EmptyFileHasNoMetadataKey) {
  safe_save({}, path());
  EXPECT_EQ(read(path()), file_of("{}      "));
  EXPECT_TRUE(safe_load(path()).empty());
  EXPECT_TRUE(safe_load_metadata(path()).empty());
}

TEST_F(SafetensorsTest, MetadataRoundTrips) {
  std::map<std::string, std::string> meta = {
      {"format", "pt"}, {"q\"uote\\", "line\nbreak\t\x01 ctl"}, {"caf\xC3\xA9", "\xE2\x98\x83"}};
  Bytes b = raw<float>({1.0f});
  safe_save({{"w", tensor_from_bytes(b.data(), b.size(), {1}, dtypes::kFloat32)}}, path(), meta);
  EXPECT_EQ(safe_load_metadata(path()), meta);
  std::string text(reinterpret_cast<const char*>(read(path()).data()) + 8, 100);
  EXPECT_NE(text.find(R"("q\"uote\\":"line\nbreak\t\u0001 ctl")"), std::string::npos) << text;
}

TEST_F(SafetensorsTest, LoadsAFileWrittenByHandFromTheSpec) {
  // Any key and field order, whitespace, escapes, unpadded header, offsets not in key order.
  std::string header =
      "{ \"zz\" : {\"shape\": [2, 2], \"dtype\": \"F32\", \"data_offsets\": [8, 24]},\n"
      "  \"caf\\u00e9\\ud83d\\ude00\": {\"data_offsets\":[0,8],\"dtype\":\"U8\",\"shape\":[8]},\n"
      "  \"empty\":{\"dtype\":\"I64\",\"shape\":[0,3],\"data_offsets\":[24,24]},\n"
      "  \"__metadata__\":{\"a\":\"b\\/c\"} }";
  Bytes data = {0, 1, 2,    3,    4, 5, 6,    7,      // caf\u00e9..: U8 0..7
                0, 0, 0x80, 0x3F, 0, 0, 0x20, 0xC0,   // zz: 1.0, -2.5
                0, 0, 0,    0x3F, 0, 0, 0x40, 0x40};  //     0.5, 3.0
  write(file_of(header, data), path());
  auto m = safe_load(path());
  ASSERT_EQ(m.size(), 3u);
  const Tensor& u8 = m.at("caf\xC3\xA9\xF0\x9F\x98\x80");
  EXPECT_EQ(u8.dtype(), dtypes::kUint8);
  EXPECT_EQ(u8.to_vector(), (std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(m.at("zz").shape(), (Shape{2, 2}));
  EXPECT_EQ(m.at("zz").to_vector(), (std::vector<double>{1.0, -2.5, 0.5, 3.0}));
  EXPECT_EQ(m.at("empty").shape(), (Shape{0, 3}));
  EXPECT_EQ(m.at("empty").dtype(), dtypes::kInt64);
  EXPECT_EQ(safe_load_metadata(path()), (std::map<std::string, std::string>{{"a", "b/c"}}));
}

std::string entry(const std::string& dtype, const std::string& shape, int begin, int end) {
  return R"({"dtype":")" + dtype + R"(","shape":)" + shape + R"(,"data_offsets":[)" +
         std::to_string(begin) + "," + std::to_string(end) + "]}";
}

TEST_F(SafetensorsTest, CorruptHeadersNameTheProblem) {
  Bytes d16(16, 0);
  auto err = [&](const std::string& header, const Bytes& data = Bytes(16, 0)) {
    return load_error(file_of(header, data));
  };
  auto has = [](const std::string& msg, const std::string& part) {
    if (msg.find(part) != std::string::npos) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "message \"" << msg << "\" lacks \"" << part << "\"";
  };
  EXPECT_TRUE(has(load_error({}), "file is 0 bytes, shorter than the 8-byte header length"));
  EXPECT_TRUE(has(load_error(Bytes(7, 0)), "file is 7 bytes"));
  Bytes huge = file_of("{}");
  huge[5] = 1;
  EXPECT_TRUE(has(load_error(huge), "header length 1099511627778 exceeds the 2 bytes"));
  EXPECT_TRUE(has(err(R"({"a":)" + entry("F32", "[4]", 0, 16) + ",}"),
                  "not valid JSON at header byte 55 (file offset 63): expected a string key"));
  EXPECT_TRUE(has(err("{\"a\" 1}"), "at header byte 5 (file offset 13): expected ':'"));
  EXPECT_TRUE(has(err("{\"a\":\"x"), "at header byte 5 (file offset 13): unterminated string"));
  EXPECT_TRUE(has(err("{\"a\":\"\\q\"}"), "invalid escape"));
  EXPECT_TRUE(has(err("{\"a\":\"\\ud800\"}"), "unpaired high surrogate"));
  EXPECT_TRUE(has(err("{\"a\":\"\xC3(\"}"), "not valid UTF-8"));
  EXPECT_TRUE(has(err("{\"a\":[-1]}"), "negative numbers"));
  EXPECT_TRUE(has(err("{\"a\":[1.5]}"), "only integers"));
  EXPECT_TRUE(has(err("{\"a\":[01]}"), "leading zero"));
  EXPECT_TRUE(has(err("{\"a\":[18446744073709551616]}"), "does not fit in 64 bits"));
  EXPECT_TRUE(has(err("{\"a\":true}"), "expected a value, got character 't'"));
  EXPECT_TRUE(has(err("{} x"), "after the top-level value"));
  EXPECT_TRUE(has(err(std::string(10000, '[')), "nesting deeper than 64"));
  EXPECT_TRUE(has(err("[]"), "header must be an object, got an array"));
  EXPECT_TRUE(has(err(R"({"a":)" + entry("F8_E8M0", "[16]", 0, 16) + "}"),
                  "tensor \"a\": unknown dtype \"F8_E8M0\""));
  EXPECT_TRUE(has(err(R"({"a":)" + entry("F8_E4M3", "[2,3]", 0, 16) + "}"),
                  "shape (2, 3) of F8_E4M3 needs 6 bytes but data_offsets [0, 16] span 16"));
  EXPECT_TRUE(has(err(R"({"a":)" + entry("F32", "[2,3]", 0, 16) + "}"),
                  "shape (2, 3) of F32 needs 24 bytes but data_offsets [0, 16] span 16"));
  EXPECT_TRUE(has(err(R"({"a":)" + entry("U8", "[20]", 0, 20) + "}"),
                  "data_offsets [0, 20] exceed the data section (16 bytes)"));
  EXPECT_TRUE(has(err(R"({"a":)" + entry("U8", "[0]", 9, 8) + "}"), "begin after end"));
  EXPECT_TRUE(has(
      err(R"({"a":)" + entry("F32", "[3]", 0, 12) + R"(,"b":)" + entry("F32", "[2]", 8, 16) + "}"),
      "tensor \"b\" data_offsets [8, 16] overlap tensor \"a\" data_offsets [0, 12]"));
  EXPECT_TRUE(has(err(R"({"a":)" + entry("U8", "[8]", 8, 16) + "}"),
                  "tensor \"a\" data_offsets [8, 16] leave a gap: data bytes [0, 8)"));
  EXPECT_TRUE(has(err(R"({"a":)" + entry("U8", "[8]", 0, 8) + "}"),
                  "tensors cover 8 bytes but the data section has 16 (trailing bytes"));
  EXPECT_TRUE(
      has(err(R"({"a":)" + entry("U8", "[8]", 0, 8) + R"(,"a":)" + entry("U8", "[8]", 8, 16) + "}"),
          "duplicate key \"a\""));
  EXPECT_TRUE(has(err(R"({"a":{"dtype":"U8","shape":[16]}})"), "missing field \"data_offsets\""));
  EXPECT_TRUE(has(err(R"({"a":{"dtype":"U8","shape":[16],"data_offsets":[0,16],"x":1}})"),
                  "unknown field \"x\""));
  EXPECT_TRUE(has(err(R"({"a":{"dtype":"U8","shape":[16],"data_offsets":[0]}})"),
                  "data_offsets must hold 2 integers, got 1"));
  EXPECT_TRUE(has(err(R"({"a":{"dtype":"U8","shape":[16],"data_offsets":[0,"16"]}})"),
                  "data_offsets must hold integers, got a string"));
  EXPECT_TRUE(
      has(err(R"({"a":{"dtype":"U8","shape":[9223372036854775808],"data_offsets":[0,16]}})"),
          "value 9223372036854775808 is out of range"));
  EXPECT_TRUE(
      has(err(R"({"a":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,16]}})"),
          "has too many elements"));
  EXPECT_TRUE(has(err(R"({"__metadata__":{"k":1}})", {}),
                  "__metadata__ value of \"k\" must be a string, got an integer"));
  EXPECT_TRUE(has(load_error(file_of("{}", d16)), "trailing bytes"));
  EXPECT_THROW(safe_load(path("missing.safetensors")), Error);
  EXPECT_THROW(safe_load(dir_.string()), Error);
}

// What the JSON library would accept but a safetensors header must not hold, and where the
// error points: the header byte where a token starts, or the JSON pointer of a refused value.
TEST_F(SafetensorsTest, StrictJsonNamesTheValueOrByte) {
  std::string shape_of = R"({"a":{"dtype":"U8","data_offsets":[0,0],"shape":)";
  const std::pair<std::string, std::string> cases[] = {
      {shape_of + "[2.0]}}", "header at /a/shape/0: only integers are allowed, got 2.0"},
      {shape_of + "[1e3]}}", "header at /a/shape/0: only integers are allowed, got 1e3"},
      {shape_of + "[0,-3]}}", "header at /a/shape/1: negative numbers are not allowed"},
      {shape_of + "[-0]}}", "header at /a/shape/0: negative numbers are not allowed"},
      {shape_of + "[\"2\"]}}", "tensor \"a\" shape must hold integers, got a string"},
      {shape_of + "16}}", "tensor \"a\" shape must be an array, got an integer"},
      {shape_of + "null}}", "header at /a/shape: expected a value, got character 'n'"},
      {R"({"a":false})", "header at /a: expected a value, got character 'f'"},
      {R"({"x/y~":[true]})", "header at /x~1y~0/0: expected a value, got character 't'"},
      {R"({"a":{"dtype":"U8","dtype":"U8"}})", "header at /a: duplicate key \"dtype\""},
      {R"({"__metadata__":{"k":"1","k":"2"}})", "header at /__metadata__: duplicate key \"k\""},
      {R"({"__metadata__":["k"]})", "__metadata__ must be an object, got an array"},
      {R"({"a":"F32"})", "tensor \"a\" must be an object, got a string"},
      {R"({"a":{"dtype":32,"shape":[],"data_offsets":[0,0]}})",
       "tensor \"a\": dtype must be a string, got an integer"},
      {R"({"a":{"shape":[],"data_offsets":[0,0]}})", "tensor \"a\": missing field \"dtype\""},
      // Syntax errors point at the header byte where the offending token starts.
      {"{\"a\" 123}", "at header byte 5 (file offset 13): expected ':', got character '1'"},
      {"{\"a\" true}", "at header byte 5 (file offset 13): expected ':', got character 't'"},
      {"{\"a\":{} \"b\"}",
       "at header byte 8 (file offset 16): expected ',' or '}' in an object, got character '\"'"},
      {"{\"a\":[1 2]}", "at header byte 8 (file offset 16): expected ',' or ']' in an array"},
      {"{\"a\":[1,]}", "at header byte 8 (file offset 16): expected a value, got character ']'"},
      {"{\"a\":[10,01]}", "at header byte 9 (file offset 17): leading zero in an integer"},
      {"{\"a\":\"x\\u12\"}", "expected 4 hex digits in \\u escape"},
      {"{\"a\":\"\\udc00\"}", "unpaired low surrogate in \\u escape"},
      {"{\"a\":\"tab\there\"}", "at header byte 9 (file offset 17): control character in a string"},
      {"", "at header byte 0 (file offset 8): expected a value, got end of header"},
      {"{} 12", "at header byte 3 (file offset 11): unexpected character '1' after the top-level"},
      {"{}\n}", "at header byte 3 (file offset 11): unexpected character '}' after the top-level"},
      // The library skips a byte order mark and stops at a NUL byte; a header may hold neither.
      {"\xEF\xBB\xBF{}", "at header byte 0 (file offset 8): expected a value, got byte 0xef"},
      {std::string("{}\0{\"a\":1}", 10), "at header byte 2 (file offset 10): unexpected byte 0x00"},
      // 65 nested arrays hold values up to depth 64 (the root is depth 0); one more is refused.
      {std::string(65, '[') + std::string(65, ']'), "header must be an object, got an array"},
      {std::string(65, '[') + "1" + std::string(65, ']'), "nesting deeper than 64"},
  };
  for (const auto& [header, part] : cases) {
    std::string msg = load_error(file_of(header));
    EXPECT_NE(msg.find(part), std::string::npos)
        << "header " << header << "\ngave \"" << msg << "\"\nlacking \"" << part << "\"";
  }
}

TEST_F(SafetensorsTest, SaveNamesTheStringThatIsNotUtf8) {
  Bytes b = raw<float>({1.0f});
  Tensor t = tensor_from_bytes(b.data(), b.size(), {1}, dtypes::kFloat32);
  try {
    safe_save({{"w", t}}, path(), {{"k", "bad\xFF"}});
    ADD_FAILURE() << "saved a metadata value that is not UTF-8";
  } catch (const Error& e) {
    EXPECT_EQ(e.op(), "safe_save");
    // The message shows the byte that is not UTF-8 as U+FFFD, so it stays UTF-8 itself.
    EXPECT_NE(e.message().find("metadata value \"bad\xEF\xBF\xBD\" is not UTF-8"),
              std::string::npos)
        << e.message();
  }
  EXPECT_FALSE(fs::exists(path()));
}

// A small valid file with metadata and three tensors.
Bytes valid_file() {
  std::string header = R"({"__metadata__":{"m":"v"},"a":)" + entry("F32", "[2]", 0, 8) +
                       R"(,"b":)" + entry("I16", "[1,2]", 8, 12) + R"(,"c":)" +
                       entry("U8", "[3]", 12, 15) + "}";
  return file_of(header, Bytes{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
}

TEST_F(SafetensorsTest, EveryTruncationIsACleanError) {
  Bytes full = valid_file();
  for (size_t n = 0; n < full.size(); n++)
    EXPECT_NE(load_error(Bytes(full.begin(), full.begin() + static_cast<ptrdiff_t>(n))), "")
        << "truncated to " << n << " bytes loaded";
  EXPECT_EQ(load_error(full), "");
}

TEST_F(SafetensorsTest, FlippedHeaderBytesNeverCrash) {
  Bytes full = valid_file();
  size_t header_end = 8;
  for (int i = 0; i < 8; i++) header_end += size_t{full[i]} << (8 * i);
  int errors = 0;
  for (size_t i = 0; i < header_end; i++) {
    for (uint8_t v : {uint8_t(0x01), uint8_t(0x80), uint8_t('"'), uint8_t('}'), uint8_t('9')}) {
      Bytes b = full;
      b[i] = i < 8 ? b[i] ^ v : v;
      if (b == full) continue;
      errors += load_error(b).empty() ? 0 : 1;  // a clean Error, or a file that still parses
    }
  }
  EXPECT_GT(errors, 0);
}

TEST_F(SafetensorsTest, ViewsSaveTheirLogicalRowMajorValues) {
  Tensor base = Tensor::from_data({0, 1, 2, 3, 4, 5}, {2, 3}, dtypes::kFloat32);
  Bytes big = raw<int64_t>({(1LL << 53) + 1, 2, -(1LL << 60) - 1, 4});
  Tensor ints = tensor_from_bytes(big.data(), big.size(), {2, 2}, dtypes::kInt64);
  safe_save({{"t", base.permute({1, 0})},
             {"s", base.shrink({{0, 2}, {1, 3}})},
             {"e", Tensor::from_data({7, 8}, {2, 1}).expand({2, 3})},
             {"i", ints.transpose()}},
            path());
  auto m = safe_load(path());
  EXPECT_EQ(m.at("t").shape(), (Shape{3, 2}));
  EXPECT_EQ(m.at("t").to_vector(), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(m.at("s").to_vector(), (std::vector<double>{1, 2, 4, 5}));
  EXPECT_EQ(m.at("e").to_vector(), (std::vector<double>{7, 7, 7, 8, 8, 8}));
  EXPECT_EQ(tensor_to_bytes(m.at("i")), raw<int64_t>({(1LL << 53) + 1, -(1LL << 60) - 1, 2, 4}));
}

TEST_F(SafetensorsTest, SaveIsAtomicAndRejectsBadNames) {
  Bytes b = raw<float>({1.0f});
  Tensor t = tensor_from_bytes(b.data(), b.size(), {1}, dtypes::kFloat32);
  safe_save({{"old", t}}, path());
  safe_save({{"new", t}}, path());
  EXPECT_EQ(safe_load(path()).count("new"), 1u);
  EXPECT_THROW(safe_save({{"__metadata__", t}}, path()), Error);
  EXPECT_THROW(safe_save({{"bad\xFF", t}}, path()), Error);
  EXPECT_THROW(safe_save({{"x", t}}, path("no_such_dir/x.safetensors")), Error);
  EXPECT_EQ(safe_load(path()).count("new"), 1u) << "a failed save left the old file";
  int files = 0;
  for (const auto& f : fs::directory_iterator(dir_)) files += f.is_regular_file();
  EXPECT_EQ(files, 1) << "temporary files were left behind";
}

}  // namespace
}  // namespace baregrad::tensor
