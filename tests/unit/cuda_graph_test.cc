// DEV=CUDA graphs (CudaDevice::make_graph) against the fake driver of tests/fakes: a TEST
// INSTRUMENT, not a GPU. Its kernels never run: a graph launch logs each kernel node the way
// cuLaunchKernel logs a launch (function, grid, block, the parameter area built from the values
// the node holds), so these tests check which kernels a replay runs, in which order and with
// which buffer addresses, against addresses the test computes itself. Nothing here ran on a real
// GPU. The compile tests need ptxas.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/kernels/test_asts.h"
#include "tests/unit/cuda_rig.h"

namespace baregrad::runtime {
namespace {

using namespace compiler;   // NOLINT: AST builders
using namespace cuda_test;  // NOLINT: the rig
using testing::add_ast;
using testing::square_ast;

constexpr int64_t kN = 256;  // elements per buffer
constexpr size_t kBytes = kN * 4;

// One logged launch: everything the fake saw but the stream and the graph it came from.
struct Launch {
  std::string function;
  std::vector<uint32_t> grid, block;
  std::vector<uint8_t> params;
  bool operator==(const Launch&) const = default;
};

class CudaGraphTest : public CudaDeviceTest {
 protected:
  void SetUp() override {
    CudaDeviceTest::SetUp();
    if (HasFatalFailure()) return;
    Result<compiler::Ptxas> p = compiler::Ptxas::find();
    if (!p.ok()) GTEST_SKIP() << "CUDA compile tests need ptxas: " << p.status().message();
    Result<std::shared_ptr<Program>> add = dev_->compile(add_ast(kN));
    ASSERT_TRUE(add.ok()) << add.status().to_string();
    Result<std::shared_ptr<Program>> square = dev_->compile(square_ast(kN));
    ASSERT_TRUE(square.ok()) << square.status().to_string();
    add_ = *add;
    square_ = *square;
    for (int i = 0; i < 2; i++) tmp_.push_back(*dev_->alloc(kBytes));
  }
  void TearDown() override {
    for (const Buffer& b : tmp_) dev_->free(b);
    add_.reset();
    square_.reset();
    CudaDeviceTest::TearDown();
  }

  // t = x + y; u = t * t; out = u + x, with x, y, out the inputs 0, 1, 2.
  std::vector<GraphLaunch> chain() const {
    Buffer t = tmp_[0], u = tmp_[1];
    return {{add_, {t, Buffer{}, Buffer{}}, {-1, 0, 1}},
            {square_, {u, t}, {-1, -1}},
            {add_, {Buffer{}, u, Buffer{}}, {2, -1, 0}}};
  }
  // What the chain's three launches must be for inputs x, y, out.
  std::vector<Launch> want_chain(const Buffer& x, const Buffer& y, const Buffer& out) const {
    uint64_t t = addr(tmp_[0]), u = addr(tmp_[1]);
    return {expect(*add_, le64({t, addr(x), addr(y)})), expect(*square_, le64({u, t})),
            expect(*add_, le64({addr(out), u, addr(x)}))};
  }
  Launch expect(const Program& prg, std::vector<uint8_t> params) const {
    const auto* k = dynamic_cast<const CudaProgram*>(&prg);
    return {prg.spec.name,
            {k->grid.begin(), k->grid.end()},
            {k->block.begin(), k->block.end()},
            std::move(params)};
  }
  // Logged launches [from, count), checking each ran on the device's stream; graph launches
  // must name an executable graph, plain ones none.
  std::vector<Launch> logged(int from, bool from_graph) {
    std::vector<Launch> out;
    for (int i = from; i < fake_.launch_count(); i++) {
      FakeCudaLaunch l;
      CHECK(fake_.get_launch(i, &l) == 0);
      EXPECT_EQ(l.stream, static_cast<void*>(dev_->stream())) << "launch " << i;
      EXPECT_EQ(l.graph_exec != nullptr, from_graph) << "launch " << i;
      EXPECT_EQ(l.shared_bytes, 0u);
      out.push_back({l.function,
                     {l.grid, l.grid + 3},
                     {l.block, l.block + 3},
                     {l.params, l.params + l.param_bytes}});
    }
    return out;
  }

  std::shared_ptr<Program> add_, square_;
  std::vector<Buffer> tmp_;  // the chain's intermediates t and u
};

TEST_F(CudaGraphTest, ReplaysRunTheChainInOrderWithTheBoundInputs) {
  Result<std::unique_ptr<Graph>> g = dev_->make_graph(chain(), 3);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ((*g)->size(), 3u);
  EXPECT_EQ(fake_.live("graphs"), 1);
  EXPECT_EQ(fake_.live("graph_execs"), 1);
  EXPECT_EQ(fake_.calls("cuGraphAddKernelNode_v2"), 3);
  EXPECT_EQ(fake_.launch_count(), 0) << "building a graph runs nothing";
  std::vector<Buffer> in;
  for (int i = 0; i < 5; i++) in.push_back(*dev_->alloc(kBytes));
  const Buffer x1 = in[0], y1 = in[1], o1 = in[2], x2 = in[3], o2 = in[4];

  // Each replay: the inputs, the nodes whose parameters must be patched first.
  struct Replay {
    Buffer x, y, out;
    int patches;
  };
  const Replay replays[] = {
      {x1, y1, o1, 2},  // nodes 0 and 2 start without inputs
      {x1, y1, o1, 0},  // the same inputs: nothing to patch
      {x2, y1, o2, 2},  // x feeds nodes 0 and 2, out node 2
      {x2, o1, o2, 1},  // y feeds node 0 only
  };
  int from = 0, patches = 0;
  for (const Replay& r : replays) {
    SCOPED_TRACE("replay " + std::to_string(&r - replays));
    std::vector<Buffer> bind = {r.x, r.y, r.out};
    Status s = (*g)->replay(bind);
    ASSERT_TRUE(s.ok()) << s.to_string();
    ASSERT_TRUE(dev_->synchronize().ok());
    patches += r.patches;
    EXPECT_EQ(fake_.calls("cuGraphExecKernelNodeSetParams_v2"), patches);
    EXPECT_EQ(logged(from, true), want_chain(r.x, r.y, r.out));
    from = fake_.launch_count();
  }
  EXPECT_EQ(fake_.calls("cuGraphLaunch"), 4);
  EXPECT_EQ(fake_.calls("cuLaunchKernel"), 0);
  g->reset();
  EXPECT_EQ(fake_.live("graphs"), 0);
  EXPECT_EQ(fake_.live("graph_execs"), 0);
  for (const Buffer& b : in) dev_->free(b);
}

// A kernel node runs exactly as launch() runs the same program with the same buffers.
TEST_F(CudaGraphTest, NodesLaunchExactlyAsLaunchDoes) {
  Buffer x = *dev_->alloc(kBytes), y = *dev_->alloc(kBytes), out = *dev_->alloc(kBytes);
  std::vector<GraphLaunch> ls = chain();
  for (const GraphLaunch& l : ls) {
    std::vector<Buffer> bufs = l.bufs;
    for (size_t s = 0; s < bufs.size(); s++)
      if (l.input[s] >= 0) bufs[s] = std::vector<Buffer>{x, y, out}[l.input[s]];
    ASSERT_TRUE(dev_->launch(*l.prg, bufs).ok());
  }
  std::vector<Launch> direct = logged(0, false);
  Result<std::unique_ptr<Graph>> g = dev_->make_graph(ls, 3);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  ASSERT_TRUE((*g)->replay(std::vector<Buffer>{x, y, out}).ok());
  EXPECT_EQ(logged(3, true), direct);
  EXPECT_EQ(direct, want_chain(x, y, out));
  g->reset();
  for (const Buffer& b : {x, y, out}) dev_->free(b);
}

TEST_F(CudaGraphTest, ReplayChecksInputCountAndSizesBeforeTheDriver) {
  Result<std::unique_ptr<Graph>> g = dev_->make_graph(chain(), 3);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  Buffer ok = *dev_->alloc(kBytes), small = *dev_->alloc(kBytes - 4);
  Status s = (*g)->replay(std::vector<Buffer>{ok, ok});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "graph replay on CUDA: 2 inputs for a graph of 3");
  s = (*g)->replay(std::vector<Buffer>{ok, ok, ok, ok});
  EXPECT_EQ(s.message(), "graph replay on CUDA: 4 inputs for a graph of 3");
  s = (*g)->replay(std::vector<Buffer>{ok, small, ok});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "graph replay on CUDA: input 1 needs 1024 bytes, got 1020");
  s = (*g)->replay(std::vector<Buffer>{ok, ok, Buffer{0, kBytes}});
  EXPECT_EQ(s.message(), "graph replay on CUDA: input 2 needs 1024 bytes, got 1024 (null)");
  EXPECT_EQ(fake_.calls("cuGraphExecKernelNodeSetParams_v2"), 0);
  EXPECT_EQ(fake_.calls("cuGraphLaunch"), 0);
  EXPECT_EQ(fake_.launch_count(), 0);
  // An input no slot reads may be anything.
  Result<std::unique_ptr<Graph>> spare = dev_->make_graph(chain(), 4);
  ASSERT_TRUE(spare.ok()) << spare.status().to_string();
  EXPECT_TRUE((*spare)->replay(std::vector<Buffer>{ok, ok, ok, Buffer{}}).ok());
  EXPECT_EQ(fake_.launch_count(), 3);
  g->reset();
  spare->reset();
  dev_->free(ok);
  dev_->free(small);
}

TEST_F(CudaGraphTest, MakeGraphChecksTheLaunchesBeforeTheDriver) {
  const std::string add = add_->spec.name;
  Buffer ok = *dev_->alloc(kBytes), small = *dev_->alloc(8);
  auto refused = [&](std::vector<GraphLaunch> ls, size_t inputs, const std::string& msg) {
    Result<std::unique_ptr<Graph>> g = dev_->make_graph(ls, inputs);
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(g.status().message(), msg);
  };
  refused({{add_, {ok, ok}, {-1, -1}}}, 0, "graph of " + add + " on CUDA: 2 buffers for 3 slots");
  refused({{add_, {ok, ok, ok}, {-1, -1}}}, 0,
          "graph of " + add + " on CUDA: 2 input bindings for 3 buffers");
  refused({{add_, {ok, ok, Buffer{}}, {-1, -1, 1}}}, 1,
          "graph of " + add + " on CUDA: slot 2 binds input 1 of 1");
  refused({{add_, {ok, small, ok}, {-1, -1, -1}}}, 0,
          "graph of " + add + " on CUDA: buffer 1 (" + kF32.name() + ") needs 1024 bytes, got 8");
  EXPECT_EQ(fake_.calls("cuGraphCreate"), 0);
  // Symbolic kernels have no graph here.
  auto a = global(1, kF32), o = global(0, kF32);
  auto v = load(a, ShapeTracker::contiguous({kN})) * cast(UOp::var("s", 0, 9), kF32);
  Result<std::shared_ptr<Program>> sym =
      dev_->compile(sink({store(o, ShapeTracker::contiguous({kN}), v)}));
  ASSERT_TRUE(sym.ok()) << sym.status().to_string();
  Result<std::unique_ptr<Graph>> g = dev_->make_graph({{*sym, {ok, ok}, {-1, -1}}}, 0);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(), "graph of " + (*sym)->spec.name +
                                      " on CUDA: 1 vars (symbolic kernels are not supported)");
  dev_->free(ok);
  dev_->free(small);
}

TEST_F(CudaGraphTest, DriverErrorsNameTheCallAndLeakNothing) {
  fake_.fail_next("cuGraphInstantiateWithFlags", cuda::CUDA_ERROR_OUT_OF_MEMORY);
  Result<std::unique_ptr<Graph>> g = dev_->make_graph(chain(), 3);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(g.status().message(),
            "graph on CUDA: cuGraphInstantiateWithFlags failed: CUDA_ERROR_OUT_OF_MEMORY (out of "
            "memory)");
  EXPECT_EQ(fake_.live("graphs"), 0) << "the half-built graph went with the error";
  fake_.fail_next("cuGraphAddKernelNode_v2", cuda::CUDA_ERROR_INVALID_VALUE);
  g = dev_->make_graph(chain(), 3);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(), "graph of " + add_->spec.name +
                                      " on CUDA: cuGraphAddKernelNode_v2 failed: "
                                      "CUDA_ERROR_INVALID_VALUE (invalid argument)");
  EXPECT_EQ(fake_.live("graphs"), 0);

  g = dev_->make_graph(chain(), 3);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  Buffer b = *dev_->alloc(kBytes);
  std::vector<Buffer> in = {b, b, b};
  fake_.fail_next("cuGraphLaunch", cuda::CUDA_ERROR_LAUNCH_FAILED);
  Status s = (*g)->replay(in);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message(),
            "graph replay on CUDA: cuGraphLaunch failed: CUDA_ERROR_LAUNCH_FAILED (unspecified "
            "launch failure)");
  // A failed patch is retried on the next replay: the graph never runs stale addresses.
  Buffer c = *dev_->alloc(kBytes);
  fake_.fail_next("cuGraphExecKernelNodeSetParams_v2", cuda::CUDA_ERROR_INVALID_VALUE);
  std::vector<Buffer> moved = {c, b, b};
  s = (*g)->replay(moved);
  EXPECT_NE(s.message().find("cuGraphExecKernelNodeSetParams_v2 failed"), std::string::npos)
      << s.message();
  int from = fake_.launch_count();
  ASSERT_TRUE((*g)->replay(moved).ok());
  EXPECT_EQ(logged(from, true), want_chain(c, b, b));
  g->reset();
  dev_->free(b);
  dev_->free(c);
}

TEST_F(CudaGraphTest, AnEmptyGraphReplaysNothing) {
  Result<std::unique_ptr<Graph>> g = dev_->make_graph({}, 0);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ((*g)->size(), 0u);
  ASSERT_TRUE((*g)->replay({}).ok());
  EXPECT_EQ(fake_.launch_count(), 0);
  EXPECT_EQ(fake_.calls("cuGraphLaunch"), 1);
}

// The fake refuses what the driver refuses, so a misuse in CudaDevice would fail the tests above.
TEST_F(CudaGraphTest, TheFakeRefusesGraphMisuse) {
  const cuda::CudaApi& api = dev_->api();
  ASSERT_TRUE(dev_->bind().ok());
  const auto* kern = dynamic_cast<const CudaProgram*>(square_.get());
  uint64_t values[2] = {addr(tmp_[0]), addr(tmp_[1])};
  void* ptrs[2] = {&values[0], &values[1]};
  cuda::CUDA_KERNEL_NODE_PARAMS_v2 p{};
  p.func = kern->function;
  p.gridDimX = kern->grid[0];
  p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = kern->block[0];
  p.blockDimY = p.blockDimZ = 1;
  p.kernelParams = ptrs;
  cuda::CUgraph graph = nullptr, other = nullptr;
  ASSERT_EQ(api.cuGraphCreate(&graph, 0), cuda::CUDA_SUCCESS);
  ASSERT_EQ(api.cuGraphCreate(&other, 0), cuda::CUDA_SUCCESS);
  cuda::CUgraphNode node = nullptr, stranger = nullptr;
  EXPECT_EQ(api.cuGraphAddKernelNode_v2(&node, graph, nullptr, 0, nullptr),
            cuda::CUDA_ERROR_INVALID_VALUE);
  cuda::CUDA_KERNEL_NODE_PARAMS_v2 no_params = p;
  no_params.kernelParams = nullptr;
  EXPECT_EQ(api.cuGraphAddKernelNode_v2(&node, graph, nullptr, 0, &no_params),
            cuda::CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(api.cuGraphAddKernelNode_v2(&stranger, other, nullptr, 0, &p), cuda::CUDA_SUCCESS);
  EXPECT_EQ(api.cuGraphAddKernelNode_v2(&node, graph, &stranger, 1, &p),
            cuda::CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(api.cuGraphAddKernelNode_v2(&node, graph, nullptr, 0, &p), cuda::CUDA_SUCCESS);
  values[0] = 0;  // the driver copied the values when the node was added
  cuda::CUgraphExec exec = nullptr;
  ASSERT_EQ(api.cuGraphInstantiateWithFlags(&exec, graph, 0), cuda::CUDA_SUCCESS);
  EXPECT_EQ(api.cuGraphExecKernelNodeSetParams_v2(exec, node, nullptr),
            cuda::CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(api.cuGraphExecKernelNodeSetParams_v2(exec, stranger, &p),
            cuda::CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(api.cuGraphLaunch(exec, dev_->stream()), cuda::CUDA_SUCCESS);
  EXPECT_EQ(logged(0, true),
            (std::vector<Launch>{expect(*square_, le64({addr(tmp_[0]), addr(tmp_[1])}))}));
  ASSERT_EQ(api.cuGraphExecDestroy(exec), cuda::CUDA_SUCCESS);
  EXPECT_EQ(api.cuGraphLaunch(exec, dev_->stream()), cuda::CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(api.cuGraphExecDestroy(exec), cuda::CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(fake_.launch_count(), 1);
  ASSERT_EQ(api.cuGraphDestroy(graph), cuda::CUDA_SUCCESS);
  ASSERT_EQ(api.cuGraphDestroy(other), cuda::CUDA_SUCCESS);
  EXPECT_EQ(api.cuGraphDestroy(graph), cuda::CUDA_ERROR_INVALID_VALUE);
}

}  // namespace
}  // namespace baregrad::runtime
