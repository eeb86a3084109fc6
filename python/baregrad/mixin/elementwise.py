"""Elementwise Tensor methods: arithmetic with tinygrad's scalar promotion, math, activations."""
from __future__ import annotations

import math

import numpy as np

import _baregrad as _C
from baregrad import multi
from baregrad import variable
from baregrad.dtype import InvalidType, _fits, dtypes, least_upper_dtype, least_upper_float, to_dtype
from baregrad.helpers import DTypeError, op_name

_CONST = (bool, int, float, np.bool_, np.integer, np.floating)


def _scalar_dtype(x_dtype, y, widen: bool = False):
  """The dtype a Python scalar `y` takes against a tensor of `x_dtype` (tinygrad's rule): floats
  keep the tensor's float dtype, ints keep its int dtype, anything else gets the scalar's own.
  An int outside the int dtype's range raises (torch), or with `widen` (comparisons, true
  division: results that keep no int dtype) gets its own wider dtype; it never wraps."""
  if dtypes.is_float(x_dtype): return x_dtype
  if dtypes.is_int(x_dtype) and isinstance(y, (int, np.integer)):
    if _fits(y, x_dtype): return x_dtype
    if widen and not isinstance(y, bool): return dtypes.from_py(int(y))
    raise ValueError(f"[{op_name()}] {y} cannot be converted to {x_dtype} without overflow: cast the tensor to a wider dtype first")
  return dtypes.from_py(y)


class ElementwiseMixin:
  __slots__ = ()

  # ---- operands ------------------------------------------------------------------------------

  def _to_tensor(self, y, dtype=None):
    """`y` as a tensor on this device: a Tensor as is, a scalar as a 0-d constant (a SymInt as
    one whose value kernels take at launch)."""
    if isinstance(y, self._T): return y
    if isinstance(y, variable.SymInt):
      dt = dtype or _scalar_dtype(self.dtype, y)
      return self._wrap(_C.Tensor.sym_scalar(y.sym, y.vals, dt.key, self.device))
    if isinstance(y, np.generic): y = y.item()
    if isinstance(y, _CONST): return self._const(y, dtype or _scalar_dtype(self.dtype, y), self.device)
    if isinstance(y, (list, tuple, np.ndarray)): return self._T(y, device=self.device)
    raise TypeError(f"[{op_name()}] unsupported operand of type {type(y).__name__} for a Tensor")

  def _broadcasted(self, y, reverse: bool = False, match_dtype: bool = True, widen: bool = False):
    """(self, y) with y a tensor and both of one promoted dtype (the C++ ops broadcast)."""
    if widen and isinstance(y, np.generic): y = y.item()
    x, y = self, self._to_tensor(y, _scalar_dtype(self.dtype, y, True) if widen and isinstance(y, _CONST) else None)
    if x._deviceless is not y._deviceless:  # a deviceless constant goes where the other operand is
      x, y = (x._on(y.device), y) if x._deviceless else (x, y._on(x.device))
    if match_dtype and x.dtype != y.dtype:
      out = least_upper_dtype(x.dtype, y.dtype)
      x, y = x.cast(out), y.cast(out)
    return (y, x) if reverse else (x, y)

  def _binary(self, name: str, y, reverse: bool = False, widen: bool = False):
    a, b = self._broadcasted(y, reverse, widen=widen)
    return self._wrap(multi.call(name, a._c, b._c))

  # ---- arithmetic ----------------------------------------------------------------------------

  def add(self, x, reverse: bool = False): return self._binary("add", x, reverse)
  def sub(self, x, reverse: bool = False): return self._binary("sub", x, reverse)
  def mul(self, x, reverse: bool = False): return self._binary("mul", x, reverse)

  def div(self, x, reverse: bool = False, rounding_mode: str | None = None):
    """True division (ints give float32); rounding_mode "trunc" or "floor" rounds the quotient."""
    a, b = self._broadcasted(x, reverse, widen=rounding_mode is None)
    if rounding_mode is None: return self._wrap(multi.call("div", a._c, b._c))
    if rounding_mode == "floor":
      if dtypes.is_float(a.dtype): return self._wrap(multi.call("div", a._c, b._c)).floor()
      return self._wrap(multi.call("idiv", a._c, b._c))
    if rounding_mode == "trunc":
      if dtypes.is_float(a.dtype): return self._wrap(multi.call("div", a._c, b._c)).trunc()
      q = self._wrap(multi.call("idiv", a._c, b._c))
      inexact = (q * b).ne(a)
      return (inexact & ((a < 0) ^ (b < 0))).where(q + 1, q)
    raise RuntimeError(f"[div] rounding_mode={rounding_mode!r} is not supported")

  def idiv(self, x, reverse: bool = False):
    """Integer division rounding toward zero (C's /), as tinygrad's idiv."""
    return self.div(x, reverse, rounding_mode="trunc")

  def mod(self, x, reverse: bool = False):
    """Python's %: the result has the divisor's sign."""
    return self._binary("mod", x, reverse)

  def fmod(self, x):
    """C's fmod (torch.fmod): the remainder of truncating division, with the dividend's sign."""
    a, b = self._broadcasted(x)
    if dtypes.is_float(a.dtype):  # NOTE: quotients beyond 2**24 (float32) round, as tinygrad's; x fmod inf is x
      return (b.isinf() & a.isfinite()).where(a, a - a.div(b, rounding_mode="trunc") * b)
    r = a.mod(b)  # Python's remainder, exact for ints: shift it by b where the signs disagree
    return (r.ne(0) & ((r < 0) ^ (a < 0))).where(r - b, r)

  def pow(self, x, reverse: bool = False):
    """x ** e; int ** int stays int, an int tensor with a float exponent gives float32."""
    if not reverse and isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool):
      if isinstance(x, (int, np.integer)) and x < 0 and not dtypes.is_float(self.dtype):
        raise RuntimeError(f"[pow] {self.dtype} ** {x}: an integer tensor has no negative integer powers")
      # the exponent is no operand of the tensor's dtype: an int one of any size keeps it
      sd = self.dtype if dtypes.is_int(self.dtype) and isinstance(x, (int, np.integer)) else _scalar_dtype(self.dtype, x)
      base = self.cast(least_upper_dtype(self.dtype, sd))
      return self._wrap(base._c.pow_scalar(float(x)))
    return self._binary("pow", x, reverse)

  def maximum(self, x): return self._binary("maximum", x)
  def minimum(self, x): return self._binary("minimum", x)

  def where(self, x, y):
    """x where this (cast to bool) is true, else y; scalars take the other operand's dtype. tinygrad's Invalid as x
    or y leaves the other operand's values there (any value is valid)."""
    if isinstance(x, InvalidType) and isinstance(y, InvalidType): raise TypeError("[where] both values are Invalid")
    if isinstance(x, InvalidType): x = y
    if isinstance(y, InvalidType): y = x
    if isinstance(x, self._T): x, y = x._broadcasted(y)
    elif isinstance(y, self._T): y, x = y._broadcasted(x)
    else:
      x, y = self._to_tensor(x, _scalar_dtype(self.dtype, x)), self._to_tensor(y, _scalar_dtype(self.dtype, y))
      x, y = x._broadcasted(y)
    return self._wrap(multi.static("where", self._c, x._c, y._c))

  def neg(self): return self.logical_not() if self.dtype is dtypes.bool else self._wrap(self._c.neg())
  def logical_not(self): return self._wrap(self._c.logical_not())

  # ---- comparisons (bool results) ------------------------------------------------------------

  def __lt__(self, x): return self._binary("lt", x, widen=True)
  def __gt__(self, x): return self._binary("gt", x, widen=True)
  def __le__(self, x): return self._binary("le", x, widen=True)
  def __ge__(self, x): return self._binary("ge", x, widen=True)
  def eq(self, x): return self._binary("eq", x, widen=True)
  def ne(self, x): return self._binary("ne", x, widen=True)
  def __eq__(self, x): return self.eq(x)  # type: ignore[override]
  def __ne__(self, x): return self.ne(x)  # type: ignore[override]

  # ---- bitwise -------------------------------------------------------------------------------

  def _check_int_or_bool(self):
    if not (dtypes.is_int(self.dtype) or self.dtype is dtypes.bool): raise TypeError(f"[{op_name()}] {self.dtype} is not supported")

  def _bit_pattern(self, x):
    """A Python int mask for a bitwise op: one that fits the unsigned type of a signed tensor's
    width is that bit pattern (`int32 | 0xFFFFFFFF` is `| -1`, as tinygrad); others are unchanged."""
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool) and dtypes.is_int(self.dtype) and not dtypes.is_unsigned(self.dtype):
      bits = 8 * self.dtype.itemsize
      if dtypes.max(self.dtype) < x < 1 << bits: return int(x) - (1 << bits)
    return x

  def bitwise_and(self, x, reverse: bool = False):
    self._check_int_or_bool()
    return self._binary("bitwise_and", self._bit_pattern(x), reverse)

  def bitwise_or(self, x, reverse: bool = False):
    self._check_int_or_bool()
    return self._binary("bitwise_or", self._bit_pattern(x), reverse)

  def bitwise_xor(self, x, reverse: bool = False):
    self._check_int_or_bool()
    return self._binary("bitwise_xor", self._bit_pattern(x), reverse)

  def bitwise_not(self):
    self._check_int_or_bool()
    return self._wrap(self._c.bitwise_not())

  def _shift_amount(self, x):
    op = op_name()
    if not dtypes.is_int(self.dtype): raise DTypeError(f"[{op}] needs an int tensor, got {self.dtype}")
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer, self._T)) or \
       (isinstance(x, self._T) and not dtypes.is_int(x.dtype)):
      raise DTypeError(f"[{op}] shift amounts must be ints, got {x.dtype if isinstance(x, self._T) else type(x).__name__}")
    return x

  def _shift_by_tensor(self, n, left: bool):
    """self shifted by the per-element amounts n: one constant shift per bit of n (no 2**n, which overflows)."""
    a, n = self._broadcasted(n)
    for b in range(max(1, (a.dtype.itemsize * 8 - 1).bit_length())):
      shifted = a._wrap(a._c.lshift(1 << b) if left else a._c.rshift(1 << b))
      a = ((n // (1 << b)) % 2 == 1).where(shifted, a)
    return a

  def lshift(self, x, reverse: bool = False):
    """x << n for int tensors; n an int or an int tensor (amounts past the bit width are undefined, as in C)."""
    if reverse: return self._to_tensor(x).lshift(self)
    if isinstance(self._shift_amount(x), (int, np.integer)): return self._wrap(self._c.lshift(int(x)))
    return self._shift_by_tensor(x, True)

  def rshift(self, x, reverse: bool = False):
    """x >> n for int tensors, arithmetic for signed ones; n an int or an int tensor."""
    if reverse: return self._to_tensor(x).rshift(self)
    if isinstance(self._shift_amount(x), (int, np.integer)): return self._wrap(self._c.rshift(int(x)))
    return self._shift_by_tensor(x, False)

  # ---- operators -----------------------------------------------------------------------------

  def __neg__(self): return self.neg()
  def __invert__(self): return self.bitwise_not()
  def __pos__(self): return self
  def __abs__(self): return self.abs()
  def __add__(self, x): return self.add(x)
  def __radd__(self, x): return self.add(x, True)
  def __sub__(self, x): return self.sub(x)
  def __rsub__(self, x): return self.sub(x, True)
  def __mul__(self, x): return self.mul(x)
  def __rmul__(self, x): return self.mul(x, True)
  def __truediv__(self, x): return self.div(x)
  def __rtruediv__(self, x): return self.div(x, True)
  def __floordiv__(self, x): return self.div(x, rounding_mode="floor")
  def __rfloordiv__(self, x): return self.div(x, True, rounding_mode="floor")
  def __mod__(self, x): return self.mod(x)
  def __rmod__(self, x): return self.mod(x, True)
  def __pow__(self, x): return self.pow(x)
  def __rpow__(self, x): return self.pow(x, True)
  def __matmul__(self, x): return self.matmul(x)
  def __rmatmul__(self, x): return self.matmul(x, True)
  def __and__(self, x): return self.bitwise_and(x)
  def __rand__(self, x): return self.bitwise_and(x, True)
  def __or__(self, x): return self.bitwise_or(x)
  def __ror__(self, x): return self.bitwise_or(x, True)
  def __xor__(self, x): return self.bitwise_xor(x)
  def __rxor__(self, x): return self.bitwise_xor(x, True)
  def __lshift__(self, x): return self.lshift(x)
  def __rshift__(self, x): return self.rshift(x)
  def __rlshift__(self, x): return self.lshift(x, True)
  def __rrshift__(self, x): return self.rshift(x, True)

  # ---- dtype ---------------------------------------------------------------------------------

  def cast(self, dtype):
    dt = to_dtype(dtype)
    return self if dt is self.dtype else self._wrap(self._c.cast(dt.key))

  def bitcast(self, dtype):
    """The same bytes read as `dtype` (same itemsize, or the last axis rescaled); not differentiable. With the same
    itemsize it is lazy and a view, as tinygrad's: assign or setitem into it writes into this tensor."""
    dt = to_dtype(dtype)
    if dt.itemsize == 0: raise TypeError(f"[bitcast] dtype {dt.name} has no values: no tensor holds it")
    if self.requires_grad: raise RuntimeError(f"[bitcast] has no gradient: bitcast a detach()ed tensor")
    shape = self.shape
    if dt.itemsize == self.dtype.itemsize: return self._wrap(self._c.bitcast(dt.key))
    # another itemsize: the last axis rescaled, through the host
    if not shape or (shape[-1] * self.dtype.itemsize) % dt.itemsize:
      raise RuntimeError(f"[bitcast] cannot bitcast {self.shape} {self.dtype} to {dt}")
    shape = shape[:-1] + ((shape[-1] * self.dtype.itemsize) // dt.itemsize,)
    return self._wrap(_C.Tensor.from_bytes(self._c.to_bytes(), list(shape), dt.key, self.device))

  def float(self): return self.cast(dtypes.float32)
  def half(self): return self.cast(dtypes.float16)
  def double(self): return self.cast(dtypes.float64)
  def bfloat16(self): return self.cast(dtypes.bfloat16)
  def int(self): return self.cast(dtypes.int32)
  def long(self): return self.cast(dtypes.int64)
  def short(self): return self.cast(dtypes.int16)
  def bool(self): return self.cast(dtypes.bool)

  # ---- math ----------------------------------------------------------------------------------

  def _u(self, name: str, *args): return self._wrap(getattr(self._c, name)(*args))
  def _float(self):
    """This tensor in a float dtype: composites of float math on bool or int inputs would wrap."""
    return self.cast(least_upper_float(self.dtype))
  def log(self): return self._u("log")
  def log2(self): return self._u("log2")
  def exp(self): return self._u("exp")
  def exp2(self): return self._u("exp2")
  def sqrt(self): return self._u("sqrt")
  def rsqrt(self): return self.sqrt().reciprocal()
  def sin(self): return self._u("sin")
  def cos(self): return self._u("cos")
  def tan(self): return self._u("tan")
  def reciprocal(self): return self._u("reciprocal")
  def square(self): return self * self
  def abs(self): return self._u("abs")
  def sign(self): return self._u("sign")
  def trunc(self): return self._u("trunc")
  def floor(self): return self._u("floor")
  def ceil(self): return self._u("ceil")
  def round(self): return self._u("round")
  def isnan(self): return self._u("isnan")
  def isinf(self, detect_positive: bool = True, detect_negative: bool = True): return self._u("isinf", detect_positive, detect_negative)
  def isfinite(self): return self._u("isfinite")
  def sinh(self): x = self._float(); return (x.exp() - x.neg().exp()) / 2
  def cosh(self): x = self._float(); return (x.exp() + x.neg().exp()) / 2
  def atanh(self): x = self._float(); return ((1 + x) / (1 - x)).log() / 2
  def asinh(self): x = self._float(); return (x.abs() + (x.square() + 1).sqrt()).log() * x.sign()
  def acosh(self): x = self._float(); return (x + (x.square() - 1).sqrt()).log()
  def log10(self):
    """Base-10 logarithm (bool and int tensors in float32)."""
    return self._float().log() * (1 / math.log(10))

  def _asin_core(self):
    """asin for |x| <= 0.5: x + x^3 P(x^2), Cephes' asinf minimax polynomial (float32 accuracy)."""
    z = self.square()
    poly = (((4.2163199048e-2 * z + 2.4181311049e-2) * z + 4.5470025998e-2) * z + 7.4953002686e-2) * z + 1.6666752422e-1
    return self + self * z * poly

  def _asin_acos(self, acos: bool):
    # |x| <= 0.5: the polynomial; beyond, asin(x) = sign(x) (pi/2 - 2 asin(sqrt((1 - |x|) / 2))). Each branch gets a
    # harmless input where it is not taken (NaN goes to the first), so that where's zero gradient stays zero.
    x = self._float()
    far = x.abs() > 0.5
    near = far.where(0.0, x)._asin_core()
    xf = far.where(x, 0.75)
    h = 2 * ((1 - xf.abs()) / 2).sqrt()._asin_core()  # pi/2 - asin(|x|), precise near |x| = 1
    if not acos: return far.where((math.pi / 2 - h) * xf.sign(), near)
    return far.where((xf < 0).where(math.pi - h, h), math.pi / 2 - near)

  def asin(self):
    """Inverse sine (NaN outside [-1, 1]), to about float32 precision in every float dtype."""
    return self._asin_acos(False)

  def acos(self):
    """Inverse cosine (NaN outside [-1, 1]), to about float32 precision in every float dtype."""
    return self._asin_acos(True)

  def atan(self):
    """Inverse tangent: asin(x / sqrt(1 + x^2)) for |x| <= 1, sign(x) pi/2 - atan(1/x) beyond."""
    x = self._float()
    far = x.abs() > 1
    xn, xf = far.where(0.0, x), far.where(x, 1.0)
    near = (xn / (1 + xn.square()).sqrt()).asin()
    r = 1 / xf
    return far.where(xf.sign() * (math.pi / 2) - (r / (1 + r.square()).sqrt()).asin(), near)

  def erf(self):
    """Abramowitz and Stegun 7.1.26 (|error| < 1.5e-7)."""
    x = self._float()
    t = 1.0 / (1.0 + 0.3275911 * x.abs())
    poly = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t
    return x.sign() * (1.0 - poly * (-x.square()).exp())

  def clamp(self, min_=None, max_=None):
    if min_ is None and max_ is None: raise RuntimeError(f"[clamp] needs min_, max_ or both")
    if dtypes.is_int(self.dtype):  # an int bound beyond the dtype's range binds nothing
      if isinstance(min_, int) and min_ < dtypes.min(self.dtype): min_ = dtypes.min(self.dtype)
      if isinstance(max_, int) and max_ > dtypes.max(self.dtype): max_ = dtypes.max(self.dtype)
    if dtypes.is_float(self.dtype):  # selects, not maximum/minimum: the gradient is 1 on the bounds, as torch's
      ret = (self < min_).where(min_, self) if min_ is not None else self
      ret = (ret > max_).where(max_, ret) if max_ is not None else ret
      return self.isnan().where(self.detach(), ret)  # NaN stays NaN, with no gradient (torch)
    ret = self.maximum(min_) if min_ is not None else self
    return ret.minimum(max_) if max_ is not None else ret

  def clip(self, min_=None, max_=None): return self.clamp(min_, max_)

  def lerp(self, end, weight):
    if not isinstance(end, self._T): end = self._to_tensor(end)
    if isinstance(weight, self._T): return self._wrap(multi.call("lerp", self._c, end._c, weight._c))
    return self + (end - self) * weight

  def copysign(self, other):
    """|self| with the sign of other (-0.0 counts as negative, as torch); other gets a zero gradient, as torch's."""
    x = self._float()
    other = x._broadcasted(other)[1]
    negative = (other < 0) | ((other == 0) & (other.reciprocal() < 0))
    # other.sign() * 0 (0 for NaN) adds nothing but keeps other in the graph with a zero gradient, as in torch
    return negative.where(-x.abs(), x.abs()) + other.isnan().where(0, other.sign()) * 0

  def logaddexp(self, other):
    x = self._float()
    m = x.maximum(other)
    return ((x - m).exp() + (x._broadcasted(other)[1] - m).exp()).log() + m

  # ---- activations ---------------------------------------------------------------------------

  def relu(self): return self._u("relu")
  def relu6(self): return self._u("relu6")
  def sigmoid(self): return self._u("sigmoid")
  def logsigmoid(self): return -(-self._float()).softplus()
  def hardsigmoid(self, alpha: float = 1 / 6, beta: float = 0.5): return (alpha * self + beta).relu() - (alpha * self + beta - 1).relu()
  def tanh(self): return self._u("tanh")
  def gelu(self, approximate: str = "tanh"):
    """GELU: x * Phi(x) with approximate="none", the tanh approximation (tinygrad's default) with "tanh"."""
    if approximate == "tanh": return self._u("gelu")
    if approximate == "none": x = self._float(); return 0.5 * x * (1 + (x * (1 / math.sqrt(2))).erf())
    raise RuntimeError(f"[gelu] approximate={approximate!r} is not supported: 'none' or 'tanh'")
  def quick_gelu(self): return self._u("quick_gelu")
  def silu(self): return self._u("silu")
  def swish(self): return self.silu()
  def mish(self): return self._u("mish")
  def hardswish(self): return self._u("hardswish")
  def softsign(self): x = self._float(); return x / (1 + x.abs())
  def leaky_relu(self, neg_slope: float = 0.01): return self._u("leaky_relu", float(neg_slope))
  def softplus(self, beta: float = 1.0): return self._u("softplus", float(beta))
  def elu(self, alpha: float = 1.0): return self._u("elu", float(alpha))
  def celu(self, alpha: float = 1.0): return self.maximum(0) + (alpha * ((self / alpha).exp() - 1)).minimum(0)
  def hardtanh(self, min_val: float = -1, max_val: float = 1): return self._u("hardtanh", float(min_val), float(max_val))

  def selu(self, alpha: float = 1.67326, gamma: float = 1.0507):
    if math.isclose(alpha, 1.67326, rel_tol=1e-5) and math.isclose(gamma, 1.0507, rel_tol=1e-5): return self._u("selu")
    return gamma * (self >= 0).detach().where(self, alpha * (self.exp() - 1))
