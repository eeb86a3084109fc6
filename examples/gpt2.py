#!/usr/bin/env python3
# GPT-2 inference in tinygrad style on baregrad: pre-LN transformer blocks, a fixed-size KV cache
# written through a position mask (every decode step has the same shapes, so one TinyJit capture
# replays every position), greedy / top-k / temperature sampling with a seed, weights from
# HuggingFace safetensors or llama.cpp GGUF. Nothing is downloaded.
#
#   PYTHONPATH=python:build/python python3 examples/gpt2.py --weights model.safetensors \
#     --prompt-ids 1,2,3 --max-new 20 --temperature 0.8 --top-k 40 --seed 1
#
# Tokens: --prompt-ids, or --prompt text through GPT-2's byte-level BPE when --vocab (vocab.json)
# and --merges (merges.txt) are given or the GGUF file carries its tokenizer; otherwise one token
# per UTF-8 byte (ids 0..255), which needs a vocabulary of at least 256 tokens.
import argparse, json, math, os, re, sys, time
import numpy as np
import baregrad as tinygrad
from baregrad import Tensor, TinyJit, dtypes
from baregrad.nn import Embedding, LayerNorm, Linear
from baregrad.nn.state import gguf_load, safe_load

class Attention:
  def __init__(self, dim: int, n_heads: int, max_context: int):
    self.c_attn, self.c_proj = Linear(dim, 3 * dim), Linear(dim, dim)
    self.n_heads, self.head_dim, self.max_context = n_heads, dim // n_heads, max_context
    self.cache_k: Tensor | None = None
    self.cache_v: Tensor | None = None

  def __call__(self, x: Tensor, start_pos: Tensor) -> Tensor:
    """Causal self-attention of x (B, T, dim) at positions start_pos.. over the KV cache."""
    bsz, seqlen, dim = x.shape
    q, k, v = [t.reshape(bsz, seqlen, self.n_heads, self.head_dim).transpose(1, 2) for t in self.c_attn(x).split(dim, dim=2)]
    if self.cache_k is None or self.cache_k.shape[0] != bsz:
      shape = (bsz, self.n_heads, self.max_context, self.head_dim)
      self.cache_k, self.cache_v = Tensor.zeros(*shape).contiguous().realize(), Tensor.zeros(*shape).contiguous().realize()
    # A fixed-size cache: slot j of the new keys/values takes position j's row when j is written
    # now (start_pos <= j < start_pos + T) and keeps its value otherwise.
    slots = Tensor.arange(self.max_context).reshape(1, self.max_context)
    positions = (start_pos + Tensor.arange(seqlen)).reshape(seqlen, 1)
    hit = slots == positions                                        # (T, ctx): row t marks slot start_pos+t
    written = hit.any(0).reshape(self.max_context, 1)
    for cache, new in ((self.cache_k, k), (self.cache_v, v)):
      # T == 1 broadcasts the one row; a prompt spreads its rows to their slots by a one-hot matmul.
      rows = new if seqlen == 1 else hit.T.cast(new.dtype) @ new
      cache.assign(written.where(rows, cache))
    mask = slots <= positions                                       # (T, ctx): causal, and unwritten slots hidden
    y = q.scaled_dot_product_attention(self.cache_k, self.cache_v, attn_mask=mask)
    return self.c_proj(y.transpose(1, 2).reshape(bsz, seqlen, dim))

class MLP:
  def __init__(self, dim: int, hidden: int):
    self.c_fc, self.c_proj = Linear(dim, hidden), Linear(hidden, dim)

  def __call__(self, x: Tensor) -> Tensor: return self.c_proj(self.c_fc(x).gelu())

class Block:
  def __init__(self, dim: int, n_heads: int, max_context: int, norm_eps: float):
    self.ln_1, self.attn = LayerNorm(dim, norm_eps), Attention(dim, n_heads, max_context)
    self.ln_2, self.mlp = LayerNorm(dim, norm_eps), MLP(dim, 4 * dim)

  def __call__(self, x: Tensor, start_pos: Tensor) -> Tensor:
    x = x + self.attn(self.ln_1(x), start_pos)
    return x + self.mlp(self.ln_2(x))

class GPT2:
  def __init__(self, vocab_size: int, max_context: int, dim: int, n_heads: int, n_layers: int, norm_eps: float = 1e-5):
    if dim % n_heads: raise ValueError(f"[gpt2] dim={dim} is not a multiple of n_heads={n_heads}")
    self.vocab_size, self.max_context, self.dim, self.n_heads = vocab_size, max_context, dim, n_heads
    self.wte, self.wpe = Embedding(vocab_size, dim), Embedding(max_context, dim)
    self.h = [Block(dim, n_heads, max_context, norm_eps) for _ in range(n_layers)]
    self.ln_f = LayerNorm(dim, norm_eps)
    self.lm_head: Tensor | None = None  # None: tied to wte.weight, as GPT-2's
    self.freeze()

  def freeze(self):
    """Inference only: no parameter records a graph for a gradient."""
    for p in tinygrad.nn.state.get_parameters(self): p.requires_grad = False

  def __call__(self, tokens: Tensor, start_pos: Tensor | int = 0) -> Tensor:
    """Logits (B, T, vocab) of tokens (B, T) at positions start_pos..start_pos+T-1; fills the KV cache."""
    if not isinstance(start_pos, Tensor): start_pos = Tensor(start_pos, dtype=dtypes.int32)
    seqlen = tokens.shape[1]
    if seqlen > self.max_context:
      raise ValueError(f"[gpt2] {seqlen} tokens exceed the context of {self.max_context}")
    x = self.wte(tokens) + self.wpe(start_pos + Tensor.arange(seqlen))
    for block in self.h: x = block(x, start_pos)
    return self.ln_f(x) @ (self.wte.weight if self.lm_head is None else self.lm_head).T

  # ---- weights ----
  @staticmethod
  def from_safetensors(path: str, n_heads: int | None = None, norm_eps: float = 1e-5) -> "GPT2":
    """A GPT-2 from HuggingFace names (wte, wpe, h.N.{ln_1,attn.c_attn,attn.c_proj,ln_2,mlp.c_fc,mlp.c_proj}, ln_f)."""
    sd = {k.removeprefix("transformer."): v for k, v in safe_load(path).items()}
    cfg = {}
    if os.path.exists(p := os.path.join(os.path.dirname(os.path.abspath(path)), "config.json")):
      with open(p) as f: cfg = json.load(f)
    (vocab, dim), ctx = sd["wte.weight"].shape, sd["wpe.weight"].shape[0]
    n_layers = 1 + max(int(m.group(1)) for k in sd if (m := re.match(r"h\.(\d+)\.", k)))
    # every released GPT-2 has 64-wide heads; config.json or the caller says otherwise
    n_heads = n_heads or cfg.get("n_head") or dim // 64
    model = GPT2(vocab, ctx, dim, n_heads, n_layers, cfg.get("layer_norm_epsilon", norm_eps))
    conv1d = (".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight")
    weights = {}
    for k, v in sd.items():
      if k.endswith((".attn.bias", ".attn.masked_bias")): continue   # old checkpoints' causal-mask buffers
      weights[k] = v.T if k.endswith(conv1d) else v                   # Conv1D stores (in, out); Linear wants (out, in)
    model.load(weights, path)
    return model

  @staticmethod
  def from_gguf(path: str) -> tuple["GPT2", dict]:
    """A GPT-2 from a llama.cpp GGUF file (architecture gpt2); also returns the file's metadata."""
    kv, sd = gguf_load(path)
    if (arch := kv.get("general.architecture")) != "gpt2": raise ValueError(f"[gpt2] {path}: architecture {arch!r}, not 'gpt2'")
    vocab, dim = sd["token_embd.weight"].shape
    model = GPT2(vocab, kv["gpt2.context_length"], dim, kv["gpt2.attention.head_count"], kv["gpt2.block_count"],
                 kv.get("gpt2.attention.layer_norm_epsilon", 1e-5))
    names = {"token_embd": "wte", "position_embd": "wpe", "output_norm": "ln_f", "output": "lm_head"}
    layer = {"attn_norm": "ln_1", "attn_qkv": "attn.c_attn", "attn_output": "attn.c_proj", "ffn_norm": "ln_2",
             "ffn_up": "mlp.c_fc", "ffn_down": "mlp.c_proj"}
    weights = {}
    for k, v in sd.items():   # llama.cpp stores the projections as Linear's (out, in) already
      if (m := re.match(r"blk\.(\d+)\.(\w+)\.(weight|bias)$", k)) and m.group(2) in layer:
        k = f"h.{m.group(1)}.{layer[m.group(2)]}.{m.group(3)}"
      elif (base := k.rpartition(".")[0]) in names: k = names[base] + ("" if base == "output" else k[len(base):])
      # anything else stays as named and load() reports it as unexpected
      weights[k] = v.float()
    model.load(weights, path)
    return model, kv

  def load(self, weights: dict[str, Tensor], source: str):
    """Copies weights (model names, Linear layout) into the parameters; every parameter must be there."""
    if "lm_head.weight" in weights: weights["lm_head"] = weights.pop("lm_head.weight")
    if "lm_head" in weights: self.lm_head = Tensor.empty(self.vocab_size, self.dim)
    params = tinygrad.nn.state.get_state_dict(self)
    params = {k: v for k, v in params.items() if ".cache_" not in k}
    if missing := sorted(set(params) - set(weights)): raise KeyError(f"[gpt2] {source}: missing {missing[:5]}")
    if extra := sorted(set(weights) - set(params)): raise KeyError(f"[gpt2] {source}: unexpected {extra[:5]}")
    for k, p in params.items():
      w = weights[k]
      if w.shape != p.shape: raise ValueError(f"[gpt2] {source}: {k} has shape {w.shape}, the model wants {p.shape}")
      p.replace(w.cast(p.dtype).contiguous()).realize()
    if self.lm_head is not None and np.array_equal(self.lm_head.numpy(), self.wte.weight.numpy()): self.lm_head = None
    self.freeze()

# ---- sampling ----
def sample(logits: Tensor, temperature: float, top_k: int) -> Tensor:
  """One token per row of logits (B, vocab): argmax at temperature 0, else a draw from softmax(logits/T)
  restricted to the top_k largest logits (all when top_k is 0)."""
  if temperature < 0 or top_k < 0: raise ValueError(f"[sample] temperature={temperature} and top_k={top_k} must be >= 0")
  if temperature == 0: return logits.argmax(-1).cast(dtypes.int32)
  logits = logits / temperature
  if 0 < top_k < logits.shape[-1]:
    # a draw among the k candidates only: multinomial's cumsum is quadratic in its length
    values, indices = logits.topk(top_k, dim=-1)
    return indices.gather(-1, values.softmax(-1).multinomial(1))[:, 0].cast(dtypes.int32)
  # the whole vocabulary: Gumbel-max, argmax(logits + Gumbel noise), an exact softmax draw in one pass
  return (logits - (-Tensor.rand(*logits.shape).clamp(1e-20, 1).log()).log()).argmax(-1).cast(dtypes.int32)

class Generator:
  """Token-by-token decoding: one jitted step (token, position) -> next token, captured once for every position."""
  def __init__(self, model: GPT2, temperature: float = 0.0, top_k: int = 0):
    self.model, self.temperature, self.top_k = model, temperature, top_k
    self.step = TinyJit(self._step)
    self.step_times: list[float] = []  # perf_counter() after each step of the last generate()

  def _step(self, token: Tensor, start_pos: Tensor) -> Tensor:
    return sample(self.model(token, start_pos)[:, -1, :], self.temperature, self.top_k).realize()

  def generate(self, prompt: list[int], max_new: int, seed: int | None = None, on_token=None) -> list[int]:
    """The max_new tokens after prompt (the prompt is fed through the same step, one token at a time)."""
    if not prompt: raise ValueError("[generate] the prompt needs at least one token")
    if len(prompt) + max_new > self.model.max_context:
      raise ValueError(f"[generate] {len(prompt)} prompt + {max_new} new tokens exceed the context of {self.model.max_context}")
    if bad := [t for t in prompt if not 0 <= t < self.model.vocab_size]:
      raise ValueError(f"[generate] token ids {bad[:5]} outside the vocabulary of {self.model.vocab_size}")
    if seed is not None: Tensor.manual_seed(seed)
    out, token, self.step_times = [], prompt[0], []
    for pos in range(len(prompt) + max_new - 1):
      nxt = self.step(Tensor([[token]], dtype=dtypes.int32), Tensor(pos, dtype=dtypes.int32)).item()
      self.step_times.append(time.perf_counter())
      if pos + 1 < len(prompt): token = prompt[pos + 1]; continue   # still reading the prompt
      out.append(token := nxt)
      if on_token: on_token(token)
    return out

# ---- tokenizers ----
def bytes_to_unicode() -> dict[int, str]:
  """GPT-2's reversible map of the 256 bytes onto printable characters."""
  keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
  extra = [b for b in range(256) if b not in keep]
  return {**{b: chr(b) for b in keep}, **{b: chr(256 + i) for i, b in enumerate(extra)}}

class BPETokenizer:
  """GPT-2's byte-level BPE from a token list (id order) and merge rules ("a b")."""
  # NOTE: Python's re has no \p{L}/\p{N}: letters are [^\W\d_], numbers \d (the regex module's exact classes differ on rare scripts).
  PAT = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+""")

  def __init__(self, tokens: list[str], merges: list[str]):
    self.encoder = {t: i for i, t in enumerate(tokens)}
    self.decoder = dict(enumerate(tokens))
    self.ranks = {tuple(m.split(" ")): i for i, m in enumerate(merges)}
    self.byte_enc = bytes_to_unicode()
    self.byte_dec = {c: b for b, c in self.byte_enc.items()}

  @staticmethod
  def from_files(vocab_path: str, merges_path: str) -> "BPETokenizer":
    with open(vocab_path, encoding="utf-8") as f: vocab = json.load(f)
    with open(merges_path, encoding="utf-8") as f: merges = [l.rstrip("\n") for l in f if l.strip() and not l.startswith("#version")]
    return BPETokenizer([t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])], merges)

  def _bpe(self, word: str) -> list[str]:
    parts = list(word)
    while len(parts) > 1:
      best = min(range(len(parts) - 1), key=lambda i: self.ranks.get((parts[i], parts[i + 1]), math.inf))
      if (parts[best], parts[best + 1]) not in self.ranks: break
      pair, merged, i = (parts[best], parts[best + 1]), [], 0
      while i < len(parts):
        if i + 1 < len(parts) and (parts[i], parts[i + 1]) == pair: merged.append(parts[i] + parts[i + 1]); i += 2
        else: merged.append(parts[i]); i += 1
      parts = merged
    return parts

  def encode(self, text: str) -> list[int]:
    return [self.encoder[p] for w in self.PAT.findall(text) for p in self._bpe("".join(self.byte_enc[b] for b in w.encode("utf-8")))]

  def decode(self, ids: list[int]) -> str:
    return bytes(self.byte_dec[c] for i in ids for c in self.decoder[i]).decode("utf-8", errors="replace")

class ByteTokenizer:
  """One token per UTF-8 byte: ids 0..255 (the fallback when no BPE files are given)."""
  def __init__(self, vocab_size: int):
    if vocab_size < 256: raise ValueError(f"[tokenizer] a vocabulary of {vocab_size} < 256 tokens cannot hold bytes: pass --prompt-ids")
  def encode(self, text: str) -> list[int]: return list(text.encode("utf-8"))
  def decode(self, ids: list[int]) -> str: return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")

# ---- command line ----
def main(argv=None):
  ap = argparse.ArgumentParser(description="GPT-2 text generation with a KV cache on baregrad")
  ap.add_argument("--weights", required=True, help=".safetensors (HuggingFace GPT-2 names) or .gguf (llama.cpp gpt2)")
  ap.add_argument("--n-heads", type=int, default=None, help="heads of a safetensors model (default: config.json beside it, else dim/64)")
  ap.add_argument("--prompt-ids", default=None, help="comma-separated token ids")
  ap.add_argument("--prompt", default="Hello", help="text, when no --prompt-ids")
  ap.add_argument("--vocab", default=None, help="GPT-2 vocab.json (with --merges) for the BPE tokenizer")
  ap.add_argument("--merges", default=None, help="GPT-2 merges.txt")
  ap.add_argument("--max-new", type=int, default=20)
  ap.add_argument("--temperature", type=float, default=0.0, help="0: greedy")
  ap.add_argument("--top-k", type=int, default=0, help="0: the whole vocabulary")
  ap.add_argument("--seed", type=int, default=None)
  args = ap.parse_args(argv)

  kv = {}
  if args.weights.endswith(".gguf"): model, kv = GPT2.from_gguf(args.weights)
  else: model = GPT2.from_safetensors(args.weights, args.n_heads)
  if args.vocab and args.merges: tok = BPETokenizer.from_files(args.vocab, args.merges)
  elif "tokenizer.ggml.tokens" in kv and "tokenizer.ggml.merges" in kv: tok = BPETokenizer(kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.merges"])
  else: tok = None
  if args.prompt_ids is not None: prompt = [int(t) for t in args.prompt_ids.split(",") if t.strip()]
  else: prompt = (tok or ByteTokenizer(model.vocab_size)).encode(args.prompt)
  if tok is None and args.prompt_ids is None: tok = ByteTokenizer(model.vocab_size)

  gen = Generator(model, args.temperature, args.top_k)
  t0 = time.perf_counter()
  out = gen.generate(prompt, args.max_new, args.seed)
  dt = time.perf_counter() - t0
  print("ids:", ",".join(map(str, out)))
  if tok is not None: print("text:", repr(tok.decode(out)))
  steps, st = len(gen.step_times), gen.step_times
  replay = f", {(steps - 2) / (st[-1] - st[1]):.1f} tokens/s replaying the TinyJit capture" if steps > 2 else ""
  print(f"{steps} steps ({len(prompt)} prompt + {args.max_new} new tokens) in {dt:.2f} s: {steps / dt:.1f} tokens/s "
        f"overall (the first two steps run eagerly and compile){replay}")

if __name__ == "__main__":
  main()
