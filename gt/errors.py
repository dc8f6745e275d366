"""Exceptions that GT raises to users."""

from __future__ import annotations


class GTError(RuntimeError):
    """Base class of every GT error."""


class ShapeError(GTError, ValueError):
    """Operand shapes (or dtypes) do not fit the op; raised on the client at the user's line."""


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


class WorkerLost(GTError):
    """A worker holding this client's data died; pending and later results are lost."""


class DispatcherLost(GTError):
    """The dispatcher stopped answering within the time limit."""


class GTTimeout(GTError, TimeoutError):
    """A sync point waited longer than its timeout."""
