// HCQ graphs: recorded once into bound queues, replayed with patched inputs, dependencies
// between the compute and copy queues derived from what each item reads and writes.
#include <gmock/gmock.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "hcq/graph.h"
#include "tests/cts/backends.h"

namespace baregrad::cts {
namespace {

using ::testing::HasSubstr;
using CtsGraph = Cts;

// add_one over A; copy A -> input 0 (copy queue); add_one over input 0; copy input 0 -> C.
TEST_P(CtsGraph, ReplaysWithNewInputsAndCrossQueueDependencies) {
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer a, alloc(16));
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer c, alloc(16));
  std::vector<hcq::Buffer> inputs;
  for (int i = 0; i < 3; i++) {
    CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer b, alloc(16));
    inputs.push_back(b);
  }
  auto prg = program("add_one", add_one, {16}, 0);
  auto exec = [&](hcq::Value buf) {
    hcq::GraphItem it;
    it.prg = prg.get();
    it.bufs = {buf};
    it.grid = {4, 1, 1};
    it.reads = it.writes = {{buf, 16}};
    return it;
  };
  auto copy = [&](hcq::Value dst, hcq::Value src) {
    hcq::GraphItem it;
    it.kind = hcq::GraphItem::Kind::kCopy;
    it.dst = dst;
    it.src = src;
    it.bytes = 16;
    it.reads = {{src, 16}};
    it.writes = {{dst, 16}};
    return it;
  };
  hcq::Value in = hcq::Value::sym(0);
  std::vector<hcq::GraphItem> items{exec(va_of(a)), copy(in, va_of(a)), exec(in),
                                    copy(va_of(c), in)};
  int32_t zero[4] = {0, 0, 0, 0};
  CTS_ASSERT_OK(dev().allocator().copy_in(a, zero, 16));
  CTS_ASSERT_OK_AND_ASSIGN(std::unique_ptr<hcq::Graph> g,
                           hcq::Graph::create(dev(), std::move(items), 1));
  EXPECT_EQ(g->size(), 4u);
  if (dev().copy_queue()) {
    EXPECT_EQ(g->dependencies(), 3u);  // every hop crosses queues
  }
  uint64_t before = dev().timeline_value();
  for (int r = 0; r < 6; r++) {
    std::vector<int64_t> vars{va_of(inputs[r % 3])};
    CTS_ASSERT_OK(g->replay(vars));
  }
  EXPECT_EQ(dev().timeline_value(), before + 6);  // one timeline value per replay
  CTS_ASSERT_OK(dev().synchronize());
  CTS_REQUIRE("execution");
  int32_t got[4];
  CTS_ASSERT_OK(dev().allocator().copy_out(got, a, 16));
  EXPECT_EQ(got[0], 6);  // six replays incremented A
  CTS_ASSERT_OK(dev().allocator().copy_out(got, c, 16));
  EXPECT_EQ(got[3], 7);  // the last replay: A was 6, its copy + 1
  CTS_ASSERT_OK(dev().allocator().copy_out(got, inputs[2], 16));
  EXPECT_EQ(got[1], 7);  // the third input was bound on replay 6 (A = 6) and incremented
  CTS_ASSERT_OK(dev().allocator().copy_out(got, inputs[0], 16));
  EXPECT_EQ(got[2], 5);  // bound on replay 4 (A = 4)
}

TEST_P(CtsGraph, ReplayChecksItsVariables) {
  auto prg = program("store_var", store_var, {8}, 1);
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer out, alloc(8));
  hcq::GraphItem it;
  it.prg = prg.get();
  it.bufs = {va_of(out)};
  it.vars = {hcq::Value::sym(1)};  // a symbolic scalar
  it.writes = {{va_of(out), 8}};
  CTS_ASSERT_OK_AND_ASSIGN(std::unique_ptr<hcq::Graph> g, hcq::Graph::create(dev(), {it}, 2));
  Status s = g->replay(std::vector<int64_t>{1});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("1 values for 2 variables"));
  for (int64_t v : {5, 9, 42}) CTS_ASSERT_OK(g->replay(std::vector<int64_t>{0, v}));
  CTS_ASSERT_OK(dev().synchronize());
  CTS_REQUIRE("execution");
  int64_t got = 0;
  CTS_ASSERT_OK(dev().allocator().copy_out(&got, out, 8));
  EXPECT_EQ(got, 42);
}

TEST_P(CtsGraph, CopySizesAndAddressesCanBeSymbolic) {
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer src, alloc(4096));
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer dst, alloc(4096));
  hcq::GraphItem it;
  it.kind = hcq::GraphItem::Kind::kCopy;
  it.dst = va_of(dst);
  it.src = hcq::Value::sym(0);  // the source address and the size change per replay
  it.bytes = hcq::Value::sym(1);
  it.reads = {{it.src, 4096}};
  it.writes = {{it.dst, 4096}};
  CTS_ASSERT_OK_AND_ASSIGN(std::unique_ptr<hcq::Graph> g, hcq::Graph::create(dev(), {it}, 2));
  auto pattern = random_bytes(4096, 11);
  CTS_ASSERT_OK(dev().allocator().copy_in(src, pattern.get(), 4096));
  auto zeros = std::make_unique<uint8_t[]>(4096);
  std::memset(zeros.get(), 0, 4096);
  CTS_ASSERT_OK(dev().allocator().copy_in(dst, zeros.get(), 4096));
  for (int64_t n : {1, 17, 1000}) {
    CTS_ASSERT_OK(g->replay(std::vector<int64_t>{va_of(src) + 3, n}));
    CTS_ASSERT_OK(dev().synchronize());
    CTS_REQUIRE("execution");
    auto got = std::make_unique<uint8_t[]>(4096);
    CTS_ASSERT_OK(dev().allocator().copy_out(got.get(), dst, 4096));
    EXPECT_TRUE(same_bytes(got.get(), pattern.get() + 3, static_cast<size_t>(n))) << n;
    EXPECT_EQ(got[n], 0) << n;  // nothing past n was copied (sizes only grow here)
  }
}

using CtsProfile = Cts;

TEST_P(CtsProfile, SubmissionsAreBracketedWithTimestampsAndWrittenAsAChromeTrace) {
  CTS_REQUIRE("execution");
  auto prg = program("add_one", add_one, {16}, 0);
  CTS_ASSERT_OK_AND_ASSIGN(hcq::ArgsState * args, args_for(*prg));
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer b, alloc(16));
  args->set_buf(0, va_of(b));
  dev().set_profiling(true);
  auto q = dev().compute_queue();
  for (const char* name : {"first", "second"})
    CTS_ASSERT_OK(dev().submit_on_timeline(
        *q, [&](hcq::HwQueue& hq) { launch(hq, *prg, *args, 4); }, {}, name));
  int32_t host[4] = {1, 2, 3, 4};
  CTS_ASSERT_OK(dev().allocator().copy_in(b, host, 16));
  CTS_ASSERT_OK_AND_ASSIGN(std::vector<hcq::Device::ProfileEvent> events, dev().take_profile());
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].name, "first");
  EXPECT_EQ(events[1].name, "second");
  EXPECT_EQ(events[2].name, "copy_in");
  EXPECT_EQ(events[0].engine, hcq::Engine::kCompute);
  EXPECT_EQ(events[2].engine, dev().copy_queue() ? hcq::Engine::kCopy : hcq::Engine::kCompute);
  for (size_t i = 0; i < events.size(); i++) {
    EXPECT_GT(events[i].start_ns, 0u) << i;
    EXPECT_GE(events[i].end_ns, events[i].start_ns) << i;
    if (i > 0) {
      EXPECT_GE(events[i].start_ns, events[i - 1].end_ns) << i;  // timeline order
    }
  }
  std::string path = ::testing::TempDir() + "cts_trace.json";
  CTS_ASSERT_OK(hcq::write_chrome_trace(path, {{dev().name(), events}}));
  std::ifstream f(path);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr("\"traceEvents\""));
  EXPECT_THAT(text, HasSubstr("{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 0, "
                              "\"tid\": 1, \"args\": {\"name\": \"copy queue\"}}"));
  EXPECT_THAT(text, HasSubstr("{\"ph\": \"X\", \"name\": \"second\", \"pid\": 0, \"tid\": 0"));
  CTS_ASSERT_OK_AND_ASSIGN(events, dev().take_profile());
  EXPECT_TRUE(events.empty());  // taken
}

CTS_INSTANTIATE(CtsProfile);

CTS_INSTANTIATE(CtsGraph);

}  // namespace
}  // namespace baregrad::cts
