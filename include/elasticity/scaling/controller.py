"""The autosizer's loop, poll by poll: the inputs' high watermarks over a sliding window (the input rate), and
the confirmation a change must pass before the rescale starts. Pure: the clock is the caller's, so a restart
of the loop only forgets what the next polls see again.

As Flink's autoscaler waits out a stabilisation interval and KEDA a polling window before acting, a wanted
change must hold for `confirm_ms`, in the same direction and on the same generation, before it fires; once
fired, it stays quiet for that generation until the rescale comes (a new generation) or `retry_ms` passes (a
rescale that never came)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from elasticity.scaling.ds2 import HighWatermarks


class WatermarkWindow:
    """The latest high-watermark readings within `window_ms` of the newest (at least two kept)."""

    def __init__(self, window_ms: int) -> None:
        self.window_ms = window_ms
        self.readings: deque[HighWatermarks] = deque()

    def add(self, reading: HighWatermarks) -> tuple[HighWatermarks, ...]:
        if self.readings and reading.records < self.readings[-1].records:  # a topic recreated: start again
            self.readings.clear()
        self.readings.append(reading)
        while len(self.readings) > 2 and reading.at_ms - self.readings[1].at_ms >= self.window_ms:
            self.readings.popleft()
        return tuple(self.readings)


@dataclass(frozen=True)
class Wanted:
    """What the policy wants on one poll: `factor` on `generation`, whose factor is `current`; `applies`
    when it is a change the autosizer may make (no manual hold)."""

    generation: int
    current: int
    factor: int
    applies: bool


class Confirmation:
    """Fires once a change has been wanted for `confirm_ms` (see the module's doc)."""

    def __init__(self, confirm_ms: int, retry_ms: int) -> None:
        self.confirm_ms = confirm_ms
        self.retry_ms = retry_ms
        self.since: tuple[int, int, int] | None = None  # (generation, direction, since_ms)
        self.fired: tuple[int, int] | None = None  # (generation, at_ms)

    def observe(self, wanted: Wanted, now_ms: int) -> bool:
        """True when this poll should start the rescale to `wanted.factor`."""
        if self.fired is not None:
            generation, at = self.fired
            if wanted.generation == generation and now_ms - at < self.retry_ms:
                return False
            self.fired = None
        direction = (wanted.factor > wanted.current) - (wanted.factor < wanted.current)
        if not wanted.applies or direction == 0:
            self.since = None
            return False
        if self.since is None or self.since[:2] != (wanted.generation, direction):
            self.since = (wanted.generation, direction, now_ms)
        if now_ms - self.since[2] >= self.confirm_ms:
            self.since, self.fired = None, (wanted.generation, now_ms)
            return True
        return False
