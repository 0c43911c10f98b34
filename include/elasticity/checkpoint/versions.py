"""Which checkpoint version to read (`task.checkpoint.read.versions`).

The list order is the priority, unless a lower-priority version is newer by
more than `task.live.checkpoint.max.age`: then the job evidently last ran
writing only that version, and its checkpoint is the live one. This is what lets
a job that only ever wrote V1 upgrade to V2 without losing its place, and roll
back to V1-only reading.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Candidate:
    created_ms: int
    payload: Any


def choose(by_version: Mapping[int, Candidate], read_versions: tuple[int, ...], live_max_age_ms: int) -> Candidate | None:
    available = [v for v in read_versions if v in by_version]
    if not available:
        return None
    best = available[0]
    for v in available[1:]:
        if by_version[v].created_ms - by_version[best].created_ms > live_max_age_ms:
            best = v
    return by_version[best]
