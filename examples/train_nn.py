"""A PyTorch-style training loop with gt.nn and gt.optim: a 2-layer MLP learns XOR-like classes.

python examples/train_nn.py [steps]           # auto-starts a local cluster
gt run --record nn.gtrace examples/train_nn.py  # with the dashboard, recorded
"""

import sys

import numpy as np

import gt
import gt.nn as nn
import gt.nn.functional as F

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300
gt.manual_seed(0)
rng = np.random.default_rng(0)
x_np = rng.uniform(-1, 1, size=(512, 2)).astype(np.float32)
y_np = ((x_np[:, 0] > 0) ^ (x_np[:, 1] > 0)).astype(np.int64)  # XOR of the signs
x, y = gt.from_numpy(x_np), gt.from_numpy(y_np)

model = nn.Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, 2))
opt = gt.optim.Adam(model.parameters(), lr=0.01)
for step in range(steps):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    if step % 100 == 0:
        gt.mark(f"step {step}")
        print(f"step {step:4d} loss {loss.item():.4f}", flush=True)
with gt.no_grad():
    accuracy = (model(x).argmax(dim=1) == y).float().mean().item()
print(f"final loss {loss.item():.4f}, accuracy {accuracy:.3f}")
