"""Random orders for the samplers: GT's own seeds, and PyTorch's CPU ``randperm`` for a seed.

Samplers that PyTorch drives from its global RNG or a ``torch.Generator`` draw here from GT's seed
(or a ``gt.Generator``): reproducible, not PyTorch's numbers. Where PyTorch's order is a function
of an integer seed alone (``DistributedSampler``'s ``seed + epoch``), :func:`torch_randperm` gives
PyTorch's exact permutation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gt.ops.random import next_seed

#: PyTorch's CPU ``randperm`` shuffles with 32-bit draws below this size (another method above).
_SMALL_N = (2**32 - 1) // 20


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
    bits = np.random.MT19937()
    bits.state = np.random.RandomState(seed & 0xFFFFFFFF).get_state(legacy=False)
    offsets = (bits.random_raw(max(n - 1, 0)) % np.arange(n, 1, -1, dtype=np.uint64)).tolist()
    order = list(range(n))
    for i, z in enumerate(offsets):
        j = i + z
        order[i], order[j] = order[j], order[i]
    return order
