"""Write the PyTorch checkpoints that ``tests/integration/test_torch_checkpoints.py`` reads with
``gt.load``, and check that PyTorch reads what ``gt.save`` writes.

PyTorch is not a dependency of GT or of its tests: run this by hand where it is installed, after
changing the checkpoint format code (``gt/serialization_torch.py``), and commit the files::

    python scripts/make_torch_checkpoints.py          # write tests/support/torch_checkpoints/
    python scripts/make_torch_checkpoints.py --check  # also: torch.load of gt.save's files

Every value is made from ``arange`` (the test rebuilds it with NumPy), so no expected values are
stored beside the files.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "support" / "torch_checkpoints"


def contents(torch):  # noqa: ANN001, ANN201 - ``torch`` or ``gt``
    """The objects saved (the same code builds them with either library)."""
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    with torch.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(torch.arange(p.numel(), dtype=torch.float32).reshape(p.shape) / 10 - i)
    base = torch.arange(12, dtype=torch.float64)
    return model, {
        "state_dict": model.state_dict(),
        "float16": torch.arange(5, dtype=torch.float16) / 4,
        "int8": torch.arange(-3, 3, dtype=torch.int8),
        "uint8": torch.arange(250, 256, dtype=torch.int64).to(torch.uint8),
        "int64": torch.arange(4) * 2**40,
        "uint16": torch.tensor([1, 65535], dtype=torch.uint16),
        "bool": torch.tensor([True, False, True]),
        "complex64": torch.tensor([1 + 2j, -0.5j]),
        "scalar": torch.tensor(2.5, dtype=torch.float64),
        "empty": torch.zeros(0, 3),
        "transposed": base.reshape(3, 4).t(),
        "slice": base[2:9:3],
        "parameter": torch.nn.Parameter(torch.arange(3.0)),
        "needs_grad": torch.arange(2.0).requires_grad_(),
        "sparse": torch.tensor([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]]).to_sparse(),
        "csr": torch.eye(3).to_sparse_csr(),
        "size": torch.Size([2, 3]),
        "dtype": torch.float16,
        "device": torch.device("cpu"),
        "python": {"step": 7, "name": "run-1", "lrs": [0.1, 0.01], "raw": b"\x00\x01"},
    }


def write(torch) -> None:  # noqa: ANN001
    OUT.mkdir(parents=True, exist_ok=True)
    model, saved = contents(torch)
    torch.save(saved, OUT / "mixed.pt")
    torch.save(model, OUT / "whole_model.pt")
    torch.save({"bfloat16": torch.arange(5).to(torch.bfloat16) / 8}, OUT / "bfloat16.pt")
    torch.save({"w": torch.ones(2)}, OUT / "legacy.pt", _use_new_zipfile_serialization=False)
    print(f"wrote {sorted(p.name for p in OUT.glob('*.pt'))} with torch {torch.__version__}")


def check(torch) -> int:  # noqa: ANN001
    """``torch.load`` of what ``gt.save`` writes equals PyTorch's own objects."""
    import gt  # noqa: PLC0415

    _, want = contents(torch)
    _, mine = contents(gt)
    buf = io.BytesIO()
    gt.save(mine, buf)
    got = torch.load(io.BytesIO(buf.getvalue()))
    bad = []
    for key, value in want.items():
        other = got[key]
        if isinstance(value, torch.Tensor) and value.layout != torch.strided:
            same = other.layout == value.layout and torch.equal(other.to_dense(), value.to_dense())
        elif isinstance(value, torch.Tensor):
            same = (type(other) is type(value) and other.dtype == value.dtype
                    and other.shape == value.shape and other.requires_grad == value.requires_grad
                    and torch.equal(other.detach(), value.detach()))  # fmt: skip
        elif isinstance(value, dict) and key == "state_dict":
            same = list(other) == list(value) and all(
                torch.equal(other[k], value[k]) for k in value
            )
        else:
            same = other == value and type(other) is type(value)
        if not same:
            bad.append(key)
    print("torch.load(gt.save(...)):", "all equal" if not bad else f"different: {bad}")
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    model.load_state_dict(got["state_dict"])
    x = np.ones((1, 3), np.float32)
    print("a PyTorch model from GT's state dict:", model(torch.tensor(x)).tolist())
    return 1 if bad else 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="also load gt.save's files with torch")
    args = parser.parse_args(argv)
    import torch  # noqa: PLC0415 - only this script needs it

    write(torch)
    return check(torch) if args.check else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
