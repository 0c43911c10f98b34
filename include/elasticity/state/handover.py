"""Which process has a store's live folder, and how another one gets it.

RocksDB admits one process per folder, and a restore rebuilds the live folder in place, so a process
must never rebuild or open a folder that another one has open: a Spark Python worker that still runs a
cancelled batch, or the one that ran this task's previous batch. A process claims a store (an exclusive
flock on `<store>/OWNER`) before it touches the live folder, and keeps the claim while the store is open.

After its snapshot a store stays open, parked: the task's next batch in the same Python worker uses it as
it is, without a RocksDB open (which holds the GIL: every task, every batch). Spark may run that batch in
another Python worker of the host: the process that needs the store asks for it (`<store>/RELEASE`), and
the holder's keeper thread closes it, sealed with its checkpoint id, which the asker opens as it is.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from elasticity.process_registry import PROCESS

log = logging.getLogger(__name__)
OWNER, RELEASE = "OWNER", "RELEASE"
CLAIM_POLL_S = 0.01
KEEPER_POLL_S = 0.05
CLAIM_TIMEOUT_S = 120.0  # a holder lets go once its slice is done: far less than this


class StoreBusy(RuntimeError):
    """Another process kept a store past CLAIM_TIMEOUT_S."""


class Releasable(Protocol):
    @property
    def root(self) -> Path: ...

    def release(self) -> None: ...


def claim(root: Path, timeout_s: float | None = None) -> int:
    """The store at `root`, for this claim alone: returns the descriptor that holds the flock (`unclaim` it).
    A process holding the store is asked to let go, and waited for (CLAIM_TIMEOUT_S)."""
    timeout_s = CLAIM_TIMEOUT_S if timeout_s is None else timeout_s
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / OWNER, os.O_RDWR | os.O_CREAT, 0o644)
    deadline, asked = time.monotonic() + timeout_s, False
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
                    raise StoreBusy(
                        f"store folder {root} is held by process {holder} on this host: not released within {timeout_s:.0f} s"
                    ) from None
                if not asked:
                    (root / RELEASE).touch()
                    asked = True
                time.sleep(CLAIM_POLL_S)
    except BaseException:
        os.close(fd)
        raise
    if asked:
        (root / RELEASE).unlink(missing_ok=True)
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


def unclaim(fd: int) -> None:
    os.close(fd)  # drops the flock


class Parking:
    """This process's stores left open between batches (`parking()`); a keeper thread releases those another
    process asks for. Closing it releases them all (sealed, as for another process: the next owner opens them as
    they are) and ends the keeper."""

    def __init__(self, poll_s: float = KEEPER_POLL_S) -> None:
        self.poll_s = poll_s
        self._parked: set[Releasable] = set()
        self._lock = threading.Lock()
        self._keeper: threading.Thread | None = None

    def park(self, store: Releasable) -> None:
        with self._lock:
            self._parked.add(store)
            if self._keeper is None:
                self._keeper = threading.Thread(target=self._keep, name="store-keeper", daemon=True)
                self._keeper.start()

    def take(self, store: Releasable) -> None:
        """The store is in use again: no longer released on request (waits for a release under way)."""
        with self._lock:
            self._parked.discard(store)

    def release_unparked(self, stores: Iterable[Releasable]) -> None:
        """Release those of `stores` that are not parked (under the keeper's lock: never two releases at once)."""
        with self._lock:
            for store in stores:
                if store not in self._parked:
                    store.release()

    def release_all(self, keep: set[Releasable]) -> None:
        """Release every parked store but `keep` (a slot's own): another process may run their tasks next."""
        with self._lock:
            for store in self._parked - keep:
                self._parked.discard(store)
                store.release()

    def close(self) -> None:
        self.release_all(keep=set())
        with self._lock:
            keeper = self._keeper
        if keeper is not None and keeper is not threading.current_thread():
            keeper.join(self.poll_s * 10)  # it ends at its next poll, the parking empty

    def _keep(self) -> None:
        while True:
            time.sleep(self.poll_s)
            with self._lock:
                for store in [s for s in self._parked if (s.root / RELEASE).exists()]:
                    self._parked.discard(store)
                    try:
                        store.release()
                    except Exception:  # noqa: BLE001 - the asker then waits for its timeout, and says so
                        log.exception("releasing store %s for another process failed", store.root)
                if not self._parked:
                    self._keeper = None
                    return


def parking() -> Parking:
    """This process's parking (held by the process registry, `elasticity.process_registry`)."""
    return PROCESS.get(Parking)
