"""``gt.nn``: modules, layers and losses with PyTorch's names.

``gt.nn.functional`` holds the same computations as functions; ``gt.nn.init`` the initializers;
``gt.nn.utils`` gradient clipping. ``gt.nn.SGD`` is ``gt.optim.SGD``, kept for the prototype's users.
"""

from __future__ import annotations

from gt.nn import functional, init, utils
from gt.nn.functional import (
    binary_cross_entropy,
    cross_entropy,
    mse_loss,
    relu,
    sigmoid,
    tanh,
)
from gt.nn.layers import (
    GELU,
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    Dropout,
    Embedding,
    Flatten,
    Identity,
    L1Loss,
    LayerNorm,
    Linear,
    LogSoftmax,
    MSELoss,
    NLLLoss,
    ReLU,
    Sigmoid,
    SiLU,
    Softmax,
    Tanh,
)
from gt.nn.module import Module, ModuleDict, ModuleList, Parameter, Sequential
from gt.optim import SGD


def cross_entropy_loss(logits, targets):  # noqa: ANN001, ANN201 - the prototype's spelling
    """The prototype's name for :func:`gt.nn.functional.cross_entropy`."""
    return cross_entropy(logits, targets)


__all__ = [
    "BCELoss",
    "BCEWithLogitsLoss",
    "CrossEntropyLoss",
    "Dropout",
    "Embedding",
    "Flatten",
    "GELU",
    "Identity",
    "L1Loss",
    "LayerNorm",
    "Linear",
    "LogSoftmax",
    "MSELoss",
    "Module",
    "ModuleDict",
    "ModuleList",
    "NLLLoss",
    "Parameter",
    "ReLU",
    "SGD",
    "Sequential",
    "SiLU",
    "Sigmoid",
    "Softmax",
    "Tanh",
    "binary_cross_entropy",
    "cross_entropy",
    "cross_entropy_loss",
    "functional",
    "init",
    "mse_loss",
    "relu",
    "sigmoid",
    "tanh",
    "utils",
]
