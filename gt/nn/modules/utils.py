"""``gt.nn.modules.utils``: where code written for PyTorch finds ``torch.nn.modules.utils`` (the
tuple helpers of layer constructors and ``consume_prefix_in_state_dict_if_present``)."""

from __future__ import annotations

import collections.abc
from itertools import repeat
from typing import Any

__all__ = [
    "_ntuple",
    "_pair",
    "_quadruple",
    "_reverse_repeat_tuple",
    "_single",
    "_triple",
    "consume_prefix_in_state_dict_if_present",
]


def _ntuple(n: int, name: str = "parse") -> Any:
    def parse(x: Any) -> tuple:
        if isinstance(x, collections.abc.Iterable):
            return tuple(x)
        return tuple(repeat(x, n))

    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")
_quadruple = _ntuple(4, "_quadruple")


def _reverse_repeat_tuple(t: tuple, n: int) -> tuple:
    """``t`` reversed, each element repeated ``n`` times (``(1, 2), 2 -> (2, 2, 1, 1)``)."""
    return tuple(x for x in reversed(t) for _ in range(n))


def consume_prefix_in_state_dict_if_present(state_dict: dict, prefix: str) -> None:
    """Strip ``prefix`` from the keys of ``state_dict`` that have it (and from its ``_metadata``),
    in place: a checkpoint saved from a ``DistributedDataParallel`` wrapper (``"module."``) loads
    into the bare model."""
    for key in list(state_dict.keys()):
        if key.startswith(prefix):
            state_dict[key[len(prefix) :]] = state_dict.pop(key)
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is not None:
        for key in list(metadata.keys()):
            # '' is the wrapper's own entry; 'module' the model's; 'module.x' the rest
            if key and (key == prefix.replace(".", "") or key.startswith(prefix)):
                metadata[key[len(prefix) :]] = metadata.pop(key)
