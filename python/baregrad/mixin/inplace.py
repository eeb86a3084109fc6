"""The in-place operators (`t += x`, `t[k] *= 2`, ...): each assigns the result to the tensor, as
tinygrad's, so the tensor keeps its buffer and every view of it sees the new values."""
from __future__ import annotations


class InPlaceMixin:
  __slots__ = ()

  def __iadd__(self, x): return self.assign(self.add(x))
  def __isub__(self, x): return self.assign(self.sub(x))
  def __imul__(self, x): return self.assign(self.mul(x))
  def __itruediv__(self, x): return self.assign(self.div(x))
  def __ifloordiv__(self, x): return self.assign(self.__floordiv__(x))
  def __imod__(self, x): return self.assign(self.mod(x))
  def __ipow__(self, x): return self.assign(self.pow(x))
  def __imatmul__(self, x): return self.assign(self.matmul(x))
  def __iand__(self, x): return self.assign(self.bitwise_and(x))
  def __ior__(self, x): return self.assign(self.bitwise_or(x))
  def __ixor__(self, x): return self.assign(self.bitwise_xor(x))
  def __ilshift__(self, x): return self.assign(self.lshift(x))
  def __irshift__(self, x): return self.assign(self.rshift(x))
