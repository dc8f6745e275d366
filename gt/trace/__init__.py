"""Instrumentation: the event schema, publishing, recording, reading and exporting traces.

``gt.trace`` never imports ``gt.runtime``. The heavier parts load on first use, so importing
:mod:`gt.trace.events` or :mod:`gt.trace.emit` from the runtime stays cheap.

Modules:
    events: the event schema (kinds, fields, batch encoding).
    emit: the never-blocking publisher.
    recorder: the ``.gtrace`` format, :class:`Recorder` and :func:`record_from_bus`.
    reader: :class:`Reader`, :class:`TraceFormatError`.
    export: :func:`export_chrome` (Chrome trace JSON for Perfetto).
    commands: what ``gt trace info|stats`` and ``gt export`` run.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "Recorder": "gt.trace.recorder",
    "record_from_bus": "gt.trace.recorder",
    "write_trace": "gt.trace.recorder",
    "Reader": "gt.trace.reader",
    "TraceEvent": "gt.trace.reader",
    "TraceFormatError": "gt.trace.reader",
    "export_chrome": "gt.trace.export",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gt.trace' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
