"""Matrix factorisations over the last two axes, from Tensor ops (tinygrad's names): qr, svd and
newton_schulz (batch axes first), and tinygrad's IMAGE-mode image_dot / image_conv2d."""
from __future__ import annotations

import numpy as np

from baregrad.helpers import ShapeError


def _tournament(n: int) -> list[list[tuple[int, int]]]:
  """Round-robin pairings of 0..n-1 (n even): n-1 rounds of n/2 disjoint pairs, every pair once."""
  players, rounds = list(range(n)), []
  for _ in range(n - 1):
    rounds.append([(players[i], players[n - 1 - i]) for i in range(n // 2)])
    players = [players[0], players[-1]] + players[1:-1]
  return rounds


class LinalgMixin:
  __slots__ = ()

  def _matrix_arg(self, op: str):
    if self.ndim < 2: raise ShapeError(f"[{op}] needs at least 2 dims (..., m, n), got shape {self.shape}")
    if not self.is_floating_point(): raise TypeError(f"[{op}] needs a float tensor, got {self.dtype}")

  def qr(self):
    """(Q, R) with self = Q @ R over the last two axes: Q (..., m, m) orthogonal, R (..., m, n) upper
    triangular (complete, as tinygrad's). Householder reflections as LAPACK's geqrf makes them (column
    k onto -sign(x_k) |x| e_k, none where the column is already zero below the diagonal), so R
    matches numpy.linalg.qr's up to rounding."""
    self._matrix_arg("qr")
    T = self._T
    *batch, m, n = self.shape
    R, Q = self, T.eye(m, dtype=self.dtype, device=self.device).expand(*batch, m, m)
    rows = T.arange(m, device=self.device).reshape(m, 1)
    for k in range(min(m, n)):
      x = (rows >= k).where(R[..., :, k:k + 1], 0)  # (..., m, 1): the column from the diagonal down
      xk = R[..., k:k + 1, k:k + 1]
      norm = x.square().sum(-2, keepdim=True).sqrt()
      alpha = -(xk >= 0).where(1, -1) * norm
      v = x - (rows == k).where(alpha, 0)  # x - alpha e_k
      vv = v.square().sum(-2, keepdim=True)
      below = (rows > k).where(x, 0).square().sum(-2, keepdim=True)
      beta = (below > 0).where(2 / (vv > 0).where(vv, 1), 0)  # nothing below the diagonal: no reflection
      R = R - (beta * v) @ (v.transpose(-2, -1) @ R)
      Q = Q - (Q @ v) @ (beta * v).transpose(-2, -1)
    return Q, R

  def svd(self, full_matrices: bool = True):
    """(U, S, Vh) with self = U @ diag(S) @ Vh over the last two axes, S descending (tinygrad's order
    of results). full_matrices: U (..., m, m) and Vh (..., n, n), else (..., m, k) and (..., k, n)
    with k = min(m, n). A QR first (for m >= n; the transpose otherwise), then one-sided Jacobi on
    the k x k triangle: rounds of k/2 disjoint column rotations, each round one matmul, until the
    columns are orthogonal to float precision (at most 30 sweeps). Columns of U for zero singular
    values are completed to an orthonormal basis."""
    self._matrix_arg("svd")
    T = self._T
    *batch, m, n = self.shape
    if m < n:
      u, s, vh = self.transpose(-2, -1).svd(full_matrices)
      return vh.transpose(-2, -1), s, u.transpose(-2, -1)
    k, dev, dt = n, self.device, self.dtype
    q, r = self.qr()
    w = r[..., :k, :]  # (..., k, k) upper triangle: self = q[..., :, :k] @ w
    kk = k + k % 2  # an even count of columns: an odd k gets a zero column that never rotates
    if kk != k: w = w.pad(((0, 0),) * len(batch) + ((0, 0), (0, 1)))
    v = T.eye(kk, dtype=dt, device=dev).expand(*batch, kk, kk)
    eye = T.eye(kk, dtype=dt, device=dev)
    rounds = []
    for pairs in _tournament(kk):
      sel = np.zeros((2, kk, kk // 2), np.float32)
      for i, (a, b) in enumerate(pairs): sel[0, a, i] = sel[1, b, i] = 1
      rounds.append((T(sel[0], device=dev, dtype=dt), T(sel[1], device=dev, dtype=dt)))
    eps = 1e-7 if dt.itemsize <= 4 else 1e-15
    for _ in range(30 if kk > 1 else 0):
      worst = 0.0
      for p, qs in rounds:
        wp, wq = w @ p, w @ qs  # (..., k, k/2): the columns of each pair
        alpha, beta, gamma = (wp * wp).sum(-2), (wq * wq).sum(-2), (wp * wq).sum(-2)
        off = gamma.abs() / ((alpha * beta).sqrt() + 1e-30)
        rot = off > eps
        zeta = (beta - alpha) / (2 * rot.where(gamma, 1))
        t = (zeta >= 0).where(1, -1) / (zeta.abs() + (1 + zeta * zeta).sqrt())
        c = rot.where(1 / (1 + t * t).sqrt(), 1)
        s = rot.where(c * t, 0)
        # the rotation: columns a, b -> c w_a - s w_b, s w_a + c w_b
        cd, sd = (1 - c).unsqueeze(-2), s.unsqueeze(-2)
        j = eye - (p * cd) @ p.transpose(-1, -2) - (qs * cd) @ qs.transpose(-1, -2) + (p * sd) @ qs.transpose(-1, -2) \
          - (qs * sd) @ p.transpose(-1, -2)
        w, v = (w @ j).realize(), (v @ j).realize()
        worst = max(worst, off.max().item())
      if worst <= eps: break
    w, v = w[..., :k], v[..., :k, :k]
    sv = (w * w).sum(-2).sqrt()
    order = sv.argsort(-1, descending=True)
    sv = sv.gather(-1, order)
    w, v = w.gather(-1, order.unsqueeze(-2).expand(*batch, k, k)), v.gather(-1, order.unsqueeze(-2).expand(*batch, k, k))
    u1 = w / (sv > 0).where(sv, 1).unsqueeze(-2)  # zero columns where S is 0
    # Complete u1 to an orthonormal basis: its nonzero columns are orthonormal, so QR gives them back
    # up to sign, and fills the zero ones.
    qu, ru = u1.qr()
    diag = (ru * T.eye(k, dtype=dt, device=dev)).sum(-1)
    u1 = qu * (diag >= 0).where(1, -1).unsqueeze(-2)
    if full_matrices:
      blk = u1.pad(((0, 0),) * len(batch) + ((0, m - k), (0, m - k))) + \
        T.eye(m, dtype=dt, device=dev) * (T.arange(m, device=dev) >= k).unsqueeze(-1).cast(dt)  # I on the rest
      u = q @ blk
    else:
      u = q[..., :, :k] @ u1
    return u, sv, v.transpose(-2, -1)

  def image_dot(self, w, dtype=None):
    """tinygrad's matmul for its IMAGE mode. baregrad has no image layouts, so this is `dot` (same
    values and gradients), with tinygrad's shape check."""
    if not (self.ndim > 0 and w.ndim > 0):
      raise RuntimeError(f"[image_dot] both tensors need to be at least 1D, got {self.ndim=}, {w.ndim=}")
    if self.shape[-1] != w.shape[-min(w.ndim, 2)]: raise RuntimeError(f"[image_dot] cannot image_dot {self.shape} and {w.shape}")
    return self.dot(w, dtype=dtype)

  def image_conv2d(self, weight, bias=None, groups=1, stride=1, dilation=1, padding=0, dtype=None):
    """tinygrad's conv2d for its IMAGE mode. baregrad has no image layouts, so this is `conv2d` with
    the same arguments (same values and gradients); 2-D only, as tinygrad's."""
    if self.ndim != 4 or weight.ndim != 4:
      raise ValueError(f"[image_conv2d] needs a 4-D input and weight, got {self.shape} and {weight.shape}")
    return self.conv2d(weight, bias, groups=groups, stride=stride, dilation=dilation, padding=padding, dtype=dtype)

  def newton_schulz(self, steps: int, params, eps: float = 1.0e-7):
    """tinygrad's Newton-Schulz iteration for odd polynomials: X = self / |self|_F, then `steps` times
    X = sum_i params[i] (X X^T)^i X; over the transpose when there are more rows than columns."""
    self._matrix_arg("newton_schulz")
    if not params: raise ValueError("[newton_schulz] params must hold at least one coefficient")
    if self.shape[-2] > self.shape[-1]: return self.transpose(-2, -1).newton_schulz(steps, params, eps).transpose(-2, -1)
    g = self / (self.square().sum(axis=(-2, -1), keepdim=True).sqrt() + eps)
    for _ in range(steps):
      a, term, out = g @ g.transpose(-2, -1), g, g * params[0]
      for p in params[1:]:
        term = a @ term
        out = out + p * term
      g = out
    return g
