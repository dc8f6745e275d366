"""GT: eager, PyTorch-like tensors that run on a shared cluster of workers.

``import gt`` does no work; the first op connects to ``$GT_DISPATCHER`` or starts a local
dispatcher with ``$GT_WORKERS`` workers (default 1) in the background.
"""

from __future__ import annotations

from gt.errors import DispatcherLost, GTError, GTTimeout, ShapeError, WorkerError, WorkerLost
from gt.factories import (
    arange,
    eye,
    from_numpy,
    full,
    full_like,
    manual_seed,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    sync,
    tensor,
    zeros,
    zeros_like,
)
from gt.session import connect, disconnect, gpu_workers
from gt.tensor import Tensor

float16 = "float16"
float32 = "float32"
float64 = "float64"
int32 = "int32"
int64 = "int64"
bool_ = "bool"
uint8 = "uint8"
int8 = "int8"
float = float32  # noqa: A001 - PyTorch spells these as module attributes too
double = float64
long = int64
half = float16

__version__ = "0.1.0"

__all__ = [
    "DispatcherLost",
    "GTError",
    "GTTimeout",
    "ShapeError",
    "Tensor",
    "WorkerError",
    "WorkerLost",
    "arange",
    "connect",
    "disconnect",
    "eye",
    "from_numpy",
    "full",
    "full_like",
    "gpu_workers",
    "manual_seed",
    "ones",
    "ones_like",
    "rand",
    "rand_like",
    "randint",
    "randn",
    "randn_like",
    "sync",
    "tensor",
    "zeros",
    "zeros_like",
]
