"""The autosizer: a factor from lag and the measured rate per unit of factor, within bounds and a
cool-down (SEP-32 asks for an interface an autosizing controller can drive). Pure, applied through
the ordinary rescale path."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from elasticity.config import JobConfig


@dataclass(frozen=True, kw_only=True)
class BatchSample:
    """What the autosizer reads from a committed batch's metrics."""

    at_ms: int
    factor: int
    records: int  # processed for the first time: what the batch took off the lag
    process_s: float
    # records left after the batch, each counted once: those a merge's watermarks skip are not (an upper bound only
    # where the batches' count was lost: batch.coordinator.behind)
    lag: int


@dataclass(frozen=True, kw_only=True)
class AutosizePolicy:
    min_factor: int = 1
    max_factor: int = 16
    cooldown_ms: int = 600_000
    target_lag_s: float = 60.0  # drain the backlog within this
    headroom: float = 1.25
    scale_down_below: float = 0.6  # scale down only when the need falls well below the factor (no flapping)


@dataclass(frozen=True)
class Recommendation:
    factor: int
    reason: str


def recommend(
    samples: Sequence[BatchSample], current: int, last_change_ms: int, *, now_ms: int, policy: AutosizePolicy
) -> Recommendation:
    """Throughput grows about linearly with the factor (virtual tasks are I/O-bound):
    the factor needed = (input rate + backlog / target) / (throughput per unit of factor)."""

    def clamp(f: int) -> int:
        return max(policy.min_factor, min(policy.max_factor, f))

    if not policy.min_factor <= current <= policy.max_factor:
        return Recommendation(clamp(current), f"factor {current} is outside [{policy.min_factor}, {policy.max_factor}]")
    if now_ms - last_change_ms < policy.cooldown_ms:
        return Recommendation(current, f"cool-down: last change {(now_ms - last_change_ms) / 1000:.0f}s ago")
    recent = [s for s in samples if s.factor == current][-6:]
    if len(recent) < 2 or sum(s.process_s for s in recent) <= 0:
        return Recommendation(current, "not enough batches at this factor yet")
    per_factor = sum(s.records for s in recent) / sum(s.process_s for s in recent) / current
    if per_factor <= 0:
        return Recommendation(current, "no records processed at this factor yet")
    span_s = max((recent[-1].at_ms - recent[0].at_ms) / 1000, 1e-3)
    input_rate = max(0.0, (sum(s.records for s in recent[1:]) + recent[-1].lag - recent[0].lag) / span_s)
    need = (input_rate + recent[-1].lag / policy.target_lag_s) * policy.headroom / per_factor
    growing = recent[-1].lag > recent[0].lag
    if need > current and (growing or recent[-1].lag > 0):
        target = clamp(math.ceil(need))
        if target > current:
            return Recommendation(target, f"lag {recent[0].lag} -> {recent[-1].lag}: need factor {need:.1f}")
    if recent[-1].lag == 0 and need < current * policy.scale_down_below:
        target = clamp(max(1, math.ceil(need)))
        if target < current:
            return Recommendation(target, f"idle: need factor {need:.1f} of {current}")
    return Recommendation(current, f"need factor {need:.1f}: holding")


def autosize_policy(config: JobConfig) -> AutosizePolicy:
    """The autosizer's bounds as the job configures them (`job.elasticity.autosize.*`)."""
    return AutosizePolicy(
        min_factor=config.autosize_min,
        max_factor=config.autosize_max,
        cooldown_ms=config.autosize_cooldown_ms,
        target_lag_s=float(config.autosize_target_lag_s),
    )


def samples(metrics: list[dict[str, Any]], created: dict[int, int]) -> list[BatchSample]:
    """What the autosizer reads of the store's batch metrics (`created`: when each batch finished). The records are
    those kept, not read: after a merge a batch reads records it skips as processed, which neither took lag off
    nor cost processing; a summary from before the kept count has only the read one."""
    out = []
    for m in metrics:
        at = created.get(m["batch_id"], 0)
        out.append(
            BatchSample(
                at_ms=at,
                factor=m["factor"],
                records=m.get("kept", m["records_read"]),
                process_s=m["durations_ms"].get("process", 0) / 1000,
                lag=m["lag_left"],
            )
        )
    return out
