"""``gt.torch_version``: PyTorch's ``TorchVersion``, the class of ``gt.__version__``.

A ``str`` that compares as a version (PEP 440) with strings, tuples and :class:`Version`s, so
``gt.__version__ >= "0.1"`` and ``gt.__version__ >= (0, 1)`` mean what they do for
``torch.__version__``; a string that is no version (``"parrot"``) compares as a string. As in
PyTorch, ``<``, ``<=``, ``==``, ``>=`` and ``>`` compare versions; ``!=`` is ``str``'s.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from gt.version import __version__ as internal_version

__all__ = ["TorchVersion"]


class InvalidVersion(ValueError):
    """A string that is not a PEP 440 version (``packaging.version.InvalidVersion``)."""


_PATTERN = re.compile(
    r"""^\s*v?
    (?:(?P<epoch>[0-9]+)!)?
    (?P<release>[0-9]+(?:\.[0-9]+)*)
    (?P<pre>[-_.]?(?P<pre_l>alpha|a|beta|b|preview|pre|c|rc)[-_.]?(?P<pre_n>[0-9]+)?)?
    (?P<post>(?:-(?P<post_n1>[0-9]+))|(?:[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>[0-9]+)?))?
    (?P<dev>[-_.]?(?P<dev_l>dev)[-_.]?(?P<dev_n>[0-9]+)?)?
    (?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?
    \s*$""",
    re.VERBOSE | re.IGNORECASE,
)
_PRE = {"alpha": "a", "a": "a", "beta": "b", "b": "b", "c": "rc", "pre": "rc", "preview": "rc",
        "rc": "rc"}  # fmt: skip


class Version:
    """A PEP 440 version, ordered as ``packaging.version.Version`` orders them."""

    __slots__ = ("_key", "_text")

    def __init__(self, version: str) -> None:
        m = _PATTERN.match(version)
        if m is None:
            raise InvalidVersion(f"Invalid version: {version!r}")
        self._text = version.strip()
        release = tuple(int(p) for p in m["release"].split("."))
        while len(release) > 1 and release[-1] == 0:
            release = release[:-1]
        pre = (0, _PRE[m["pre_l"].lower()], int(m["pre_n"] or 0)) if m["pre_l"] else None
        post_n = m["post_n1"] or m["post_n2"]
        post = (0, int(post_n or 0)) if m["post"] else (-1,)
        dev = (0, int(m["dev_n"] or 0)) if m["dev_l"] else (1,)
        if pre is None:
            pre = (-1,) if m["post"] is None and m["dev_l"] else (1,)
        local: tuple = (0,)
        if m["local"]:
            parts = re.split(r"[-_.]", m["local"].lower())
            local = (1, tuple((1, int(p), "") if p.isdigit() else (0, 0, p) for p in parts))
        self._key = (int(m["epoch"] or 0), release, pre, post, dev, local)

    def __repr__(self) -> str:
        return f"<Version({self._text!r})>"

    def __str__(self) -> str:
        return self._text

    def __hash__(self) -> int:
        return hash(self._key)

    def _other(self, other: Any) -> Any:
        return other._key if isinstance(other, Version) else None

    def __eq__(self, other: object) -> bool:
        k = self._other(other)
        return NotImplemented if k is None else self._key == k

    def __lt__(self, other: Any) -> bool:
        k = self._other(other)
        return NotImplemented if k is None else self._key < k

    def __le__(self, other: Any) -> bool:
        k = self._other(other)
        return NotImplemented if k is None else self._key <= k

    def __gt__(self, other: Any) -> bool:
        k = self._other(other)
        return NotImplemented if k is None else self._key > k

    def __ge__(self, other: Any) -> bool:
        k = self._other(other)
        return NotImplemented if k is None else self._key >= k


class TorchVersion(str):
    """A string with magic powers to compare to both Version and iterables, as PyTorch's:
    ``TorchVersion("1.10.0a") > (1, 2)``, ``> "1.2.1"`` and ``> Version("1.2")`` all hold."""

    __slots__ = ()

    def _convert_to_version(self, inp: Any) -> Any:
        if isinstance(inp, Version):
            return inp
        if isinstance(inp, str):
            return Version(inp)
        if type(inp).__name__ == "Version" and hasattr(inp, "release"):
            return Version(str(inp))  # (a ``packaging.version.Version``)
        if isinstance(inp, Iterable):
            # (1) -> "1", (1, 20) -> "1.20", (1, 20, 1) -> "1.20.1"
            return Version(".".join(str(item) for item in inp))
        raise InvalidVersion(inp)

    def _cmp_wrapper(self, cmp: Any, method: str) -> bool:
        try:
            return getattr(Version(self), method)(self._convert_to_version(cmp))
        except InvalidVersion:
            # not a version (like "parrot"): compare as strings
            return getattr(super(), method)(cmp)


for _method in ("__gt__", "__lt__", "__eq__", "__ge__", "__le__"):
    setattr(TorchVersion, _method, lambda x, y, method=_method: x._cmp_wrapper(y, method))

__version__ = TorchVersion(internal_version)
