"""Named fault points for crash-injection tests.

Code calls `point("commit.checkpoints_written")` between the steps of a commit or
a rescale. Nothing happens unless a test installs a hook or the process runs
with ELASTICITY_FAULT=<point>[:kill|:sigkill|:hold:<folder>]: then it raises InjectedFault, exits at
once without cleanup (a real crash: no rollback handler, no lease release), has
the kernel kill the process (SIGKILL, as an out-of-memory killer or `kill -9`
does), or holds it there for a test that does something to the process (a SIGKILL
or SIGSTOP of its whole host) while it is at that very point.

`hold` holds only when armed, and one process only: the test creates
`<folder>/<point>.armed`; the first process to reach the point renames it to
`<point>.held` (atomic: one wins), writes its pid there and waits until the
test removes that file. Unarmed, the point passes, so a long-lived process (an
Airflow worker) can carry the setting for all its tasks.

A test's hook (`hook`, `raise_at`) is process-wide, not the process registry's: a fault point is reached on
whatever thread runs the step (a slice's, an upload's), from modules below the registry's users, and the hook
is installed and removed by the test around the code it runs (a context manager that restores the previous).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_hook: Callable[[str], None] | None = None


class InjectedFault(RuntimeError):
    pass


def point(name: str) -> None:
    if _hook is not None:
        _hook(name)
    spec = os.environ.get("ELASTICITY_FAULT")
    if spec:
        target, _, mode = spec.partition(":")
        if target == name:
            if mode == "kill":
                os._exit(137)
            if mode == "sigkill":
                os.kill(os.getpid(), signal.SIGKILL)
            if mode.startswith("hold:"):
                hold(name, mode.removeprefix("hold:"))
                return
            raise InjectedFault(name)


def hold(name: str, folder: str, timeout_s: float = 3600.0) -> bool:
    """Wait at `name` while `<folder>/<name>.held` exists, if this process took `<name>.armed`; False if unarmed."""
    armed, held = os.path.join(folder, f"{name}.armed"), os.path.join(folder, f"{name}.held")
    try:
        os.rename(armed, held)
    except FileNotFoundError:
        return False
    with open(held, "w") as f:
        json.dump({"pid": os.getpid(), "host": os.environ.get("ELASTICITY_WORKER_HOSTNAME") or socket.gethostname()}, f)
    deadline = time.monotonic() + timeout_s
    while os.path.exists(held) and time.monotonic() < deadline:
        time.sleep(0.1)
    return True


@contextmanager
def hook(fn: Callable[[str], None]) -> Iterator[None]:
    global _hook
    previous, _hook = _hook, fn
    try:
        yield
    finally:
        _hook = previous


@contextmanager
def raise_at(name: str) -> Iterator[list[str]]:
    """Raise InjectedFault at the named point; yields the points passed, in order."""
    seen: list[str] = []

    def fn(p: str) -> None:
        seen.append(p)
        if p == name:
            raise InjectedFault(name)

    with hook(fn):
        yield seen
