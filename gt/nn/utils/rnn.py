"""Variable-length sequences for the recurrent layers, as ``torch.nn.utils.rnn``: ``PackedSequence``,
``pack_padded_sequence``, ``pad_packed_sequence``, ``pad_sequence``, ``pack_sequence``,
``unpad_sequence``, ``unpack_sequence``.

A packed sequence holds the time steps of a batch one after the other, longest sequences first,
and each step only for the sequences that are still running (``batch_sizes[t]`` of them). The
lengths live on the host (PyTorch keeps ``batch_sizes`` on the CPU too): GT keeps them as a plain
list beside the tensor, so running an RNN over a packed batch costs no sync point. Packing and
unpacking are slices and concatenations, so gradients flow through them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gt import factories as F
from gt.ops.shaping import cat, stack
from gt.tensor import Tensor

__all__ = [
    "PackedSequence",
    "pack_padded_sequence",
    "pack_sequence",
    "pad_packed_sequence",
    "pad_sequence",
    "unpack_sequence",
    "unpad_sequence",
]


class PackedSequence(tuple):
    """``(data, batch_sizes, sorted_indices, unsorted_indices)``, as PyTorch's.

    Attributes:
        data: ``[sum of lengths, *features]``, the steps one after the other.
        batch_sizes: int64 tensor, how many sequences run at each step.
        sorted_indices: the batch order packing used (``None`` if the input was sorted).
        unsorted_indices: its inverse, to put results back in the caller's order.
    """

    def __new__(
        cls,
        data: Tensor,
        batch_sizes: Any = None,
        sorted_indices: Tensor | None = None,
        unsorted_indices: Tensor | None = None,
    ) -> PackedSequence:
        if isinstance(batch_sizes, Tensor):
            sizes = [int(v) for v in batch_sizes.tolist()]  # (a sync: build them with pack_*)
        else:
            sizes = [int(v) for v in batch_sizes]
            batch_sizes = _ints(sizes)
        unsorted_host = None
        if sorted_indices is not None:
            unsorted_host = _inverse(sorted_indices.tolist())  # (a sync, unless packed here)
            if unsorted_indices is None:
                unsorted_indices = _ints(unsorted_host)
        self = super().__new__(cls, (data, batch_sizes, sorted_indices, unsorted_indices))
        self.sizes = sizes  # batch_sizes on the host
        self.unsorted = unsorted_host  # unsorted_indices on the host
        return self

    @classmethod
    def _packed(cls, data: Tensor, sizes: list[int], order: list[int] | None) -> PackedSequence:
        """Build one from host-side facts, with no sync point."""
        unsorted = None if order is None else _inverse(order)
        index = (None, None) if order is None else (_ints(order), _ints(unsorted))
        self = tuple.__new__(cls, (data, _ints(sizes), *index))
        self.sizes, self.unsorted = sizes, unsorted
        return self

    data = property(lambda self: self[0], doc="The steps one after the other.")
    batch_sizes = property(lambda self: self[1], doc="Sequences running at each step.")
    sorted_indices = property(lambda self: self[2], doc="The order packing used.")
    unsorted_indices = property(lambda self: self[3], doc="The inverse of that order.")

    def _with_data(self, data: Tensor) -> PackedSequence:
        """The same packing around other data (an RNN's output, a converted dtype)."""
        out = tuple.__new__(PackedSequence, (data, *self[1:]))
        out.sizes, out.unsorted = self.sizes, self.unsorted
        return out

    # PyTorch's PackedSequence is a namedtuple: packed._replace(data=f(packed.data)) and friends
    _fields = ("data", "batch_sizes", "sorted_indices", "unsorted_indices")

    def _replace(self, **fields: Any) -> PackedSequence:
        """A copy with some fields replaced; replacing only ``data`` costs no sync point."""
        unknown = set(fields) - set(self._fields)
        if unknown:
            raise ValueError(f"Got unexpected field names: {sorted(unknown)!r}")
        if set(fields) <= {"data"}:
            return self._with_data(fields.get("data", self.data))
        return PackedSequence(*(fields.get(name, self[i]) for i, name in enumerate(self._fields)))

    def _asdict(self) -> dict[str, Any]:
        """The four fields by name."""
        return dict(zip(self._fields, self))

    def to(self, *args: Any, **kwargs: Any) -> PackedSequence:
        """The same sequences with ``data`` converted (dtype, device)."""
        return self._with_data(self.data.to(*args, **kwargs))

    def float(self) -> PackedSequence:
        return self._with_data(self.data.float())

    def double(self) -> PackedSequence:
        return self._with_data(self.data.double())

    def cpu(self) -> PackedSequence:
        return self

    def cuda(self, *args: Any, **kwargs: Any) -> PackedSequence:
        return self

    @property
    def is_cuda(self) -> bool:
        return False

    def __repr__(self) -> str:
        return (
            f"PackedSequence(data={self.data!r}, batch_sizes={self.batch_sizes!r}, "
            f"sorted_indices={self.sorted_indices!r}, unsorted_indices={self.unsorted_indices!r})"
        )


def _ints(values: list[int]) -> Tensor:
    return F.tensor(values, dtype="int64")


def _inverse(order: list[int]) -> list[int]:
    inv = [0] * len(order)
    for i, j in enumerate(order):
        inv[j] = i
    return inv


def _host_lengths(lengths: Any) -> list[int]:
    if isinstance(lengths, Tensor):
        lengths = lengths.tolist()  # (PyTorch wants them on the CPU too)
    out = [int(v) for v in np.asarray(lengths).reshape(-1)]
    if any(v <= 0 for v in out):
        raise RuntimeError(
            "Length of all samples has to be greater than 0, but found an element in 'lengths' "
            "that is <= 0"
        )
    return out


def pack_padded_sequence(
    input: Tensor, lengths: Any, batch_first: bool = False, enforce_sorted: bool = True
) -> PackedSequence:
    """Pack a padded batch (``[T, B, *]``, or ``[B, T, *]`` with ``batch_first``) whose sequence
    ``i`` has ``lengths[i]`` valid steps."""
    sizes = _host_lengths(lengths)
    batch_dim = 0 if batch_first else 1
    if len(sizes) != input.shape[batch_dim]:
        raise RuntimeError(
            f"Expected `len(lengths)` to be equal to batch_size, but got {len(sizes)} (batch_size="
            f"{input.shape[batch_dim]})"
        )
    order = None
    if enforce_sorted:
        if any(a < b for a, b in zip(sizes, sizes[1:])):
            raise RuntimeError(
                "`lengths` array must be sorted in decreasing order when `enforce_sorted` is "
                "True. You can pass `enforce_sorted=False` to pack_padded_sequence and/or "
                "pack_sequence to sidestep this requirement if you do not need ONNX exportability."
            )
    else:
        order = sorted(range(len(sizes)), key=lambda i: -sizes[i])  # (stable, as PyTorch's)
        sizes = [sizes[i] for i in order]
        input = input.index_select(batch_dim, F.tensor(order, dtype="int64"))
    if batch_first:
        input = input.transpose(0, 1)
    if sizes[0] > input.shape[0]:
        raise RuntimeError(
            f"the longest length ({sizes[0]}) is more than the input's {input.shape[0]} steps"
        )
    batch_sizes = [sum(1 for n in sizes if n > t) for t in range(sizes[0])]
    data = cat([input[t, :b] for t, b in enumerate(batch_sizes)])
    return PackedSequence._packed(data, batch_sizes, order)


def pad_packed_sequence(
    sequence: PackedSequence,
    batch_first: bool = False,
    padding_value: float = 0.0,
    total_length: int | None = None,
) -> tuple[Tensor, Tensor]:
    """Undo :func:`pack_padded_sequence`: the padded batch and the lengths (int64), in the order
    the sequences were given."""
    sizes = sequence.sizes
    steps = len(sizes)
    if total_length is not None:
        if total_length < steps:
            raise ValueError(
                "Expected total_length to be at least the length of the longest sequence in the "
                f"input, but got total_length={total_length} and max sequence length being {steps}"
            )
        steps = total_length
    batch = sizes[0]
    data = sequence.data
    feat = tuple(data.shape[1:])
    rows, start = [], 0
    for t in range(steps):
        b = sizes[t] if t < len(sizes) else 0
        part = data[start : start + b]
        start += b
        if b < batch:
            pad = F.full((batch - b, *feat), padding_value, dtype=data.dtype)
            part = pad if b == 0 else cat([part, pad])
        rows.append(part)
    padded = stack(rows)
    lengths = [sum(1 for s in sizes if s > i) for i in range(batch)]
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(1, sequence.unsorted_indices)
        lengths = [lengths[i] for i in sequence.unsorted]
    if batch_first:
        padded = padded.transpose(0, 1)
    return padded, F.tensor(lengths, dtype="int64")


def pad_sequence(
    sequences: Sequence[Tensor],
    batch_first: bool = False,
    padding_value: float = 0.0,
    padding_side: str = "right",
) -> Tensor:
    """Stack tensors of different lengths (``[L_i, *]``) into ``[T, B, *]`` (``[B, T, *]`` with
    ``batch_first``), padding with ``padding_value`` on the right (or the left)."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"padding_side must be 'left' or 'right', not {padding_side!r}")
    sequences = sequences.unbind(0) if isinstance(sequences, Tensor) else list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    longest = max(s.shape[0] for s in sequences)
    dtype = sequences[0].dtype  # (every sequence in the first one's dtype, as PyTorch's copy)
    out = []
    for s in sequences:
        s = s if s.dtype == dtype else s.to(dtype)
        short = longest - s.shape[0]
        if short:
            pad = F.full((short, *s.shape[1:]), padding_value, dtype=s.dtype)
            s = cat([s, pad] if padding_side == "right" else [pad, s])
        out.append(s)
    return stack(out, 0 if batch_first else 1)


def pack_sequence(sequences: Sequence[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of tensors of different lengths (``[L_i, *]``)."""
    sequences = list(sequences)
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpad_sequence(padded: Tensor, lengths: Any, batch_first: bool = False) -> list[Tensor]:
    """Split a padded batch back into its sequences (``[L_i, *]`` each)."""
    sizes = _host_lengths(lengths)
    if not batch_first:
        padded = padded.transpose(0, 1)
    return [padded[i, :n].clone() for i, n in enumerate(sizes)]  # (copies, as PyTorch's)


def unpack_sequence(packed: PackedSequence) -> list[Tensor]:
    """The sequences of a packed batch, in the order they were given."""
    padded, lengths = pad_packed_sequence(packed, batch_first=True)
    return unpad_sequence(padded, lengths.tolist(), batch_first=True)
