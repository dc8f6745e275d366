"""GT: eager, PyTorch-like tensors that run on a shared cluster of workers.

``import gt`` does no work; the first op connects to ``$GT_DISPATCHER`` or starts a local
dispatcher with ``$GT_WORKERS`` workers (default 1) in the background.
"""

from __future__ import annotations

import math as _math

from gt import amp, backends, config, cuda, nn, optim, signal, utils
from gt.amp import autocast
from gt.autograd import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
)
from gt.config import load_config
from gt.errors import (
    DispatcherLost,
    GTError,
    GTTimeout,
    OutOfMemory,
    ShapeError,
    WorkerError,
    WorkerLost,
)
from gt.factories import (
    arange,
    bernoulli,
    empty,
    empty_like,
    eye,
    from_numpy,
    full,
    full_like,
    linspace,
    normal,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randint_like,
    randn,
    randn_like,
    randperm,
    sync,
    tensor,
    zeros,
    zeros_like,
)
from gt.hotpath import HotFunction, hot
from gt.ops.device import device
from gt.ops.functional import *  # noqa: F403 - gt.exp(x), gt.cat([...]), ... (see its __all__)
from gt.ops.functional import __all__ as _functional_names
from gt.ops.random import Generator, manual_seed
from gt.ops.typeinfo import Size, finfo, get_default_dtype, iinfo
from gt.serialization import load, save
from gt.session import connect, disconnect, gpu_workers, mark
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
int = int32  # noqa: A001
bool = "bool"  # noqa: A001 - the prototype's spelling (gt.bool_ is kept too)

inf = _math.inf
nan = _math.nan
pi = _math.pi
e = _math.e

__version__ = "0.1.0"

__all__ = [
    *_functional_names,
    "Generator",
    "HotFunction",
    "hot",
    "amp",
    "autocast",
    "bernoulli",
    "normal",
    "Size",
    "backends",
    "cuda",
    "device",
    "e",
    "finfo",
    "get_default_dtype",
    "iinfo",
    "inf",
    "load",
    "nan",
    "pi",
    "save",
    "utils",
    "bool",
    "config",
    "load_config",
    "signal",
    "empty",
    "empty_like",
    "enable_grad",
    "inference_mode",
    "is_grad_enabled",
    "linspace",
    "nn",
    "no_grad",
    "optim",
    "randint_like",
    "randperm",
    "set_grad_enabled",
    "DispatcherLost",
    "GTError",
    "GTTimeout",
    "ShapeError",
    "Tensor",
    "OutOfMemory",
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
    "mark",
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
