"""Keyed event-time windows (Samza's `Windows` and `MessageStream.window`), with the
micro-batch as the timer.

A window operator keeps its open windows in a store it declares (named by the
operator's id). Per virtual task:

- the watermark is the largest event time among the records the window has
  folded in so far (late and failed records do not count);
- a window [start, end) is closed once watermark >= end + allowed lateness;
- a record is late when the window it would join is closed by the watermark of
  the records before it: it goes to the dead-letter sink with the window and
  the watermark, and does not move the watermark;
- at the end of the task's slice the windows closed by the slice's watermark
  are emitted, ordered by (end, start, key), and deleted.

Lateness is decided per record from the records before it, so any split of a
task's records into batches emits the same windows in the same order as one
batch; the batch only decides when they come out.

Store entries all embed the window key (the input key, or a 1:1 function of it,
serialised with `key_serde`), so a rescale moves each with its key:

    w | key | start       -> {"end", "value", "source"}   an open window
    t | end | key | start -> 0                           its timer (the close scan reads only what closes)
    m | key               -> mark                        the watermark when the key was last touched
    x | mark | key        -> 0                           the marks in order: the last one is the watermark

A key's mark is the task's watermark at the end of the last batch that folded a
record of that key in or closed one of its windows. The watermark on restore is
the largest mark in the store: after a rescale that merges tasks it is the max
of theirs; after a split each new task gets the largest mark of the keys it
owns, which is at least the watermark that closed any window of those keys, so
a closed window stays closed (never emitted twice).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from elasticity.api.descriptors import StoreDescriptor
from elasticity.serializers import SERIALIZERS

_BIAS = 1 << 63
_WINDOW, _TIMER, _MARK, _MARKS = b"w", b"t", b"m", b"x"


class Aggregation(NamedTuple):
    """What a window computes: `initial_value()` (Samza's Supplier), `aggregator(item, value)`
    (Samza's FoldLeftFunction) and, for session windows, `merger(a, b)`: the value of two
    sessions that a record joins into one."""

    initial_value: Callable[[], Any]
    aggregator: Callable[[Any, Any], Any]
    merger: Callable[[Any, Any], Any] | None = None


@dataclass(frozen=True)
class WindowPane:
    """A closed window (Samza's WindowPane): its key, [start, end) in event time, and value."""

    key: Any
    start: int
    end: int
    value: Any

    def as_dict(self) -> dict[str, Any]:
        return {"key": self.key, "start": self.start, "end": self.end, "value": self.value}


@dataclass(frozen=True, kw_only=True)
class Window:
    """A keyed window definition; `Windows` builds them. `size_ms` is the duration of a
    tumbling window, or the gap that ends a session."""

    kind: str  # tumbling | session
    key_fn: Callable[[Any], Any]
    size_ms: int
    aggregation: Aggregation
    event_time: Callable[[Any], int | None] | None = None  # ms; None (or a None result): the input record's Kafka timestamp
    allowed_lateness_ms: int = 0
    key_serde: str = "string"

    def __post_init__(self) -> None:
        if self.kind not in ("tumbling", "session"):
            raise ValueError(f"window kind {self.kind!r} is not one of ['session', 'tumbling']")
        what = "duration" if self.kind == "tumbling" else "gap"
        if not isinstance(self.size_ms, int) or self.size_ms <= 0:
            raise ValueError(f"{self.kind} window {what} must be a positive int of ms, got {self.size_ms!r}")
        if not isinstance(self.allowed_lateness_ms, int) or self.allowed_lateness_ms < 0:
            raise ValueError(f"allowed_lateness_ms must be an int >= 0, got {self.allowed_lateness_ms!r}")
        if self.key_serde not in SERIALIZERS or self.key_serde == "json":
            raise ValueError(f"window key_serde {self.key_serde!r} must be one of ['byte', 'string'] (the input key's serde)")
        if self.kind == "session" and self.aggregation.merger is None:
            raise ValueError(
                "keyed_session_window needs merger(a, b): a record that falls between two sessions joins them "
                "(Windows.count() and Windows.sum() bring one)"
            )

    def store(self, name: str) -> StoreDescriptor:
        """The store that holds this window's state, keyed so that each entry follows its window key."""
        return StoreDescriptor(name, "byte", "json", input_key=_input_key)


class Windows:
    """Samza's `Windows` factory, with event time and allowed lateness."""

    @staticmethod
    def keyed_tumbling_window(
        key_fn: Callable[[Any], Any],
        duration_ms: int,
        initial_value: Callable[[], Any],
        aggregator: Callable[[Any, Any], Any],
        merger: Callable[[Any, Any], Any] | None = None,
        *,
        event_time: Callable[[Any], int | None] | None = None,
        allowed_lateness_ms: int = 0,
        key_serde: str = "string",
    ) -> Window:
        """Fixed [k*duration, (k+1)*duration) windows per key; `merger` is not used (it lets
        `*Windows.count()` fill both kinds)."""
        return Window(
            kind="tumbling",
            key_fn=key_fn,
            size_ms=duration_ms,
            aggregation=Aggregation(initial_value, aggregator, merger),
            event_time=event_time,
            allowed_lateness_ms=allowed_lateness_ms,
            key_serde=key_serde,
        )

    @staticmethod
    def keyed_session_window(
        key_fn: Callable[[Any], Any],
        gap_ms: int,
        initial_value: Callable[[], Any],
        aggregator: Callable[[Any, Any], Any],
        merger: Callable[[Any, Any], Any] | None = None,
        *,
        event_time: Callable[[Any], int | None] | None = None,
        allowed_lateness_ms: int = 0,
        key_serde: str = "string",
    ) -> Window:
        """Per key, records less than `gap_ms` apart in event time form one session [first, last + gap)."""
        return Window(
            kind="session",
            key_fn=key_fn,
            size_ms=gap_ms,
            aggregation=Aggregation(initial_value, aggregator, merger),
            event_time=event_time,
            allowed_lateness_ms=allowed_lateness_ms,
            key_serde=key_serde,
        )

    @staticmethod
    def count() -> Aggregation:
        return Aggregation(lambda: 0, lambda _item, n: n + 1, lambda a, b: a + b)

    @staticmethod
    def sum(value_fn: Callable[[Any], Any]) -> Aggregation:
        return Aggregation(lambda: 0, lambda item, total: total + value_fn(item), lambda a, b: a + b)

    @staticmethod
    def reduce(
        initial_value: Callable[[], Any], aggregator: Callable[[Any, Any], Any], merger: Callable[[Any, Any], Any] | None = None
    ) -> Aggregation:
        return Aggregation(initial_value, aggregator, merger)


# --- store keys -------------------------------------------------------------------


def _time(t: int) -> bytes:
    return struct.pack(">Q", t + _BIAS)


def _untime(b: bytes) -> int:
    return struct.unpack(">Q", b)[0] - _BIAS


def _key_part(kb: bytes) -> bytes:
    return struct.pack(">I", len(kb)) + kb


def _split_key(raw: bytes, at: int) -> tuple[bytes, int]:
    """The window key at `raw[at:]` and the position after it."""
    (n,) = struct.unpack(">I", raw[at : at + 4])
    return raw[at + 4 : at + 4 + n], at + 4 + n


def _input_key(raw: bytes) -> bytes:
    """The input key (bytes) a stored entry belongs to: how a rescale and the bucket check place it."""
    tag = raw[:1]
    if tag in (_WINDOW, _MARK):
        return _split_key(raw, 1)[0]
    if tag in (_TIMER, _MARKS):
        return _split_key(raw, 9)[0]
    raise ValueError(f"not a window store key: {raw!r}")


def window_key(kb: bytes, start: int) -> bytes:
    return _WINDOW + _key_part(kb) + _time(start)


def timer_key(end: int, kb: bytes, start: int) -> bytes:
    return _TIMER + _time(end) + _key_part(kb) + _time(start)


# --- the operator -------------------------------------------------------------------


@dataclass
class Closed:
    pane: WindowPane
    source: list[Any]  # [system, stream, partition, offset] of the last record folded into the window


@dataclass
class WindowRun:
    """One slice's pass through a window operator."""

    late: dict[int, str] = field(default_factory=dict)
    failed: dict[int, BaseException] = field(default_factory=dict)
    closed: list[Closed] = field(default_factory=list)


@dataclass
class WindowOperator:
    window: Window
    name: str  # the operator id, which names its store

    def watermark(self, store: Any) -> int | None:
        """The task's watermark: the largest mark in the store (None before any record)."""
        for k in store.db.keys(backwards=True, from_key=_MARKS + b"\xff" * 9):
            return _untime(k[1:9]) if k[:1] == _MARKS else None
        return None

    def _key_bytes(self, key: Any) -> bytes:
        if key is None:
            raise ValueError(f"window {self.name!r}: the window key is None (key_fn must give the input key)")
        return SERIALIZERS[self.window.key_serde](key)

    def _event_time(self, item: Any, timestamp: int) -> int:
        t = None if self.window.event_time is None else self.window.event_time(item)
        t = timestamp if t is None else t
        if isinstance(t, bool) or not isinstance(t, int):
            raise TypeError(f"window {self.name!r}: event time must be an int of ms, got {t!r}")
        return t

    def run(self, store: Any, items: Iterable[tuple[int, Any, Any, int, list[Any]]]) -> WindowRun:
        """Fold `items` (index, item, key, timestamp, source), in order, into the store; then close
        and delete the windows the new watermark closes and return them in emission order."""
        out = WindowRun()
        w = self.window
        wm = self.watermark(store)
        touched: set[bytes] = set()
        for i, item, key, timestamp, source in items:
            try:
                kb = self._key_bytes(key)
                t = self._event_time(item, timestamp)
                late = self._fold(store, w, kb, key=key, t=t, wm=wm, item=item, source=source)
            except Exception as e:  # noqa: BLE001 - user code: charged to its record
                out.failed[i] = e
                continue
            if late is not None:
                out.late[i] = late
                continue
            touched.add(kb)
            wm = t if wm is None else max(wm, t)
        if wm is None:
            return out
        out.closed = self._close(store, wm, touched)
        self._mark(store, wm, touched)
        return out

    def _closed(self, end: int, wm: int | None) -> bool:
        return wm is not None and wm >= end + self.window.allowed_lateness_ms

    def _late(self, key: Any, start: int, end: int, *, t: int, wm: int | None) -> str:
        return (
            f"window {self.name!r}: late record for key {key!r}: event time {t} falls in {self.window.kind} window "
            f"[{start}, {end}), closed at watermark {wm} (allowed lateness {self.window.allowed_lateness_ms} ms)"
        )

    def _fold(
        self, store: Any, w: Window, kb: bytes, *, key: Any, t: int, wm: int | None, item: Any, source: list[Any]
    ) -> str | None:
        """Fold one record in; the reason when it is late (nothing written then, nor on an exception)."""
        agg = w.aggregation
        if w.kind == "tumbling":
            start = t - t % w.size_ms
            end = start + w.size_ms
            if self._closed(end, wm):
                return self._late(key, start, end, t=t, wm=wm)
            wk = window_key(kb, start)
            entry = store.get(wk)
            value = agg.aggregator(item, agg.initial_value() if entry is None else entry["value"])
            if entry is None:
                store.put(timer_key(end, kb, start), 0)
            store.put(wk, {"end": end, "value": value, "source": source})
            return None

        start, end = t, t + w.size_ms
        if self._closed(end, wm):
            return self._late(key, start, end, t=t, wm=wm)
        joined = []
        for raw, entry in store.prefix(_WINDOW + _key_part(kb)):
            s = _untime(raw[-8:])
            # a session closed by the watermark is emitted at the end of the batch: never joined again
            if not self._closed(entry["end"], wm) and t < entry["end"] and s < end:
                joined.append((s, entry))
        merger = agg.merger
        assert merger is not None  # Window refuses a session window without one
        value = None
        for _, entry in joined:  # by start: the prefix scan is in start order
            value = entry["value"] if value is None else merger(value, entry["value"])
        value = agg.aggregator(item, agg.initial_value() if value is None else value)
        new_start = min([start, *(s for s, _ in joined)])
        new_end = max([end, *(e["end"] for _, e in joined)])
        for s, entry in joined:
            store.delete(window_key(kb, s))
            store.delete(timer_key(entry["end"], kb, s))
        store.put(timer_key(new_end, kb, new_start), 0)
        store.put(window_key(kb, new_start), {"end": new_end, "value": value, "source": source})
        return None

    def _close(self, store: Any, wm: int, touched: set[bytes]) -> list[Closed]:
        last_end = wm - self.window.allowed_lateness_ms  # closed: end <= watermark - lateness
        timers = [raw for raw, _ in store.range(_TIMER, _TIMER + _time(last_end + 1))]
        closed = []
        for raw in timers:
            end = _untime(raw[1:9])
            kb, at = _split_key(raw, 9)
            start = _untime(raw[at : at + 8])
            entry = store.get(window_key(kb, start))
            key = kb if self.window.key_serde == "byte" else kb.decode("utf-8")
            closed.append(Closed(WindowPane(key, start, end, entry["value"]), entry["source"]))
            store.delete(window_key(kb, start))
            store.delete(raw)
            touched.add(kb)
        closed.sort(key=lambda c: (c.pane.end, c.pane.start, self._key_bytes(c.pane.key)))
        return closed

    def _mark(self, store: Any, wm: int, touched: set[bytes]) -> None:
        for kb in sorted(touched):
            mk = _MARK + _key_part(kb)
            old = store.get(mk)
            if old == wm:
                continue
            if old is not None:
                store.delete(_MARKS + _time(old) + _key_part(kb))
            store.put(_MARKS + _time(wm) + _key_part(kb), 0)
            store.put(mk, wm)
