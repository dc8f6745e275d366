"""Screens: the top view (with a time bar in a replay), a worker's detail, the config editor, help."""

from __future__ import annotations

from gt.tui.screens.config import ConfigScreen
from gt.tui.screens.help import HelpScreen
from gt.tui.screens.top import TopScreen
from gt.tui.screens.worker import WorkerScreen

__all__ = ["ConfigScreen", "HelpScreen", "TopScreen", "WorkerScreen"]
