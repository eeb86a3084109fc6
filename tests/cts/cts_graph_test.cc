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

// Builders of graph items for the tests below; a null device is the graph's own.
hcq::GraphItem exec_item(hcq::Device* d, const hcq::Program& prg, hcq::Value buf) {
  hcq::GraphItem it;
  it.dev = d;
  it.prg = &prg;
  it.bufs = {buf};
  it.grid = {4, 1, 1};
  it.reads = it.writes = {{buf, 16}};
  return it;
}
hcq::GraphItem copy_item(hcq::Device* d, hcq::Value dst, hcq::Value src) {
  hcq::GraphItem it;
  it.kind = hcq::GraphItem::Kind::kCopy;
  it.dev = d;
  it.dst = dst;
  it.src = src;
  it.bytes = 16;
  it.reads = {{src, 16}};
  it.writes = {{dst, 16}};
  return it;
}

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
  hcq::Value in = hcq::Value::sym(0);
  std::vector<hcq::GraphItem> items{exec_item(nullptr, *prg, va_of(a)),
                                    copy_item(nullptr, in, va_of(a)), exec_item(nullptr, *prg, in),
                                    copy_item(nullptr, va_of(c), in)};
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
  CTS_REQUIRE("symbolic copy sizes");
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

// add_one over A (on dev); copy A -> B (on the peer); add_one over B (peer); copy B -> input 0
// (on dev). Every hop crosses a queue, two of them cross devices.
TEST_P(CtsGraph, SpansTwoDevicesWithCrossDeviceWaits) {
  CTS_REQUIRE("peers");
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Device * peer, open_another());
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer a, alloc(16));
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer b, alloc(*peer, 16));
  std::vector<hcq::Buffer> inputs;
  for (int i = 0; i < 2; i++) {
    CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer in, alloc(16));
    inputs.push_back(in);
  }
  CTS_ASSERT_OK(dev().allocator().map_into(a, *peer));
  CTS_ASSERT_OK(peer->allocator().map_into(b, dev()));
  auto mine = program("add_one", add_one, {16}, 0);
  auto theirs = program(*peer, "add_one", add_one, {16}, 0);
  int32_t zero[4] = {0, 0, 0, 0};
  CTS_ASSERT_OK(dev().allocator().copy_in(a, zero, 16));
  CTS_ASSERT_OK(peer->allocator().copy_in(b, zero, 16));
  hcq::Value in = hcq::Value::sym(0);
  std::vector<hcq::GraphItem> items{
      exec_item(nullptr, *mine, va_of(a)), copy_item(peer, va_of(b), va_of(a)),
      exec_item(peer, *theirs, va_of(b)), copy_item(&dev(), in, va_of(b))};
  CTS_ASSERT_OK_AND_ASSIGN(std::unique_ptr<hcq::Graph> g,
                           hcq::Graph::create(dev(), std::move(items), 1));
  ASSERT_EQ(g->devices().size(), 2u);
  EXPECT_EQ(g->devices()[0], &dev());
  EXPECT_EQ(g->devices()[1], peer);
  // dev: compute (+ copy); peer: copy or compute, + compute.
  EXPECT_EQ(g->queues(), dev().copy_queue() ? 4u : 2u);
  // Three hops cross queues (two without copy engines); B -> input also conflicts with A -> B,
  // which the wait for add_one over B already covers. NULL's devices reuse addresses, which
  // only adds waits.
  if (a.va + 16 <= b.va || b.va + 16 <= a.va) {
    EXPECT_EQ(g->dependencies(), dev().copy_queue() ? 3u : 2u);
  }
  uint64_t mine_before = dev().timeline_value(), theirs_before = peer->timeline_value();
  for (int r = 0; r < 5; r++) CTS_ASSERT_OK(g->replay(std::vector<int64_t>{va_of(inputs[r % 2])}));
  EXPECT_EQ(dev().timeline_value(), mine_before + 5);  // one value per replay on each device
  EXPECT_EQ(peer->timeline_value(), theirs_before + 5);
  // The creating device's timeline covers the whole graph: the peer's work is done too.
  CTS_ASSERT_OK(dev().synchronize());
  CTS_REQUIRE("execution");
  EXPECT_GE(peer->timeline().value(), theirs_before + 4);
  int32_t got[4];
  CTS_ASSERT_OK(dev().allocator().copy_out(got, a, 16));
  EXPECT_EQ(got[0], 5);
  CTS_ASSERT_OK(peer->allocator().copy_out(got, b, 16));
  EXPECT_EQ(got[1], 6);  // the last replay: A was 5, its copy + 1
  CTS_ASSERT_OK(dev().allocator().copy_out(got, inputs[0], 16));
  EXPECT_EQ(got[2], 6);  // bound on replay 5
  CTS_ASSERT_OK(dev().allocator().copy_out(got, inputs[1], 16));
  EXPECT_EQ(got[3], 5);  // bound on replay 4
}

TEST_P(CtsGraph, ASpanOutsideThePeerGroupIsUnimplemented) {
  Result<std::unique_ptr<hcq::Device>> other = open_foreign();
  if (!other.ok() && other.status().code() == StatusCode::kNotFound) GTEST_SKIP() << other.status();
  CTS_ASSERT_OK_AND_ASSIGN(std::unique_ptr<hcq::Device> foreign, std::move(other));
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer a, alloc(16));
  auto prg = program("add_one", add_one, {16}, 0);
  auto r = hcq::Graph::create(dev(), {copy_item(foreign.get(), va_of(a), va_of(a))}, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_THAT(r.status().message(),
              HasSubstr("with items on " + foreign->name() + " (peer group " +
                        foreign->peer_group() + "): a graph spans one peer group"));
}

// The graph's commands name the timeline signal; once synchronize() wraps the timeline into its
// shadow, the next replay records them again instead of signalling the retired one.
TEST_P(CtsGraph, KeepsReplayingAcrossATimelineWrap) {
  CTS_REQUIRE("peers");
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Device * peer, open_another());
  CTS_ASSERT_OK(dev().set_timeline_for_test(hcq::kTimelineWrap - 2));
  CTS_ASSERT_OK(peer->set_timeline_for_test(hcq::kTimelineWrap - 1));
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer a, alloc(16));
  CTS_ASSERT_OK_AND_ASSIGN(hcq::Buffer b, alloc(*peer, 16));
  CTS_ASSERT_OK(dev().allocator().map_into(a, *peer));
  int32_t zero[4] = {0, 0, 0, 0};
  CTS_ASSERT_OK(dev().allocator().copy_in(a, zero, 16));
  auto prg = program("add_one", add_one, {16}, 0);
  CTS_ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<hcq::Graph> g,
      hcq::Graph::create(
          dev(), {exec_item(nullptr, *prg, va_of(a)), copy_item(peer, va_of(b), va_of(a))}, 0));
  uint64_t epoch = dev().timeline_epoch(), peer_epoch = peer->timeline_epoch();
  for (int r = 0; r < 6; r++) {
    CTS_ASSERT_OK(g->replay({}));
    CTS_ASSERT_OK(dev().synchronize());  // wraps once the value passes 2^31
    CTS_ASSERT_OK(peer->synchronize());
  }
  EXPECT_EQ(dev().timeline_epoch(), epoch + 1);
  EXPECT_EQ(peer->timeline_epoch(), peer_epoch + 1);
  EXPECT_LT(dev().timeline_value(), 16u);
  CTS_REQUIRE("execution");
  int32_t got[4];
  CTS_ASSERT_OK(peer->allocator().copy_out(got, b, 16));
  EXPECT_EQ(got[0], 6);
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
