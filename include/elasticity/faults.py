"""Named fault points for crash-injection tests.

Code calls `point("commit.checkpoints_written")` between the steps of a commit or
a rescale. Nothing happens unless a test installs a hook or the process runs
with ELASTICITY_FAULT=<point>[:kill|:sigkill]: then it raises InjectedFault, exits at
once without cleanup (a real crash: no rollback handler, no lease release), or
has the kernel kill the process (SIGKILL, as an out-of-memory killer or
`kill -9` does).
"""

from __future__ import annotations

import os
import signal
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
            raise InjectedFault(name)


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
