"""What programs print: tensor reprs (padding, precision, dtypes, summaries) and ``print(model)``.

Strings are compared with ``torch.`` read as ``gt.`` (the module name in dtype suffixes).
"""

from __future__ import annotations

import numpy as np

from programs import program
from programs.common import arr


@program
def tensor_reprs(torch):
    cases = {
        "nan_inf_one": torch.tensor([float("nan"), float("inf"), 1.0]),
        "nan_neg_inf_frac": torch.tensor([float("nan"), -float("inf"), 1.5]),
        "sci": torch.tensor([1e-5, 1.0, 100.0]),
        "zeros": torch.zeros(2, 2),
        "ints": torch.tensor([[1, -20], [300, 4]]),
        "bools": torch.tensor([True, False]),
        "float64": torch.tensor([1.25, 2.5], dtype=torch.float64),
        "int32": torch.tensor([1, 2], dtype=torch.int32),
        "scalar": torch.tensor(3.14159),
        "scalar_int": torch.tensor(7),
        "empty": torch.zeros(0),
        "empty_2d": torch.zeros(0, 3),
        "big": torch.arange(2000.0).reshape(40, 50),
        "long_row": torch.tensor(arr(1, 30)),
        "requires_grad": torch.ones(2, requires_grad=True),
        "negative": torch.tensor([-1.5, 2.25, -0.125]),
        "large_ints_float": torch.tensor([1e9, 1.0]),
        "3d": torch.tensor(arr(2, 2, 2, 3)),
        "half_like_values": torch.tensor([0.1, 0.2, 0.3]),
    }
    return {k: repr(v) for k, v in cases.items()}


@program
def str_of_parameters_and_items(torch):
    p = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    t = torch.tensor([0.5, 0.25])
    return {"param": repr(p), "str": str(t), "format": f"{t.sum():.3f}", "item": str(t[0].item()),
            "list": str(t.tolist()), "fstring": f"loss {torch.tensor(0.123456).item():.4f}"}  # fmt: skip


@program
def print_models(torch):
    nn = torch.nn
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Dropout(0.1), nn.LayerNorm(4), nn.Embedding(10, 4, padding_idx=0), nn.LeakyReLU(0.2),
        nn.Softmax(dim=-1), nn.Flatten(), nn.GELU(), nn.MSELoss(), nn.CrossEntropyLoss(),
        nn.AdaptiveAvgPool2d(1), nn.AvgPool2d(2), nn.GroupNorm(2, 8), nn.RMSNorm(4),
        nn.MultiheadAttention(8, 2), nn.Conv1d(2, 4, 3, stride=2), nn.ELU(), nn.Tanh(),
        nn.Identity(), nn.SiLU(), nn.Sigmoid(), nn.LogSoftmax(dim=1), nn.Upsample(scale_factor=2),
        nn.BatchNorm1d(4), nn.SmoothL1Loss(), nn.BCEWithLogitsLoss(), nn.Linear(2, 2, bias=False),
        nn.ModuleList([nn.ReLU()]), nn.Unflatten(1, (2, 2)), nn.Softplus(), nn.Mish(),
        nn.Hardtanh(), nn.ReLU6(), nn.LayerNorm((2, 3), elementwise_affine=False),
        nn.HuberLoss(), nn.NLLLoss(), nn.L1Loss(), nn.BCELoss(), nn.KLDivLoss(reduction="batchmean"),
        nn.MaxPool1d(2), nn.AdaptiveAvgPool1d(1), nn.ConvTranspose2d(4, 2, 2, stride=2),
        nn.Dropout2d(0.1), nn.PReLU(), nn.Conv2d(2, 2, (3, 1), stride=2, bias=False, groups=2,
                                                 dilation=2),
        nn.MaxPool2d(3, stride=1, padding=1), nn.AvgPool1d(3), nn.Embedding(5, 2),
        nn.GELU("tanh"), nn.Softmax(), nn.ModuleDict({"a": nn.ReLU()}),
        nn.Upsample(size=(4, 4), mode="bilinear"),
    )  # fmt: skip
    return {"model": repr(model)}


@program
def print_nested_and_repeated_modules(torch):
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.act = nn.ReLU(inplace=True)

        def forward(self, x):
            return self.act(self.fc(x))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([Block() for _ in range(3)])
            self.extra = nn.ModuleList([nn.Linear(4, 2), nn.Linear(4, 2), nn.Tanh()])
            self.head = nn.Sequential(nn.Linear(4, 2))

    enc = nn.TransformerEncoderLayer(8, 2, 16)
    return {"net": repr(Net()), "encoder_layer": repr(enc), "empty": repr(nn.Sequential()),
            "empty_list": repr(nn.ModuleList())}  # fmt: skip


@program
def print_during_training(torch):
    model = torch.nn.Linear(2, 1)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[0.5, -0.25]]))
        model.bias.fill_(0.1)
    x = torch.tensor(np.array([[1.0, 2.0], [3.0, -1.0]], np.float32))
    out = model(x)
    lines = [f"out: {out.detach()}", f"weight: {model.weight}", f"loss={out.mean().item():.5f}",
             f"grad: {model.weight.grad}"]  # fmt: skip
    out.sum().backward()
    lines.append(f"grad after: {model.weight.grad}")
    lines.append(f"detached: {out.detach()}")
    return {"lines": "\n".join(lines)}


@program
def print_tensor_with_grad_fn(torch):
    """PyTorch names the backward node of the op that made a tensor (``AddmmBackward0`` for a
    Linear layer, though GT runs it as a matmul and an add)."""
    model = torch.nn.Linear(2, 1)
    with torch.no_grad():
        model.weight.fill_(0.5)
        model.bias.fill_(0.25)
    x = torch.ones(1, 2)
    out = model(x)
    return {"linear_out": repr(out), "shape": repr(out.shape), "size": repr(out.size()),
            "sum": repr((x.requires_grad_() * 2).sum())}  # fmt: skip
