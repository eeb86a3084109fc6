#!/usr/bin/python3
"""Tiny-op latency through a Python API, for bench_train.cc. Arguments: LIB MODE [PATH...].
LIB is baregrad or torch; PATHs go first on sys.path (baregrad's package and built extension).
MODE single: `(a + 1)` on 16 floats, realized and synchronized, per op.
MODE chain: 1,000 chained `x = x + 1`, each realized, synchronized once, per op.
MODE mul: `(a * b)` of two 16-float tensors, realized and synchronized, per op.
MODE setitem: `t[i] = 1.5` into a 4096x64 float buffer (i cycling over 256 rows), synchronized, per op.
MODE iadd: `t[i:i+2] += 1.5` on that buffer (i cycling over 256 rows), synchronized, per op.
MODE rows: `t[i] = 1.5` into that buffer, each row once (512 rows per run, none written before), synchronized, per op.
Prints the median over repetitions in microseconds, one number."""
import statistics
import sys
import time

lib, mode = sys.argv[1], sys.argv[2]
sys.path[:0] = sys.argv[3:]
if lib == "torch":
  import torch
  torch.set_num_threads(1)
  a, b, big = torch.rand(16), torch.rand(16), torch.rand(4096, 64)
  def add1(x): return x + 1
  def mul(x, y): return x * y
  def sync(): pass
else:
  from baregrad import Device, Tensor
  a, b, big = Tensor.rand(16).realize(), Tensor.rand(16).realize(), Tensor.rand(4096, 64).realize()
  dev = Device[Device.DEFAULT]
  def add1(x): return (x + 1).realize()
  def mul(x, y): return (x * y).realize()
  def sync(): dev.synchronize()

def single(n=2000):
  t0 = time.perf_counter()
  for _ in range(n):
    add1(a)
    sync()
  return (time.perf_counter() - t0) / n

def chain(n=1000):
  t0 = time.perf_counter()
  x = a
  for _ in range(n): x = add1(x)
  sync()
  return (time.perf_counter() - t0) / n

def binary(n=2000):
  t0 = time.perf_counter()
  for _ in range(n):
    mul(a, b)
    sync()
  return (time.perf_counter() - t0) / n

def setitem(n=2000):
  t0 = time.perf_counter()
  for i in range(n):
    big[i % 256] = 1.5
    sync()
  return (time.perf_counter() - t0) / n

def iadd(n=2000):
  t0 = time.perf_counter()
  for i in range(n):
    big[i % 256:i % 256 + 2] += 1.5
    sync()
  return (time.perf_counter() - t0) / n

runs = iter(range(8))
def rows(n=512):
  k = next(runs)
  t0 = time.perf_counter()
  for i in range(k * n, (k + 1) * n):
    big[i] = 1.5
    sync()
  return (time.perf_counter() - t0) / n

fn = {"single": single, "chain": chain, "mul": binary, "setitem": setitem, "iadd": iadd, "rows": rows}[mode]
fn()  # warm up: compiles, caches
print(statistics.median(fn() for _ in range(7)) * 1e6)
