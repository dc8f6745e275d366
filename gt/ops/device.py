"""``gt.device``: PyTorch's device objects, accepted everywhere and ignored.

Ported code writes ``device = torch.device("cuda" if torch.cuda.is_available() else "cpu")`` and
passes it to ``.to()``, ``Module.to()`` and the factories. In GT the cluster decides where data
lives (a worker's GPU, or its CPU), so a device names nothing here; it only has to behave like
PyTorch's object (``type``, ``index``, ``str``, equality, and ``with torch.device("meta"):``,
which sets the default device for the block).
"""

from __future__ import annotations

from typing import Any


class device:  # noqa: N801 - PyTorch's name
    """A device name such as ``"cpu"``, ``"cuda"`` or ``"cuda:1"`` (accepted and ignored).

    Args:
        type: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"`` or ``"gt"`` (or another device).
        index: the device index, when not part of ``type``.
    """

    __slots__ = ("type", "index")

    def __init__(self, type: Any, index: int | None = None):  # noqa: A002 - PyTorch's name
        if isinstance(type, device):
            type, index = type.type, type.index
        elif isinstance(type, int):  # torch.device(0) is the first CUDA device
            type, index = "cuda", type
        text = str(type)
        if ":" in text:
            text, idx = text.split(":", 1)
            index = int(idx)
        self.type = text
        self.index = index

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __eq__(self, other: object) -> bool:
        # (a string is not equal to a device, as in PyTorch: ``x.device == "cpu"`` is False there)
        if not isinstance(other, device):
            return NotImplemented
        return (self.type, self.index) == (other.type, other.index)

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __enter__(self) -> device:
        """``with torch.device("meta"): model = Net()``: this device is the default one (what
        ``get_default_device`` says) until the block ends; GT's tensors still hold data."""
        ENTERED.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        ENTERED.pop()


#: The devices of the ``with device(...)`` blocks being run, innermost last (the innermost is the
#: default device: :func:`gt.settings.get_default_device` reads it).
ENTERED: list[device] = []
