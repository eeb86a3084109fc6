#!/usr/bin/env python3
# tinygrad code running unchanged on baregrad. Trains a small MLP with a jitted Adam step, saves it as
# safetensors, reloads it into a fresh model and checks that the outputs are identical.
# The one baregrad line: importing baregrad.as_tinygrad makes every `tinygrad` import below resolve to
# baregrad. Without it, `python3 -m baregrad.as_tinygrad examples/tinygrad_style.py` does the same.
import baregrad.as_tinygrad  # noqa: F401
import os, tempfile
import numpy as np
from tinygrad import Tensor, TinyJit, dtypes
from tinygrad.nn import Linear
from tinygrad.nn.optim import Adam
from tinygrad.nn.state import get_parameters, get_state_dict, load_state_dict, safe_load, safe_save
from tinygrad.helpers import getenv

class TinyNet:
  def __init__(self):
    self.l1 = Linear(4, 32)
    self.l2 = Linear(32, 3)

  def __call__(self, x: Tensor) -> Tensor:
    return self.l2(self.l1(x).relu())

Tensor.manual_seed(0)
X = Tensor.randn(128, 4)
Y = (X[:, 0] > 0).cast(dtypes.int32) + (X[:, 1] > 0).cast(dtypes.int32)  # three classes: 0, 1, 2

model = TinyNet()
opt = Adam(get_parameters(model), lr=0.03)

@TinyJit
@Tensor.train()
def train_step(x: Tensor, y: Tensor) -> Tensor:
  opt.zero_grad()
  loss = model(x).sparse_categorical_crossentropy(y).backward()
  opt.step()
  return loss

for step in range(getenv("STEPS", 150)):
  loss = train_step(X, Y)
  if step % 50 == 0: print(f"step {step:3d}  loss {loss.item():.4f}")

acc = (model(X).argmax(axis=1) == Y).mean().item()
print(f"train accuracy {acc:.3f}")
assert acc > 0.9, f"accuracy {acc} too low"

with tempfile.TemporaryDirectory() as tmp:
  path = os.path.join(tmp, "tinynet.safetensors")
  safe_save(get_state_dict(model), path)
  fresh = TinyNet()
  assert not np.array_equal(fresh(X).numpy(), model(X).numpy())
  load_state_dict(fresh, safe_load(path))
  np.testing.assert_equal(fresh(X).numpy(), model(X).numpy())
print("reloaded model gives identical outputs")
