"""``gt.optim``: optimizers and learning-rate schedulers with PyTorch's names and formulas.

``SGD`` (momentum, weight decay, Nesterov), ``Adam``/``AdamW`` (amsgrad), ``RMSprop`` (centered,
momentum), ``Adagrad``; ``gt.optim.lr_scheduler`` holds the schedulers. Optimizer state and
``state_dict`` follow PyTorch's layout.
"""

from __future__ import annotations

from gt.optim import lr_scheduler
from gt.optim.adam import Adam, AdamW
from gt.optim.adaptive import Adagrad, RMSprop
from gt.optim.optimizer import Optimizer
from gt.optim.sgd import SGD

__all__ = ["SGD", "Adagrad", "Adam", "AdamW", "Optimizer", "RMSprop", "lr_scheduler"]
