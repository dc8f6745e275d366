"""``nn.AdaptiveLogSoftmaxWithLoss`` (Grave et al., 2016): a softmax over many classes split into a
frequent shortlist, handled by the ``head``, and rarer clusters, each a ``tail`` projection through a
smaller hidden size. Parameter names, state dict keys, initialization and ``repr`` are PyTorch's.

``forward`` reads the targets on the client once (a sync point, as ``nonzero`` is in PyTorch) to
send each cluster only its own rows, so a cluster no target falls in is not evaluated and its
parameters get no gradient, as in PyTorch. ``log_prob`` and ``predict`` have no sync point
(``predict`` scores the clusters of every row and keeps the head's choice where it is in the
shortlist: PyTorch's answer).
"""

from __future__ import annotations

import math
from collections import namedtuple
from collections.abc import Sequence
from typing import Any

import numpy as np

from gt import factories as F
from gt.autograd import no_grad
from gt.nn.containers import ModuleList, Sequential
from gt.nn.layers import Linear
from gt.nn.module import Module
from gt.ops.arith import where
from gt.ops.shaping import cat
from gt.tensor import Tensor

#: What ``forward`` returns: each row's target log-probability and the mean negative of them.
_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """Efficient softmax approximation for large, imbalanced label sets.

    Args:
        in_features: features of each input row.
        n_classes: number of classes (labels sorted by frequency, the most frequent first).
        cutoffs: increasing class boundaries; classes below ``cutoffs[0]`` go to the head, each
            following range to one tail cluster.
        div_value: cluster ``i`` (from 1) projects to ``in_features // div_value**i`` features.
        head_bias: give the head a bias.
    """

    def __init__(self, in_features: int, n_classes: int, cutoffs: Sequence[int],
                 div_value: float = 4.0, head_bias: bool = False, device: Any = None,
                 dtype: Any = None):  # fmt: skip
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):  # fmt: skip
            raise ValueError(
                "cutoffs should be a sequence of unique, positive integers sorted in an "
                "increasing order, where each value is between 1 and n_classes-1"
            )
        self.in_features, self.n_classes = in_features, n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value, self.head_bias = div_value, head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, dtype=dtype)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hidden = int(in_features // (div_value ** (i + 1)))
            size = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hidden, bias=False, dtype=dtype),
                                        Linear(hidden, size, bias=False, dtype=dtype)))  # fmt: skip

    def reset_parameters(self) -> None:
        """Draw every weight (and the head's bias) again, as at construction."""
        for lin in [self.head] + [m for seq in self.tail for m in seq]:
            bound = 1.0 / math.sqrt(lin.in_features) if lin.in_features > 0 else 0.0
            with no_grad():
                for p in (lin.weight, lin.bias):
                    if p is not None:
                        p.copy_(F.rand(*p.shape, dtype=p.dtype) * (2.0 * bound) - bound)

    def forward(self, input_: Tensor, target_: Tensor) -> _ASMoutput:
        """``(output, loss)``: each row's log-probability of its target, and ``-output.mean()``.

        Shapes: ``input_`` ``[N, in_features]`` with ``target_`` ``[N]``, or ``[in_features]``
        with a 0-d target.
        """
        if target_.ndim == 1:
            if input_.shape[0] != target_.shape[0]:
                raise RuntimeError(
                    "Input and target should have the same size in the batch dimension."
                )
            if input_.ndim != 2:
                raise RuntimeError(
                    "1D target tensor expects 2D input tensors, but found inputs with size "
                    f"{list(input_.shape)}"
                )
        elif target_.ndim == 0:
            if input_.ndim != 1:
                raise RuntimeError(
                    "0D target tensor expects 1D input tensors, but found inputs with size "
                    f"{list(input_.shape)}"
                )
        else:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        batched = target_.ndim > 0
        input = input_ if batched else input_.unsqueeze(0)
        target = target_ if batched else target_.unsqueeze(0)
        t = np.asarray(target._host()).astype(np.int64).reshape(-1)  # the sync point
        head_column = t.copy()
        used, pieces, rows_seen = 0, [], []
        bounds = [0] + self.cutoffs
        for i in range(len(bounds) - 1):
            rows = np.flatnonzero((t >= bounds[i]) & (t < bounds[i + 1]))
            if rows.size == 0:
                continue
            used += rows.size
            if i == 0:
                continue
            subset = input.index_select(0, input._upload(rows))
            logp = self.tail[i - 1](subset).log_softmax(1)
            relative = input._upload((t[rows] - bounds[i]).reshape(-1, 1))
            pieces.append(logp.gather(1, relative).squeeze(1))
            rows_seen.append(rows)
            head_column[rows] = self.shortlist_size + i - 1
        if used != t.size:
            raise RuntimeError(
                f"Target values should be in [0, {self.n_classes - 1}], but values in range "
                f"[{t.min()}, {t.max()}] were found. "
            )
        head_logprob = self.head(input).log_softmax(1)
        output = head_logprob.gather(1, input._upload(head_column.reshape(-1, 1))).squeeze(1)
        if pieces:  # each tail row's cluster log-probability, in row order (0 for the shortlist)
            shortlist = np.setdiff1d(np.arange(t.size), np.concatenate(rows_seen))
            order = np.concatenate([*rows_seen, shortlist])
            values = cat([*pieces, input.new_zeros((shortlist.size,))], 0)
            output = values.index_select(0, input._upload(np.argsort(order))) + output
        loss = (-output).mean()
        return _ASMoutput(output if batched else output.squeeze(0), loss)

    def _get_full_log_prob(self, input: Tensor, head_output: Tensor) -> Tensor:
        head_logprob = head_output.log_softmax(1)
        parts = [head_logprob[:, : self.shortlist_size]]
        for i in range(self.n_clusters):
            cluster = self.tail[i](input).log_softmax(1)
            parts.append(cluster + head_logprob[:, self.shortlist_size + i].unsqueeze(1))
        return cat(parts, 1)

    def log_prob(self, input: Tensor) -> Tensor:
        """Log-probabilities of every class, ``[N, n_classes]``."""
        return self._get_full_log_prob(input, self.head(input))

    def predict(self, input: Tensor) -> Tensor:
        """The most probable class of each row of ``input`` ``[N, in_features]``."""
        head_output = self.head(input)
        output = head_output.argmax(1)
        full = self._get_full_log_prob(input, head_output).argmax(1)
        return where(output >= self.shortlist_size, full, output)


__all__ = ["AdaptiveLogSoftmaxWithLoss"]
