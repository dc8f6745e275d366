"""``gt.optim``: optimizers and learning-rate schedulers with PyTorch's names and formulas.

``SGD`` (momentum, weight decay, Nesterov), ``Adam``/``AdamW`` (amsgrad), ``RMSprop`` (centered,
momentum), ``Adagrad``, ``Adadelta``, ``Adamax``, ``NAdam``, ``RAdam``, ``ASGD``, ``Rprop``,
``Adafactor`` and ``LBFGS`` (with the strong-Wolfe line search); ``gt.optim.lr_scheduler`` holds
the schedulers. Optimizer state and ``state_dict`` follow PyTorch's layout.
"""

from __future__ import annotations

from gt.optim import lr_scheduler
from gt.optim.adadelta_asgd import ASGD, Adadelta
from gt.optim.adafactor import Adafactor
from gt.optim.adam import Adam, AdamW
from gt.optim.adam_variants import Adamax, NAdam, RAdam
from gt.optim.adaptive import Adagrad, RMSprop
from gt.optim.lbfgs import LBFGS
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
    "Adam",
    "AdamW",
    "Adamax",
    "NAdam",
    "Optimizer",
    "RAdam",
    "RMSprop",
    "Rprop",
    "lr_scheduler",
]
