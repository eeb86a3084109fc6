#!/usr/bin/python3
"""PyTorch reference for bench_train.cc: median ms of a float32 2x2 max_pool2d on the CPU (eager).
argv: threads, batch, channels, size, mode (fwd: forward only; fwdbwd: forward, then the input
gradient of its sum). Prints one number."""
import statistics
import sys
import time

import torch

threads, n, c, size = (int(a) for a in sys.argv[1:5])
mode = sys.argv[5]
torch.set_num_threads(threads)
torch.manual_seed(0)
x = torch.rand(n, c, size, size, requires_grad=mode == "fwdbwd")


def run():
    y = torch.nn.functional.max_pool2d(x, 2)
    if mode == "fwdbwd":
        (g,) = torch.autograd.grad(y.sum(), x)


for _ in range(2):
    run()
times = []
for _ in range(7):
    t0 = time.perf_counter()
    run()
    times.append(time.perf_counter() - t0)
print(statistics.median(times) * 1000)
