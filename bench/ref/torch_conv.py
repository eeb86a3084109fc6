#!/usr/bin/python3
"""PyTorch reference for bench_train.cc: median ms of a float32 conv2d forward on the CPU (eager,
oneDNN where torch has it). argv: threads, batch, cin, cout, size, kernel, padding. Prints one
number."""
import statistics
import sys
import time

import torch

threads, n, cin, cout, size, k, pad = (int(a) for a in sys.argv[1:8])
torch.set_num_threads(threads)
torch.manual_seed(0)
x = torch.rand(n, cin, size, size)
w = torch.rand(cout, cin, k, k)
for _ in range(2):
    torch.nn.functional.conv2d(x, w, padding=pad)
times = []
for _ in range(7):
    t0 = time.perf_counter()
    torch.nn.functional.conv2d(x, w, padding=pad)
    times.append(time.perf_counter() - t0)
print(statistics.median(times) * 1000)
