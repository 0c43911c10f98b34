"""What the scale policy wants for a job now: the schedule's or the autosizer's factor, unless a
person's rescale holds (`job.elasticity.manual.hold.ms` after it). One policy for all three."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from elasticity.checkpoint.store import CheckpointStore, Generation
from elasticity.config import JobConfig
from elasticity.scaling.autosize import Recommendation, autosize_policy, recommend, samples
from elasticity.scaling.schedule import parse_schedule, scheduled_factor


@dataclass(frozen=True)
class ManualHold:
    """A person's rescale holds against the schedule and the autosizer until `until_ms`."""

    factor: int
    generation: int
    until_ms: int
    reason: str


def manual_hold(generations: Sequence[Generation], hold_ms: int, now_ms: int) -> ManualHold | None:
    """The hold of the latest manual rescale, unless it has expired; a later manual rescale replaces an earlier one."""
    manual = [g for g in generations if g.origin == "manual"]
    if not manual or hold_ms <= 0:
        return None
    last = max(manual, key=lambda g: g.number)
    until = last.created_ms + hold_ms
    return ManualHold(last.factor, last.number, until, last.reason) if now_ms < until else None


@dataclass(frozen=True, kw_only=True)
class ScaleDecision:
    """What the scale policy wants for a job now: one policy for schedule, autosizer and people."""

    job: str
    current: int | None
    factor: int | None  # None: nothing to apply
    origin: str  # schedule | autosize
    reason: str
    hold: ManualHold | None = None
    generation: int | None = None  # the generation decided on: applied only while it is still the current one

    @property
    def applies(self) -> bool:
        return self.factor is not None and self.current is not None and self.factor != self.current and self.hold is None


def decide(config: JobConfig, store: CheckpointStore, current: Generation | None, now: datetime) -> ScaleDecision:
    """The schedule's or the autosizer's factor, unless a person's rescale holds
    (`job.elasticity.manual.hold.ms` after it)."""
    job = config.job_name
    if current is None:
        return ScaleDecision(job=job, current=None, factor=None, origin="schedule", reason="the job has not started")
    now_ms = int(now.timestamp() * 1000)
    rules = config.elasticity_schedule
    if rules:
        want = Recommendation(scheduled_factor(parse_schedule(rules), now), f"schedule {rules!r}")
        origin = "schedule"
    elif config.autosize:
        policy = autosize_policy(config)
        metrics = store.metrics(job, limit=20)
        at = {m["batch_id"]: m.get("finished_ms", 0) for m in metrics}
        want = recommend(samples(metrics, at), current.factor, current.created_ms, now_ms=now_ms, policy=policy)
        origin = "autosize"
    else:
        return ScaleDecision(
            job=job, current=current.factor, factor=None, origin="schedule", reason="no job.elasticity.schedule and no autosizer"
        )
    hold = manual_hold(store.generations(job), config.manual_hold_ms, now_ms)
    if hold is not None and want.factor != current.factor:
        until = datetime.fromtimestamp(hold.until_ms / 1000, UTC).isoformat(timespec="seconds")
        return ScaleDecision(
            job=job,
            current=current.factor,
            factor=want.factor,
            origin=origin,
            reason=f"{want.reason} wants {want.factor}, held at {hold.factor} by a manual rescale until {until}",
            hold=hold,
            generation=current.number,
        )
    return ScaleDecision(
        job=job, current=current.factor, factor=want.factor, origin=origin, reason=want.reason, generation=current.number
    )
