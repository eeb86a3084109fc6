// Token-by-token GPT-2 decoding through the tensor front-end, as examples/gpt2.py does it: a
// fixed-size KV cache written through a position mask, so one TinyJit capture replays every step.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/timer.h"
#include "bench/bench.h"
#include "tensor/jit.h"
#include "tensor/nn.h"

namespace baregrad::bench {
namespace {
using tensor::Tensor;
namespace nn = tensor::nn;

struct Config {
  int64_t vocab = 2048, ctx = 256, dim = 256, heads = 4, layers = 4;
};

// Rows of `table` (n, d) picked by int indices idx (T,): a one-hot (T, n) matmul.
Tensor rows_of(const Tensor& table, const Tensor& idx) {
  int64_t n = table.shape()[0], t = idx.shape()[0];
  Tensor hot = Tensor::arange(0, static_cast<double>(n)).reshape({1, n}).eq(idx.reshape({t, 1}));
  return hot.cast(table.dtype()).matmul(table);
}

struct Block {
  explicit Block(const Config& c)
      : ln_1(c.dim),
        ln_2(c.dim),
        c_attn(c.dim, 3 * c.dim),
        attn_proj(c.dim, c.dim),
        c_fc(c.dim, 4 * c.dim),
        mlp_proj(4 * c.dim, c.dim),
        cfg(c),
        cache_k(Tensor::zeros({1, c.heads, c.ctx, c.dim / c.heads}).contiguous().realize()),
        cache_v(Tensor::zeros({1, c.heads, c.ctx, c.dim / c.heads}).contiguous().realize()) {
    // Wider than nn::Linear's U(+-1/sqrt(in)) init, so the blocks move the residual stream and
    // greedy decoding does not just repeat the input token.
    for (nn::Linear* l : {&c_attn, &attn_proj, &c_fc, &mlp_proj}) l->weight.assign(l->weight * 4.0);
  }

  // One token x (1, 1, dim) at position pos (a 1-element int32 tensor, shape (1,)).
  Tensor operator()(const Tensor& x, const Tensor& pos) {
    const int64_t d = cfg.dim, hd = d / cfg.heads;
    std::vector<Tensor> qkv = c_attn(ln_1(x)).split(d, 2);
    auto heads = [&](const Tensor& t) { return t.reshape({1, 1, cfg.heads, hd}).transpose(1, 2); };
    Tensor slots = Tensor::arange(0, static_cast<double>(cfg.ctx)).reshape({cfg.ctx, 1});
    Tensor hit = slots.eq(pos.reshape({1, 1}));  // (ctx, 1): the slot this step writes
    cache_k.assign(Tensor::where(hit, heads(qkv[1]), cache_k));
    cache_v.assign(Tensor::where(hit, heads(qkv[2]), cache_v));
    Tensor mask = slots.le(pos.reshape({1, 1})).reshape({1, cfg.ctx});  // written slots only
    Tensor y = heads(qkv[0]).scaled_dot_product_attention(cache_k, cache_v, mask);
    Tensor h = x + attn_proj(y.transpose(1, 2).reshape({1, 1, d}));
    return h + mlp_proj(c_fc(ln_2(h)).gelu());
  }

  // The cache-free reference: T tokens x (1, T, dim) at positions 0..T-1, causal attention.
  Tensor full(const Tensor& x) const {
    const int64_t d = cfg.dim, t = x.shape()[1];
    std::vector<Tensor> qkv = c_attn(ln_1(x)).split(d, 2);
    auto heads = [&](const Tensor& z) {
      return z.reshape({1, t, cfg.heads, d / cfg.heads}).transpose(1, 2);
    };
    Tensor y = heads(qkv[0]).scaled_dot_product_attention(heads(qkv[1]), heads(qkv[2]),
                                                          std::nullopt, true);
    Tensor h = x + attn_proj(y.transpose(1, 2).reshape({1, t, d}));
    return h + mlp_proj(c_fc(ln_2(h)).gelu());
  }

  std::vector<Tensor> parameters() const {
    std::vector<Tensor> out;
    for (auto& p : ln_1.parameters()) out.push_back(p);
    for (auto& p : ln_2.parameters()) out.push_back(p);
    for (const nn::Linear* l : {&c_attn, &attn_proj, &c_fc, &mlp_proj})
      for (auto& p : l->parameters()) out.push_back(p);
    return out;
  }

  nn::LayerNorm ln_1, ln_2;
  nn::Linear c_attn, attn_proj, c_fc, mlp_proj;
  Config cfg;
  Tensor cache_k, cache_v;  // (1, heads, ctx, head_dim), written in place
};

struct Gpt2 {
  explicit Gpt2(const Config& c)
      : cfg(c),
        wte((Tensor::randn({c.vocab, c.dim}) * 0.5).realize()),
        wpe((Tensor::randn({c.ctx, c.dim}) * 0.2).realize()),
        ln_f(c.dim) {
    for (int64_t i = 0; i < c.layers; i++) h.push_back(std::make_unique<Block>(c));
    std::vector<Tensor> params{wte, wpe};
    for (auto& p : ln_f.parameters()) params.push_back(p);
    for (auto& b : h)
      for (auto& p : b->parameters()) params.push_back(p);
    for (auto& p : params) p.set_requires_grad(false);  // inference: no graph for a gradient
  }

  // The greedy next token (shape (1,), int32) after `token` (1,) at `pos` (1,).
  Tensor step(const Tensor& token, const Tensor& pos) {
    Tensor x = (rows_of(wte, token) + rows_of(wpe, pos)).reshape({1, 1, cfg.dim});
    for (auto& b : h) x = (*b)(x, pos);
    Tensor logits = ln_f(x).reshape({1, cfg.dim}).matmul(wte.transpose());  // tied LM head
    return logits.argmax(-1).cast(tensor::dtypes::kInt32);
  }

  // The greedy next token after each prefix of `tokens`, from one full forward without the cache.
  std::vector<int64_t> greedy_full(const std::vector<int64_t>& tokens) const {
    const auto t = static_cast<int64_t>(tokens.size());
    Tensor ids = Tensor::from_data(std::vector<double>(tokens.begin(), tokens.end()), {t},
                                   tensor::dtypes::kInt32);
    Tensor pos = Tensor::arange(0, static_cast<double>(t));
    Tensor x = (rows_of(wte, ids) + rows_of(wpe, pos)).reshape({1, t, cfg.dim});
    for (auto& b : h) x = b->full(x);
    std::vector<double> next =
        ln_f(x).reshape({t, cfg.dim}).matmul(wte.transpose()).argmax(-1).to_vector();
    return std::vector<int64_t>(next.begin(), next.end());
  }

  Config cfg;
  Tensor wte, wpe;
  nn::LayerNorm ln_f;
  std::vector<std::unique_ptr<Block>> h;
};

std::vector<Row> llm_rows(const Context& ctx) {
  const Config cfg;
  const int64_t new_tokens = 64;
  Tensor::manual_seed(3);
  Gpt2 model(cfg);
  tensor::TinyJit jit(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{model.step(in[0], in[1])}; });
  // Greedy decoding of new_tokens after token 1, from position 0; the cache is overwritten.
  std::vector<int64_t> out;
  auto generate = [&] {
    out.clear();
    double token = 1;
    for (int64_t pos = 0; pos < new_tokens; pos++) {
      Tensor t = Tensor::from_data({token}, {1}, tensor::dtypes::kInt32);
      Tensor p = Tensor::from_data({static_cast<double>(pos)}, {1}, tensor::dtypes::kInt32);
      token = jit({t, p})[0].to_vector()[0];
      out.push_back(static_cast<int64_t>(token));
    }
  };
  double t0 = now_ms();
  generate();  // two eager steps (compiling or loading every kernel), the capture, replays
  double first_ms = now_ms() - t0;
  std::vector<int64_t> first = out;
  double ms = time_median_ms(generate, ctx.quick ? 2 : 5, ctx.quick ? 200 : 1000);
  // Every run decodes the same greedy tokens (replays compute what the eager steps did), and
  // they are a full cache-free forward's greedy tokens of the same sequence.
  bool same = out == first;
  std::vector<int64_t> seq{1};
  seq.insert(seq.end(), out.begin(), out.end() - 1);
  bool matches_full = model.greedy_full(seq) == out;
  int distinct = 0;
  for (size_t i = 0; i < out.size(); i++)
    distinct += std::find(out.begin(), out.begin() + i, out[i]) == out.begin() + i;

  Row r;
  r.name = "gpt2 decode tokens/s";
  r.device = Tensor::zeros({1}).device();
  r.metric = "throughput";
  r.unit = "tokens/s";
  r.value = new_tokens / (ms / 1000);
  r.note = std::to_string(cfg.layers) + " layers, d=" + std::to_string(cfg.dim) + ", " +
           std::to_string(cfg.heads) + " heads, vocab " + std::to_string(cfg.vocab) + ", ctx " +
           std::to_string(cfg.ctx) + "; greedy, " + std::to_string(new_tokens) +
           " tokens per run, median; " + std::to_string(jit.kernel_count()) +
           " kernels per step; first run (compiles) " +
           std::to_string(static_cast<int64_t>(first_ms)) + " ms; " + std::to_string(distinct) +
           " distinct tokens" +
           (same ? "" : "; WRONG: replays decoded other tokens than the first run") +
           (matches_full ? "; tokens = a full forward's greedy tokens"
                         : "; WRONG: the tokens differ from a full forward's greedy tokens");
  return {r};
}

}  // namespace

void register_llm_benches() {
  register_bench("llm gpt2 decode", llm_rows,
                 "greedy token-by-token decoding of a random GPT-2 (4x256, 4 heads, vocab 2048,\n"
                 "ctx 256) with a fixed-size KV cache, one TinyJit step replayed per token");
}

}  // namespace baregrad::bench
