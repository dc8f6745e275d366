"""Screens: the top view, a worker's detail, and help."""

from __future__ import annotations

from gt.tui.screens.help import HelpScreen
from gt.tui.screens.top import TopScreen
from gt.tui.screens.worker import WorkerScreen

__all__ = ["HelpScreen", "TopScreen", "WorkerScreen"]
