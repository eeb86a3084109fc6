// Trains a small CNN on the handwritten digits Debian ships with python3-sklearn (1797 8x8
// images, 10 classes) and reports accuracy on a held-out 20%.
//   build/examples/digits [path/to/digits.csv.gz] [--epochs N] [--seed S]
#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/timer.h"
#include "base/tool_main.h"
#include "tensor/nn.h"
#include "tensor/optim.h"

using baregrad::tensor::Shape;
using baregrad::tensor::Tensor;
namespace nn = baregrad::tensor::nn;
namespace dtypes = baregrad::tensor::dtypes;

namespace {

constexpr const char* kDefaultPath =
    "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz";

struct Dataset {
  std::vector<double> pixels;  // n * 64, scaled to [0, 1]
  std::vector<double> labels;
  int64_t n = 0;
};

[[noreturn]] void bad_file(const std::string& path, const std::string& what) {
  baregrad::fail("digits", path + ": " + what, baregrad::ErrorKind::kValue);
}

// The whole file, gunzipped (a file that is not gzip is read as it is).
std::string read_all(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f)
    bad_file(path,
             "cannot open (install Debian's python3-sklearn, or pass the path of digits.csv.gz)");
  std::string text;
  char buf[1 << 16];
  int got;
  while ((got = gzread(f, buf, sizeof(buf))) > 0) text.append(buf, static_cast<size_t>(got));
  int err = Z_OK;
  std::string why = got < 0 ? gzerror(f, &err) : "";
  if (gzclose(f) != Z_OK && why.empty()) why = "truncated or corrupt gzip data";
  if (!why.empty()) bad_file(path, "cannot read: " + why);
  return text;
}

// `tok` as a number, or an error naming row `row` and the token.
double number(const std::string& path, int64_t row, const std::string& tok) {
  char* end = nullptr;
  double v = std::strtod(tok.c_str(), &end);
  if (tok.empty() || *end != '\0' || !std::isfinite(v))
    bad_file(path, "row " + std::to_string(row) + ": '" + tok.substr(0, 40) + "' is not a number");
  return v;
}

// Rows of 64 pixel values (0..16) and a label (0..9), comma-separated, gzip-compressed. A file
// with fewer than 5 rows, a bad number, a pixel or a label out of range is refused, naming the
// row.
Dataset load(const std::string& path) {
  std::string text = read_all(path);
  Dataset d;
  int64_t row = 0;
  for (size_t at = 0; at < text.size();) {
    size_t eol = std::min(text.find('\n', at), text.size());
    std::string line = text.substr(at, eol - at);
    at = eol + 1;
    row++;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::vector<double> v;
    for (size_t p = 0;;) {
      size_t comma = std::min(line.find(',', p), line.size());
      v.push_back(number(path, row, line.substr(p, comma - p)));
      if (comma == line.size()) break;
      p = comma + 1;
    }
    if (v.size() != 65)
      bad_file(path, "row " + std::to_string(row) + " has " + std::to_string(v.size()) +
                         " values, want 65 (64 pixels and a label)");
    for (int i = 0; i < 64; i++) {
      if (v[i] < 0 || v[i] > 16)
        bad_file(path, "row " + std::to_string(row) + ": pixel " + std::to_string(i) + " is " +
                           std::to_string(v[i]) + ", out of range [0, 16]");
      d.pixels.push_back(v[i] / 16.0);
    }
    if (v[64] != std::floor(v[64]) || v[64] < 0 || v[64] > 9)
      bad_file(path, "row " + std::to_string(row) + ": label " + std::to_string(v[64]) +
                         " is out of range (an integer in [0, 9])");
    d.labels.push_back(v[64]);
    d.n++;
  }
  if (d.n == 0) bad_file(path, "empty: no rows of 64 pixels and a label");
  if (d.n < 5)
    bad_file(path, "only " + std::to_string(d.n) +
                       " rows; at least 5 are needed to hold out 20% for testing");
  return d;
}

// `text` as an integer in [lo, hi], or nothing.
std::optional<uint64_t> parse_uint(const char* text, uint64_t hi) {
  uint64_t v = 0;
  const char* end = text + std::strlen(text);
  auto [ptr, ec] = std::from_chars(text, end, v);
  if (ec != std::errc() || ptr != end || ptr == text || v > hi) return std::nullopt;
  return v;
}

struct Model {
  nn::Conv2d c1{1, 16, 3, 1, 1}, c2{16, 32, 3, 1, 1};
  nn::Linear l{32 * 2 * 2, 10};
  Tensor operator()(const Tensor& x) const {
    Tensor h = c1(x).relu().max_pool2d(2);  // (B, 16, 4, 4)
    h = c2(h).relu().max_pool2d(2);         // (B, 32, 2, 2)
    return l(h.reshape({h.shape()[0], 128}));
  }
  std::vector<Tensor> parameters() const {
    std::vector<Tensor> p;
    for (auto& v : {c1.parameters(), c2.parameters(), l.parameters()})
      p.insert(p.end(), v.begin(), v.end());
    return p;
  }
};

// Rows `idx` of the dataset as (B, 1, 8, 8) images and (B,) int labels.
std::pair<Tensor, Tensor> batch(const Dataset& d, const std::vector<int64_t>& idx) {
  std::vector<double> x, y;
  for (int64_t i : idx) {
    x.insert(x.end(), d.pixels.begin() + i * 64, d.pixels.begin() + (i + 1) * 64);
    y.push_back(d.labels[i]);
  }
  int64_t b = static_cast<int64_t>(idx.size());
  return {Tensor::from_data(x, {b, 1, 8, 8}), Tensor::from_data(y, {b}, dtypes::kInt32)};
}

double accuracy(const Model& m, const Dataset& d, const std::vector<int64_t>& idx) {
  auto [x, y] = batch(d, idx);
  auto logits = m(x).to_vector();
  int64_t correct = 0;
  for (size_t i = 0; i < idx.size(); i++) {
    auto row = logits.begin() + i * 10;
    correct += std::max_element(row, row + 10) - row == static_cast<int64_t>(d.labels[idx[i]]);
  }
  return 100.0 * correct / static_cast<double>(idx.size());
}

void progress(int epoch, int epochs, int64_t done, int64_t total, double loss, double acc) {
  const int width = 30;
  int filled = static_cast<int>(width * done / std::max<int64_t>(total, 1));
  std::string bar(filled, '#');
  bar += std::string(width - filled, '.');
  std::printf("\repoch %2d/%d [%s] %4lld/%lld  loss %.4f  train acc %5.1f%%", epoch, epochs,
              bar.c_str(), static_cast<long long>(done), static_cast<long long>(total), loss, acc);
  std::fflush(stdout);
}

int digits_main(int argc, char** argv) {
  std::string path = kDefaultPath;
  int epochs = 15;
  uint64_t seed = 1337;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--epochs" || a == "--seed") {
      std::optional<uint64_t> v;
      if (i + 1 < argc) v = parse_uint(argv[i + 1], a == "--epochs" ? 100000 : UINT64_MAX);
      if (!v) {
        std::fprintf(stderr, "digits: %s wants %s, got '%s'\n", a.c_str(),
                     a == "--epochs" ? "an integer in [0, 100000]" : "a non-negative integer",
                     i + 1 < argc ? argv[i + 1] : "nothing");
        return baregrad::kExitUsage;
      }
      i++;
      if (a == "--epochs")
        epochs = static_cast<int>(*v);
      else
        seed = *v;
    } else if (a == "--help" || a == "-h") {
      std::printf("usage: digits [digits.csv.gz] [--epochs N] [--seed S]\n  default path: %s\n",
                  kDefaultPath);
      return 0;
    } else
      path = a;
  }
  try {
    Dataset d = load(path);
    std::vector<int64_t> order(d.n);
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 rng(seed);
    std::shuffle(order.begin(), order.end(), rng);
    int64_t n_test = d.n / 5;
    std::vector<int64_t> test(order.begin(), order.begin() + n_test),
        train(order.begin() + n_test, order.end());
    std::printf("digits: %lld train, %lld held-out images from %s\n",
                static_cast<long long>(train.size()), static_cast<long long>(test.size()),
                path.c_str());
    Tensor::manual_seed(seed);
    Model model;
    baregrad::tensor::Adam opt(model.parameters(), 1e-2);
    const int64_t bs = 64;
    double t0 = baregrad::now_ms();
    for (int epoch = 1; epoch <= epochs; epoch++) {
      std::shuffle(train.begin(), train.end(), rng);
      double loss_sum = 0;
      int64_t correct = 0, seen = 0;
      for (int64_t s = 0; s < static_cast<int64_t>(train.size()); s += bs) {
        std::vector<int64_t> idx(train.begin() + s,
                                 train.begin() + std::min<int64_t>(s + bs, train.size()));
        auto [x, y] = batch(d, idx);
        opt.zero_grad();
        Tensor logits = model(x);
        Tensor loss = logits.sparse_categorical_crossentropy(y);
        loss.backward();
        opt.step();
        auto lv = logits.detach().to_vector();
        for (size_t i = 0; i < idx.size(); i++) {
          auto row = lv.begin() + i * 10;
          correct +=
              std::max_element(row, row + 10) - row == static_cast<int64_t>(d.labels[idx[i]]);
        }
        seen += static_cast<int64_t>(idx.size());
        loss_sum += loss.to_vector()[0] * static_cast<double>(idx.size());
        progress(epoch, epochs, seen, static_cast<int64_t>(train.size()), loss_sum / seen,
                 100.0 * correct / seen);
      }
      std::printf("  held-out acc %5.1f%%\n", accuracy(model, d, test));
    }
    double acc = accuracy(model, d, test);
    std::printf("held-out accuracy %.2f%% after %d epochs (%.1f s)\n", acc, epochs,
                (baregrad::now_ms() - t0) / 1000);
    return acc >= 97.0 ? 0 : 1;
  } catch (const baregrad::Error& e) {
    std::fprintf(stderr, "digits: %s\n", e.op() == "digits" ? e.message().c_str() : e.what());
    return 2;
  }
}

}  // namespace

int main(int argc, char** argv) {
  return baregrad::run_tool("digits", [&] { return digits_main(argc, argv); });
}
