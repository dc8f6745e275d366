"""The client side of a GT connection (one per user process).

:class:`~gt.runtime.client.connection.Connection` owns the sockets: ids, batching, sync points,
errors and heartbeats. The user API (:mod:`gt.tensor` and friends) queues instructions on it.
"""

from gt.runtime.client.connection import Connection

__all__ = ["Connection"]
