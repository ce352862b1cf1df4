"""Streaming, typed decoding of a torch.profiler (Kineto) Chrome-trace JSON.

The file (``.json`` or ``.json.gz``) is memory-mapped (plain) or read in blocks (gzipped); the ``traceEvents``
array is cut into chunks of about :data:`CHUNK` bytes at event boundaries and
each chunk is decoded by msgspec into :class:`Event` structs that hold only
the fields the importer reads (unknown keys, such as huge ``args``, are skipped
without being built). A cut is tried at ``}, {`` and kept only when the chunk
decodes as a JSON array: a cut inside a string or a nested object leaves it
unbalanced, so a wrong cut is never kept. Memory is one chunk at a time plus
what the consumer keeps. The top-level keys outside the array (``schemaVersion``,
``distributedInfo``, ...) are decoded at the end as :class:`Header`.

A file that ends before the array does (a truncated trace, plain or gzipped: a gzip stream cut short
yields what it decompressed before the cut) yields every complete event before the cut and a
:class:`Truncation` saying how much was read. Bounds: one event (or run of text with no event boundary)
of at most :data:`MAX_EVENT` bytes (a gzip of gigabytes of whitespace stops there, in bounded memory),
values nested at most as deep as msgspec decodes (deeper: an error naming the byte); a ``NaN`` or
``Infinity`` token (not JSON, but Python's json writes them) is read as a non-finite number, which the
collector counts and leaves out, never as a truncation. Nothing in a trace is ever executed: it is data
for msgspec's decoder.
"""

from __future__ import annotations

import mmap
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

from recstack.errors import DataError

# Small enough that the window, the chunk copied out of it and its events stay in the CPU's caches and
# reuse freed memory (8 MiB chunks in a 24 MiB window cost ~50% more than the decoding, in page faults and
# copies: 0.30 s against 0.20 s for the 54 MB of a 216k-event gzipped trace).
CHUNK = 1 << 20  # bytes decoded per msgspec call
BLOCK = 2 << 20  # bytes read per file read
MAX_HEADER = 64 << 20  # a file with no ``traceEvents`` in its first 64 MiB is not a trace
MAX_EVENT = 64 << 20  # the longest text with no event boundary the reader holds (bounds a gzip bomb's memory)
NONFINITE_AS = b"1.7976931348623155e308"  # what a NaN / Infinity token reads as (collect.NONFINITE)
FIRST_SHARE = 0.85  # the first of plan_parts' parts, against an even share (measured: merging took the rest)

_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[\s*')
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_END = re.compile(rb"\}\s*\]")
_EMPTY = re.compile(rb"\]")
_NONFINITE = re.compile(rb"(?<=[:,\[])(\s*)-?(?:NaN|Infinity)(?=\s*[,}\]])")


NO_RAW = msgspec.Raw(b"")


class Args(msgspec.Struct, gc=False):
    """The few ``args`` the importer reads; every other key is skipped unbuilt."""

    # Raw: the JSON text, kept undecoded (interned by the collector; decoded once per distinct value).
    input_dims: msgspec.Raw = msgspec.field(default=NO_RAW, name="Input Dims")
    input_type: msgspec.Raw = msgspec.field(default=NO_RAW, name="Input type")
    concrete: msgspec.Raw = msgspec.field(default=NO_RAW, name="Concrete Inputs")
    correlation: int | None = None
    ext: int | None = msgspec.field(default=None, name="External id")  # links an op and what it launched
    ext_old: int | None = msgspec.field(default=None, name="external id")  # the same in PyTorch <= 1.9 traces
    seq: int | None = msgspec.field(default=None, name="Sequence number")  # a forward op and its backward's
    name: str | None = None  # thread_name / process_name metadata events


class Event(msgspec.Struct, gc=False):
    """One trace event; missing keys take these defaults."""

    ph: str = ""
    name: str = ""
    cat: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: float = 0.0
    dur: float = 0.0
    id: int | str | None = None  # flow events (``ph`` s / f): the flow's id
    args: Args | None = None


class Header(msgspec.Struct):
    """The top-level keys around ``traceEvents`` the importer reads."""

    schemaVersion: int | None = None  # noqa: N815 (Kineto's key)
    distributedInfo: dict[str, Any] | None = None  # noqa: N815
    deviceProperties: list[Any] | None = None  # noqa: N815
    traceName: str | None = None  # noqa: N815


@dataclass
class Truncation:
    """How much of a truncated trace was read."""

    events: int
    bytes_read: int
    bytes_total: int | None


_decode_events = msgspec.json.Decoder(list[Event]).decode
_decode_header = msgspec.json.Decoder(Header).decode


class _Gunzip:
    """A gzip file's decompressed bytes, read in blocks, that keeps what it decompressed before damage or a
    cut (``GzipFile.read`` raises and loses the block); concatenated members are read in turn."""

    def __init__(self, f: BinaryIO, source: str) -> None:
        self.f, self.source = f, source
        self.z = zlib.decompressobj(31)  # 31: a gzip header and trailer
        self.pending, self.ended, self.damaged, self.produced, self.fresh = b"", False, False, 0, True

    def read(self, n: int) -> bytes:
        out = []
        size = 0
        while size < n and not self.ended:
            data = self.pending or self.f.read(1 << 18)  # small compressed reads: little held twice
            self.pending = b""
            if not data:
                if not self.fresh and not self.z.eof:  # the stream stopped before its end marker: a cut file
                    self.damaged = True
                self.ended = True
                break
            self.fresh = False
            try:
                chunk = self.z.decompress(data, n - size)
            except zlib.error as exc:
                if not self.produced and not out:
                    raise DataError(f"{self.source}: not gzip data ({exc})") from None
                self.damaged = self.ended = True
                break
            self.pending = self.z.unconsumed_tail
            if self.z.eof:  # a member ends: the next (if any) starts in unused_data
                rest = self.z.unused_data
                self.z, self.fresh = zlib.decompressobj(31), True
                self.pending = rest.lstrip(b"\x00") + self.pending
            out.append(chunk)
            size += len(chunk)
        self.produced += size
        return b"".join(out)

    def close(self) -> None:
        self.f.close()

    def __enter__(self) -> _Gunzip:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Reader:
    """A window on the (possibly gzipped) file: ``buf[off:]`` is unread; ``base`` is ``buf``'s file offset.

    Consuming moves ``off`` (no copy); the window is compacted only when a block is appended."""

    def __init__(self, f: BinaryIO | _Gunzip, source: str) -> None:
        self.f, self.source = f, source
        self.buf, self.off, self.base, self.eof, self.damaged = b"", 0, 0, False, False

    def fill(self) -> bool:
        """Read one more block; False at the end of the file (or of readable gzip data)."""
        if self.eof:
            return False
        try:
            block = self.f.read(BLOCK)
        except OSError:
            block, self.damaged = b"", True
        if not block:
            self.eof = True
            return False
        self.base += self.off
        self.buf = self.buf[self.off:] + block
        self.off = 0
        return True

    def unread(self) -> int:
        return len(self.buf) - self.off

    def drop(self, upto: int) -> None:
        """Consume up to the absolute window index ``upto``."""
        self.off = upto


class _MappedReader(_Reader):
    """A plain (not gzipped) file as one read-only memory map: the window is the whole file, nothing is
    copied into it, and the pages already consumed are handed back every :data:`BLOCK` bytes (so resident
    memory stays about one block, as with reading)."""

    def __init__(self, f: BinaryIO, source: str) -> None:
        super().__init__(f, source)
        self.map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self.buf, self.eof, self.released = self.map, True, 0  # type: ignore[assignment]

    def fill(self) -> bool:
        return False

    def drop(self, upto: int) -> None:
        self.off = upto
        done = (upto // mmap.PAGESIZE) * mmap.PAGESIZE
        if done - self.released >= BLOCK and hasattr(mmap, "MADV_DONTNEED"):
            self.map.madvise(mmap.MADV_DONTNEED, self.released, done - self.released)
            self.released = done


def open_trace(path: Path) -> BinaryIO | _Gunzip:
    """The trace's bytes: gunzipped when the file starts with the gzip magic (whatever its suffix)."""
    f = path.open("rb")
    magic = f.read(2)
    f.seek(0)
    if magic == b"\x1f\x8b":
        return _Gunzip(f, f"TRACE: {path}")
    return f


def _chunk(data: bytes, source: str, offset: int) -> list[Event] | None:
    """The events of ``[data]``; None when the cut was not an event boundary (the JSON does not parse)."""
    try:
        return _decode_events(b"[" + data + b"]")
    except msgspec.ValidationError as exc:  # parses, but an event has a field of the wrong type
        raise DataError(f"{source}: traceEvents (near byte {offset}): {_field_path(str(exc))}") from None
    except RecursionError:
        raise DataError(f"{source}: traceEvents (near byte {offset}): a value nested deeper than the decoder "
                        "reads (thousands of levels); no profiler writes one: the file is damaged or forged") from None
    except msgspec.DecodeError:
        if _NONFINITE.search(data) is None:
            return None
    try:  # NaN / Infinity tokens (Python's json writes them): read as a non-finite number
        return _decode_events(b"[" + _NONFINITE.sub(rb"\g<1>" + NONFINITE_AS, data) + b"]")
    except msgspec.ValidationError as exc:
        raise DataError(f"{source}: traceEvents (near byte {offset}): {_field_path(str(exc))}") from None
    except msgspec.DecodeError:
        return None


def _field_path(msg: str) -> str:
    """msgspec's ``... - at `$[12].ts``` as ``event 12 of the chunk: ts: ...``."""
    m = re.search(r"at `\$\[(\d+)\]\.?(.*)`", msg)
    what = msg.split(" - at ")[0]
    return f"{m.group(2) or 'event'}: {what}" if m else what


def stream_events(path: Path, on_chunk: Callable[[list[Event]], None]) -> tuple[Header, Truncation | None]:
    """Decode ``path``'s events chunk by chunk into ``on_chunk``; return the header and any truncation."""
    source = f"TRACE: {path}"
    total = path.stat().st_size
    with open_trace(path) as f:
        gz = isinstance(f, _Gunzip)
        r = _MappedReader(f, source) if not gz and total > 0 else _Reader(f, source)
        while not (m := _EVENTS_KEY.search(r.buf, 0, MAX_HEADER)):
            if len(r.buf) > MAX_HEADER or not r.fill():
                raise DataError(f"{source}: not a torch.profiler trace: no \"traceEvents\" array "
                                "(record one with torch.profiler's export_chrome_trace)")
        prefix = r.buf[: m.end()].rstrip()  # ends with '['
        r.drop(m.end())
        count, suffix, trunc = 0, b"", None
        for events, rest in _chunks(r, source):
            if events is None:  # the file ended inside the array
                trunc = Truncation(count, r.base + r.off, total if not gz else None)
                break
            count += len(events)
            on_chunk(events)
            suffix = rest
        header = _header(prefix, suffix, source) if trunc is None else _header(prefix, b"}", source, strict=False)
        if isinstance(r, _MappedReader):
            r.map.close()
    return header, trunc


def plan_parts(path: Path, parts: int, min_part: int = CHUNK) -> list[int]:
    """Byte offsets where ``parts`` pieces of a plain trace's event array start (each the ``{`` of an event;
    the first is the array's first event; pieces of ``min_part`` bytes at least). Fewer when the array is
    too short to split; [] when it is empty, the file is gzipped or has no event array (read it in one
    pass: that reports the error)."""
    if parts < 2:
        return []
    with path.open("rb") as f:
        if f.read(2) == b"\x1f\x8b" or path.stat().st_size == 0:
            return []
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            m = _EVENTS_KEY.search(buf, 0, MAX_HEADER)
            if m is None or _EMPTY.match(buf, m.end()):
                return []
            starts = [m.end()]
            first = FIRST_SHARE / parts  # the caller's own part: it also merges the others afterwards
            for k in range(1, parts):
                pos = m.end() + int((len(buf) - m.end()) * (first + (k - 1) * (1 - first) / (parts - 1)))
                s = _event_start(buf, max(pos, starts[-1] + min_part), min(1 << 20, min_part // 2))
                if s is None:
                    break
                starts.append(s)
    return starts


def _event_start(buf: Any, pos: int, probe: int) -> int | None:
    """The first ``{`` at or after ``pos`` that starts an event: the text from it to a cut ``probe`` bytes on
    decodes as events (a ``{`` inside a string or a nested object leaves it unbalanced)."""
    for _ in range(256):
        m = _BOUNDARY.search(buf, pos)
        if m is None:
            return None
        s = m.end() - 1
        end = _BOUNDARY.search(buf, s + probe)
        if end is None:
            return None
        try:
            _decode_events(b"[" + buf[s: end.start() + 1] + b"]")
            return s
        except (msgspec.ValidationError, RecursionError):
            return s  # events (of a wrong field type, too deep: reported when that part is decoded)
        except msgspec.DecodeError:
            pos = s
    return None


def stream_part(path: Path, start: int, stop: int | None,
                on_chunk: Callable[[list[Event]], None]) -> tuple[bytes, Truncation | None]:
    """Decode the events of a plain trace from byte ``start`` (an event's ``{``, from :func:`plan_parts`) to
    ``stop`` (the next part's start; None: to the array's end) into ``on_chunk``. Returns what follows the
    array (``stop`` None) and any truncation (counting this part's events only)."""
    source = f"TRACE: {path}"
    with path.open("rb") as f:
        r = _MappedReader(f, source)
        try:
            r.drop(start)
            if stop is not None:
                _range_chunks(r, stop, source, on_chunk)
                return b"", None
            count, suffix, trunc = 0, b"", None
            for events, rest in _chunks(r, source):
                if events is None:
                    trunc = Truncation(count, r.base + r.off, path.stat().st_size)
                    break
                count += len(events)
                on_chunk(events)
                suffix = rest
            return suffix, trunc
        finally:
            r.map.close()


def _range_chunks(r: _MappedReader, stop: int, source: str, on_chunk: Callable[[list[Event]], None]) -> None:
    """The events between ``r.off`` and ``stop`` (both event starts), chunk by chunk."""
    while r.off < stop:
        pos = r.off + CHUNK
        events, end = None, stop
        while pos < stop and (m := _BOUNDARY.search(r.buf, pos, stop + 1)) is not None:
            events = _chunk(r.buf[r.off: m.start() + 1], source, r.off)
            if events is not None:
                end = m.end() - 1
                break
            pos = m.end() - 1
        if events is None:  # the rest of the part: up to the comma before ``stop``
            tail = r.buf[r.off: stop].rstrip()
            events = _chunk(tail[:-1] if tail.endswith(b",") else tail, source, r.off)
            if events is None:
                raise DataError(f"{source}: traceEvents (near byte {r.off}): not JSON events")
        on_chunk(events)
        r.drop(end)


def _chunks(r: _Reader, source: str) -> Iterator[tuple[list[Event] | None, bytes]]:
    """(events, b"") per chunk; the last is (events, what follows the array); (None, b"") if truncated."""
    while r.unread() < 2 and r.fill():
        pass
    if _EMPTY.match(r.buf, r.off):
        while r.fill():
            pass
        yield [], r.buf[r.off + 1:]
        return
    scan = None  # where the search for a cut resumes, relative to ``r.off`` (after a window too short)
    while True:
        while r.unread() < CHUNK + BLOCK and r.fill():
            pass
        start = r.off + (scan if scan is not None else min(CHUNK, max(r.unread() - 1, 0)))
        events, end = _next_cut(r, start, source)
        if events is not None:
            r.drop(end)
            scan = None
            yield events, b""
            continue
        if not r.eof:  # an event longer than the window: double the window, resume the search where it stopped
            if r.unread() >= MAX_EVENT:
                raise DataError(f"{source}: traceEvents (near byte {r.base + r.off}): more than {MAX_EVENT >> 20} MiB "
                                "without an event boundary (no profiler writes such an event: a damaged or forged "
                                "file, e.g. a gzip of whitespace); not read further")
            scan = max(0, end - r.off)
            target = min(2 * r.unread(), MAX_EVENT)
            while r.unread() < target and r.fill():
                pass
            continue
        last = _last_chunk(r, source)
        if last is not None:
            yield last
            return
        events, end = _partial(r, source)
        if events:
            yield events, b""
        r.drop(end)
        yield None, b""
        return


def _next_cut(r: _Reader, start: int, source: str) -> tuple[list[Event] | None, int]:
    """The first ``}, {`` at or after ``start`` that ends a decodable chunk: (events, index of the next ``{``);
    (None, where the search stopped) when there is none in the window."""
    pos = start
    while (m := _BOUNDARY.search(r.buf, pos)) is not None:
        events = _chunk(r.buf[r.off: m.start() + 1], source, r.base + r.off)
        if events is not None:
            return events, m.end() - 1
        pos = m.end() - 1
    return None, max(start, len(r.buf) - 64)  # a cut may straddle the window's end: look again there


def _last_chunk(r: _Reader, source: str) -> tuple[list[Event], bytes] | None:
    """At the end of the file: the remaining events up to the array's ``]`` and what follows it."""
    if not r.eof:
        return None
    for m in reversed(list(_END.finditer(r.buf, r.off))):
        events = _chunk(r.buf[r.off: m.start() + 1], source, r.base + r.off)
        if events is not None:
            return events, r.buf[m.end():]
    return None


def _partial(r: _Reader, source: str) -> tuple[list[Event], int]:
    """A truncated array: the complete events before the last decodable ``}, {`` (none: [])."""
    for m in reversed(list(_BOUNDARY.finditer(r.buf, r.off))):
        events = _chunk(r.buf[r.off: m.start() + 1], source, r.base + r.off)
        if events is not None:
            return events, m.start() + 1
    return [], r.off


def header_of(path: Path, suffix: bytes, truncated: bool) -> Header:
    """The header of a plain trace read in parts: the text before its event array + ``]`` + ``suffix``."""
    source = f"TRACE: {path}"
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        m = _EVENTS_KEY.search(buf, 0, MAX_HEADER)
        prefix = buf[: m.end()].rstrip() if m is not None else b"{"
    return _header(prefix, b"}", source, strict=False) if truncated else _header(prefix, suffix, source)


def _header(prefix: bytes, suffix: bytes, source: str, strict: bool = True) -> Header:
    """The top-level object without its events: ``prefix`` (up to ``[``) + ``]`` + ``suffix``."""
    try:
        return _decode_header(prefix + b"]" + suffix)
    except msgspec.ValidationError as exc:
        raise DataError(f"{source}: {_field_path(str(exc))}") from None
    except RecursionError:
        raise DataError(f"{source}: a top-level value nested deeper than the decoder reads") from None
    except msgspec.DecodeError:
        if strict:
            raise DataError(f"{source}: not a JSON trace: the text around \"traceEvents\" does not parse") from None
        return Header()
