// Neural-network ops of Tensor (tinygrad's names and semantics): softmax, losses, dropout,
// attention and einsum. Each is composed from other Tensor ops, so autograd covers them without
// backward rules of their own.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string_view>

#include "base/error.h"
#include "tensor/tensor.h"
#include "tensor/tensor_internal.h"

namespace baregrad::tensor {

// ---- softmax and losses ------------------------------------------------------------------------

Tensor Tensor::softmax(int axis) const {
  if (!dtypes::is_float(dtype())) return as_float(*this).softmax(axis);  // x - max would wrap
  Tensor e = (*this - max({axis}, true).detach()).exp();
  return e / e.sum({axis}, true);
}

Tensor Tensor::log_softmax(int axis) const {
  if (!dtypes::is_float(dtype())) return as_float(*this).log_softmax(axis);
  Tensor shifted = *this - max({axis}, true).detach();
  return shifted - shifted.exp().sum({axis}, true).log();
}

Tensor Tensor::sparse_categorical_crossentropy(const Tensor& labels) const {
  if (ndim() < 1)
    fail("sparse_categorical_crossentropy", "logits must have a class axis", ErrorKind::kValue);
  Shape want(shape().begin(), shape().end() - 1);
  if (labels.shape() != want)
    fail("sparse_categorical_crossentropy",
         "labels of shape " + shape_str(labels.shape()) + " for logits of shape " +
             shape_str(shape()) + " (want " + shape_str(want) + ")",
         ErrorKind::kValue);
  if (dtypes::is_float(labels.dtype()))
    fail("sparse_categorical_crossentropy", "labels must be integers, got " + labels.dtype().name(),
         ErrorKind::kType);
  int64_t classes = shape().back();
  Tensor onehot =
      labels.unsqueeze(-1).eq(Tensor::arange(0, static_cast<double>(classes), 1, labels.dtype()));
  Tensor picked = (log_softmax(-1) * onehot.cast(dtype())).sum({-1});
  return -picked.mean();
}

Tensor Tensor::binary_cross_entropy(const Tensor& target) const {
  broadcast("binary_cross_entropy", *this, target);
  Tensor p = as_float(*this), y = target.cast(p.dtype()), lo = p.scalar_like(-100);
  return (-(y * p.log().maximum(lo) + (-y + 1.0) * (-p + 1.0).log().maximum(lo))).mean();
}

Tensor Tensor::binary_cross_entropy_with_logits(const Tensor& target) const {
  broadcast("binary_cross_entropy_with_logits", *this, target);
  Tensor x = as_float(*this);
  return (x.softplus() - x * target.cast(x.dtype())).mean();
}

Tensor Tensor::mse(const Tensor& target) const {
  broadcast("mse", *this, target);
  return (*this - target).square().mean();
}

// ---- dropout and attention ---------------------------------------------------------------------

Tensor Tensor::dropout(double p, bool training) const {
  if (!(p >= 0 && p <= 1))
    fail("dropout", "p = " + std::to_string(p) + " is not in [0, 1]", ErrorKind::kValue);
  if (!training || p == 0) return *this;
  if (p == 1) return *this * 0.0;  // keeps the (zero) gradient path
  Tensor u = rand(shape(), dtypes::kFloat32, device());
  return where(u.lt(u.scalar_like(p)), scalar_like(0), *this) / (1 - p);
}

Tensor Tensor::scaled_dot_product_attention(const Tensor& key,
                                            const Tensor& value,
                                            const std::optional<Tensor>& attn_mask,
                                            bool is_causal) const {
  const char* op = "scaled_dot_product_attention";
  std::string shapes = "query " + shape_str(shape()) + ", key " + shape_str(key.shape()) +
                       ", value " + shape_str(value.shape());
  if (ndim() < 2 || key.ndim() < 2 || value.ndim() < 2)
    fail(op, shapes + ": need >= 2 dims", ErrorKind::kValue);
  if (shape().back() != key.shape().back())
    fail(op, shapes + ": query and key dims differ", ErrorKind::kValue);
  if (key.shape()[key.ndim() - 2] != value.shape()[value.ndim() - 2])
    fail(op, shapes + ": key and value lengths differ", ErrorKind::kValue);
  if (is_causal && attn_mask) fail(op, "attn_mask given with is_causal", ErrorKind::kValue);
  Tensor q = as_float(*this);
  Tensor qk = q.matmul(key.transpose(-2, -1)) / std::sqrt(static_cast<double>(shape().back()));
  Tensor ninf = qk.scalar_like(-INFINITY);
  if (is_causal) {
    int64_t l = qk.shape()[qk.ndim() - 2], s = qk.shape().back();
    Tensor above = arange_on(qk, l).reshape({l, 1}).lt(arange_on(qk, s).reshape({1, s}));
    qk = where(above, ninf, qk);
  }
  if (attn_mask) {
    if (attn_mask->shape() != qk.shape()) broadcast(op, qk, *attn_mask);
    qk = dtypes::is_bool(attn_mask->dtype()) ? where(*attn_mask, qk, ninf) : qk + *attn_mask;
  }
  return qk.softmax(-1).matmul(value);
}

// ---- einsum ------------------------------------------------------------------------------------

namespace {
constexpr std::string_view kDots = "...";

// The labels of `term`: its letters, with "..." standing for the last `dims` of the `ell`
// broadcast dims, which get the chars 1..ell (below any letter, so they sort first).
std::vector<char> labels_of(std::string_view term, int dims, int ell, const std::string& f) {
  std::vector<char> out;
  for (size_t i = 0; i < term.size(); i++) {
    if (term.substr(i, 3) == kDots) {
      for (int k = ell - dims; k < ell; k++) out.push_back(static_cast<char>(1 + k));
      i += 2;
    } else if (std::isalpha(static_cast<unsigned char>(term[i]))) {
      out.push_back(term[i]);
    } else {
      fail("einsum", "bad character '" + std::string(1, term[i]) + "' in '" + f + "'",
           ErrorKind::kValue);
    }
  }
  return out;
}

int letters_in(std::string_view term) {
  return static_cast<int>(std::count_if(term.begin(), term.end(), [](char c) {
    return std::isalpha(static_cast<unsigned char>(c));
  }));
}
}  // namespace

Tensor Tensor::einsum(const std::string& formula, const std::vector<Tensor>& operands) {
  std::string f;
  for (char c : formula)
    if (c != ' ') f += c;
  size_t arrow = f.find("->");
  std::string_view lhs = std::string_view(f).substr(0, arrow);
  std::vector<std::string_view> terms;
  for (size_t b = 0, e = 0; e < lhs.size() || b == 0; b = e + 1) {
    e = std::min(lhs.find(',', b), lhs.size());
    terms.push_back(lhs.substr(b, e - b));
  }
  if (terms.size() != operands.size())
    fail("einsum",
         "'" + formula + "' has " + str(terms.size()) + " terms for " + str(operands.size()) +
             " operands",
         ErrorKind::kValue);
  int ell = 0;
  std::vector<int> dims(terms.size());
  for (size_t i = 0; i < terms.size(); i++) {
    bool dots = terms[i].find(kDots) != std::string_view::npos;
    dims[i] = operands[i].ndim() - letters_in(terms[i]);
    if (dims[i] < 0 || (!dots && dims[i] != 0))
      fail("einsum",
           "term '" + std::string(terms[i]) + "' does not fit operand " + str(i) + " of shape " +
               shape_str(operands[i].shape()),
           ErrorKind::kValue);
    ell = std::max(ell, dims[i]);
  }
  std::map<char, int64_t> size;  // every label, sorted; the size it broadcasts to
  std::map<char, int> uses;
  std::vector<std::vector<char>> labels;
  for (size_t i = 0; i < terms.size(); i++) {
    const Shape& s = operands[i].shape();
    labels.push_back(labels_of(terms[i], dims[i], ell, formula));
    for (size_t d = 0; d < s.size(); d++) {
      char c = labels[i][d];
      std::string name = c < 'A' ? "..." : std::string(1, c);
      if (std::count(labels[i].begin(), labels[i].end(), c) > 1)
        fail("einsum",
             "repeated index '" + name + "' in term '" + std::string(terms[i]) +
                 "' (diagonals are not supported)",
             ErrorKind::kValue);
      int64_t& n = size.try_emplace(c, 1).first->second;  // size 1 broadcasts (also to 0)
      if (n != 1 && s[d] != 1 && n != s[d])
        fail("einsum",
             "index '" + name + "' has sizes " + str(n) + " and " + str(s[d]) + " (operand " +
                 str(i) + " of shape " + shape_str(s) + ")",
             ErrorKind::kValue);
      if (s[d] != 1) n = s[d];
      uses[c]++;
    }
  }
  std::vector<char> out;
  if (arrow == std::string::npos) {
    for (auto [c, n] : uses)  // numpy's implicit output: "..." first, then letters used once
      if (c < 'A' || n == 1) out.push_back(c);
  } else {
    out = labels_of(std::string_view(f).substr(arrow + 2), ell, ell, formula);
    for (char c : out)
      if (!size.count(c) || std::count(out.begin(), out.end(), c) > 1)
        fail("einsum",
             "output index '" + std::string(1, c) + "' is unknown or repeated in '" + formula + "'",
             ErrorKind::kValue);
  }
  // Each operand permuted to sorted label order and viewed over all labels (1 where it lacks
  // one); their broadcast product is summed over the labels not in the output.
  std::optional<Tensor> prod;
  for (size_t i = 0; i < operands.size(); i++) {
    std::vector<int> order(labels[i].size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](int a, int b) { return labels[i][a] < labels[i][b]; });
    Shape view;
    for (auto [c, n] : size) {
      auto at = std::find(labels[i].begin(), labels[i].end(), c);
      view.push_back(at == labels[i].end() ? 1 : operands[i].shape()[at - labels[i].begin()]);
    }
    Tensor x = operands[i].permute(order).reshape(view);
    prod = prod ? *prod * x : x;
  }
  if (!prod) fail("einsum", "no operands for '" + formula + "'", ErrorKind::kValue);
  Shape all;
  std::vector<int> drop;
  std::vector<char> kept;
  for (auto [c, n] : size) {
    all.push_back(n);
    if (std::count(out.begin(), out.end(), c)) {
      kept.push_back(c);
    } else {
      drop.push_back(static_cast<int>(all.size()) - 1);
    }
  }
  Tensor r = prod->expand(all);
  if (!drop.empty()) r = r.sum(drop);
  std::vector<int> perm;
  for (char c : out)
    perm.push_back(static_cast<int>(std::find(kept.begin(), kept.end(), c) - kept.begin()));
  return r.permute(perm);
}

}  // namespace baregrad::tensor
