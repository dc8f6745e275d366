"""Thin widgets: each draws the latest :class:`~gt.trace.state.ClusterState` with the pure
functions of :mod:`gt.tui.render` and :mod:`gt.tui.tables`; none of them reads a socket."""

from __future__ import annotations

from gt.tui.widgets.panels import ClusterHeader, EventLog, OutputPane, TimelineView
from gt.tui.widgets.tables import ClientsTable, RowTable, WorkersTable
from gt.tui.widgets.timebar import TimeBar

__all__ = [
    "ClientsTable",
    "ClusterHeader",
    "EventLog",
    "OutputPane",
    "RowTable",
    "TimeBar",
    "TimelineView",
    "WorkersTable",
]
