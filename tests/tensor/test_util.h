// Shared helpers of the tensor tests: float64 references, error checks, finite differences.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/tensor.h"

namespace baregrad::tensor::test_util {

const DType kF64 = dtypes::kFloat64;

using Vec = std::vector<double>;

// Uniform values, exactly representable in float32.
inline Vec rnd(size_t n, uint64_t seed, double lo = -2, double hi = 2) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  Vec v(n);
  for (auto& x : v) x = static_cast<float>(d(rng));
  return v;
}

// The number of elements of a shape.
inline int64_t count(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Row-major strides of `s`.
inline Shape strides(const Shape& s) {
  Shape st(s.size(), 1);
  for (int d = static_cast<int>(s.size()) - 2; d >= 0; d--) st[d] = st[d + 1] * s[d + 1];
  return st;
}

// Small integers in [0, k): many ties.
inline Vec ints(size_t n, uint64_t seed, int k) {
  std::mt19937_64 rng(seed);
  Vec v(n);
  for (auto& x : v) x = static_cast<double>(rng() % k);
  return v;
}

inline void expect_near(const Vec& got, const Vec& want, double atol = 1e-6, double rtol = 1e-3) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); i++) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i << " is " << got[i] << ", want NaN";
    } else if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << "element " << i;
    } else {
      ASSERT_NEAR(got[i], want[i], atol + rtol * std::fabs(want[i])) << "element " << i;
    }
  }
}

// Runs f and checks it throws baregrad::Error whose message contains `text`.
inline void expect_error(const std::function<void()>& f, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "no error; expected: " << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// d/dx_i of sum(f(x) * w) by backward, against central differences of the same forward.
inline void check_grad(const char* name,
                       const Fn& f,
                       const std::vector<Shape>& shapes,
                       double lo = -2,
                       double hi = 2) {
  SCOPED_TRACE(name);
  std::vector<Vec> xs;
  for (size_t i = 0; i < shapes.size(); i++) {
    int64_t n = 1;
    for (int64_t d : shapes[i]) n *= d;
    xs.push_back(rnd(n, 100 + i, lo, hi));
  }
  auto inputs = [&](const std::vector<Vec>& v) {
    std::vector<Tensor> t;
    for (size_t i = 0; i < v.size(); i++) t.push_back(Tensor::from_data(v[i], shapes[i], kF64));
    return t;
  };
  std::vector<Tensor> in = inputs(xs);
  for (auto& t : in) t.requires_grad_();
  Tensor y0 = f(in);
  Vec w = rnd(y0.numel(), 7, -1, 1);
  Tensor wt = Tensor::from_data(w, y0.shape(), kF64);
  auto loss = [&](const std::vector<Tensor>& t) { return (f(t) * wt).sum(); };
  loss(in).backward();
  const double eps = 1e-6;
  for (size_t i = 0; i < xs.size(); i++) {
    ASSERT_TRUE(in[i].grad()) << "input " << i << " got no gradient";
    Vec g = in[i].grad()->to_vector();
    for (size_t j = 0; j < xs[i].size(); j++) {
      auto plus = xs, minus = xs;
      plus[i][j] += eps;
      minus[i][j] -= eps;
      double num =
          (loss(inputs(plus)).to_vector()[0] - loss(inputs(minus)).to_vector()[0]) / (2 * eps);
      ASSERT_NEAR(g[j], num, 1e-5 + 1e-4 * std::fabs(num)) << "input " << i << " element " << j;
    }
  }
}

// A row-major shape seen as (outer, n, inner) around `axis`: index of (o, k, i).
struct Lanes {
  int64_t outer = 1, n = 1, inner = 1;
  Lanes(const Shape& s, int axis) {
    int ax = axis < 0 ? axis + static_cast<int>(s.size()) : axis;
    for (int d = 0; d < static_cast<int>(s.size()); d++)
      (d < ax ? outer : d == ax ? n : inner) *= s[d];
  }
  int64_t at(int64_t o, int64_t k, int64_t i) const { return (o * n + k) * inner + i; }
};

}  // namespace baregrad::tensor::test_util
