"""The client's random seed: what ``gt.manual_seed`` sets and every random op draws from.

Random numbers are made on the workers from a seed the client picks per op, so results do not
depend on which worker (or how many) make them.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

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


def random_attrs(
    shape: tuple[int, ...], dtype: str, generator: Any = None, **extra: object
) -> dict:
    """The attributes of a random creation op (``randn``, ``rand``, ``randint``), with a seed from
    ``generator`` (a :class:`Generator`) or else from the global one."""
    seed = next_seed() if generator is None else generator.next_seed()
    return {"shape": list(shape), "dtype": dtype, "seed": seed, **extra}


def poisson(input: Any, generator: Any = None) -> Any:  # noqa: A002 - PyTorch's name
    """Poisson counts with the rates ``input`` (same shape and dtype; zero gradient)."""
    seed = next_seed() if generator is None else generator.next_seed()
    rates = checked_values(
        input, "nonnegative", "invalid Poisson rate, expected rate to be non-negative"
    )
    return rates._apply("poisson", [rates], {"seed": seed})


def state_bytes(base: int, pos: int) -> Any:
    """A stream's seed and position as 16 bytes (little-endian int64s), a uint8 array."""
    import numpy as np  # noqa: PLC0415 - (this module is imported by ``import gt`` itself)

    return np.array([base, pos], dtype="<i8").view(np.uint8)


def state_pair(state: Any) -> tuple[int, int]:
    """``(seed, position)`` from a state: a uint8 tensor or array of 16 bytes, or the pair."""
    import numpy as np  # noqa: PLC0415

    if isinstance(state, tuple) and len(state) == 2:  # (GT's former form)
        return int(state[0]), int(state[1])
    raw = state.numpy() if hasattr(state, "numpy") and not isinstance(state, np.ndarray) else state
    base, pos = np.ascontiguousarray(np.asarray(raw), dtype=np.uint8).view("<i8")
    return int(base), int(pos)


#: Makes a tensor of a uint8 array (``gt.tensor``; set by :mod:`gt.factories`, which builds on
#: this module).
make_tensor: Any = None


def _state_tensor(base: int, pos: int) -> Any:
    return make_tensor(state_bytes(base, pos))


#: The seed of a ``torch.Generator()`` nobody seeded.
_TORCH_DEFAULT_SEED = 67280421310721


class Generator:
    """A source of random seeds of its own, as ``torch.Generator``: pass it as ``generator=`` to
    the random factories, ``multinomial``, ``randperm`` and ``DataLoader``.

    Example:
        >>> g = gt.Generator().manual_seed(42)
        >>> x = gt.randn(3, generator=g)
    """

    def __init__(self, device: Any = None):
        self._initial = random.SystemRandom().getrandbits(40)
        self._counter = itertools.count()
        # What the data utilities draw on the host (permutations, a loader's seed) follows
        # PyTorch's CPU generator for a seeded generator, whose state it keeps here: the seed,
        # then the stream once used (gt.utils.data._random). ``None``: not PyTorch's numbers.
        # Unseeded, PyTorch's generator starts from a fixed seed, so its orders are fixed too.
        self._torch_seed: int | None = _TORCH_DEFAULT_SEED
        self._host: Any = None

    def manual_seed(self, seed: int) -> Generator:
        """Restart the stream from ``seed``; returns the generator."""
        self._initial = int(seed) & ((1 << 40) - 1)
        self._counter = itertools.count()
        self._torch_seed, self._host = int(seed), None
        return self

    def seed(self) -> int:
        """Reseed from the operating system's randomness; returns the new seed."""
        self.manual_seed(random.SystemRandom().getrandbits(40))
        return self._initial

    def initial_seed(self) -> int:
        """The seed this stream started from."""
        return self._initial

    def next_seed(self) -> int:
        """The seed of the next random op drawn from this generator."""
        return (self._initial << 22) + next(self._counter) + (1 << 62)

    def get_state(self) -> Any:
        """The stream's position, for :meth:`set_state`: a uint8 tensor, as PyTorch's."""
        pos = next(self._counter)
        self._counter = itertools.count(pos)
        return _state_tensor(self._initial, pos)

    def set_state(self, state: Any) -> Generator:
        """Go back to a position returned by :meth:`get_state`."""
        self._initial, pos = state_pair(state)
        self._counter = itertools.count(pos)
        self._torch_seed = self._host = None  # (the host stream's position is not in a state)
        return self


class _DefaultGenerator(Generator):
    """``gt.default_generator``: the global stream (the one ``gt.manual_seed`` seeds) as a
    :class:`Generator`, so ``generator=gt.default_generator`` draws what no generator draws."""

    def __init__(self) -> None:  # (no state of its own)
        self._torch_seed = self._host = None  # (the global stream is not PyTorch's)

    def manual_seed(self, seed: int) -> Generator:
        manual_seed(seed)
        return self

    def seed(self) -> int:
        manual_seed(random.SystemRandom().getrandbits(40))
        return _seed_base

    def initial_seed(self) -> int:
        return _seed_base

    def next_seed(self) -> int:
        return next_seed()

    def get_state(self) -> Any:
        global _seed_counter
        pos = next(_seed_counter)
        _seed_counter = itertools.count(pos)
        return _state_tensor(_seed_base, pos)

    def set_state(self, state: Any) -> Generator:
        global _seed_base, _seed_counter
        _seed_base, pos = state_pair(state)
        _seed_counter = itertools.count(pos)
        return self

    def __repr__(self) -> str:
        return f"<gt.Generator object at {id(self):#x}>"


#: ``gt.default_generator`` (PyTorch's ``torch.default_generator``).
default_generator = _DefaultGenerator()


#: PyTorch's message for a probability tensor with an entry outside [0, 1] (``bernoulli``).
BAD_PROBABILITY = (
    "Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error message be "
    "improved?  If so, please report an enhancement request to PyTorch.)"
)


def checked_values(x: Any, test: str, message: str, **extra: object) -> Any:
    """``x``, raising ``RuntimeError(message)`` on the worker (at the next sync point that depends
    on it, no round trip) unless every entry passes ``test``: ``"nonnegative"``,
    ``"probability"`` (in [0, 1]) or ``"below"`` (in ``[0, bound)``). NaN fails each."""
    return x._apply("checked_values", [x], {"test": test, "message": message, **extra})


def check_probability(name: str, p: Any) -> None:
    """A number ``p`` outside [0, 1] refused at the call, as PyTorch's ``bernoulli_``."""
    if not 0 <= p <= 1:
        raise RuntimeError(f"{name} expects p to be in [0, 1], but got p={p:g}")


def check_std(std: Any) -> None:
    """A negative number ``std`` refused at the call, as PyTorch's ``normal``."""
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
