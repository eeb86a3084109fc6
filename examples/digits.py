#!/usr/bin/env python3
# The digits CNN of digits.cc in tinygrad-style Python: 1797 8x8 handwritten digits that Debian
# ships with python3-sklearn, 20% held out; prints the held-out accuracy (about 98% after 15 epochs).
#   examples/digits.py [digits.csv.gz]   EPOCHS=n (default 15), SMOKE=1 for a 1-epoch run
import gzip, sys, time
import numpy as np
from baregrad import Tensor, TinyJit, nn
from baregrad.helpers import getenv

path = sys.argv[1] if len(sys.argv) > 1 else "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"
data = np.loadtxt(gzip.open(path, "rt"), delimiter=",", dtype=np.float32)  # rows: 64 pixels (0..16), label
X, Y = (data[:, :64] / 16).reshape(-1, 1, 8, 8), data[:, 64].astype(np.int32)
rng = np.random.default_rng(1337)
order, n_test = rng.permutation(len(X)), len(X) // 5
X_test, Y_test, X_train, Y_train = X[order[:n_test]], Y[order[:n_test]], X[order[n_test:]], Y[order[n_test:]]

class Model:
  def __init__(self):
    self.c1, self.c2, self.l = nn.Conv2d(1, 16, 3, padding=1), nn.Conv2d(16, 32, 3, padding=1), nn.Linear(32 * 2 * 2, 10)
  def __call__(self, x: Tensor) -> Tensor:
    x = self.c1(x).relu().max_pool2d(2)  # (B, 16, 4, 4)
    x = self.c2(x).relu().max_pool2d(2)  # (B, 32, 2, 2)
    return self.l(x.flatten(1))

Tensor.manual_seed(1337)
model = Model()
opt = nn.optim.Adam(nn.state.get_parameters(model), lr=1e-2)

@TinyJit
def train_step(x: Tensor, y: Tensor) -> Tensor:
  with Tensor.train():
    opt.zero_grad()
    loss = model(x).sparse_categorical_crossentropy(y)
    loss.backward()
    opt.step()
    return loss.realize()

epochs, bs, t0 = getenv("EPOCHS", 1 if getenv("SMOKE") else 15), 64, time.perf_counter()
for epoch in range(1, epochs + 1):
  perm, steps = rng.permutation(len(X_train)), len(X_train) // bs  # full batches only: the JIT wants fixed shapes
  for i in range(steps):
    idx = perm[i * bs:(i + 1) * bs]
    loss = train_step(Tensor(X_train[idx]), Tensor(Y_train[idx])).item()
    print(f"\repoch {epoch:2d}/{epochs} [{'#' * (30 * (i + 1) // steps):.<30}] {i + 1:2d}/{steps} loss {loss:.4f}", end="", file=sys.stderr, flush=True)
  print(file=sys.stderr)
acc = (model(Tensor(X_test)).argmax(axis=1) == Tensor(Y_test)).mean().item() * 100
print(f"held-out accuracy {acc:.2f}% after {epochs} epochs ({time.perf_counter() - t0:.1f} s)")
sys.exit(0 if acc >= 97 or epochs < 15 else 1)
