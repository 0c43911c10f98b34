"""What this process keeps from one use to the next, in one place, with one close.

A Spark Python worker is reused from batch to batch, so it keeps what it built for the next one: the
container process (the app as loaded, its slice threads, the read's Kafka consumers and the stores'
containers) and the handover's parked stores. A driver keeps what it shipped (the archives it zipped,
which session was given which) and when it last swept old slot claims. Each is made by its own module on
first use, `PROCESS.get(Kind)` (one per kind, `Kind()` its constructor), and lives until `PROCESS.close()`:
what has a `close()` is closed, newest first, while the others are still held (a container's close still
finds the parking), and then all are forgotten, so the next use starts afresh as a new process would.

`close()` runs at the interpreter's exit (atexit: a driver's end, a Python worker that Spark runs without
its daemon) and in the tests' fixtures. A worker forked by Spark's daemon ends with os._exit, where nothing
runs, as before: the kernel closes its sockets and a store it left open is sealed by its next owner
(`state.handover`).

Nothing else in the library keeps mutable state at module level (`tests/unit/test_process_state.py`).
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

log = logging.getLogger(__name__)
T = TypeVar("T")


class ProcessRegistry:
    """One object per kind for this process (see the module's docstring)."""

    def __init__(self) -> None:
        self._held: dict[Callable[[], Any], Any] = {}  # kind -> its object, in the order they were made
        self._lock = threading.RLock()  # a kind's constructor may get another kind

    def get(self, kind: Callable[[], T]) -> T:
        """This process's object of `kind`, made on first use. Per batch, slot or chunk: a dict lookup, no lock."""
        held = self._held.get(kind)
        if held is None:
            with self._lock:
                held = self._held.get(kind)
                if held is None:
                    held = self._held[kind] = kind()
        return cast(T, held)

    def held(self) -> list[Any]:
        """What is held now, oldest first."""
        with self._lock:
            return list(self._held.values())

    def close(self) -> None:
        """Close what is held (newest first; a failed close is logged and the others still close), then forget it."""
        with self._lock:
            held = list(self._held.items())
        for kind, obj in reversed(held):
            close = getattr(obj, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:  # noqa: BLE001 - the other objects still close
                    log.exception("closing this process's %s failed", getattr(kind, "__name__", kind))
        with self._lock:
            for kind, obj in held:
                if self._held.get(kind) is obj:
                    del self._held[kind]


PROCESS = ProcessRegistry()
atexit.register(PROCESS.close)
