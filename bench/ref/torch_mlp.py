#!/usr/bin/python3
"""PyTorch reference for bench_train.cc: median ms of one Adam step of an MLP 784-512-512-10 at
batch 128 on the CPU, with the thread count given as argv[1]. Prints one number."""
import statistics
import sys
import time

import torch

torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
torch.manual_seed(1)
model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                            torch.nn.ReLU(), torch.nn.Linear(512, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x = torch.randn(128, 784)
y = torch.arange(128) % 10


def step():
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()


for _ in range(5):
    step()
times = []
deadline = time.perf_counter() + 1.0
while len(times) < 20 or time.perf_counter() < deadline:
    t0 = time.perf_counter()
    step()
    times.append((time.perf_counter() - t0) * 1e3)
print(f"{statistics.median(times):.4f}")
