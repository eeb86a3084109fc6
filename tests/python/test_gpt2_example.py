# examples/gpt2.py against a PyTorch GPT-2 written here, on a tiny random checkpoint this test writes
# itself as safetensors (HuggingFace names, Conv1D layout) and as GGUF (llama.cpp's gpt2 names, F16
# matrices): logits, KV-cache decoding, greedy generation, seeded top-k sampling, the command line.
import contextlib, io, json, os, pathlib, struct, sys
import numpy as np
import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples"))
from baregrad import Tensor, dtypes  # noqa: E402
import gpt2  # noqa: E402

VOCAB, CTX, DIM, HEADS, LAYERS = 64, 32, 32, 4, 2
PROMPT = [3, 17, 42, 8, 60, 1, 29, 11, 50, 7]

def random_weights(seed: int = 0) -> dict[str, np.ndarray]:
  """HuggingFace GPT-2 names and layouts: Conv1D weights are (in, out)."""
  rng = np.random.default_rng(seed)
  r = lambda *shape, s=0.3: (rng.standard_normal(shape) * s).astype(np.float32)
  w = {"wte.weight": r(VOCAB, DIM, s=0.5), "wpe.weight": r(CTX, DIM, s=0.2), "ln_f.weight": 1 + r(DIM, s=0.1), "ln_f.bias": r(DIM, s=0.1)}
  for i in range(LAYERS):
    p = f"h.{i}."
    w.update({p + "ln_1.weight": 1 + r(DIM, s=0.1), p + "ln_1.bias": r(DIM, s=0.1),
              p + "attn.c_attn.weight": r(DIM, 3 * DIM), p + "attn.c_attn.bias": r(3 * DIM, s=0.1),
              p + "attn.c_proj.weight": r(DIM, DIM), p + "attn.c_proj.bias": r(DIM, s=0.1),
              p + "ln_2.weight": 1 + r(DIM, s=0.1), p + "ln_2.bias": r(DIM, s=0.1),
              p + "mlp.c_fc.weight": r(DIM, 4 * DIM), p + "mlp.c_fc.bias": r(4 * DIM, s=0.1),
              p + "mlp.c_proj.weight": r(4 * DIM, DIM, s=0.15), p + "mlp.c_proj.bias": r(DIM, s=0.1)})
  return w

def write_safetensors(path, tensors: dict[str, np.ndarray]):
  header, off = {}, 0
  for k, v in tensors.items():
    header[k] = {"dtype": "F32", "shape": list(v.shape), "data_offsets": [off, off + v.nbytes]}
    off += v.nbytes
  h = json.dumps(header).encode()
  h += b" " * (-len(h) % 8)
  with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(np.ascontiguousarray(v).tobytes() for v in tensors.values()))

def write_gguf(path, kv: dict, tensors: dict[str, np.ndarray], align: int = 32):
  """GGUF v3: kv values typed from Python (str, int -> u32, float -> f32, list of str); tensors F32 or F16."""
  s = lambda x: struct.pack("<Q", len(x.encode())) + x.encode()
  out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
  for k, v in kv.items():
    if isinstance(v, str): out += s(k) + struct.pack("<I", 8) + s(v)
    elif isinstance(v, int): out += s(k) + struct.pack("<II", 4, v)
    elif isinstance(v, float): out += s(k) + struct.pack("<If", 6, v)
    else: out += s(k) + struct.pack("<IIQ", 9, 8, len(v)) + b"".join(s(x) for x in v)
  data, offsets = b"", []
  for v in tensors.values():
    data += b"\0" * (-len(data) % align)
    offsets.append(len(data))
    data += v.tobytes()
  for (k, v), o in zip(tensors.items(), offsets):
    out += s(k) + struct.pack("<I", v.ndim) + struct.pack(f"<{v.ndim}Q", *reversed(v.shape))  # ggml lists dims innermost first
    out += struct.pack("<IQ", {np.float32: 0, np.float16: 1}[v.dtype.type], o)
  out += b"\0" * (-len(out) % align)
  pathlib.Path(path).write_bytes(out + data)

def gguf_tensors(w: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
  """llama.cpp's gpt2 conversion: Linear layout (out, in), matrices F16, vectors F32."""
  names = {"ln_1": "attn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output", "ln_2": "ffn_norm",
           "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down"}
  out = {"token_embd.weight": w["wte.weight"].astype(np.float16), "position_embd.weight": w["wpe.weight"].astype(np.float16),
         "output_norm.weight": w["ln_f.weight"], "output_norm.bias": w["ln_f.bias"]}
  for i in range(LAYERS):
    for hf, gg in names.items():
      wt = w[f"h.{i}.{hf}.weight"]
      out[f"blk.{i}.{gg}.weight"] = wt.T.astype(np.float16) if wt.ndim == 2 else wt
      out[f"blk.{i}.{gg}.bias"] = w[f"h.{i}.{hf}.bias"]
  return out

def torch_logits(w: dict[str, np.ndarray], ids: list[int]) -> np.ndarray:
  """GPT-2 in PyTorch, float32: logits (T, vocab)."""
  t = {k: torch.from_numpy(v) for k, v in w.items()}
  T = len(ids)
  ln = lambda x, p: F.layer_norm(x, (DIM,), t[p + ".weight"], t[p + ".bias"], 1e-5)
  lin = lambda x, p: x @ t[p + ".weight"] + t[p + ".bias"]
  heads = lambda x: x.view(T, HEADS, DIM // HEADS).transpose(0, 1)
  x = t["wte.weight"][torch.tensor(ids)] + t["wpe.weight"][:T]
  for i in range(LAYERS):
    q, k, v = lin(ln(x, f"h.{i}.ln_1"), f"h.{i}.attn.c_attn").split(DIM, dim=-1)
    att = heads(q) @ heads(k).transpose(-1, -2) / (DIM // HEADS) ** 0.5
    att = att.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
    y = (att @ heads(v)).transpose(0, 1).reshape(T, DIM)
    x = x + lin(y, f"h.{i}.attn.c_proj")
    x = x + lin(F.gelu(lin(ln(x, f"h.{i}.ln_2"), f"h.{i}.mlp.c_fc"), approximate="tanh"), f"h.{i}.mlp.c_proj")
  return (ln(x, "ln_f") @ t["wte.weight"].T).numpy()

def torch_greedy(w, prompt: list[int], n: int) -> list[int]:
  ids = list(prompt)
  for _ in range(n):
    top2 = np.sort(torch_logits(w, ids)[-1])[-2:]
    assert top2[1] - top2[0] > 1e-3, "near-tie in the reference: pick another seed"
    ids.append(int(torch_logits(w, ids)[-1].argmax()))
  return ids[len(prompt):]

@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
  d = tmp_path_factory.mktemp("gpt2")
  w = random_weights()
  write_safetensors(d / "model.safetensors", w)
  (d / "config.json").write_text(json.dumps({"n_head": HEADS, "layer_norm_epsilon": 1e-5}))
  kv = {"general.architecture": "gpt2", "gpt2.block_count": LAYERS, "gpt2.context_length": CTX, "gpt2.embedding_length": DIM,
        "gpt2.feed_forward_length": 4 * DIM, "gpt2.attention.head_count": HEADS, "gpt2.attention.layer_norm_epsilon": 1e-5}
  write_gguf(d / "model.gguf", kv, gguf_tensors(w))
  # the GGUF model's reference: its F16 matrices rounded as the file stores them
  w16 = {k: (v.astype(np.float16).astype(np.float32) if v.ndim == 2 else v) for k, v in w.items()}
  return {"dir": d, "w": w, "w16": w16}

@pytest.fixture(scope="module")
def model(ckpt): return gpt2.GPT2.from_safetensors(str(ckpt["dir"] / "model.safetensors"))

def test_safetensors_logits_match_torch(ckpt, model):
  assert (len(model.h), model.n_heads, model.max_context, model.vocab_size) == (LAYERS, HEADS, CTX, VOCAB)
  got = model(Tensor([PROMPT], dtype=dtypes.int32)).numpy()[0]
  np.testing.assert_allclose(got, torch_logits(ckpt["w"], PROMPT), atol=2e-4, rtol=1e-4)

def test_gguf_logits_match_torch(ckpt):
  m, kv = gpt2.GPT2.from_gguf(str(ckpt["dir"] / "model.gguf"))
  assert kv["gpt2.attention.head_count"] == HEADS and m.lm_head is None
  got = m(Tensor([PROMPT], dtype=dtypes.int32)).numpy()[0]
  np.testing.assert_allclose(got, torch_logits(ckpt["w16"], PROMPT), atol=2e-4, rtol=1e-4)
  # the F16 rounding is visible: the unrounded weights' logits differ
  assert np.abs(got - torch_logits(ckpt["w"], PROMPT)).max() > 1e-3

def test_kv_cache_decoding_matches_full_forward(model):
  full = model(Tensor([PROMPT], dtype=dtypes.int32)).numpy()[0]
  model(Tensor([[5] * CTX], dtype=dtypes.int32))  # fill every cache slot with other keys and values first
  # a 4-token prompt at 0, 2 tokens at 4 (a chunk written at a nonzero position), then one at a time
  chunks = [(0, 4), (4, 6)] + [(i, i + 1) for i in range(6, len(PROMPT))]
  inc = np.concatenate([model(Tensor([PROMPT[a:b]], dtype=dtypes.int32), a).numpy()[0] for a, b in chunks])
  np.testing.assert_allclose(inc, full, atol=1e-5, rtol=1e-5)

def test_greedy_generation_matches_torch(ckpt, model):
  gen = gpt2.Generator(model)
  want = torch_greedy(ckpt["w"], PROMPT[:3], 12)
  assert len(set(want)) > 2  # not a degenerate repetition
  assert gen.generate(PROMPT[:3], 12) == want
  assert gen.step.captured and gen.generate(PROMPT[:3], 12) == want  # replays of the one capture

def test_topk_temperature_sampling(ckpt, model):
  gen = gpt2.Generator(model, temperature=2.0, top_k=5)
  a, b = gen.generate(PROMPT[:3], 12, seed=7), gen.generate(PROMPT[:3], 12, seed=7)
  assert a == b, "the same seed must give the same tokens"
  assert gen.generate(PROMPT[:3], 12, seed=8) != a
  ids, greedy_picks = PROMPT[:3], 0
  for t in a:
    logits = torch_logits(ckpt["w"], ids)[-1]
    assert t in np.argsort(logits)[-5:], f"token {t} is outside the top 5 {np.argsort(logits)[-5:]}"
    greedy_picks += t == logits.argmax()
    ids = ids + [t]
  assert greedy_picks < len(a), "at temperature 2 some pick must not be the argmax"

def test_sample_function():
  row = np.log(np.array([1.0, 3.0, 6.0, 0.5, 2.0], np.float32))
  logits = Tensor(np.tile(row, (4000, 1)))
  assert gpt2.sample(logits, 0, 0).tolist() == [2] * 4000
  Tensor.manual_seed(3)
  for top_k, probs in ((2, np.array([0, 3, 6, 0, 0]) / 9), (0, np.exp(row) / np.exp(row).sum())):
    picks = gpt2.sample(logits, 1.0, top_k).numpy()
    freq = np.bincount(picks, minlength=5) / len(picks)
    np.testing.assert_allclose(freq, probs, atol=0.03, err_msg=f"top_k={top_k}: draws do not follow softmax(logits)")
    if top_k: assert set(picks.tolist()) == {1, 2}
  # a high temperature flattens the draw: the smallest logit's share rises toward 1/5
  assert (gpt2.sample(logits, 50.0, 0).numpy() == 3).mean() > 0.15
  with pytest.raises(ValueError, match=r"\[sample\]"): gpt2.sample(logits, -1.0, 0)

def test_misuse(ckpt, model, tmp_path):
  gen = gpt2.Generator(model)
  with pytest.raises(ValueError, match=r"\[generate\].*context of 32"): gen.generate(PROMPT, CTX)
  with pytest.raises(ValueError, match=r"\[generate\].*\[64\]"): gen.generate([1, 64], 2)
  with pytest.raises(ValueError, match=r"\[generate\]"): gen.generate([], 2)
  write_gguf(tmp_path / "llama.gguf", {"general.architecture": "llama"}, {"x": np.zeros(2, np.float32)})
  with pytest.raises(ValueError, match=r"\[gpt2\].*'llama'"): gpt2.GPT2.from_gguf(str(tmp_path / "llama.gguf"))
  kv = {"general.architecture": "gpt2", "gpt2.block_count": LAYERS, "gpt2.context_length": CTX, "gpt2.attention.head_count": HEADS}
  write_gguf(tmp_path / "extra.gguf", kv, {**gguf_tensors(ckpt["w"]), "blk.0.attn_gate.weight": np.zeros(DIM, np.float32)})
  with pytest.raises(KeyError, match=r"\[gpt2\].*unexpected.*blk\.0\.attn_gate\.weight"): gpt2.GPT2.from_gguf(str(tmp_path / "extra.gguf"))
  bad = dict(ckpt["w"]); del bad["h.1.mlp.c_fc.bias"]
  write_safetensors(tmp_path / "bad.safetensors", bad)
  with pytest.raises(KeyError, match=r"h\.1\.mlp\.c_fc\.bias"): gpt2.GPT2.from_safetensors(str(tmp_path / "bad.safetensors"), HEADS)
  with pytest.raises(ValueError, match=r"\[tokenizer\]"): gpt2.ByteTokenizer(VOCAB)

def test_command_line(ckpt):
  out = io.StringIO()
  with contextlib.redirect_stdout(out):
    gpt2.main(["--weights", str(ckpt["dir"] / "model.safetensors"), "--prompt-ids", "3,17,42", "--max-new", "6"])
  lines = out.getvalue().splitlines()
  assert lines[0] == "ids: " + ",".join(map(str, torch_greedy(ckpt["w"], PROMPT[:3], 6)))
  assert "tokens/s" in lines[-1]
  # a GGUF file that carries its tokenizer: --prompt text is BPE-encoded and the output decoded
  b2u = gpt2.bytes_to_unicode()
  tokens = [b2u[b] for b in range(ord("0"), ord("0") + VOCAB - 1)] + ["AB"]  # "0".."n" and one merged token
  kv = {"general.architecture": "gpt2", "gpt2.block_count": LAYERS, "gpt2.context_length": CTX, "gpt2.attention.head_count": HEADS,
        "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.merges": ["A B"]}
  write_gguf(ckpt["dir"] / "tok.gguf", kv, gguf_tensors(ckpt["w"]))
  out = io.StringIO()
  with contextlib.redirect_stdout(out):
    gpt2.main(["--weights", str(ckpt["dir"] / "tok.gguf"), "--prompt", "ABC", "--max-new", "4"])
  ids, text = out.getvalue().splitlines()[:2]
  want = torch_greedy(ckpt["w16"], [VOCAB - 1, ord("C") - ord("0")], 4)  # "AB" merged, then "C"
  assert ids == "ids: " + ",".join(map(str, want))
  assert text == "text: " + repr("".join(tokens[i] for i in want))

def test_bpe_tokenizer():
  b2u = gpt2.bytes_to_unicode()
  assert sorted(b2u) == list(range(256)) and len(set(b2u.values())) == 256 and b2u[ord("a")] == "a" and b2u[ord(" ")] == "\u0120"
  tokens = [b2u[b] for b in range(256)] + ["he", "ll", "hell", "hello", "\u0120w"]
  tok = gpt2.BPETokenizer(tokens, ["h e", "l l", "he ll", "hell o", "\u0120 w"])  # merges in rank order
  ids = tok.encode("hello world")
  assert ids == [259, 260, ord("o"), ord("r"), ord("l"), ord("d")]
  assert tok.decode(ids) == "hello world"
  assert tok.decode(tok.encode("naïve  x")) == "naïve  x"  # bytes beyond ASCII round-trip
