// Trains a small CNN on the handwritten digits Debian ships with python3-sklearn (1797 8x8
// images, 10 classes) and reports accuracy on a held-out 20%.
//   build/examples/digits [path/to/digits.csv.gz] [--epochs N] [--seed S]
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/timer.h"
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

// Rows of 64 pixel values (0..16) and a label, comma-separated, gzip-compressed.
Dataset load(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f)
    baregrad::fail("digits", path +
                                 ": cannot open (install Debian's python3-sklearn, or pass "
                                 "the path of digits.csv.gz)");
  Dataset d;
  char line[1024];
  while (gzgets(f, line, sizeof(line))) {
    std::vector<double> v;
    for (char* tok = std::strtok(line, ",\n"); tok; tok = std::strtok(nullptr, ",\n"))
      v.push_back(std::strtod(tok, nullptr));
    if (v.empty()) continue;
    if (v.size() != 65) {
      gzclose(f);
      baregrad::fail("digits", path + ": row " + std::to_string(d.n + 1) + " has " +
                                   std::to_string(v.size()) + " values, want 65");
    }
    for (int i = 0; i < 64; i++) d.pixels.push_back(v[i] / 16.0);
    d.labels.push_back(v[64]);
    d.n++;
  }
  gzclose(f);
  return d;
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

}  // namespace

int main(int argc, char** argv) {
  std::string path = kDefaultPath;
  int epochs = 15;
  uint64_t seed = 1337;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--epochs" && i + 1 < argc)
      epochs = std::atoi(argv[++i]);
    else if (a == "--seed" && i + 1 < argc)
      seed = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--help" || a == "-h") {
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
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}
