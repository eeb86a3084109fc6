#!/usr/bin/python3
"""PyTorch reference for bench_hcq.cc: median microseconds of an eager add of two 16-float
tensors on the CPU (one thread). Prints one number."""
import statistics
import time

import torch

torch.set_num_threads(1)
a = torch.randn(16)
b = torch.randn(16)
for _ in range(1000):
    a + b
times = []
for _ in range(10000):
    t0 = time.perf_counter_ns()
    a + b
    times.append(time.perf_counter_ns() - t0)
print(statistics.median(times) / 1000)
