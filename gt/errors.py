"""Exceptions that GT raises to users."""

from __future__ import annotations

import re


class GTError(RuntimeError):
    """Base class of every GT error."""


class ShapeError(GTError, ValueError):
    """Operand shapes (or dtypes) do not fit the op; raised on the client at the user's line."""


class DtypeError(GTError, TypeError):
    """An op refuses its operands' dtypes (``-`` on bools, a float result into an int tensor in
    place, ``mean`` of integers); raised on the client at the user's line. A RuntimeError as in
    PyTorch, and a TypeError."""


class LinAlgError(GTError):
    """A linear algebra function got a matrix it cannot factor (``linalg.cholesky`` of one that is
    not positive definite), raised at the call with PyTorch's message, as ``torch.linalg.
    LinAlgError`` (a RuntimeError) is; ``gt.linalg.LinAlgError``."""


class WorkerError(GTError):
    """An op failed on a worker; raised at the next sync point that depends on it.

    Attributes:
        op: the primitive that failed.
        source: the user's ``file:line`` that made the failing instruction.
        worker_message: the worker's own message.
    """

    def __init__(self, message: str, op: str = "?", source: str = "?"):
        self.op = op
        self.source = source
        self.worker_message = message
        super().__init__(f"{op} failed on a worker: {message} (from {source})")


class WorkerIndexError(WorkerError, IndexError):
    """A worker's op failed with an ``IndexError`` (an index tensor out of range): caught by
    ``except IndexError`` as PyTorch's is."""


class WorkerLinAlgError(WorkerError, LinAlgError):
    """A worker's factorization failed (``linalg.inv`` or ``linalg.solve`` of a singular matrix),
    with PyTorch's message: caught by ``except gt.linalg.LinAlgError`` around the sync point that
    raises it (``inv_ex``/``solve_ex`` report it in ``info`` instead, without failing)."""


class OutOfMemory(WorkerError, MemoryError):
    """An op's result did not fit under a worker's memory limit or the client's quota, even after
    spilling; the worker and every other tensor are fine.

    Attributes:
        requested: bytes the result needed (``None`` if the message did not say).
        limit: the limit it ran into, in bytes (``None`` if the message did not say).
    """

    def __init__(self, message: str, op: str = "?", source: str = "?"):
        super().__init__(message, op, source)
        sizes = [int(m) for m in re.findall(r"\((\d+) B\)", message)]
        self.requested = sizes[0] if sizes else None
        self.limit = sizes[1] if len(sizes) > 1 else None


class WorkerLost(GTError):
    """A worker holding this client's data died; pending and later results are lost."""


class DispatcherLost(GTError):
    """The dispatcher stopped answering within the time limit."""


class GTTimeout(GTError, TimeoutError):
    """A sync point waited longer than its timeout."""


def worker_error_class(message: object) -> type[WorkerError]:
    """The exception class for a worker's error ``message``: by the exception it names first
    (``except MemoryError``/``IndexError``/``gt.linalg.LinAlgError`` catch theirs, as PyTorch's)."""
    if isinstance(message, str):
        if message.startswith("OutOfMemory:"):
            return OutOfMemory
        if message.startswith("IndexError:"):
            return WorkerIndexError
        if message.startswith("LinAlgError:"):
            return WorkerLinAlgError
    return WorkerError
