"""``gt.optim``: optimizers and learning-rate schedulers with PyTorch's names and formulas.

``SGD`` (momentum, weight decay, Nesterov), ``Adam``/``AdamW`` (amsgrad), ``RMSprop`` (centered,
momentum), ``Adagrad``, ``Adadelta``, ``Adamax``, ``NAdam``, ``RAdam``, ``ASGD``, ``Rprop``,
``Adafactor``, ``Muon`` (2-d parameters) and ``LBFGS`` (with the strong-Wolfe line search); ``gt.optim.lr_scheduler`` holds
the schedulers, ``gt.optim.swa_utils`` weight averaging (``AveragedModel``, ``SWALR``,
``update_bn``). Optimizer state and ``state_dict`` follow PyTorch's layout.
"""

from __future__ import annotations

import importlib
from typing import Any

from gt.optim import lr_scheduler
from gt.optim.adadelta_asgd import ASGD, Adadelta
from gt.optim.adafactor import Adafactor
from gt.optim.adam import Adam, AdamW
from gt.optim.adam_variants import Adamax, NAdam, RAdam
from gt.optim.adaptive import Adagrad, RMSprop, SparseAdam
from gt.optim.lbfgs import LBFGS
from gt.optim.muon import Muon
from gt.optim.optimizer import Optimizer
from gt.optim.rprop import Rprop
from gt.optim.sgd import SGD

__all__ = [
    "ASGD",
    "LBFGS",
    "SGD",
    "Adadelta",
    "Adafactor",
    "Adagrad",
    "SparseAdam",
    "Adam",
    "AdamW",
    "Adamax",
    "Muon",
    "NAdam",
    "Optimizer",
    "RAdam",
    "RMSprop",
    "Rprop",
    "lr_scheduler",
    "swa_utils",
]


def __getattr__(name: str) -> Any:
    # ``swa_utils`` builds on ``gt.nn``, whose package imports this one: load it on first use.
    if name == "swa_utils":
        return importlib.import_module("gt.optim.swa_utils")
    raise AttributeError(f"module 'gt.optim' has no attribute {name!r}")
