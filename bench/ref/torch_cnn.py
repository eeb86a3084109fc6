#!/usr/bin/python3
"""PyTorch reference for bench_train.cc: median ms of one Adam step of the beautiful_mnist model
(conv5-conv5-BN-pool-conv3-conv3-BN-pool-linear) on random 28x28 images. argv: threads, batch.
Prints one number."""
import statistics
import sys
import time

import torch

threads, batch = int(sys.argv[1]), int(sys.argv[2])
torch.set_num_threads(threads)
torch.manual_seed(0)
nn = torch.nn
model = nn.Sequential(nn.Conv2d(1, 32, 5), nn.ReLU(), nn.Conv2d(32, 32, 5), nn.ReLU(), nn.BatchNorm2d(32),
                      nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(), nn.Conv2d(64, 64, 3), nn.ReLU(),
                      nn.BatchNorm2d(64), nn.MaxPool2d(2), nn.Flatten(1), nn.Linear(576, 10))
opt = torch.optim.Adam(model.parameters())
x = torch.rand(batch, 1, 28, 28)
y = torch.arange(batch) % 10


def step():
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()


step()
times = []
for _ in range(3):
    t0 = time.perf_counter()
    step()
    times.append(time.perf_counter() - t0)
print(statistics.median(times) * 1000)
