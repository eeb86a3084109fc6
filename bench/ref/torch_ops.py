#!/usr/bin/python3
"""PyTorch reference for bench_train.cc's tensor-op rows: median ms of one op on the CPU (eager).
argv: threads, op. Ops (the shapes match bench_train.cc):
  sum1      x.sum(1) of a 4096x4096 float32 matrix
  softmax   x.softmax(-1) of a 4096x4096 float32 matrix
  convstep  conv2d 32x64x56x56 -> 64, 3x3, pad 1, forward, then the gradients of the output's
            sum for the input and the weight
  batch     x[idx]: 512 random rows of a 60000x784 uint8 matrix
  embed     x[idx]: 1024 random rows of a 50257x768 float32 matrix
  pairs     x[:, i, j]: a 10x100x200 float32 tensor at 50x60 random (i, j) pairs
  pool N    2x2 max_pool2d of N x 64 x 56 x 56
  poolstep N  the same, then the input gradient of the output's sum
Prints one number."""
import statistics
import sys
import time

import torch

threads, op = int(sys.argv[1]), sys.argv[2]
torch.set_num_threads(threads)
torch.manual_seed(0)
if op in ("sum1", "softmax"):
    x = torch.rand(4096, 4096)
    run = (lambda: x.sum(1)) if op == "sum1" else (lambda: x.softmax(-1))
elif op in ("batch", "embed"):
    n, width, picks = (60000, 784, 512) if op == "batch" else (50257, 768, 1024)
    x = (torch.rand(n, width) * 255).to(torch.uint8) if op == "batch" else torch.rand(n, width)
    idx = torch.randint(0, n, (picks,))
    run = lambda: x[idx]  # noqa: E731
elif op == "pairs":
    x = torch.rand(10, 100, 200)
    i, j = torch.randint(0, 100, (50, 60)), torch.randint(0, 200, (50, 60))
    run = lambda: x[:, i, j]  # noqa: E731
elif op == "convstep":
    x = torch.rand(32, 64, 56, 56, requires_grad=True)
    w = torch.rand(64, 64, 3, 3, requires_grad=True)

    def run():
        y = torch.nn.functional.conv2d(x, w, padding=1)
        torch.autograd.grad(y.sum(), (x, w))
elif op in ("pool", "poolstep"):
    x = torch.rand(int(sys.argv[3]), 64, 56, 56, requires_grad=op == "poolstep")

    def run():
        y = torch.nn.functional.max_pool2d(x, 2)
        if op == "poolstep":
            torch.autograd.grad(y.sum(), x)
else:
    raise SystemExit(f"unknown op {op}")
for _ in range(2):
    run()
times = []
for _ in range(7):
    t0 = time.perf_counter()
    run()
    times.append(time.perf_counter() - t0)
print(statistics.median(times) * 1000)
