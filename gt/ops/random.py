"""The client's random seed: what ``gt.manual_seed`` sets and every random op draws from.

Random numbers are made on the workers from a seed the client picks per op, so results do not
depend on which worker (or how many) make them.
"""

from __future__ import annotations

import itertools
import random

_seed_base = random.SystemRandom().getrandbits(40)
_seed_counter = itertools.count()


def manual_seed(seed: int) -> None:
    """Make the random factories reproducible from this point on."""
    global _seed_base, _seed_counter
    _seed_base = int(seed) & ((1 << 40) - 1)
    _seed_counter = itertools.count()


def next_seed() -> int:
    """The seed of the next random op."""
    return (_seed_base << 22) + next(_seed_counter)


def random_attrs(shape: tuple[int, ...], dtype: str, **extra: object) -> dict:
    """The attributes of a random creation op (``randn``, ``rand``, ``randint``)."""
    return {"shape": list(shape), "dtype": dtype, "seed": next_seed(), **extra}
