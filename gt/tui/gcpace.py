"""Full garbage collections at moments the user is not waiting for the screen.

CPython's cyclic GC runs a full collection by itself whenever enough objects have outlived two
younger collections: in ``gt top`` about every 10 s, and each one walks every tracked object with
the GIL held (tens of thousands of Textual cache entries: 30-130 ms on the 2-core VM, measured in
a live ``gt top`` under load), freezing both the screen and the event fold. A key pressed then
waits that long. :class:`IdlePacer` takes full collections off CPython's schedule (young
collections stay as they are) and runs them itself, from the app's repaint timer, when no key
or mouse event has come for :attr:`idle_s` (a second: the user has stopped to read). Someone who
keeps pressing keys gets one at most :attr:`at_most_s` apart, run just after a key has been
answered (:attr:`answer_s` after it, while they read what it showed), so garbage cycles cannot pile
up; only if no such moment comes for :attr:`late_s` more does one run regardless.

After each paced collection the survivors are frozen (:func:`gc.freeze`: moved where no
collection looks), so the next one walks only what was made since: 20-35 ms instead of 50-70 ms
in ``gt top`` under load. Every :attr:`thaw_every`-th collection unfreezes first and walks
everything, so a cycle among frozen objects that became garbage waits at most that many rounds.

The pacer is pure bookkeeping around a clock and a ``collect`` callable; :meth:`install` and
:meth:`uninstall` are the only parts that touch the interpreter's GC settings.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

#: A generation-2 threshold no program reaches: CPython then never starts a full collection.
NEVER = 1 << 30


class IdlePacer:
    """When to run a full collection: after ``every_s`` since the last one, once input has been
    quiet for ``idle_s``; after ``at_most_s``, once the last input has been answered; after
    ``at_most_s + late_s``, regardless of input.

    Args:
        every_s: the least time between two paced collections.
        idle_s: how long after the last input a collection may run.
        at_most_s: the time after which a collection runs as soon as the last input has been
            answered (``answer_s`` after it; on a busy 2-core machine an answer takes up to
            ~0.1 s, and a person needs longer than that to react to it).
        answer_s: how long after an input its answer is taken to be on the screen (the app
            calls :meth:`tick` that long after each key or click, so an overdue collection
            runs while the user reads the answer).
        answer_window_s: how long after ``answer_s`` that moment lasts: a collection started
            later could still be running when the next key comes.
        late_s: how much past ``at_most_s`` a collection runs even while input keeps coming.
        thaw_every: every how many collections everything is walked (the others walk only what
            was made since the previous one; 1 = always everything).
        clock: seconds, monotonic (a test passes its own).
        collect: runs one full collection (default :func:`gc.collect`).
        freeze, unfreeze: move survivors out of the collector's sight and back (default
            :func:`gc.freeze`, :func:`gc.unfreeze`).
    """

    def __init__(self, every_s: float = 2.0, idle_s: float = 1.0, at_most_s: float = 10.0,
                 thaw_every: int = 5, *, answer_s: float = 0.15, answer_window_s: float = 0.1,
                 late_s: float = 5.0,
                 clock: Callable[[], float] = time.monotonic,
                 collect: Callable[[], object] = gc.collect,
                 freeze: Callable[[], None] = gc.freeze,
                 unfreeze: Callable[[], None] = gc.unfreeze) -> None:  # fmt: skip
        self.every_s, self.idle_s, self.at_most_s = every_s, idle_s, at_most_s
        self.answer_s, self.answer_window_s, self.late_s = answer_s, answer_window_s, late_s
        self.thaw_every = max(1, thaw_every)
        self.clock, self.collect = clock, collect
        self.freeze, self.unfreeze = freeze, unfreeze
        self.froze = False  # whether survivors of a paced collection are frozen now
        self.last_full = self.last_input = clock()
        self.collections = 0  # paced collections run so far
        self._saved: tuple[int, int, int] | None = None

    def install(self) -> None:
        """Stop CPython's own full collections (young ones go on); :meth:`uninstall` undoes it."""
        if self._saved is None:
            self._saved = gc.get_threshold()
            gen0, gen1, _ = self._saved
            gc.set_threshold(gen0, gen1, NEVER)

    def uninstall(self) -> None:
        """Give full collections back to CPython, with the thresholds it had."""
        if self._saved is not None:
            gc.set_threshold(*self._saved)
            self._saved = None
        if self.froze:
            self.unfreeze()
            self.froze = False

    def saw_input(self) -> None:
        """A key or a mouse event arrived: the user may be waiting for the screen."""
        self.last_input = self.clock()

    def due(self) -> bool:
        """Whether a collection should run now."""
        now = self.clock()
        since, quiet = now - self.last_full, now - self.last_input
        if since >= self.at_most_s + self.late_s:
            return True
        if since >= self.at_most_s and 0 <= quiet - self.answer_s < self.answer_window_s:
            return True  # overdue, and the last input has just been answered
        return since >= self.every_s and quiet >= self.idle_s

    def tick(self) -> bool:
        """Run a full collection if one is :meth:`due`; returns whether it ran."""
        if not self.due():
            return False
        if self.froze and self.collections % self.thaw_every == 0:
            self.unfreeze()  # this round walks everything
        self.collect()
        if self.thaw_every > 1:
            self.freeze()
            self.froze = True
        self.collections += 1
        self.last_full = self.clock()
        return True
