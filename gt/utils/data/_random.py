"""Random orders for the samplers: PyTorch's for a seeded generator, GT's own seeds otherwise.

PyTorch draws a sampler's order, a ``random_split`` and a loader's base seed from its CPU
generator, a 32-bit Mersenne Twister. A ``gt.Generator`` seeded with ``manual_seed`` keeps such a
stream for these host draws (:class:`TorchStream`), so ``random_split(...,
generator=gt.Generator().manual_seed(42))`` and a ``DataLoader(shuffle=True, generator=g)`` give
PyTorch's subsets and batches. Without one (GT's global seed, an unseeded generator, one restored
with ``set_state``) the orders are reproducible but not PyTorch's: GT's global stream is the
workers' counter-based one, not a Mersenne Twister. Where PyTorch's order is a function of an
integer seed alone (``DistributedSampler``'s ``seed + epoch``), :func:`torch_randperm` gives it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gt.ops.random import next_seed

#: PyTorch's CPU ``randperm`` shuffles with 32-bit draws below this size (another method above).
_SMALL_N = (2**32 - 1) // 20


class TorchStream:
    """PyTorch's CPU generator from ``torch.Generator().manual_seed(seed)`` on, for the draws
    that PyTorch's data utilities make: ``randperm``, ``randint``, ``multinomial`` and a
    full-range int64."""

    def __init__(self, seed: int) -> None:
        self._bits = np.random.MT19937()  # (seeded as PyTorch seeds it: the low 32 bits)
        self._bits.state = np.random.RandomState(seed & 0xFFFFFFFF).get_state(legacy=False)

    def random(self, n: int) -> np.ndarray:
        """``n`` 32-bit draws (``generator->random()``), as uint64."""
        return self._bits.random_raw(n)

    def random64(self, n: int) -> np.ndarray:
        """``n`` 64-bit draws, each two 32-bit ones, the first high (``random64()``)."""
        raw = self._bits.random_raw(2 * n)
        return (raw[0::2] << np.uint64(32)) | raw[1::2]

    def int64(self) -> int:
        """``torch.empty((), dtype=torch.int64).random_(generator=g).item()``."""
        return int(self.random64(1)[0] % np.uint64(1 << 63))

    def randperm(self, n: int) -> list[int]:
        """``torch.randperm(n, generator=g).tolist()``.

        Raises:
            ValueError: ``n`` of 214 million or more (PyTorch's other method, not kept here).
        """
        if n >= _SMALL_N:
            raise ValueError("randperm of 214 million or more")
        offsets = (self.random(max(n - 1, 0)) % np.arange(n, 1, -1, dtype=np.uint64)).tolist()
        order = list(range(n))
        for i, z in enumerate(offsets):
            j = i + z
            order[i], order[j] = order[j], order[i]
        return order

    def uniform(self, n: int) -> np.ndarray:
        """``n`` doubles uniform in [0, 1): the low 53 bits of 64-bit draws, as PyTorch's
        ``uniform_real_distribution<double>``."""
        return (self.random64(n) & np.uint64((1 << 53) - 1)).astype(np.float64) * 2.0**-53

    def multinomial(self, w: np.ndarray, k: int, replacement: bool) -> list[int]:
        """``torch.multinomial(w, k, replacement, generator=g).tolist()`` of valid float64
        weights ``w`` (checked by the caller), as PyTorch's CPU kernel draws it.

        Without replacement (or for one sample) PyTorch takes the ``k`` largest ``w / q``,
        ``q = -log1p(-u)`` exponential; with replacement it searches each uniform in the
        normalized cumulative sums (their last set to 1). Keys that tie (weights of 0 drawn
        after every positive one) come in index order here; PyTorch's ``topk`` leaves their
        order to its sort, which may differ for more than a few ties.
        """
        if not replacement or k == 1:
            keys = w / -np.log1p(-self.uniform(w.shape[0]))
            return np.argsort(-keys, kind="stable")[:k].tolist()
        cumulative = np.cumsum(w)  # (a running sum in order, normalized by its end: PyTorch's)
        cumulative /= cumulative[-1]
        cumulative[-1] = 1.0
        return np.searchsorted(cumulative, self.uniform(k), side="left").tolist()

    def randint(self, high: int, size: int) -> list[int]:
        """``torch.randint(high=high, size=(size,), generator=g).tolist()``."""
        draws = self.random64(size) if high >= 1 << 32 else self.random(size)
        return (draws % np.uint64(high)).astype(np.int64).tolist()


def torch_stream(generator: Any) -> TorchStream | None:
    """The PyTorch-like host stream of ``generator``, or ``None`` (no generator, GT's global
    one, or one whose position PyTorch's stream cannot follow)."""
    seed = getattr(generator, "_torch_seed", None)
    if seed is None:
        return None
    if generator._host is None:
        generator._host = TorchStream(seed)
    return generator._host


def rng(generator: Any = None) -> np.random.Generator:
    """A NumPy generator seeded from ``generator`` (a ``gt.Generator``) or GT's global seed."""
    return np.random.default_rng(next_seed() if generator is None else generator.next_seed())


def torch_randperm(n: int, seed: int) -> list[int]:
    """``torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()``.

    PyTorch's CPU generator is a 32-bit Mersenne Twister seeded with the seed's low 32 bits, and
    its ``randperm`` swaps position ``i`` with ``i + draw % (n - i)``. Sizes of 214 million and
    more (where PyTorch switches method) get a permutation from the same seed that is not PyTorch's.
    """
    if n >= _SMALL_N:
        return np.random.default_rng(seed & 0xFFFFFFFF).permutation(n).tolist()
    return TorchStream(seed).randperm(n)
