"""Reading ``.gtrace`` files (the format is described in :mod:`gt.trace.recorder`).

A :class:`Reader` validates the magic bytes and the header at open, then finds the index at the
end of the file; a file without one (the recording was cut short) is scanned instead, reading
only the 25-byte record heads. A file cut at any byte reads up to its last whole record and says
so in :attr:`Reader.warning`; a foreign or corrupt file raises :class:`TraceFormatError`, whose
message names the file and what is wrong.
"""

from __future__ import annotations

import mmap
import os
import zlib
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import msgpack

from gt.trace import events as E
from gt.trace.checks import TraceFormatError, check_header, check_index, check_keyframe
from gt.trace.facts import merge_workers, reader_info, scan_summary
from gt.trace.recorder import (
    FORMAT_VERSION,
    MAGIC,
    R_BATCH,
    R_HEADER,
    R_INDEX,
    R_KEYFRAME,
    REC,
    TRAILER,
    TRAILER_MAGIC,
)

_HS = REC.size
__all__ = ["Batch", "Reader", "Seek", "TraceEvent", "TraceFormatError"]


class TraceEvent(NamedTuple):
    """One recorded event."""

    source: str
    seq: int
    kind: str
    t_ns: int
    fields: dict


class Batch(NamedTuple):
    """One recorded event batch, as it came off the bus, plus where it lies in the file."""

    source: str
    first_seq: int
    events: list
    t0: int
    t1: int
    offset: int


@dataclass
class Seek:
    """Where :meth:`Reader.seek` landed.

    Attributes:
        t_ns: the time asked for.
        keyframe: the state stored in the keyframe that precedes every event at or after
            ``t_ns`` (``None``: no such keyframe; start from an empty state).
        keyframe_t_ns: the keyframe's time (the latest event time folded into it).
        seq: per source, the next sequence number after the keyframe.
        events: every event recorded after the keyframe, in file order. Those before ``t_ns``
            are the catch-up to fold onto ``keyframe``; keep ``ev.t_ns >= t_ns`` for the rest.
    """

    t_ns: int
    keyframe: dict | None
    keyframe_t_ns: int | None
    seq: dict
    events: Iterator[TraceEvent]


def _unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False, strict_map_key=False)


class Reader:
    """An open ``.gtrace`` file.

    Args:
        path: the trace file.
        skip_damaged: pass over a batch record that is corrupt or holds no event batch (noted in
            :attr:`damaged`, said in :attr:`warning`) instead of raising when it is read: a
            replay goes on past it; the commands report it.

    Raises:
        TraceFormatError: not a trace, an unsupported format version, or a damaged header.
        OSError: the file cannot be opened.

    Attributes:
        header: the header record (run_id, start_ns, wall_time, workers, config, op_names, meta).
        clean: the file ends with an index (the recording was closed cleanly).
        truncated: the file ends inside a record (everything before it is read).
        warning: a one-line description of what is missing, or ``None``.
    """

    def __init__(self, path: str | os.PathLike[str], *, skip_damaged: bool = False):
        self.path = Path(path)
        self.skip_damaged = skip_damaged
        self.damaged: set[int] = set()  # offsets of records passed over (``skip_damaged``)
        self.clean = False
        self.truncated = False
        self.warning: str | None = None
        self._summary: dict | None = None
        with open(self.path, "rb") as f:
            self.size = os.fstat(f.fileno()).st_size
            if self.size == 0:
                raise self._error("empty file, not a .gtrace trace")
            self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            self.header = self._read_header()
            if not self._load_index():
                self._scan()
        except Exception:
            self._mm.close()
            raise
        self._prepare()

    # -- opening -------------------------------------------------------------------------------

    def _error(self, what: str) -> TraceFormatError:
        return TraceFormatError(f"{self.path}: {what}")

    def _read_header(self) -> dict:
        mm, size = self._mm, self.size
        head = mm[: len(MAGIC)]
        if head != MAGIC:
            if size < len(MAGIC) and MAGIC.startswith(head):
                raise self._error(f"truncated inside the magic bytes ({size} bytes)")
            raise self._error("not a .gtrace trace (bad magic bytes)")
        pos = len(MAGIC)
        if size - pos < _HS:
            raise self._error(f"truncated inside the header record ({size} bytes)")
        n, rtype, _, _, crc = REC.unpack_from(mm, pos)
        if rtype != R_HEADER:
            raise self._error(f"corrupt: the first record is not a header (type {rtype})")
        end = pos + _HS + n
        if end > size:
            raise self._error(f"truncated inside the header record ({size} of {end} bytes)")
        payload = mm[pos + _HS : end]
        if zlib.crc32(payload) != crc:
            raise self._error("corrupt header record (checksum mismatch)")
        try:
            header = _unpack(payload)
        except Exception:
            raise self._error("corrupt header record (not msgpack)") from None
        try:
            header = check_header(header, FORMAT_VERSION)
        except TraceFormatError as exc:
            raise self._error(str(exc)) from None
        self.data_start = end
        return header

    def _load_index(self) -> bool:
        """Use the index at the end of a cleanly closed file; False when there is none."""
        mm, size = self._mm, self.size
        if size < self.data_start + _HS + TRAILER.size:
            return False
        offset, marker = TRAILER.unpack_from(mm, size - TRAILER.size)
        if marker != TRAILER_MAGIC:
            return False
        try:
            if not self.data_start <= offset <= size - TRAILER.size - _HS:
                raise ValueError("index offset out of range")
            n, rtype, _, _, crc = REC.unpack_from(mm, offset)
            end = offset + _HS + n
            if rtype != R_INDEX or end != size - TRAILER.size:
                raise ValueError("no index record there")
            payload = mm[offset + _HS : end]
            if zlib.crc32(payload) != crc:
                raise ValueError("checksum mismatch")
            chunks, keyframes, summary = check_index(_unpack(payload))
            self._check_offsets(chunks, keyframes, offset)
        except Exception:
            self.warning = "the index is damaged; scanned the file instead"
            return False
        self._end = offset
        self._chunks = chunks
        self._keyframes = keyframes
        self._summary = summary
        self.clean = True
        return True

    def _check_offsets(self, chunks: list, keyframes: list, end: int) -> None:
        """The index's offsets name, in order, whole records before ``end`` (a seek starts there)."""
        prev = self.data_start - 1
        kinds: dict[int, int] = {}
        for o, _, _ in chunks:
            if not prev < o <= end - _HS:
                raise ValueError("chunk offset out of order or range")
            n, rtype, *_ = REC.unpack_from(self._mm, o)
            if rtype not in (R_BATCH, R_KEYFRAME) or o + _HS + n > end:
                raise ValueError("no record at a chunk offset")
            kinds[o], prev = rtype, o
        if chunks and chunks[0][0] != self.data_start:
            raise ValueError("the first chunk does not start the data")
        offsets = [o for _, o in keyframes]
        if offsets != sorted(set(offsets)) or any(kinds.get(o) != R_KEYFRAME for o in offsets):
            raise ValueError("a keyframe offset names no keyframe")

    def _scan(self) -> None:
        """Find every whole record by walking the record heads (no index at the end)."""
        mm, size = self._mm, self.size
        pos = self.data_start
        chunks: list[tuple[int, int, int]] = []
        keyframes: list[tuple[int, int]] = []
        while pos < size:
            if size - pos < _HS:
                self._truncated(pos, "inside a record head")
                break
            n, rtype, t0, t1, _ = REC.unpack_from(mm, pos)
            if rtype not in (R_BATCH, R_KEYFRAME, R_INDEX):
                raise self._error(f"corrupt record at byte {pos} (unknown record type {rtype})")
            end = pos + _HS + n
            if end > size:
                self._truncated(pos, "inside a record")
                break
            if rtype == R_INDEX:  # a clean close whose trailer was cut off
                self.warning = (
                    self.warning or "the index trailer is cut off; scanned the file instead"
                )
                break
            chunks.append((pos, t0, t1))
            if rtype == R_KEYFRAME:
                keyframes.append((t0, pos))
            pos = end
        else:
            self.warning = (
                self.warning or "no index at the end (the recording was not closed cleanly)"
            )
        self._end = pos
        self._chunks = chunks
        self._keyframes = keyframes

    def _truncated(self, pos: int, where: str) -> None:
        self.truncated = True
        self.warning = (
            f"truncated {where} at byte {pos} of {self.size}; read up to the last whole record"
        )

    def _prepare(self) -> None:
        """Precompute the seek tables: running max of chunk end times, trailing min of starts."""
        self._offsets = [c[0] for c in self._chunks]
        prefmax, m = [], None
        for _, _, t1 in self._chunks:
            m = t1 if m is None or t1 > m else m
            prefmax.append(m)
        sufmin: list[int] = [0] * len(self._chunks)
        m = None
        for i in range(len(self._chunks) - 1, -1, -1):
            t0 = self._chunks[i][1]
            m = t0 if m is None or t0 < m else m
            sufmin[i] = m
        self._prefmax = prefmax  # nondecreasing: bisect finds the first chunk reaching a time
        self._sufmin = sufmin  # nondecreasing: bisect finds the first chunk wholly after a time
        self._kf_offsets = [o for _, o in self._keyframes]
        self._kf_set = frozenset(self._kf_offsets)

    # -- records -------------------------------------------------------------------------------

    def _records(self, start: int, stop: int) -> Iterator[tuple[int, int, int, int, bytes]]:
        """``(offset, type, t0, t1, payload)`` for each whole record in ``[start, stop)``."""
        mm, unpack_from = self._mm, REC.unpack_from
        pos = start
        while pos < stop:
            n, rtype, t0, t1, crc = unpack_from(mm, pos)
            end = pos + _HS + n
            if end > self._end:
                raise self._error(f"corrupt record at byte {pos} (length runs past the end)")
            payload = mm[pos + _HS : end]
            if zlib.crc32(payload) != crc:
                self._damaged(pos, self._error(f"corrupt record at byte {pos} (checksum mismatch)"))
            else:
                yield pos, rtype, t0, t1, payload
            pos = end

    def _damaged(self, pos: int, exc: TraceFormatError) -> None:
        """Raise ``exc``, or (``skip_damaged``) note the record and say so in :attr:`warning`."""
        if not self.skip_damaged:
            raise exc
        if not self.damaged:
            self.note(str(exc).removeprefix(f"{self.path}: ") + "; skipped")
        self.damaged.add(pos)

    def verify(self) -> int:
        """Check every record's checksum (without decoding it); returns how many are damaged (a
        reader that does not ``skip_damaged`` raises at the first)."""
        for _ in self._records(self.data_start, self._end):
            pass
        return len(self.damaged)

    @property
    def skipped(self) -> int:
        """How many damaged records were passed over so far (with ``skip_damaged``)."""
        return len(self.damaged)

    def _range(self, t_start: int | None, t_end: int | None) -> tuple[int, int]:
        """Byte range holding every record that may have events in ``[t_start, t_end]``."""
        start, stop = self.data_start, self._end
        if t_start is not None:
            i = bisect_left(self._prefmax, t_start)
            start = self._offsets[i] if i < len(self._offsets) else self._end
        if t_end is not None:
            j = bisect_right(self._sufmin, t_end)  # from here on, every event is after t_end
            stop = self._offsets[j] if j < len(self._offsets) else self._end
        return start, max(start, stop)

    def _decode_batch(self, offset: int, payload: bytes, t0: int, t1: int) -> Batch:
        try:  # the bus's own check: [str, int, [[str kind, int time, dict fields], ...]]
            source, first_seq, events = E.unpack_batch(payload)
        except E.EventFormatError as exc:
            raise self._error(f"corrupt record at byte {offset} ({exc})") from None
        return Batch(source, first_seq, events, t0, t1, offset)

    def batches(
        self, t_start: int | None = None, t_end: int | None = None, *, start: int | None = None
    ) -> Iterator[Batch]:
        """The event batches in file order.

        Args:
            t_start: skip batches whose events all lie before this time (ns, run clock).
            t_end: skip batches whose events all lie after this time.
            start: begin at this byte offset (a record boundary) instead of the beginning.
        """
        lo, hi = self._range(t_start, t_end)
        if start is not None:
            lo = max(lo, start)
        for offset, rtype, t0, t1, payload in self._records(lo, hi):
            if rtype != R_BATCH:
                continue
            if (t_start is not None and t1 < t_start) or (t_end is not None and t0 > t_end):
                continue
            try:
                batch = self._decode_batch(offset, payload, t0, t1)
            except TraceFormatError as exc:
                self._damaged(offset, exc)
                continue
            yield batch

    def events(
        self,
        t_start: int | None = None,
        t_end: int | None = None,
        *,
        sources: Iterable[str] | None = None,
        kinds: Iterable[str] | None = None,
    ) -> Iterator[TraceEvent]:
        """The events in file order, optionally only those with ``t_start <= t_ns <= t_end``.

        Uses the index to skip records outside the window, so a late window costs little.
        """
        yield from self._events(self.batches(t_start, t_end), t_start, t_end, sources, kinds)

    def _events(
        self,
        batches: Iterable[Batch],
        t_start: int | None = None,
        t_end: int | None = None,
        sources: Iterable[str] | None = None,
        kinds: Iterable[str] | None = None,
    ) -> Iterator[TraceEvent]:
        src_set = set(sources) if sources is not None else None
        kind_set = set(kinds) if kinds is not None else None
        lo = -(1 << 63) if t_start is None else t_start
        hi = (1 << 63) if t_end is None else t_end
        for b in batches:
            if src_set is not None and b.source not in src_set:
                continue
            seq = b.first_seq
            for kind, t, fields in b.events:  # checked when the batch was decoded
                if lo <= t <= hi and (kind_set is None or kind in kind_set):
                    yield TraceEvent(b.source, seq, kind, t, fields)
                seq += 1

    # -- keyframes and seeking -----------------------------------------------------------------

    @property
    def keyframes(self) -> list[tuple[int, int]]:
        """``(t_ns, offset)`` of every keyframe, in file order."""
        return list(self._keyframes)

    def read_keyframe(self, offset: int) -> dict:
        """The keyframe record at ``offset``: ``{"t_ns", "seq", "source", "state"}``.

        Raises:
            TraceFormatError: no keyframe there, or one of the wrong shape.
        """
        if offset not in self._kf_set:
            raise self._error(f"no keyframe at byte {offset}")
        why: Any = "checksum mismatch"  # skip_damaged passed over it: the next record is another
        for pos, _, _, _, payload in self._records(offset, self._end):
            try:
                if pos == offset:
                    kf = check_keyframe(_unpack(payload))
                    return {**kf, "seq": kf.get("seq") or {}}
            except Exception as exc:
                why = exc if isinstance(exc, TraceFormatError) else "not msgpack"
            break
        raise self._error(f"corrupt keyframe at byte {offset} ({why})")

    def note(self, what: str) -> None:
        """Add ``what`` to :attr:`warning` (a part of the file was skipped)."""
        if self.warning is None:
            self.warning = what
        elif what not in self.warning and len(self.warning) < 300:
            self.warning += f"; {what}"

    def seek(self, t_ns: int) -> Seek:
        """Jump near ``t_ns`` without reading from the start.

        Picks the last keyframe written before any event at or after ``t_ns`` and returns its
        state with an iterator over every event recorded after it.
        """
        start, _ = self._range(t_ns, None)
        for k in range(bisect_right(self._kf_offsets, start) - 1, -1, -1):
            offset = self._kf_offsets[k]
            try:
                kf = self.read_keyframe(offset)
            except TraceFormatError:  # an earlier keyframe does too, with more to fold
                self.note(f"skipped a damaged keyframe at byte {offset}")
                continue
            after = offset + _HS + REC.unpack_from(self._mm, offset)[0]
            events = self._events(self.batches(start=after))
            return Seek(t_ns, kf["state"], kf["t_ns"], dict(kf["seq"]), events)
        return Seek(t_ns, None, None, {}, self._events(self.batches(start=self.data_start)))

    # -- summary -------------------------------------------------------------------------------

    @property
    def t_last(self) -> int | None:
        """The latest event (or keyframe) time (ns) from the record heads, without a scan."""
        s = self._summary
        if s is not None and s.get("t_last") is not None:
            return s.get("t_last")
        return self._prefmax[-1] if self._prefmax else None

    def offset_for(self, t_ns: int) -> int:
        """The offset of the first record that may hold an event at or after ``t_ns``."""
        return self._range(t_ns, None)[0]

    def chunk_start_before(self, offset: int, chunks: int = 1) -> int:
        """The start of the ``chunks``-th index chunk before the record at ``offset``.

        Every record between the result and ``offset`` is whole. A keyframe starts a chunk, so
        ``chunk_start_before(keyframe_offset)`` finds the records written just before it.
        """
        i = bisect_left(self._offsets, offset) - max(1, chunks)
        return self._offsets[i] if i >= 0 else self.data_start

    @property
    def t_first(self) -> int | None:
        """The earliest event time (ns), or ``None`` for a trace without events."""
        s = self._summary
        if s is not None:
            return s.get("t_first")
        return min((c[1] for c in self._chunks), default=None)

    def summary(self) -> dict:
        """Event counts per kind, drops per source, time range, workers seen (scans if no index)."""
        if self._summary is None:
            self._summary = scan_summary(self.batches())
        return self._summary

    def workers(self) -> list[dict]:
        """Workers from the header merged with those that joined during the recording."""
        return merge_workers(self.header["workers"], self.summary()["workers"])

    def info(self) -> dict:
        """Run id, time range, workers, devices, event counts per kind, drops, file facts."""
        return reader_info(self)

    # -- lifetime ------------------------------------------------------------------------------

    def close(self) -> None:
        """Release the file."""
        self._mm.close()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
