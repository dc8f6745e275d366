"""Three ways Textual (8.2.8) makes a long-running app's garbage collections slow, and remedies.

Found in ``gt top`` by counting the objects that survive full garbage collections while ``?``
and escape were pressed in turn: about 3,000 a pair, so each full collection took longer (90 ms
after a minute of use, 370 ms after a few minutes) and froze the screen while it ran.

- ``Footer`` rebuilds its ``FooterKey`` widgets whenever the bindings change (every screen push or
  pop), and each new key binds itself to the footer's ``compact`` reactive. The watcher entry,
  which holds the key, is stored on the footer and pruned only when ``compact`` changes, which
  here it never does (Textualize/textual#6666): 16 keys were left behind per pair. Our
  :class:`Footer` drops the entries of closed widgets after each rebuild, by the same test Textual
  applies when the value does change.
- ``StylesCache.get_inner_outer`` is an ``lru_cache`` on a method, so its 1,024 entries are keyed
  by (and keep) the caches of up to 1,024 widgets, gone or not, with every line they had
  rendered. The result depends only on the two colours: :func:`unpin_styles_caches` caches it by
  the colours alone.
- ``Strip.divide`` and ``Strip.crop_extend`` cache their result on the strip even when the result
  is the strip itself (a cut at its end, a crop to its full width), so the strip refers to itself
  and only the cyclic collector can free it, with the seven caches each strip carries: about 10,000
  such objects every two seconds in ``gt top``, half of what each full collection had to free.
  :func:`uncycle_strips` returns the strip itself without caching it.
"""

from __future__ import annotations

from functools import lru_cache

from textual.color import Color
from textual.strip import Strip
from textual.widgets import Footer as TextualFooter

try:  # a private module: another Textual may have moved it (then there is nothing to mend)
    from textual._styles_cache import StylesCache
except ImportError:  # pragma: no cover - depends on the installed Textual
    StylesCache = None  # type: ignore[assignment,misc]


class Footer(TextualFooter):
    """A ``Footer`` whose rebuilds leave nothing behind, and that rebuilds only when what it
    shows changed.

    Textual rebuilds every key widget of a screen's footer each time the screen's bindings are
    announced again, which is each time the screen is shown: opening a worker's detail and going
    back cost ~15 ms of CPU in footer widgets that came out the same (py-spy, ``gt top`` under
    ``bench_top_latency.py --key enter``), as much as the rest of the press.
    """

    _shown: tuple | None = None

    def _bindings_shown(self) -> tuple:
        """What :meth:`compose` would draw: each shown binding with its state."""
        return tuple(
            (b.key, self.app.get_key_display(b), b.description, b.action, b.group, enabled, tooltip)
            for (_, b, enabled, tooltip) in self.screen.active_bindings.values()
            if b.show
        ) + (self.compact, self.show_command_palette)

    async def recompose(self) -> None:
        if not self.is_attached or self._pruning:
            return  # (a rebuild queued before its screen went away: Textual's own test)
        shown = self._bindings_shown() if self._bindings_ready else None
        if shown is not None and shown == self._shown and self.children:
            return  # the same keys as drawn: nothing to rebuild
        await super().recompose()
        self._shown = shown
        prune_closed_watchers(self)


def prune_closed_watchers(obj: object) -> int:
    """Drop the watchers of ``obj``'s reactives whose owner is closing or closed; returns how many
    were dropped."""
    # Textual keeps them in an attribute literally named "__watchers" (set with setattr).
    watchers: dict[str, list[tuple]] = getattr(obj, "__watchers", None) or {}
    dropped = 0
    for entries in watchers.values():
        keep = [(owner, cb) for owner, cb in entries if not getattr(owner, "_closing", False)]
        dropped += len(entries) - len(keep)
        entries[:] = keep
    return dropped


def unpin_styles_caches() -> bool:
    """Make ``StylesCache.get_inner_outer`` cache by colour only (idempotent); ``False`` if this
    Textual has no such cached method (then there is nothing to mend)."""
    if StylesCache is None:
        return False
    current = getattr(StylesCache, "get_inner_outer", None)
    if getattr(current, "gt_unpinned", False):
        return True
    original = getattr(current, "__wrapped__", None)
    if original is None or not hasattr(current, "cache_clear"):
        return False
    current.cache_clear()  # let go of the instances it holds already
    # Textual's own function, which never reads its first argument, cached by the colours alone
    by_colour = lru_cache(1024)(lambda base, background: original(None, base, background))

    def get_inner_outer(self: object, base_background: Color, background: Color) -> tuple:
        return by_colour(base_background, background)

    get_inner_outer.gt_unpinned = True  # type: ignore[attr-defined]
    StylesCache.get_inner_outer = get_inner_outer
    return True


def uncycle_strips() -> bool:
    """Keep ``Strip.divide`` and ``Strip.crop_extend`` from caching a strip on itself
    (idempotent); ``False`` if this Textual's ``Strip`` lacks them."""
    divide, crop_extend = getattr(Strip, "divide", None), getattr(Strip, "crop_extend", None)
    if divide is None or crop_extend is None:
        return False
    if getattr(divide, "gt_uncycled", False):
        return True

    def divide_uncycled(self: Strip, cuts):  # noqa: ANN001, ANN202 - Textual's signature
        cuts = list(cuts)  # may be an iterator: read it once
        length = self.cell_length
        if [cut for cut in cuts if cut <= length] == [length]:
            return [self]  # what Textual returns here, without keeping it on self
        return divide(self, cuts)

    def crop_extend_uncycled(self: Strip, start: int, end: int, style):  # noqa: ANN001, ANN202
        if start <= 0 and end == self.cell_length:
            return self  # no extension and no crop: Textual's result, uncached
        return crop_extend(self, start, end, style)

    divide_uncycled.gt_uncycled = True  # type: ignore[attr-defined]
    Strip.divide = divide_uncycled  # type: ignore[method-assign]
    Strip.crop_extend = crop_extend_uncycled  # type: ignore[method-assign]
    return True
