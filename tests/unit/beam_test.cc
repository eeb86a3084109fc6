// runtime/beam.h: the search driven by a cost model (deterministic, so no test times anything),
// the actions it tries, and the text form of opts in the tuning database. BEAM through realize()
// (timing real launches, the database) is tested in tests/tensor/beam_test.cc.
#include "runtime/beam.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "compiler/ast.h"

namespace baregrad::runtime {
namespace {

using namespace baregrad::compiler;  // NOLINT: AST builders

UOpPtr matmul(int64_t m, int64_t n, int64_t k) {
  auto la = load(global(1, dtypes::kFloat32), strided({m, n, k}, {k, 0, 1}));
  auto lb = load(global(2, dtypes::kFloat32), strided({m, n, k}, {0, 1, n}));
  return sink({store(global(0, dtypes::kFloat32), strided({m, n, 1}, {n, 1, 0}),
                     reduce_axis(Op::ADD, {2}, la * lb))});
}

// The kernel after `opts`.
Kernel after(const UOpPtr& ast, const std::vector<Opt>& opts) {
  Kernel k(ast);
  for (const Opt& o : opts) k.apply(o);
  return k;
}

int64_t lanes(const Kernel& k) {
  int64_t n = 1;
  for (int i = 0; i < k.ndim(); i++)
    if (k.kinds()[i] == AxisKind::kUpcast || k.kinds()[i] == AxisKind::kUnroll) n *= k.shape()[i];
  return n;
}

TEST(Beam, ActionsAreLegalLocalOnlyOnGpusAndBoundedInLanes) {
  UOpPtr ast = matmul(64, 64, 64);
  Kernel k(ast);
  TargetInfo cpu, gpu;
  gpu.gpu = gpu.has_local = true;
  std::vector<Opt> on_cpu = beam_actions(k, cpu), on_gpu = beam_actions(k, gpu);
  ASSERT_FALSE(on_cpu.empty());
  for (const Opt& o : on_cpu) {
    EXPECT_TRUE(k.legal(o)) << o.str();
    EXPECT_NE(o.op, OptOp::kLocal) << o.str();
  }
  EXPECT_TRUE(std::any_of(on_gpu.begin(), on_gpu.end(),
                          [](const Opt& o) { return o.op == OptOp::kLocal; }));
  // 16 x 16 lanes are the most a candidate holds: no further UPCAST or UNROLL is offered.
  Kernel full = after(ast, {{OptOp::kUpcast, 0, 16}, {OptOp::kUpcast, 1, 16}});
  for (const Opt& o : beam_actions(full, cpu))
    EXPECT_TRUE(o.op != OptOp::kUpcast && o.op != OptOp::kUnroll) << o.str();
}

TEST(Beam, FindsTheCheapestCandidateCostingEachKernelStateOnce) {
  UOpPtr ast = matmul(64, 64, 64);
  // A model with one best tile: 32 lanes, the reduce loop not unrolled.
  std::map<std::pair<const UOp*, std::string>, int> costed;
  BeamCost cost = [&](const std::vector<Opt>& opts) -> std::optional<double> {
    Kernel k = after(ast, opts);
    costed[{k.ast().get(), k.str()}]++;
    double d = static_cast<double>(lanes(k)) - 32;
    return 1 + d * d + 5.0 * k.count(AxisKind::kUnroll);
  };
  std::vector<Opt> heuristic = {{OptOp::kUpcast, 1, 4}};
  BeamResult r = beam_search(ast, TargetInfo{}, heuristic, cost, 3, 600);
  Kernel best = after(ast, r.opts);
  EXPECT_EQ(lanes(best), 32) << opts_text(r.opts);
  EXPECT_EQ(best.count(AxisKind::kUnroll), 0);
  EXPECT_EQ(r.cost, 1);
  EXPECT_EQ(r.default_cost, 1 + 28 * 28);  // the heuristics' cost is the baseline
  EXPECT_EQ(r.timed, static_cast<int>(costed.size()));
  for (const auto& [state, n] : costed) EXPECT_EQ(n, 1) << state.second;
}

TEST(Beam, SeedsAreTheHeuristicsThenItsPrefixesAndABudgetOfZeroStopsAtTheFirst) {
  UOpPtr ast = matmul(64, 64, 64);
  std::vector<std::vector<Opt>> asked;
  BeamCost cost = [&](const std::vector<Opt>& opts) -> std::optional<double> {
    asked.push_back(opts);
    return 10.0 / static_cast<double>(opts.size() + 1);
  };
  std::vector<Opt> heuristic = {{OptOp::kUpcast, 1, 4}, {OptOp::kUpcast, 0, 2}};
  BeamResult r = beam_search(ast, TargetInfo{}, heuristic, cost, 2, 0);
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0], heuristic);
  EXPECT_EQ(r.opts, heuristic);
  EXPECT_EQ(r.timed, 1);
  asked.clear();
  beam_search(ast, TargetInfo{}, heuristic, cost, 2, 600);
  ASSERT_GE(asked.size(), 3u);
  EXPECT_EQ(asked[1], std::vector<Opt>(heuristic.begin(), heuristic.begin() + 1));
  EXPECT_TRUE(asked[2].empty());
}

TEST(Beam, CandidatesThatFailAreNeverPicked) {
  UOpPtr ast = matmul(64, 64, 64);
  // Every 16-wide UPCAST "fails to compile"; otherwise more lanes are cheaper.
  BeamCost cost = [&](const std::vector<Opt>& opts) -> std::optional<double> {
    for (const Opt& o : opts)
      if (o.op == OptOp::kUpcast && o.amt == 16) return std::nullopt;
    return 1000.0 / static_cast<double>(lanes(after(ast, opts)));
  };
  BeamResult r = beam_search(ast, TargetInfo{}, {}, cost, 2, 600);
  for (const Opt& o : r.opts)
    EXPECT_FALSE(o.op == OptOp::kUpcast && o.amt == 16) << opts_text(r.opts);
  EXPECT_GT(lanes(after(ast, r.opts)), 16) << opts_text(r.opts);
}

TEST(Beam, OptsTextRoundTripsAndRejectsAnythingElse) {
  std::vector<Opt> opts = {
      {OptOp::kUpcast, 0, 4}, {OptOp::kSwap, 1, 2}, {OptOp::kSplitReduce, 2, 64}};
  EXPECT_EQ(opts_text(opts), "UPCAST(0, 4) SWAP(1, 2) SPLIT_REDUCE(2, 64)");
  EXPECT_EQ(parse_opts(opts_text(opts)), opts);
  EXPECT_EQ(parse_opts(""), std::vector<Opt>{});
  for (const char* bad : {"UPCAST(0, 4", "FOO(1, 2)", "UPCAST(0, 4)SWAP(1, 2)", "UPCAST(a, 4)",
                          "UPCAST(0, 4) ", "UPCAST(0, 4)x"})
    EXPECT_EQ(parse_opts(bad), std::nullopt) << bad;
}

}  // namespace
}  // namespace baregrad::runtime
