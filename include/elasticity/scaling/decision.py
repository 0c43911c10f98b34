"""What the scale policy wants for a job now: the schedule's or the autosizer's factor, unless a
person's rescale holds (`job.elasticity.manual.hold.ms` after it). One policy for all three.

The autosizer is the DS2 controller (`scaling/ds2.py`) on the job's own measurements: the true rate of a
virtual task and the busiest task's share from the store's batch metrics, the limits from the config, the
input rate from the inputs' high watermarks over time, the exact records behind (a merge's watermarks
counted), and the scalability coefficient fitted from the job's own past rescales."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Any

from elasticity.checkpoint.store import CheckpointStore, Generation
from elasticity.config import JobConfig
from elasticity.scaling import ds2
from elasticity.scaling.schedule import parse_schedule, scheduled_factor

METRICS_READ = 200  # batches read back for the model: the recent ones at this factor, and those around past rescales
RATE_BATCHES = 10  # the true rate is measured over the latest this many batches at the current factor


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
class Observed:
    """What the autosizer saw of the job's inputs: the exact records behind now (LagReport.total) and the
    inputs' high watermarks over the last readings, oldest first (the input rate)."""

    behind: int
    exact: bool
    watermarks: tuple[ds2.HighWatermarks, ...]


@dataclass(frozen=True, kw_only=True)
class AutosizeRecord:
    """The autosizer's decision and everything it decided from: kept with the rescale it asked for (the
    generation's `decision`) and drawn on the job page (the prediction curve)."""

    at_ms: int
    current: int
    factor: int  # what it wants: `current` to hold
    needed: int
    useful: int  # the order limit's useful factor: more gives nothing
    input_rate: float  # records/s arriving
    behind: int  # records left, each once
    behind_exact: bool
    demand: float  # records/s to cover: (input rate + behind / catch-up time) / utilisation
    task_rate: float  # records per busy second of one virtual task (DS2's true rate)
    scalability: float  # the fitted coefficient: 1.0 is linear
    rescales_fitted: int  # past rescales measured for it
    batch_records: int = 0  # a full batch (batch.max.records), which pays the overhead below
    batch_overhead_s: float = 0.0  # a batch's time outside its process stage, at the current factor
    capacity: tuple[tuple[int, float], ...]  # predicted records/s per factor in [min, max]
    utilization: float
    catch_up_s: float
    reason: str

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @staticmethod
    def from_json(text: str) -> AutosizeRecord:
        d = json.loads(text)
        return AutosizeRecord(**{**d, "capacity": tuple((int(f), float(c)) for f, c in d["capacity"])})


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
    record: AutosizeRecord | None = None  # the autosizer's inputs and prediction

    @property
    def applies(self) -> bool:
        return self.factor is not None and self.current is not None and self.factor != self.current and self.hold is None


def limits_of(config: JobConfig, current: Generation) -> ds2.Limits:
    """What bounds the tasks at once: the grouper's tasks at factor 1 (the generation's tasks over its factor),
    the thread pool and the process slots. Spark's cores for the job are not measured here: the process
    slots stand for the executor slots."""
    slots = config.container_count * config.container_process_count
    return ds2.Limits(
        tasks_per_factor=max(1, math.ceil(len(current.job_model.tasks()) / max(1, current.factor))),
        pool=config.thread_pool_size,
        process_slots=slots,
        executor_slots=slots,
    )


def throughput(batches: Sequence[Mapping[str, Any]]) -> float | None:
    """Records per second of the process stage over the batches that left records behind (a backlog kept the
    job busy, so the time is the job's work, not a wait for records); None without such a batch. The stage's,
    not the batch's: the model counts the batches' overhead apart (`ds2.capacity`)."""
    busy = [m for m in batches if m.get("lag_left", 0) > 0 and m.get("kept", m.get("records_read", 0)) > 0]
    seconds = sum(m["durations_ms"].get("process", m["durations_ms"].get("total", 0)) for m in busy) / 1000
    return sum(m.get("kept", m["records_read"]) for m in busy) / seconds if busy and seconds > 0 else None


def past_rescales(generations: Sequence[Generation], metrics: Sequence[Mapping[str, Any]]) -> list[ds2.Rescaled]:
    """Each rescale between two generations whose busy batches were both measured: the throughput before and
    after (`throughput`), for the scalability coefficient."""
    by_generation: dict[int, list[Mapping[str, Any]]] = {}
    for m in metrics:
        by_generation.setdefault(m.get("generation", 0), []).append(m)
    ordered = sorted(generations, key=lambda g: g.number)
    out = []
    for before, after in zip(ordered, ordered[1:], strict=False):
        if before.factor == after.factor or after.number != before.number + 1:
            continue
        rb, ra = throughput(by_generation.get(before.number, [])), throughput(by_generation.get(after.number, []))
        if rb and ra:
            out.append(ds2.Rescaled(before.factor, after.factor, rb, ra))
    return out


def observed_from_batches(metrics: Sequence[Mapping[str, Any]]) -> Observed:
    """Where no live reading is at hand (the cron-scheduled path, the page without brokers): the batches'
    own figures. At a batch's end the inputs' ends stand at what it committed plus what it left behind, so
    the records that arrived between two batches are the later one's kept records and the change in lag."""
    marks, arrived = [], 0
    for i, m in enumerate(metrics):
        if i:
            arrived += m.get("kept", m["records_read"])
        marks.append(ds2.HighWatermarks(m.get("finished_ms", 0), arrived + m["lag_left"]))
    last = metrics[-1] if metrics else None
    return Observed(
        behind=last["lag_left"] if last else 0,
        exact=bool(last.get("lag_left_exact", True)) if last else True,
        watermarks=tuple(marks[-RATE_BATCHES:]),
    )


def autosize(
    config: JobConfig, store: CheckpointStore, current: Generation, now_ms: int, *, observed: Observed | None
) -> AutosizeRecord | str:
    """The DS2 controller's decision for the job, or why it cannot decide yet."""
    policy = ds2.policy_of(config)
    job = config.job_name
    metrics = store.metrics(job, limit=METRICS_READ)
    here = [m for m in metrics if m.get("generation") == current.number]
    rate = ds2.true_rate(ds2.timings(here[-RATE_BATCHES:]))
    if rate is None:
        return f"no batch measured at generation {current.number} (factor {current.factor}) yet"
    seen = observed or observed_from_batches(here)
    input_rate = ds2.input_rate(seen.watermarks)
    if input_rate is None:
        return "the input rate is not measured yet (high watermarks over time)"
    model = ds2.Model(
        current=current.factor,
        task_rate=rate,
        skew=ds2.measured_skew(ds2.timings(metrics)),
        limits=limits_of(config, current),
        cycle=ds2.BatchCycle(records=config.batch_max_records, overhead_s=ds2.batch_overhead_s(here[-RATE_BATCHES:])),
    )
    rescales = past_rescales(store.generations(job, limit=50), metrics)
    model = replace(model, scalability=ds2.fit_scalability(rescales, model))
    load = ds2.Load(input_rate=input_rate, behind=seen.behind, now_ms=now_ms, last_change_ms=current.created_ms)
    d = ds2.decide_factor(model, load, policy)
    return AutosizeRecord(
        at_ms=now_ms,
        current=current.factor,
        factor=d.factor,
        needed=d.needed,
        useful=d.useful,
        input_rate=input_rate,
        behind=seen.behind,
        behind_exact=seen.exact,
        demand=d.demand,
        task_rate=rate,
        scalability=model.scalability,
        rescales_fitted=len(rescales),
        batch_records=model.cycle.records,
        batch_overhead_s=model.cycle.overhead_s,
        capacity=d.capacity,
        utilization=policy.utilization,
        catch_up_s=policy.catch_up_s,
        reason=f"{input_rate:,.0f} records/s in, {seen.behind:,} behind: {d.reason}",
    )


def decide(
    config: JobConfig, store: CheckpointStore, current: Generation | None, now: datetime, *, observed: Observed | None = None
) -> ScaleDecision:
    """The schedule's or the autosizer's factor, unless a person's rescale holds
    (`job.elasticity.manual.hold.ms` after it). `observed`: the autosizer's live reading of the inputs
    (without, the batches' own figures)."""
    job = config.job_name
    if current is None:
        return ScaleDecision(job=job, current=None, factor=None, origin="schedule", reason="the job has not started")
    now_ms = int(now.timestamp() * 1000)
    rules = config.elasticity_schedule
    record = None
    if rules:
        factor, reason, origin = scheduled_factor(parse_schedule(rules), now), f"schedule {rules!r}", "schedule"
    elif config.autosize:
        origin = "autosize"
        outcome = autosize(config, store, current, now_ms, observed=observed)
        if isinstance(outcome, str):
            return ScaleDecision(
                job=job, current=current.factor, factor=current.factor, origin=origin, reason=outcome, generation=current.number
            )
        record, factor, reason = outcome, outcome.factor, outcome.reason
    else:
        return ScaleDecision(
            job=job, current=current.factor, factor=None, origin="schedule", reason="no job.elasticity.schedule and no autosizer"
        )
    hold = manual_hold(store.generations(job), config.manual_hold_ms, now_ms)
    if hold is not None and factor != current.factor:
        until = datetime.fromtimestamp(hold.until_ms / 1000, UTC).isoformat(timespec="seconds")
        return ScaleDecision(
            job=job,
            current=current.factor,
            factor=factor,
            origin=origin,
            reason=f"{reason} wants {factor}, held at {hold.factor} by a manual rescale until {until}",
            hold=hold,
            generation=current.number,
            record=record,
        )
    return ScaleDecision(
        job=job, current=current.factor, factor=factor, origin=origin, reason=reason, generation=current.number, record=record
    )
