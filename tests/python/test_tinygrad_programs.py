# tinygrad programs run unchanged under `python3 -m baregrad.as_tinygrad`: a training program in
# tinygrad's style (ours, shaped like tinygrad's examples/beautiful_mnist.py) learns a small generated
# MNIST-format dataset (examples/mnist_synth.py) read through nn.datasets.mnist, in a subprocess that
# imports only `tinygrad`; and a tinygrad module baregrad lacks fails at its import line, naming it.
import os
import re
import subprocess
import sys
import textwrap

import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_ROOT, "examples"))
import mnist_synth  # noqa: E402

PROGRAM = textwrap.dedent("""
  from tinygrad import Tensor, TinyJit, nn, function, Context, GlobalCounters
  from tinygrad.helpers import getenv, trange
  from tinygrad.nn.datasets import mnist

  class Net:
    def __init__(self):
      self.layers = [nn.Conv2d(1, 8, 3), Tensor.relu, nn.BatchNorm(8), Tensor.max_pool2d,
                     nn.Conv2d(8, 16, 3), Tensor.relu, Tensor.max_pool2d, lambda x: x.flatten(1), nn.Linear(400, 10)]

    @function
    def __call__(self, x: Tensor) -> Tensor: return (x.float() / 255.0).sequential(self.layers)

    @TinyJit
    @Context(TRAINING=1)
    def train_step(self, X: Tensor, Y: Tensor) -> Tensor:
      opt.zero_grad()
      samples = Tensor.randint(getenv("BS", 32), high=X.shape[0])
      loss = self(X[samples]).sparse_categorical_crossentropy(Y[samples]).backward()
      return loss.realize(*opt.schedule_step())

    @TinyJit
    def test_acc(self, X: Tensor, Y: Tensor) -> Tensor: return (self(X).argmax(axis=1) == Y).mean() * 100

  if __name__ == "__main__":
    Tensor.manual_seed(1)
    X_train, Y_train, X_test, Y_test = mnist()
    model = Net()
    opt = nn.optim.Adam(nn.state.get_parameters(model), lr=0.01)
    for i in (t := trange(getenv("STEPS", 50))):
      GlobalCounters.reset()
      loss = model.train_step(X_train, Y_train)
      t.set_description(f"loss {loss.item():.2f}")
    assert Net.train_step.cnt == getenv("STEPS", 50), Net.train_step.cnt  # replayed, not retraced
    print(f"running_mean set: {model.layers[2].running_mean.abs().sum().item() > 0}")
    print(f"test accuracy {model.test_acc(X_test, Y_test).item():.2f}%")
""")


def _run(script_path, **env):
  """Runs script_path under the alias in a fresh python, PYTHONPATH as this process's sys.path."""
  e = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p), **env)
  return subprocess.run([sys.executable, "-m", "baregrad.as_tinygrad", str(script_path)], env=e, capture_output=True,
                        text=True, timeout=600)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  d = tmp_path_factory.mktemp("mnist")
  mnist_synth.write(d, 800, 300, seed=3)
  return d


def test_tinygrad_style_training_program_learns_generated_mnist(data_dir, tmp_path):
  (script := tmp_path / "train.py").write_text(PROGRAM)
  r = _run(script, MNIST_DIR=str(data_dir), STEPS="50", BS="32")
  assert r.returncode == 0, r.stdout + r.stderr
  assert "running_mean set: True" in r.stdout  # BatchNorm ran in training mode under Context(TRAINING=1)
  m = re.search(r"test accuracy ([0-9.]+)%", r.stdout)
  assert m, r.stdout
  assert float(m.group(1)) >= 80.0, r.stdout  # chance is 10%; it reaches 91% here
  assert "50/50" in r.stderr  # trange drew its bar on stderr


def test_generated_mnist_is_deterministic_and_idx_format(tmp_path):
  a, b = mnist_synth.write(tmp_path / "a", 40, 10, seed=5), mnist_synth.write(tmp_path / "b", 40, 10, seed=5)
  assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]
  c = mnist_synth.write(tmp_path / "c", 40, 10, seed=6)
  assert a[0].read_bytes() != c[0].read_bytes()
  from baregrad.nn.datasets import mnist
  os.environ["MNIST_DIR"] = str(tmp_path / "a")
  try:
    xtr, ytr, xte, yte = mnist()
  finally:
    del os.environ["MNIST_DIR"]
  assert (xtr.shape, ytr.shape, xte.shape, yte.shape) == ((40, 1, 28, 28), (40,), (10, 1, 28, 28), (10,))
  assert ytr.numpy().max() <= 9 and xtr.numpy().max() > 200


def test_missing_tinygrad_module_fails_at_its_import_naming_it(tmp_path):
  (script := tmp_path / "uses_internals.py").write_text("from tinygrad import Tensor\nprint('before')\n"
                                                        "from tinygrad.codegen.opt import Opt\nprint('after')\n")
  r = _run(script)
  assert r.returncode != 0
  assert "before" in r.stdout and "after" not in r.stdout
  assert "ModuleNotFoundError: [as_tinygrad] no module named 'tinygrad.codegen'" in r.stderr, r.stderr  # the first missing package
  assert "uses_internals.py\", line 3" in r.stderr, r.stderr


def test_is_param_separates_parameters_from_buffers():
  # tinygrad's gradaccum_mnist.py: partition(get_parameters(model), lambda x: x.is_param)
  from baregrad import Tensor, nn
  bn, lin = nn.BatchNorm(3), nn.Linear(2, 2)
  assert [t.is_param for t in (bn.weight, bn.running_mean, bn.running_var, bn.num_batches_tracked, lin.weight)] == \
    [True, False, False, False, True]
  assert Tensor([1.0]).is_param and Tensor([1.0]).detach().is_param  # tinygrad: a detached tensor is a param too
  w, b = Tensor([1.0, 2.0]), Tensor([3.0]).is_param_(False)
  assert b.requires_grad is False and b.is_param is False
  opt = nn.optim.SGD([w, b], lr=0.5)
  assert len(opt.params) == 1 and opt.params[0] is w and len(opt.buffers) == 1
  assert w.is_param_(True) is w and w.requires_grad is True  # an optimizer's parameter stays True
  b.is_param = True
  assert b.requires_grad is None and b.is_param
