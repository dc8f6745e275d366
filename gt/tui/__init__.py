"""``gt top``: the live monitor (a Textual app over the pure cluster model in ``gt.trace.model``).

Entry points: :func:`gt.tui.app.make_app` (the one app factory) and the sources in
:mod:`gt.tui.sources` / :mod:`gt.tui.replay`; the commands that run them are in :mod:`gt.cli`
(``top``, ``replay``, ``run``, ``demo``; shared helpers in :mod:`gt.cli.dashboard`).
"""
