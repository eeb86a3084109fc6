// In-place assign (realize-before-overwrite) and TinyJit capture/replay against eager runs.
#include "tensor/jit.h"

#include <gtest/gtest.h>

#include <cstring>

#include "base/options.h"
#include "tensor/counters.h"
#include "tensor/nn.h"
#include "tensor/optim.h"
#include "tests/tensor/test_util.h"

namespace baregrad::tensor {
namespace {
using namespace test_util;

uint64_t address(const Tensor& t) { return t.lazy().base->realized->buffer.va; }

Tensor f64(const Vec& v) { return Tensor::from_data(v, {static_cast<int64_t>(v.size())}, kF64); }

// Bitwise equality of two float tensors' values (the same doubles, NaNs included).
void expect_bits_equal(const Tensor& a, const Tensor& b, const std::string& what) {
  Vec x = a.to_vector(), y = b.to_vector();
  ASSERT_EQ(x.size(), y.size()) << what;
  EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(double)), 0) << what;
}

TEST(Assign, UpdatesARealizedBufferInPlace) {
  Tensor p = f64({1, 2, 3, 4});
  uint64_t before = address(p);
  Tensor alias = p;  // a copy of the Tensor shares its value
  p.assign(p * 2 + 1);
  EXPECT_EQ(address(p), before);
  EXPECT_EQ(p.to_vector(), (Vec{3, 5, 7, 9}));
  EXPECT_EQ(alias.to_vector(), (Vec{3, 5, 7, 9}));
}

TEST(Assign, LazyReadersOfTheOldValueAreComputedFirst) {
  Tensor p = f64({1, 2, 3});
  Tensor total = (p * p).sum();       // lazy, reads p's buffer
  Tensor shifted = p.flip({0}) + 10;  // lazy, reads it at other elements
  p.assign(p + 1);
  EXPECT_EQ(total.to_vector(), (Vec{14}));
  EXPECT_EQ(shifted.to_vector(), (Vec{13, 12, 11}));
  EXPECT_EQ(p.to_vector(), (Vec{2, 3, 4}));
}

TEST(Assign, ValuesReadingOtherElementsOrReductionsAreExact) {
  Tensor p = f64({1, 2, 3, 4});
  p.assign(p.flip({0}));
  EXPECT_EQ(p.to_vector(), (Vec{4, 3, 2, 1}));
  p.assign(p - p.sum() / 4);
  EXPECT_EQ(p.to_vector(), (Vec{1.5, 0.5, -0.5, -1.5}));
  Tensor m = Tensor::from_data({1, 2, 3, 4}, {2, 2}, kF64);
  m.assign(m.transpose() * 10 + m);
  EXPECT_EQ(m.to_vector(), (Vec{11, 32, 23, 44}));
}

TEST(Assign, SimultaneousUpdatesSeeOldValues) {
  Tensor a = f64({1, 2}), b = f64({10, 20});
  uint64_t pa = address(a), pb = address(b);
  Tensor::assign_all({{a, a + b}, {b, b * a}});  // reads each other: a cycle, resolved aside
  EXPECT_EQ(a.to_vector(), (Vec{11, 22}));
  EXPECT_EQ(b.to_vector(), (Vec{10, 40}));
  EXPECT_EQ(address(a), pa);
  EXPECT_EQ(address(b), pb);
  Tensor::assign_all({{a, b + 1}, {b, b * 2}});  // a reads b: a's update runs first
  EXPECT_EQ(a.to_vector(), (Vec{11, 41}));
  EXPECT_EQ(b.to_vector(), (Vec{20, 80}));
}

TEST(Assign, ConstantsAndViewsGetABufferOfTheirOwn) {
  Tensor z = Tensor::zeros({3}, kF64);
  Tensor src = f64({5, 6, 7});
  z.assign(src);
  z.assign(z * 2);  // must not write into src's buffer
  EXPECT_EQ(z.to_vector(), (Vec{10, 12, 14}));
  EXPECT_EQ(src.to_vector(), (Vec{5, 6, 7}));
}

TEST(Assign, ReadingAnOverwrittenAliasThrows) {
  Tensor p = f64({1, 2, 3});
  Tensor old = p.detach();  // the same buffer, not a copy
  Tensor pending = old * 2;
  Tensor fused = pending.sum();  // `pending` is only read through `fused`, which is realized
  p.assign(p + 1);
  EXPECT_EQ(fused.to_vector(), (Vec{12}));
  expect_error([&] { old.to_vector(); },
               "[realize] a tensor of shape (3,) float64 reads a buffer "
               "that assign() has overwritten");
  Tensor copy = p.contiguous().realize();
  p.assign(p * 0);
  EXPECT_EQ(copy.to_vector(), (Vec{2, 3, 4}));
}

TEST(Assign, Misuse) {
  Tensor p = f64({1, 2, 3});
  expect_error([&] { p.assign(f64({1, 2})); },
               "[assign] value of shape (2,) float64 for a tensor of shape (3,) float64");
  expect_error([&] { p.assign(p.cast(dtypes::kFloat32)); }, "float32 for a tensor of shape (3,)");
  expect_error([&] { Tensor::assign_all({{p, p + 1}, {p, p + 2}}); }, "assigned twice");
  Tensor q = p.detach();
  expect_error([&] { Tensor::assign_all({{p, p + 1}, {q, q + 2}}); }, "share one buffer");
}

// ---- TinyJit ----

// A small MLP and its Adam optimizer, initialized from `seed`.
struct Model {
  nn::Linear l1, l2;
  std::unique_ptr<Adam> opt;
  explicit Model(uint64_t seed) : l1((Tensor::manual_seed(seed), nn::Linear(6, 16))), l2(16, 3) {
    std::vector<Tensor> ps = l1.parameters();
    for (auto& p : l2.parameters()) ps.push_back(p);
    opt = std::make_unique<Adam>(ps, 0.05);
  }
  // One training step with dropout; returns the loss.
  Tensor step(const Tensor& x, const Tensor& y) {
    opt->zero_grad();
    Tensor loss = l2(l1(x).relu().dropout(0.25)).sparse_categorical_crossentropy(y);
    loss.backward();
    opt->step();
    return loss;
  }
};

Tensor batch_x(int i) { return Tensor::from_data(rnd(8 * 6, 40 + i), {8, 6}); }
Tensor batch_y(int i) {
  Vec y(8);
  for (int j = 0; j < 8; j++) y[j] = (i + j) % 3;
  return Tensor::from_data(y, {8}, dtypes::kInt32);
}

TEST(Jit, TrainingStepReplaysBitForBitLikeEager) {
  Model eager(3), jitted(3);
  int traced = 0;
  TinyJit jit([&](const std::vector<Tensor>& in) {
    traced++;
    return std::vector<Tensor>{jitted.step(in[0], in[1])};
  });
  for (int i = 0; i < 6; i++) {
    Tensor::manual_seed(100 + i);  // the same dropout masks in both runs
    Tensor want = eager.step(batch_x(i), batch_y(i));
    Tensor::manual_seed(100 + i);
    Tensor got = jit({batch_x(i), batch_y(i)})[0];
    SCOPED_TRACE("call " + std::to_string(i + 1));
    expect_bits_equal(got.cast(kF64), want.cast(kF64), "loss");
    expect_bits_equal(jitted.l1.weight.cast(kF64), eager.l1.weight.cast(kF64), "l1.weight");
    expect_bits_equal(jitted.l2.bias->cast(kF64), eager.l2.bias->cast(kF64), "l2.bias");
  }
  EXPECT_EQ(traced, 2);  // calls 3.. replay without running the function
  EXPECT_TRUE(jit.captured());
  EXPECT_GT(jit.kernel_count(), 5u);
  EXPECT_FALSE(jit.uses_graph());  // dropout's random uploads sit between the kernels
}

TEST(Jit, RandomTensorsAreDrawnAgainOnEachReplay) {
  TinyJit jit([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0] + Tensor::rand({4}, kF64)};
  });
  Tensor::manual_seed(9);
  Vec want;
  for (int i = 0; i < 5; i++) {
    Vec r = Tensor::rand({4}, kF64).to_vector();
    want.insert(want.end(), r.begin(), r.end());
  }
  Tensor::manual_seed(9);
  for (int i = 0; i < 5; i++) {
    Vec got = jit({f64({0, 0, 0, 0})})[0].to_vector();
    EXPECT_EQ(got, Vec(want.begin() + 4 * i, want.begin() + 4 * i + 4)) << "call " << i + 1;
  }
}

TEST(Jit, PlacesIntermediatesAtOffsetsOfOneArena) {
  // a and b (8 KiB each) die where s is made; c (16 KiB) then fits where they were, which two
  // separate 8 KiB buffers could not give it: 24 KiB in all, not 40.
  auto fn = [](const Tensor& x) {
    Tensor a = (x * 2.0).contiguous().realize(), b = (x * 3.0).contiguous().realize();
    Tensor s = (a + b).contiguous().realize();
    Tensor c = s.reshape({1, 1024}).expand({2, 1024}).contiguous().realize();
    return (c * c).sum();
  };
  TinyJit jit([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in[0])}; });
  for (int i = 0; i < 3; i++) {
    Vec x = rnd(1024, i, -1, 1);
    double want = 0;
    for (double v : x) want += 2 * 25 * v * v;
    EXPECT_NEAR(jit({Tensor::from_data(x, {1024}, kF64)})[0].to_vector()[0], want, 1e-9 * want);
  }
  EXPECT_EQ(jit.intermediate_bytes(), 5u * 8192);  // a, b, s and c
  EXPECT_EQ(jit.planned_bytes(), 3u * 8192);
}

TEST(Jit, PlansIntermediateMemoryAndStaysExact) {
  // Each realize() inside the function is a kernel with a buffer only the step uses.
  auto chain = [](const Tensor& x) {
    Tensor y = x;
    for (int k = 0; k < 6; k++) y = (y * 0.5 - 0.25).exp2().contiguous().realize();
    return y;
  };
  TinyJit jit([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{chain(in[0])}; });
  auto call = [&](int i) {  // call i, checked against a float64 loop
    Vec x = rnd(1024, i, -0.5, 0.5);
    Vec want(x);
    for (int k = 0; k < 6; k++)
      for (double& v : want) v = std::exp2(v * 0.5 - 0.25);
    expect_near(jit({Tensor::from_data(x, {1024}, kF64)})[0].to_vector(), want, 1e-12, 1e-12);
  };
  for (int i = 0; i < 4; i++) call(i);
  EXPECT_TRUE(jit.uses_graph());  // one device graph submission per replay
  // Five private intermediates of 8 KiB, at most two alive at once.
  EXPECT_EQ(jit.intermediate_bytes(), 5u * 8192);
  EXPECT_EQ(jit.planned_bytes(), 2u * 8192);
  // free_intermediates() gives that memory back; the next replay allocates it again and is
  // exact; freeing twice, or before a capture, does nothing more.
  int64_t before = counters().mem_used;
  jit.free_intermediates();
  jit.free_intermediates();
  EXPECT_EQ(before - counters().mem_used, 2 * 8192);
  for (int i = 4; i < 6; i++) {
    call(i);
    EXPECT_TRUE(jit.uses_graph());
    if (i == 4) jit.free_intermediates();  // again between replays
  }
  TinyJit fresh([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{chain(in[0])}; });
  fresh.free_intermediates();
}

TEST(Jit, InputsMustMatchTheCapture) {
  TinyJit jit([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * 2}; });
  for (int i = 0; i < 2; i++) jit({f64({1, 2, 3})});
  EXPECT_EQ(jit({f64({4, 5, 6})})[0].to_vector(), (Vec{8, 10, 12}));
  std::string dev = f64({1}).lazy().base->device->name();
  expect_error([&] { jit({f64({1, 2})}); }, "[jit] input 0 is (2,) float64 on " + dev +
                                                "; the captured call had (3,) float64 on " + dev);
  expect_error([&] { jit({f64({1, 2, 3}), f64({1})}); }, "[jit] 2 inputs; the captured call had 1");
  // Views and lazy inputs are realized first; the replay reads their values.
  Tensor m = Tensor::from_data({1, 2, 3, 4, 5, 6}, {2, 3}, kF64);
  EXPECT_EQ(jit({m.index({1}) + 1})[0].to_vector(), (Vec{10, 12, 14}));
}

TEST(Jit, StateThatCannotBeUpdatedInPlaceIsRejected) {
  TinyJit jit([](const std::vector<Tensor>& in) {
    Tensor acc = Tensor::zeros({3}, kF64);  // a constant each call: no buffer to update
    acc.assign(acc + in[0]);
    return std::vector<Tensor>{acc};
  });
  jit({f64({1, 2, 3})});
  expect_error([&] { jit({f64({1, 2, 3})}); },
               "[jit] the captured call cannot be replayed: assign to a tensor of shape (3,)");
}

// PROGRAM_CACHE_SIZE bounds a device's loaded programs; a program the cache dropped still runs
// for a TinyJit that captured it (shared ownership), and a dropped kernel is rebuilt on demand.
TEST(ProgramCache, StaysBoundedAndJitKeepsEvictedProgramsAlive) {
  set_option_for_test("PROGRAM_CACHE_SIZE", "4");
  TinyJit jit([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * 3 + 1}; });
  for (int i = 0; i < 3; i++) jit({f64({1, 2})});
  ASSERT_TRUE(jit.captured());
  auto& dev = *f64({1}).lazy().base->device;
  runtime::ProgramCacheStats before = dev.program_cache_stats();
  Tensor x = f64({1, 2, 3});
  for (int i = 0; i < 20; i++) {  // 20 kernels no other call makes: a new length each
    Vec v(static_cast<size_t>(i + 4), 2.0);
    EXPECT_EQ((f64(v) * 1000.5).to_vector()[3], 2001);
  }
  runtime::ProgramCacheStats after = dev.program_cache_stats();
  set_option_for_test("PROGRAM_CACHE_SIZE", "");
  if (after.built == 0) GTEST_SKIP() << dev.name() << " has no program cache";
  EXPECT_LE(after.size, 4u);
  EXPECT_GE(after.built - before.built, 20u);
  EXPECT_GE(after.evicted - before.evicted, 16u);
  EXPECT_EQ(jit({f64({4, 5})})[0].to_vector(), (Vec{13, 16}));
  EXPECT_EQ((x * 1000.5).to_vector(), (Vec{1000.5, 2001, 3001.5}));  // rebuilt after eviction
}

}  // namespace
}  // namespace baregrad::tensor
