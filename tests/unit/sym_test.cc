// Sym (integer polynomials over bounded Variables) and the symbolic movement ops, checked by
// evaluating them at every value of the variables against the concrete view ops.
#include <gtest/gtest.h>

#include "base/error.h"
#include "compiler/sym_view.h"
#include "compiler/view_ops.h"

namespace baregrad::compiler {
namespace {

const SymVar kI{"i", 1, 6}, kJ{"j", 0, 3};

TEST(Sym, ArithmeticIsPolynomial) {
  Sym i = Sym::var(kI), j = Sym::var(kJ);
  Sym e = (i + 2) * (j - 1) - i * j;  // -i + 2j - 2
  EXPECT_EQ(e, Sym(2) * j - i - 2);
  EXPECT_EQ(e.str(), "-2 - i + 2*j");
  for (int64_t a = kI.min; a <= kI.max; a++)
    for (int64_t b = kJ.min; b <= kJ.max; b++)
      EXPECT_EQ(e.eval({{"i", a}, {"j", b}}), -a + 2 * b - 2);
  EXPECT_EQ(e.vmin(), -6 + 0 - 2);
  EXPECT_EQ(e.vmax(), -1 + 6 - 2);
  EXPECT_TRUE((i - i).is_const());
  Sym sq = i * i - i;  // i*(i-1) over [1, 6]: 0 .. 30, not the term-wise [1 - 6, 36 - 1]
  EXPECT_EQ(sq.vmin(), 0);
  EXPECT_EQ(sq.vmax(), 30);
  EXPECT_EQ(Sym::var({"k", 4, 4}), Sym(4));  // a one-value variable is its value
}

TEST(Sym, ComparisonsAreDecidedOnlyByTheBounds) {
  Sym i = Sym::var(kI);
  EXPECT_EQ(sym_lt(i, i + 1), true);
  EXPECT_EQ(sym_lt(i, Sym(0)), false);
  EXPECT_EQ(sym_lt(i, Sym(3)), std::nullopt);
  EXPECT_EQ(sym_eq(i, Sym(1)), std::nullopt);  // i is 1 for one of its values only
  EXPECT_EQ(sym_eq(i, Sym(0)), false);
}

TEST(Sym, ErrorsNameTheVariable) {
  Sym i = Sym::var(kI);
  try {
    (void)i.eval({});
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'i'"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)(i + Sym::var({"i", 0, 9})), Error);  // one name, two ranges
  EXPECT_THROW((void)Sym::var({"k", 3, 2}), Error);
}

// Every element's buffer index (or -1 for padding) of `st`, row-major over its shape.
std::vector<int64_t> indices(const ShapeTracker& st) {
  std::vector<int64_t> out;
  const std::vector<int64_t>& shape = st.shape();
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  for (int64_t flat = 0; flat < n; flat++) {
    int64_t idx = flat;
    bool valid = true;
    for (size_t vi = st.views.size(); vi-- > 0;) {
      const View& v = st.views[vi];
      int64_t rest = idx, off = v.offset;
      for (size_t d = v.shape.size(); d-- > 0;) {
        int64_t x = rest % v.shape[d];
        rest /= v.shape[d];
        off += x * v.strides[d];
        if (v.mask) valid &= (*v.mask)[d].first <= x && x < (*v.mask)[d].second;
      }
      idx = off;
    }
    out.push_back(valid ? idx : -1);
  }
  return out;
}

// A chain of movement ops, symbolic and concrete side by side, agrees at every value of i.
TEST(SymView, MovementOpsAgreeWithTheConcreteOpsAtEveryValue) {
  Sym i = Sym::var(kI);
  for (int64_t v = kI.min; v <= kI.max; v++) {
    SymTracker s = SymTracker::contiguous({3, 8}, {{"i", v}});
    ShapeTracker c = ShapeTracker::contiguous({3, 8});
    s = *sym_shrink(s, {{0, 3}, {1, i + 1}});
    c = shrink(c, {{0, 3}, {1, v + 1}});
    s = *sym_pad(s, {{1, 0}, {0, 2}});
    c = pad(c, {{1, 0}, {0, 2}});
    s = sym_flip(s, {false, true});
    c = flip(c, {false, true});
    s = sym_permute(s, {1, 0});
    c = permute(c, {1, 0});
    s = *sym_reshape(s, {i + 2, 1, 4});
    c = reshape(c, {v + 2, 1, 4});
    s = *sym_expand(s, {i + 2, 5, 4});
    c = expand(c, {v + 2, 5, 4});
    s = *sym_reshape(s, {(i + 2) * 20});
    c = reshape(c, {(v + 2) * 20});
    EXPECT_EQ(indices(s.eval()), indices(c)) << "i=" << v << " " << s.str();
  }
}

TEST(SymView, UndecidableOpsReportNullopt) {
  Sym i = Sym::var(kI);
  SymTracker s = SymTracker::contiguous({i, 4});
  EXPECT_FALSE(sym_expand(s, {Sym(5), Sym(4)}));               // i is not 1 for every value
  EXPECT_FALSE(sym_reshape(s, {Sym(4), Sym(4)}));              // 4*i is not 16 for every value
  SymTracker padded = *sym_pad(s, {{2, 0}, {0, 0}});           // mask (2, i + 2) of i + 2
  EXPECT_FALSE(sym_shrink(padded, {{i - 1, i + 2}, {0, 4}}));  // 3 - i may be either sign
}

TEST(SymView, InstantiateBoundsSizesAndExtents) {
  Sym i = Sym::var(kI);
  SymTracker s = *sym_shrink(SymTracker::contiguous({4, 10}), {{1, 3}, {i - 1, i + 3}});
  ShapeTracker st = s.instantiate();
  ASSERT_TRUE(st.views[0].sym);
  EXPECT_EQ(st.views[0].shape, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(st.views[0].sym->extent_bound(), 2 * 10 + (6 + 2) + 1);  // [2, i + 2] at i = 6
  EXPECT_FALSE(SymTracker::contiguous({4, 10}).instantiate().views[0].sym);
}

TEST(SymView, ExtentBoundCancelsAPadsOffsetAgainstItsMask) {
  // A (3, 2) buffer padded by i in front of axis 1 (cat's second part): offset -i, mask
  // [i, i + 2). It reads elements 0..5 whatever i is; bounding offset and mask apart said 15.
  Sym i = Sym::var(kI);
  SymTracker padded = *sym_pad(SymTracker::contiguous({3, 2}), {{0, 0}, {i, 0}});
  ShapeTracker st = padded.instantiate();
  ASSERT_TRUE(st.views.back().sym);
  EXPECT_EQ(st.views.back().sym->extent_bound(), 6);
}

}  // namespace
}  // namespace baregrad::compiler
